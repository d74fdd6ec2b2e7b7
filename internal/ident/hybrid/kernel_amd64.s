#include "textflag.h"

// func hiddenAVX2(w, x, acc []float64)
// acc[u] += w[k*H+u] * x[k] for k = 0 … in-1 in order (H = len(acc), a
// multiple of 4; w input-major: row k holds the H units' weights), products
// and sums rounded separately (VMULPD then VADDPD, never fused). Units go
// 32 at a time (eight independent sums of four lanes keep the multiplier
// and the adders busy, and x is read once per 32 units), then four at a
// time.
TEXT ·hiddenAVX2(SB), NOSPLIT, $0-72
	MOVQ w_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	MOVQ acc_base+48(FP), R8
	MOVQ acc_len+56(FP), BX
	MOVQ BX, R10
	SHLQ $3, R10 // bytes of one row of w: H·8

oct:
	CMPQ    BX, $32
	JL      single
	VMOVUPD (R8), Y0
	VMOVUPD 32(R8), Y1
	VMOVUPD 64(R8), Y2
	VMOVUPD 96(R8), Y3
	VMOVUPD 128(R8), Y4
	VMOVUPD 160(R8), Y5
	VMOVUPD 192(R8), Y6
	VMOVUPD 224(R8), Y7
	MOVQ    DI, R11
	XORQ    AX, AX

octloop:
	VBROADCASTSD (SI)(AX*8), Y8
	VMULPD       (R11), Y8, Y9
	VADDPD       Y9, Y0, Y0
	VMULPD       32(R11), Y8, Y10
	VADDPD       Y10, Y1, Y1
	VMULPD       64(R11), Y8, Y11
	VADDPD       Y11, Y2, Y2
	VMULPD       96(R11), Y8, Y12
	VADDPD       Y12, Y3, Y3
	VMULPD       128(R11), Y8, Y13
	VADDPD       Y13, Y4, Y4
	VMULPD       160(R11), Y8, Y14
	VADDPD       Y14, Y5, Y5
	VMULPD       192(R11), Y8, Y15
	VADDPD       Y15, Y6, Y6
	VMULPD       224(R11), Y8, Y9
	VADDPD       Y9, Y7, Y7
	ADDQ         R10, R11
	INCQ         AX
	CMPQ         AX, CX
	JL           octloop

	VMOVUPD Y0, (R8)
	VMOVUPD Y1, 32(R8)
	VMOVUPD Y2, 64(R8)
	VMOVUPD Y3, 96(R8)
	VMOVUPD Y4, 128(R8)
	VMOVUPD Y5, 160(R8)
	VMOVUPD Y6, 192(R8)
	VMOVUPD Y7, 224(R8)
	ADDQ    $256, DI
	ADDQ    $256, R8
	SUBQ    $32, BX
	JMP     oct

single:
	CMPQ    BX, $4
	JL      done
	VMOVUPD (R8), Y0
	MOVQ    DI, R11
	XORQ    AX, AX

singleloop:
	VBROADCASTSD (SI)(AX*8), Y4
	VMULPD       (R11), Y4, Y5
	VADDPD       Y5, Y0, Y0
	ADDQ         R10, R11
	INCQ         AX
	CMPQ         AX, CX
	JL           singleloop

	VMOVUPD Y0, (R8)
	ADDQ    $32, DI
	ADDQ    $32, R8
	SUBQ    $4, BX
	JMP     single

done:
	VZEROUPPER
	RET

// func tanhAVX2(x []float64, c *[25][4]float64)
// math.Tanh on four lanes: both branches computed in every lane, then
// chosen per lane as tanh's switch does. The exp(2z) branch is math.Exp's
// amd64 FMA path (exp_amd64.s, label avxfma) instruction for instruction
// in packed form; its argument 2z lies in [1.25, 88.03], where Exp
// neither overflows nor goes denormal, and lanes outside it are not used.
// Two vectors (eight lanes) go through every step side by side, so the
// core works on two independent dependency chains (one chain's latency,
// ≈ 60 dependent operations, left most execution ports idle); a last
// group of four lanes goes alone. The constants are read from c, each
// replicated in its four lanes (tanhVec), as memory operands.
//
// Every macro below is one step of one vector: x the argument (kept to
// the end), r the exp branch, p the poly branch, and t, u, k scratch
// (k's low half holds the int32 exponent).

#define C_MAXLOG 0(SI)
#define C_0625 32(SI)
#define C_ONE 64(SI)
#define C_TWO 96(SI)
#define C_P0 128(SI)
#define C_P1 160(SI)
#define C_P2 192(SI)
#define C_Q0 224(SI)
#define C_Q1 256(SI)
#define C_Q2 288(SI)
#define C_LOG2E 320(SI)
#define C_LN2U 352(SI)
#define C_LN2L 384(SI)
#define C_SIXTEENTH 416(SI)
#define C_T0 448(SI)
#define C_T1 480(SI)
#define C_T2 512(SI)
#define C_T3 544(SI)
#define C_T4 576(SI)
#define C_T5 608(SI)
#define C_T6 640(SI)
#define C_ABS 672(SI)
#define C_SIGN 704(SI)
#define C_BIAS 736(SI)
#define C_ZERO 768(SI)

// y = 2|x|; t = LOG2E·y; k = round(t) (int32, as CVTSD2SL); t = float k
#define E1(x, r, t, k) \
	VANDPD     C_ABS, x, r; \
	VADDPD     r, r, r; \
	VMULPD     C_LOG2E, r, t; \
	VCVTPD2DQY t, k; \
	VCVTDQ2PD  k, t

// y −= LN2U·k, y −= LN2L·k (fused); y·0.0625; the Taylor series
#define E2(r, t) \
	VFNMADD231PD C_LN2U, t, r; \
	VFNMADD231PD C_LN2L, t, r; \
	VMULPD       C_SIXTEENTH, r, r; \
	VMOVUPD      C_T0, t; \
	VFMADD213PD  C_T1, r, t; \
	VFMADD213PD  C_T2, r, t; \
	VFMADD213PD  C_T3, r, t; \
	VFMADD213PD  C_T4, r, t; \
	VFMADD213PD  C_T5, r, t; \
	VFMADD213PD  C_T6, r, t; \
	VFMADD213PD  C_ONE, r, t; \
	VMULPD       t, r, r

// four times x1 = x0 + 2, x0 ·= x1 (the last fused with + 1)
#define E3(r, t) \
	VADDPD      C_TWO, r, t; \
	VMULPD      t, r, r; \
	VADDPD      C_TWO, r, t; \
	VMULPD      t, r, r; \
	VADDPD      C_TWO, r, t; \
	VMULPD      t, r, r; \
	VADDPD      C_TWO, r, t; \
	VFMADD213PD C_ONE, t, r

// e = fr·2^k; r = ±(1 − 2/(e+1))
#define E4(x, r, t, k) \
	VPMOVSXDQ k, t; \
	VPADDQ    C_BIAS, t, t; \
	VPSLLQ    $52, t, t; \
	VMULPD    t, r, r; \
	VADDPD    C_ONE, r, r; \
	VMOVUPD   C_TWO, t; \
	VDIVPD    r, t, r; \
	VMOVUPD   C_ONE, t; \
	VSUBPD    r, t, r; \
	VANDPD    C_SIGN, x, t; \
	VXORPD    t, r, r

// poly branch: x + x*s*((P0*s+P1)*s+P2)/(((s+Q0)*s+Q1)*s+Q2)
#define P1(x, p, t, u) \
	VMULPD  x, x, t; \
	VMOVUPD C_P0, p; \
	VMULPD  t, p, p; \
	VADDPD  C_P1, p, p; \
	VMULPD  t, p, p; \
	VADDPD  C_P2, p, p; \
	VADDPD  C_Q0, t, u; \
	VMULPD  t, u, u; \
	VADDPD  C_Q1, u, u; \
	VMULPD  t, u, u; \
	VADDPD  C_Q2, u, u

#define P2(x, p, t, u) \
	VMULPD t, x, t; \
	VMULPD p, t, t; \
	VDIVPD u, t, t; \
	VADDPD t, x, p

// choose: z ≥ 0.625 → exp branch; z > 0.5·MAXLOG → ±1; x = 0 → x
#define CH(x, r, p, t, u) \
	VANDPD    C_ABS, x, t; \
	VCMPPD    $0x1D, C_0625, t, u; \
	VBLENDVPD u, r, p, p; \
	VCMPPD    $0x1E, C_MAXLOG, t, u; \
	VANDPD    C_SIGN, x, r; \
	VORPD     C_ONE, r, r; \
	VBLENDVPD u, r, p, p; \
	VCMPPD    $0x00, C_ZERO, x, u; \
	VBLENDVPD u, x, p, p

TEXT ·tanhAVX2(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), CX
	MOVQ c+24(FP), SI

tpair:
	CMPQ CX, $8
	JL   tone
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y6
	E1(Y0, Y1, Y2, X3)
	E1(Y6, Y7, Y8, X9)
	P1(Y0, Y4, Y5, Y12)
	P1(Y6, Y10, Y11, Y13)
	E2(Y1, Y2)
	E2(Y7, Y8)
	E3(Y1, Y2)
	E3(Y7, Y8)
	P2(Y0, Y4, Y5, Y12)
	P2(Y6, Y10, Y11, Y13)
	E4(Y0, Y1, Y2, X3)
	E4(Y6, Y7, Y8, X9)
	CH(Y0, Y1, Y4, Y2, Y3)
	CH(Y6, Y7, Y10, Y8, Y9)
	VMOVUPD Y4, (DI)
	VMOVUPD Y10, 32(DI)
	ADDQ    $64, DI
	SUBQ    $8, CX
	JMP     tpair

tone:
	CMPQ CX, $4
	JL   tdone
	VMOVUPD (DI), Y0
	E1(Y0, Y1, Y2, X3)
	E2(Y1, Y2)
	E3(Y1, Y2)
	E4(Y0, Y1, Y2, X3)
	P1(Y0, Y4, Y5, Y6)
	P2(Y0, Y4, Y5, Y6)
	CH(Y0, Y1, Y4, Y2, Y3)
	VMOVUPD Y4, (DI)

tdone:
	VZEROUPPER
	RET
