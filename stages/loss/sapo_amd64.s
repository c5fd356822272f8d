//go:build amd64 && !purego && !amd64.v3

#include "textflag.h"
#include "core_amd64.h"

// Offsets in sapoArgs (TestSAPOArgsLayout pins them).
#define A_LP 0
#define A_OLD 8
#define A_ADV 16
#define A_MASK 24
#define A_GRAD 32
#define A_N 40
#define A_SL 48
#define A_SKL 56
#define A_SGATE 64
#define A_SRATIO 72
#define A_SPOS 80
#define A_TAUPOS 88
#define A_TAUNEG 120
#define A_GS 152
#define A_K 184
#define A_CK 192
#define A_W 200
#define A_WSTEP 208
#define A_CLAMPD 216
#define A_PAPER 217

// The scratch frame: the contributions to the sums, and values kept
// across the second exp.
#define F_L 0
#define F_KL 32
#define F_GATE 64
#define F_RATIO 96
#define F_POS 128
#define F_DD 160
#define F_A 192
#define F_TAU 224
#define F_R 256

// func sapoAVX2(a *sapoArgs)
//
// The token loop of sapoTokens.run, four tokens a step, each operation the
// Go loop's in the same order; where both operands of an operation can be
// NaN (the mask, the weight, the advantage, a sum), with the same first
// operand as the compiled Go loop (which decides the payload of the NaN).
// Branches become masks: a masked token (m == 0) contributes +0 to every
// sum, which leaves it unchanged, and the sums are added to one token at a
// time, in order, from the scratch frame. A group of four with an unmasked
// token whose d or -z is outside (-708, 709) (NaN included) is left to the
// Go loop before anything of it is written.
//
// Registers: R11 args, R8 ppoConsts, R12 coreConsts, R9 exp table, AX lp,
// BX old, CX adv, DX mask, DI grad, SI 8n, R10 8t, R14 the weights;
// Y9 the mask m, Y10 where m != 0 (NaN too); X11-X15 the sums L, KL,
// Gate, Ratio, Pos.
TEXT ·sapoAVX2(SB), NOSPLIT, $288-8
	MOVQ a+0(FP), R11
	MOVQ A_K(R11), R8
	MOVQ A_CK(R11), R12
	MOVQ K_TABLE(R8), R9
	LOADCOLS
	VMOVSD A_SL(R11), X11
	VMOVSD A_SKL(R11), X12
	VMOVSD A_SGATE(R11), X13
	VMOVSD A_SRATIO(R11), X14
	VMOVSD A_SPOS(R11), X15

loop:
	// d = lp - old, clamped to ±20 with verl: dd = 0 where clamped, else 1.
	VMOVUPD (AX)(R10*1), Y0
	VSUBPD  (BX)(R10*1), Y0, Y0
	VMOVUPD K_ONE(R8), Y7
	CMPB    A_CLAMPD(R11), $0
	JEQ     unclamped
	VCMPPD  $LT_OS, K_MIND(R8), Y0, Y1
	VCMPPD  $GT_OS, K_MAXD(R8), Y0, Y2
	VBLENDVPD Y1, K_MIND(R8), Y0, Y0
	VBLENDVPD Y2, K_MAXD(R8), Y0, Y0
	VORPD   Y1, Y2, Y1
	VANDNPD Y7, Y1, Y7

unclamped:
	VMOVUPD Y7, F_DD(SP)

	// Y8: the unmasked tokens whose d is outside (-708, 709).
	VMOVUPD (DX)(R10*1), Y9
	VXORPD  Y5, Y5, Y5
	VCMPPD  $NEQ_UQ, Y5, Y9, Y10
	VCMPPD  $GT_OS, S_DMIN(R12), Y0, Y1
	VCMPPD  $LT_OS, S_DMAX(R12), Y0, Y2
	VANDPD  Y2, Y1, Y1
	VANDNPD Y10, Y1, Y8

	// ratio = Core(d) in Y6; the contributions d·m and ratio·m.
	CORE
	VMULPD  Y9, Y0, Y0
	VANDPD  Y10, Y0, Y0
	VMOVUPD Y0, F_KL(SP)
	VMOVUPD Y6, F_R(SP)
	VMULPD  Y9, Y6, Y7
	VANDPD  Y10, Y7, Y7
	VMOVUPD Y7, F_RATIO(SP)

	// pos = a > 0 (Y3), tau = pos ? tauPos : tauNeg (Y4), the
	// contribution b2f(pos)·m.
	VMOVUPD (CX)(R10*1), Y2
	VMOVUPD Y2, F_A(SP)
	VXORPD  Y5, Y5, Y5
	VCMPPD  $GT_OS, Y5, Y2, Y3
	VMOVUPD A_TAUNEG(R11), Y4
	VBLENDVPD Y3, A_TAUPOS(R11), Y4, Y4
	VMOVUPD Y4, F_TAU(SP)
	VANDPD  K_ONE(R8), Y3, Y3
	VMULPD  Y9, Y3, Y3
	VANDPD  Y10, Y3, Y3
	VMOVUPD Y3, F_POS(SP)

	// z = (ratio - 1)·tau; the group goes to the Go loop where an
	// unmasked token has d or z outside Core's range.
	VSUBPD  K_ONE(R8), Y6, Y0
	VMULPD  Y4, Y0, Y0
	VCMPPD  $GT_OS, S_ZMIN(R12), Y0, Y3
	VCMPPD  $LT_OS, S_ZMAX(R12), Y0, Y1
	VANDPD  Y1, Y3, Y3
	VANDNPD Y10, Y3, Y3
	VORPD   Y8, Y3, Y3
	VMOVMSKPD Y3, R13
	TESTQ   R13, R13
	JNZ     done

	// e = Core(-z), sig = 1/(e + 1) (Y1), gate = 4·sig/tau (Y2) and its
	// contribution gate·m; Y3 = -a.
	VXORPD  K_SIGN(R8), Y0, Y0
	CORE
	VADDPD  K_ONE(R8), Y6, Y6
	VMOVUPD K_ONE(R8), Y1
	VDIVPD  Y6, Y1, Y1
	VMULPD  S_FOURS(R12), Y1, Y2
	VDIVPD  F_TAU(SP), Y2, Y2
	VMULPD  Y9, Y2, Y3
	VANDPD  Y10, Y3, Y3
	VMOVUPD Y3, F_GATE(SP)
	VMOVUPD F_A(SP), Y3
	VXORPD  K_SIGN(R8), Y3, Y3

	// l (Y8) and g (Y7): -a·gate·lp and -a·gate (lp·(-a·gate) as
	// compiled), or with the paper gradient -a·gate and
	// (1-sig)·(-a·4·sig)·ratio·dd.
	CMPB    A_PAPER(R11), $0
	JNE     paper
	VMULPD  Y2, Y3, Y7
	VMOVUPD (AX)(R10*1), Y8
	VMULPD  Y7, Y8, Y8
	JMP     weigh

paper:
	VMULPD  Y2, Y3, Y8
	VMULPD  S_FOURS(R12), Y3, Y7
	VMULPD  Y1, Y7, Y7
	VMOVUPD K_ONE(R8), Y4
	VSUBPD  Y1, Y4, Y4
	VMULPD  Y7, Y4, Y7
	VMULPD  F_R(SP), Y7, Y7
	VMULPD  F_DD(SP), Y7, Y7

weigh:
	// The weights w (Y6): the contribution (l·w)·m, grad = w·((m·gs)·g);
	// +0 where m == 0.
	VMOVUPD (R14), Y6
	ADDQ    A_WSTEP(R11), R14
	VMULPD  Y6, Y8, Y8
	VMULPD  Y9, Y8, Y8
	VANDPD  Y10, Y8, Y8
	VMOVUPD Y8, F_L(SP)
	VMULPD  A_GS(R11), Y9, Y4
	VMULPD  Y7, Y4, Y4
	VMULPD  Y4, Y6, Y4
	VANDPD  Y10, Y4, Y4
	VMOVUPD Y4, (DI)(R10*1)

	// The sums, token by token.
	VADDSD  F_L+0(SP), X11, X11
	VSUBSD  F_KL+0(SP), X12, X12
	VADDSD  F_GATE+0(SP), X13, X13
	VADDSD  F_RATIO+0(SP), X14, X14
	VADDSD  F_POS+0(SP), X15, X15
	VADDSD  F_L+8(SP), X11, X11
	VSUBSD  F_KL+8(SP), X12, X12
	VADDSD  F_GATE+8(SP), X13, X13
	VADDSD  F_RATIO+8(SP), X14, X14
	VADDSD  F_POS+8(SP), X15, X15
	VADDSD  F_L+16(SP), X11, X11
	VSUBSD  F_KL+16(SP), X12, X12
	VADDSD  F_GATE+16(SP), X13, X13
	VADDSD  F_RATIO+16(SP), X14, X14
	VADDSD  F_POS+16(SP), X15, X15
	VADDSD  F_L+24(SP), X11, X11
	VSUBSD  F_KL+24(SP), X12, X12
	VADDSD  F_GATE+24(SP), X13, X13
	VADDSD  F_RATIO+24(SP), X14, X14
	VADDSD  F_POS+24(SP), X15, X15

	ADDQ $32, R10
	CMPQ R10, SI
	JB   loop

done:
	SHRQ $3, R10
	MOVQ R10, A_N(R11)
	VMOVSD X11, A_SL(R11)
	VMOVSD X12, A_SKL(R11)
	VMOVSD X13, A_SGATE(R11)
	VMOVSD X14, A_SRATIO(R11)
	VMOVSD X15, A_SPOS(R11)
	VZEROUPPER
	RET
