//go:build amd64 && !purego && !amd64.v3

#include "textflag.h"
#include "core_amd64.h"

// Offsets in cispoArgs (TestCISPOArgsLayout pins them).
#define A_LP 0
#define A_OLD 8
#define A_ADV 16
#define A_MASK 24
#define A_GRAD 32
#define A_N 40
#define A_SL 48
#define A_SKL 56
#define A_SKEEP 64
#define A_LO 72
#define A_HI 104
#define A_MASKLO 136
#define A_MASKHI 168
#define A_GS 200
#define A_K 232
#define A_CK 240
#define A_W 248
#define A_WSTEP 256
#define A_MASKCLIP 264
#define A_VERL 265

// The scratch frame: the contributions to the sums.
#define F_L 0
#define F_KL 32
#define F_KEEP 64

// func cispoAVX2(a *cispoArgs)
//
// The token loop of cispoTokens.run, four tokens a step, as sapoAVX2 does
// SAPO's: the Go loop's operations in its order, with the compiled Go
// loop's first operand where both can be NaN; masked tokens contribute +0
// to every sum; a group of four with an unmasked token whose d is outside
// (-708, 709) (NaN included) is left to the Go loop before anything of it
// is written. The compiled Go loop adds ΣM·m's contribution to the sum
// (keep·m + sKeep) but verl's to the sum (sKeep + [r ≠ w]·m): so here.
//
// Registers: R11 args, R8 ppoConsts, R12 coreConsts, R9 exp table, AX lp,
// BX old, CX adv, DX mask, DI grad, SI 8n, R10 8t, R14 the weights;
// Y9 the mask m, Y10 where m != 0 (NaN too); X13-X15 the sums L, KL, Keep.
TEXT ·cispoAVX2(SB), NOSPLIT, $96-8
	MOVQ a+0(FP), R11
	MOVQ A_K(R11), R8
	MOVQ A_CK(R11), R12
	MOVQ K_TABLE(R8), R9
	LOADCOLS
	VMOVSD A_SL(R11), X13
	VMOVSD A_SKL(R11), X14
	VMOVSD A_SKEEP(R11), X15

loop:
	// d = lp - old, clamped to ±20 with verl.
	VMOVUPD (AX)(R10*1), Y0
	VSUBPD  (BX)(R10*1), Y0, Y0
	CMPB    A_VERL(R11), $0
	JEQ     unclamped
	VCMPPD  $LT_OS, K_MIND(R8), Y0, Y1
	VCMPPD  $GT_OS, K_MAXD(R8), Y0, Y2
	VBLENDVPD Y1, K_MIND(R8), Y0, Y0
	VBLENDVPD Y2, K_MAXD(R8), Y0, Y0

unclamped:
	// The group goes to the Go loop where an unmasked d is outside
	// (-708, 709).
	VMOVUPD (DX)(R10*1), Y9
	VXORPD  Y5, Y5, Y5
	VCMPPD  $NEQ_UQ, Y5, Y9, Y10
	VCMPPD  $GT_OS, S_DMIN(R12), Y0, Y1
	VCMPPD  $LT_OS, S_DMAX(R12), Y0, Y2
	VANDPD  Y2, Y1, Y1
	VANDNPD Y10, Y1, Y1
	VMOVMSKPD Y1, R13
	TESTQ   R13, R13
	JNZ     done

	// ratio = Core(d) (Y6), the contribution d·m (Y0), w = clamp(ratio,
	// lo, hi) (Y7: lo where below lo, else hi where above hi).
	CORE
	VMULPD  Y9, Y0, Y0
	VANDPD  Y10, Y0, Y0
	VCMPPD  $GT_OS, A_HI(R11), Y6, Y2
	VBLENDVPD Y2, A_HI(R11), Y6, Y7
	VCMPPD  $LT_OS, A_LO(R11), Y6, Y1
	VBLENDVPD Y1, A_LO(R11), Y7, Y7

	// keep (Y8): 0 with the mask clip where ratio > maskHi and a > 0 or
	// ratio < maskLo and a < 0, else 1; a in Y3.
	VMOVUPD K_ONE(R8), Y8
	VMOVUPD (CX)(R10*1), Y3
	CMPB    A_MASKCLIP(R11), $0
	JEQ     kept
	VXORPD  Y5, Y5, Y5
	VCMPPD  $GT_OS, A_MASKHI(R11), Y6, Y1
	VCMPPD  $GT_OS, Y5, Y3, Y2
	VANDPD  Y2, Y1, Y1
	VCMPPD  $LT_OS, A_MASKLO(R11), Y6, Y2
	VCMPPD  $LT_OS, Y5, Y3, Y4
	VANDPD  Y4, Y2, Y2
	VORPD   Y2, Y1, Y1
	VANDNPD Y8, Y1, Y8

kept:
	// g = -a·w·keep (Y3); the contribution keep·m, or with verl
	// b2f(ratio != w)·m (Y8).
	VXORPD  K_SIGN(R8), Y3, Y3
	VMULPD  Y7, Y3, Y3
	VMULPD  Y8, Y3, Y3
	CMPB    A_VERL(R11), $0
	JEQ     keepm
	VCMPPD  $NEQ_UQ, Y7, Y6, Y8
	VANDPD  K_ONE(R8), Y8, Y8

keepm:
	VMULPD  Y9, Y8, Y8
	VANDPD  Y10, Y8, Y8

	// The weights w (Y6): the contribution lp·g·w·m (Y4), grad =
	// m·gs·g·w; +0 where m == 0.
	VMOVUPD (R14), Y6
	ADDQ    A_WSTEP(R11), R14
	VMOVUPD (AX)(R10*1), Y4
	VMULPD  Y3, Y4, Y4
	VMULPD  Y6, Y4, Y4
	VMULPD  Y9, Y4, Y4
	VANDPD  Y10, Y4, Y4
	VMULPD  A_GS(R11), Y9, Y2
	VMULPD  Y3, Y2, Y2
	VMULPD  Y6, Y2, Y2
	VANDPD  Y10, Y2, Y2
	VMOVUPD Y2, (DI)(R10*1)

	// The sums, token by token.
	VMOVUPD Y4, F_L(SP)
	VMOVUPD Y0, F_KL(SP)
	VMOVUPD Y8, F_KEEP(SP)
	VADDSD  F_L+0(SP), X13, X13
	VSUBSD  F_KL+0(SP), X14, X14
	VADDSD  F_L+8(SP), X13, X13
	VSUBSD  F_KL+8(SP), X14, X14
	VADDSD  F_L+16(SP), X13, X13
	VSUBSD  F_KL+16(SP), X14, X14
	VADDSD  F_L+24(SP), X13, X13
	VSUBSD  F_KL+24(SP), X14, X14
	CMPB    A_VERL(R11), $0
	JEQ     keepfirst
	VADDSD  F_KEEP+0(SP), X15, X15
	VADDSD  F_KEEP+8(SP), X15, X15
	VADDSD  F_KEEP+16(SP), X15, X15
	VADDSD  F_KEEP+24(SP), X15, X15
	JMP     next

keepfirst:
	VMOVSD  F_KEEP+0(SP), X1
	VADDSD  X15, X1, X15
	VMOVSD  F_KEEP+8(SP), X1
	VADDSD  X15, X1, X15
	VMOVSD  F_KEEP+16(SP), X1
	VADDSD  X15, X1, X15
	VMOVSD  F_KEEP+24(SP), X1
	VADDSD  X15, X1, X15

next:
	ADDQ $32, R10
	CMPQ R10, SI
	JB   loop

done:
	SHRQ $3, R10
	MOVQ R10, A_N(R11)
	VMOVSD X13, A_SL(R11)
	VMOVSD X14, A_SKL(R11)
	VMOVSD X15, A_SKEEP(R11)
	VZEROUPPER
	RET
