#include "textflag.h"

// func hiddenAVX2(w, x, acc []float64)
// acc[4b+l] += w[(b*in+k)*4+l] * x[k] for k = 0 … in-1 in order, products
// and sums rounded separately (VMULPD then VADDPD, never fused). Blocks go
// four at a time (four independent sums keep the adder busy), then one at
// a time.
TEXT ·hiddenAVX2(SB), NOSPLIT, $0-72
	MOVQ w_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	MOVQ acc_base+48(FP), R8
	MOVQ acc_len+56(FP), BX
	MOVQ CX, R10
	SHLQ $5, R10 // bytes of one block: in·4·8

quad:
	CMPQ BX, $16
	JL   single
	VMOVUPD (R8), Y0
	VMOVUPD 32(R8), Y1
	VMOVUPD 64(R8), Y2
	VMOVUPD 96(R8), Y3
	MOVQ    DI, R11
	LEAQ    (DI)(R10*1), R12
	LEAQ    (R12)(R10*1), R13
	LEAQ    (R13)(R10*1), R9
	XORQ    AX, AX

quadloop:
	VBROADCASTSD (SI)(AX*8), Y4
	VMULPD       (R11), Y4, Y5
	VADDPD       Y5, Y0, Y0
	VMULPD       (R12), Y4, Y6
	VADDPD       Y6, Y1, Y1
	VMULPD       (R13), Y4, Y7
	VADDPD       Y7, Y2, Y2
	VMULPD       (R9), Y4, Y8
	VADDPD       Y8, Y3, Y3
	ADDQ         $32, R11
	ADDQ         $32, R12
	ADDQ         $32, R13
	ADDQ         $32, R9
	INCQ         AX
	CMPQ         AX, CX
	JL           quadloop

	VMOVUPD Y0, (R8)
	VMOVUPD Y1, 32(R8)
	VMOVUPD Y2, 64(R8)
	VMOVUPD Y3, 96(R8)
	MOVQ    R9, DI // R9 ends at the fifth block
	ADDQ    $128, R8
	SUBQ    $16, BX
	JMP     quad

single:
	CMPQ BX, $4
	JL   done
	VMOVUPD (R8), Y0
	XORQ    AX, AX

singleloop:
	VBROADCASTSD (SI)(AX*8), Y4
	VMULPD       (DI), Y4, Y5
	VADDPD       Y5, Y0, Y0
	ADDQ         $32, DI
	INCQ         AX
	CMPQ         AX, CX
	JL           singleloop

	VMOVUPD Y0, (R8)
	ADDQ    $32, R8
	SUBQ    $4, BX
	JMP     single

done:
	VZEROUPPER
	RET

// func tanhAVX2(x []float64, c *[21]float64)
// math.Tanh on four lanes: both branches computed in every lane, then
// chosen per lane as tanh's switch does. The exp(2z) branch is math.Exp's
// amd64 FMA path (exp_amd64.s, label avxfma) instruction for instruction
// in packed form; its argument 2z lies in [1.25, 88.03], where Exp
// neither overflows nor goes denormal, and lanes outside it are not used.
TEXT ·tanhAVX2(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), DI
	MOVQ x_len+8(FP), CX
	MOVQ c+24(FP), SI
	MOVQ $0x7FFFFFFFFFFFFFFF, AX
	MOVQ AX, X12
	VPBROADCASTQ X12, Y12 // |.| mask
	MOVQ $0x8000000000000000, AX
	MOVQ AX, X14
	VPBROADCASTQ X14, Y14 // sign mask
	MOVQ $1023, AX
	MOVQ AX, X13
	VPBROADCASTQ X13, Y13 // exponent bias

tloop:
	CMPQ CX, $4
	JL   tdone
	VMOVUPD (DI), Y0     // x
	VANDPD  Y12, Y0, Y1  // z = |x|

	// polynomial branch: x + x*s*((P0*s+P1)*s+P2)/(((s+Q0)*s+Q1)*s+Q2)
	VMULPD       Y0, Y0, Y2 // s
	VBROADCASTSD 32(SI), Y3
	VMULPD       Y2, Y3, Y3
	VBROADCASTSD 40(SI), Y4
	VADDPD       Y4, Y3, Y3
	VMULPD       Y2, Y3, Y3
	VBROADCASTSD 48(SI), Y4
	VADDPD       Y4, Y3, Y3 // num
	VBROADCASTSD 56(SI), Y4
	VADDPD       Y4, Y2, Y4
	VMULPD       Y2, Y4, Y4
	VBROADCASTSD 64(SI), Y5
	VADDPD       Y5, Y4, Y4
	VMULPD       Y2, Y4, Y4
	VBROADCASTSD 72(SI), Y5
	VADDPD       Y5, Y4, Y4 // den
	VMULPD       Y2, Y0, Y5 // x*s
	VMULPD       Y3, Y5, Y5 // x*s*num
	VDIVPD       Y4, Y5, Y5 // /den
	VADDPD       Y5, Y0, Y6 // poly result

	// exp branch: e = exp(2z), r = ±(1 − 2/(e+1))
	VADDPD       Y1, Y1, Y2 // y = 2z (exact)
	VBROADCASTSD 80(SI), Y3
	VMULPD       Y2, Y3, Y3 // LOG2E·y
	VCVTPD2DQY   Y3, X7     // k (round to nearest, as CVTSD2SL)
	VCVTDQ2PD    X7, Y3     // float k
	VBROADCASTSD 88(SI), Y4
	VFNMADD231PD Y4, Y3, Y2 // y −= LN2U·k (fused)
	VBROADCASTSD 96(SI), Y4
	VFNMADD231PD Y4, Y3, Y2 // y −= LN2L·k (fused)
	VBROADCASTSD 104(SI), Y4
	VMULPD       Y4, Y2, Y2 // y·0.0625
	VBROADCASTSD 112(SI), Y3
	VBROADCASTSD 120(SI), Y4
	VFMADD213PD  Y4, Y2, Y3
	VBROADCASTSD 128(SI), Y4
	VFMADD213PD  Y4, Y2, Y3
	VBROADCASTSD 136(SI), Y4
	VFMADD213PD  Y4, Y2, Y3
	VBROADCASTSD 144(SI), Y4
	VFMADD213PD  Y4, Y2, Y3
	VBROADCASTSD 152(SI), Y4
	VFMADD213PD  Y4, Y2, Y3
	VBROADCASTSD 160(SI), Y4
	VFMADD213PD  Y4, Y2, Y3
	VBROADCASTSD 16(SI), Y8 // 1
	VFMADD213PD  Y8, Y2, Y3
	VMULPD       Y3, Y2, Y2 // x0 *= x1
	VBROADCASTSD 24(SI), Y9 // 2
	VADDPD       Y9, Y2, Y3
	VMULPD       Y3, Y2, Y2
	VADDPD       Y9, Y2, Y3
	VMULPD       Y3, Y2, Y2
	VADDPD       Y9, Y2, Y3
	VMULPD       Y3, Y2, Y2
	VADDPD       Y9, Y2, Y3
	VFMADD213PD  Y8, Y3, Y2 // fr = x1·x0 + 1
	VPMOVSXDQ    X7, Y4     // k as int64
	VPADDQ       Y13, Y4, Y4
	VPSLLQ       $52, Y4, Y4 // 2^k
	VMULPD       Y4, Y2, Y2  // e
	VADDPD       Y8, Y2, Y2  // e+1
	VDIVPD       Y2, Y9, Y2  // 2/(e+1)
	VSUBPD       Y2, Y8, Y2  // 1 − 2/(e+1)
	VANDPD       Y14, Y0, Y10 // sign of x
	VXORPD       Y10, Y2, Y2  // −r where x < 0

	// choose: z ≥ 0.625 → exp branch; z > 0.5·MAXLOG → ±1; x = 0 → x
	VBROADCASTSD 8(SI), Y4
	VCMPPD       $0x1D, Y4, Y1, Y5 // z >= 0.625 (GE_OQ)
	VBLENDVPD    Y5, Y2, Y6, Y6
	VBROADCASTSD 0(SI), Y4
	VCMPPD       $0x1E, Y4, Y1, Y5 // z > 0.5·MAXLOG (GT_OQ)
	VORPD        Y10, Y8, Y11      // ±1
	VBLENDVPD    Y5, Y11, Y6, Y6
	VXORPD       Y4, Y4, Y4
	VCMPPD       $0x00, Y4, Y0, Y5 // x == 0 (EQ_OQ)
	VBLENDVPD    Y5, Y0, Y6, Y6
	VMOVUPD      Y6, (DI)
	ADDQ         $32, DI
	SUBQ         $4, CX
	JMP          tloop

tdone:
	VZEROUPPER
	RET
