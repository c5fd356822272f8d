// Shared by the AVX2 token loops (ppo_amd64.s, sapo_amd64.s,
// cispo_amd64.s): the offsets in ppoConsts and coreConsts (the offsets
// tests pin them), LOADCOLS, the VCMPPD predicates, and CORE, fastexp.Core
// on four lanes.

// Offsets in ppoConsts.
#define K_INVSTEP 0
#define K_ROUND 32
#define K_LN2HI 64
#define K_LN2LO 96
#define K_C5 128
#define K_C4 160
#define K_C3 192
#define K_C2 224
#define K_ONE 256
#define K_MIND 288
#define K_MAXD 320
#define K_SIGN 352
#define K_HALF 384
#define K_LOW6 416
#define K_HIGH58 448
#define K_TABLE 480

// Offsets in coreConsts.
#define S_DMIN 0
#define S_DMAX 32
#define S_ZMIN 64
#define S_ZMAX 96
#define S_FOURS 128

// LOADCOLS loads what every loop reads of its argument (at R11, with the
// offsets the including file defines): AX lp, BX old, CX adv, DX mask, DI
// grad, R14 the weights, SI 8n, and R10 = 0, the byte offset of token t.
#define LOADCOLS \
	MOVQ A_LP(R11), AX \
	MOVQ A_OLD(R11), BX \
	MOVQ A_ADV(R11), CX \
	MOVQ A_MASK(R11), DX \
	MOVQ A_GRAD(R11), DI \
	MOVQ A_N(R11), SI \
	MOVQ A_W(R11), R14 \
	SHLQ $3, SI \
	XORQ R10, R10

// VCMPPD predicates.
#define EQ_OQ 0x00
#define LT_OS 0x01
#define NEQ_UQ 0x04
#define ORD_Q 0x07
#define GT_OS 0x0e

// CORE sets Y6 to fastexp.Core(Y0), with Y2-Y5 for
// scratch: k = bits(kf + round) - bits(round), 0 where the argument is NaN
// (a masked token's; its result is not used).
#define CORE \
	VMULPD  K_INVSTEP(R8), Y0, Y2 \
	VADDPD  K_ROUND(R8), Y2, Y2 \
	VSUBPD  K_ROUND(R8), Y2, Y3 \
	VPSUBQ  K_ROUND(R8), Y2, Y2 \
	VCMPPD  $0x07, Y0, Y0, Y4 \
	VPAND   Y4, Y2, Y2 \
	VMULPD  K_LN2HI(R8), Y3, Y4 \
	VSUBPD  Y4, Y0, Y4 \
	VMULPD  K_LN2LO(R8), Y3, Y3 \
	VSUBPD  Y3, Y4, Y4 \
	VMULPD  K_C5(R8), Y4, Y3 \
	VADDPD  K_C4(R8), Y3, Y3 \
	VMULPD  Y4, Y3, Y3 \
	VADDPD  K_C3(R8), Y3, Y3 \
	VMULPD  Y4, Y3, Y3 \
	VADDPD  K_C2(R8), Y3, Y3 \
	VMULPD  Y4, Y3, Y3 \
	VADDPD  K_ONE(R8), Y3, Y3 \
	VMULPD  Y3, Y4, Y3 \
	VADDPD  K_ONE(R8), Y3, Y3 \
	VPAND   K_LOW6(R8), Y2, Y4 \
	VPCMPEQQ Y5, Y5, Y5 \
	VXORPD  Y6, Y6, Y6 \
	VGATHERQPD Y5, (R9)(Y4*8), Y6 \
	VMULPD  Y6, Y3, Y6 \
	VPAND   K_HIGH58(R8), Y2, Y2 \
	VPSLLQ  $46, Y2, Y2 \
	VPADDQ  Y2, Y6, Y6
