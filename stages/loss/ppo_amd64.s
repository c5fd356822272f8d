//go:build amd64 && !purego && !amd64.v3

#include "textflag.h"
#include "core_amd64.h"

// Offsets in ppoArgs (TestPPOArgsLayout pins them).
#define A_LP 0
#define A_OLD 8
#define A_ADV 16
#define A_MASK 24
#define A_GRAD 32
#define A_N 40
#define A_SL 48
#define A_SCLIP 56
#define A_SLOW 64
#define A_SKL 72
#define A_LO 80
#define A_HI 112
#define A_C3 144
#define A_GS 176
#define A_K 208
#define A_W 216
#define A_WSTEP 224

// func ppoAVX2(a *ppoArgs)
//
// The token loop of ppoTokens.run, four tokens a step, each operation the
// Go loop's in the same order with the same first operand (which decides
// the payload of a NaN made of two NaNs). Branches become masks: a masked
// token (m == 0) contributes +0 to every sum, which leaves it unchanged,
// and the sums are added to one token at a time, in order, from the
// 128-byte scratch frame.
//
// Registers: R11 args, R8 constants, R9 exp table, AX lp, BX old, CX adv,
// DX mask, DI grad, SI 8n, R10 8t, R14 the weights, R12-R13 lane masks;
// X12-X15 the sums L, Clip, Low, KL.
TEXT ·ppoAVX2(SB), NOSPLIT, $128-8
	MOVQ a+0(FP), R11
	MOVQ A_K(R11), R8
	MOVQ K_TABLE(R8), R9
	LOADCOLS
	VMOVSD A_SL(R11), X12
	VMOVSD A_SCLIP(R11), X13
	VMOVSD A_SLOW(R11), X14
	VMOVSD A_SKL(R11), X15

loop:
	// d = clamp(lp - old, -20, 20); Y1: clamped.
	VMOVUPD (AX)(R10*1), Y0
	VSUBPD  (BX)(R10*1), Y0, Y0
	VCMPPD  $LT_OS, K_MIND(R8), Y0, Y1
	VCMPPD  $GT_OS, K_MAXD(R8), Y0, Y2
	VBLENDVPD Y1, K_MIND(R8), Y0, Y0
	VBLENDVPD Y2, K_MAXD(R8), Y0, Y0
	VORPD   Y1, Y2, Y1

	// ratio = fastexp.Core(d) in Y6. k = bits(kf + round) - bits(round)
	// (Y2), 0 where d is NaN as int64(NaN)&63 and int64(NaN)>>6<<52 are.
	CORE

	// l = -a·ratio (Y4), g = l, or l·0 where clamped (Y7); Y3 = -a.
	VMOVUPD (CX)(R10*1), Y2
	VXORPD  K_SIGN(R8), Y2, Y3
	VMULPD  Y6, Y3, Y4
	VXORPD  Y5, Y5, Y5
	VMULPD  Y4, Y5, Y7
	VBLENDVPD Y1, Y7, Y4, Y7

	// Clip: where ratio is outside [lo, hi] and l2 = -a·cr > l, l = l2,
	// g = g·0; Y8 the mask.
	VCMPPD  $LT_OS, A_LO(R11), Y6, Y8
	VCMPPD  $GT_OS, A_HI(R11), Y6, Y9
	VMOVUPD A_LO(R11), Y10
	VBLENDVPD Y9, A_HI(R11), Y10, Y10
	VORPD   Y8, Y9, Y8
	VMULPD  Y3, Y10, Y10
	VCMPPD  $GT_OS, Y4, Y10, Y9
	VANDPD  Y8, Y9, Y8
	VBLENDVPD Y8, Y10, Y4, Y4
	VMULPD  Y5, Y7, Y9
	VBLENDVPD Y8, Y9, Y7, Y7

	// Dual clip where a < 0, l3 = -a·c3: l > l3 gives l = l3, g = +0
	// (Y11 the mask); l == l3 gives g = g·0.5.
	VCMPPD  $LT_OS, Y5, Y2, Y9
	VMULPD  A_C3(R11), Y3, Y10
	VCMPPD  $GT_OS, Y10, Y4, Y11
	VANDPD  Y9, Y11, Y11
	VCMPPD  $EQ_OQ, Y10, Y4, Y2
	VANDPD  Y9, Y2, Y2
	VBLENDVPD Y11, Y10, Y4, Y4
	VMULPD  K_HALF(R8), Y7, Y9
	VBLENDVPD Y2, Y9, Y7, Y7
	VANDNPD Y7, Y11, Y7

	// The mask m (Y9), Y10 where m != 0 (NaN too), the weights w (Y6):
	// grad = w·(g·(m·gs)), the contributions (l·w)·m (Y4), d·m (Y0), m
	// where clipped (Y8, lanes in R12) and dual-clipped (Y11, lanes in
	// R13); all +0 where m == 0.
	VMOVUPD (DX)(R10*1), Y9
	VCMPPD  $NEQ_UQ, Y5, Y9, Y10
	VMOVUPD (R14), Y6
	ADDQ    A_WSTEP(R11), R14
	VMULPD  A_GS(R11), Y9, Y2
	VMULPD  Y2, Y7, Y2
	VMULPD  Y2, Y6, Y2
	VANDPD  Y10, Y2, Y2
	VMOVUPD Y2, (DI)(R10*1)
	VMULPD  Y6, Y4, Y4
	VMULPD  Y9, Y4, Y4
	VANDPD  Y10, Y4, Y4
	VMULPD  Y9, Y0, Y0
	VANDPD  Y10, Y0, Y0
	VANDPD  Y10, Y8, Y8
	VANDPD  Y10, Y11, Y11
	VMOVMSKPD Y8, R12
	VMOVMSKPD Y11, R13
	VANDPD  Y9, Y8, Y8
	VANDPD  Y9, Y11, Y11

	// The sums, token by token. Clip and Low are left as they are where
	// no token of the four adds to them (adding +0 changes no bit).
	VMOVUPD Y4, 0(SP)
	VMOVUPD Y0, 32(SP)
	VADDSD  0(SP), X12, X12
	VSUBSD  32(SP), X15, X15
	VADDSD  8(SP), X12, X12
	VSUBSD  40(SP), X15, X15
	VADDSD  16(SP), X12, X12
	VSUBSD  48(SP), X15, X15
	VADDSD  24(SP), X12, X12
	VSUBSD  56(SP), X15, X15
	TESTQ   R12, R12
	JZ      low
	VMOVUPD Y8, 64(SP)
	VADDSD  64(SP), X13, X13
	VADDSD  72(SP), X13, X13
	VADDSD  80(SP), X13, X13
	VADDSD  88(SP), X13, X13

low:
	TESTQ   R13, R13
	JZ      next
	VMOVUPD Y11, 96(SP)
	VADDSD  96(SP), X14, X14
	VADDSD  104(SP), X14, X14
	VADDSD  112(SP), X14, X14
	VADDSD  120(SP), X14, X14

next:
	ADDQ $32, R10
	CMPQ R10, SI
	JB   loop

	VMOVSD X12, A_SL(R11)
	VMOVSD X13, A_SCLIP(R11)
	VMOVSD X14, A_SLOW(R11)
	VMOVSD X15, A_SKL(R11)
	VZEROUPPER
	RET
