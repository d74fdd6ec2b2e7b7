#include "textflag.h"

// func dot2AVX2(v, a, b []float64, la, lb *[8]float64)
// la[l] += Σ_{i ≡ l mod 8} v[i]·a[i], lb likewise with b (starting from
// zero: la, lb are overwritten); products and sums rounded separately.
TEXT ·dot2AVX2(SB), NOSPLIT, $0-88
	MOVQ v_base+0(FP), SI
	MOVQ v_len+8(FP), CX
	MOVQ a_base+24(FP), DI
	MOVQ b_base+48(FP), DX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ AX, AX

dotloop:
	CMPQ AX, CX
	JGE  dotdone
	VMOVUPD (SI)(AX*8), Y4
	VMOVUPD 32(SI)(AX*8), Y5
	VMULPD  (DI)(AX*8), Y4, Y6
	VADDPD  Y6, Y0, Y0
	VMULPD  32(DI)(AX*8), Y5, Y7
	VADDPD  Y7, Y1, Y1
	VMULPD  (DX)(AX*8), Y4, Y8
	VADDPD  Y8, Y2, Y2
	VMULPD  32(DX)(AX*8), Y5, Y9
	VADDPD  Y9, Y3, Y3
	ADDQ    $8, AX
	JMP     dotloop

dotdone:
	MOVQ    la+72(FP), R8
	VMOVUPD Y0, (R8)
	VMOVUPD Y1, 32(R8)
	MOVQ    lb+80(FP), R9
	VMOVUPD Y2, (R9)
	VMOVUPD Y3, 32(R9)
	VZEROUPPER
	RET

// func axpy2AVX2(v, a, b []float64, sa, sb float64)
TEXT ·axpy2AVX2(SB), NOSPLIT, $0-88
	MOVQ         v_base+0(FP), SI
	MOVQ         v_len+8(FP), CX
	MOVQ         a_base+24(FP), DI
	MOVQ         b_base+48(FP), DX
	VBROADCASTSD sa+72(FP), Y0
	VBROADCASTSD sb+80(FP), Y1
	XORQ         AX, AX

axloop:
	CMPQ    AX, CX
	JGE     axdone
	VMOVUPD (SI)(AX*8), Y2
	VMULPD  Y2, Y0, Y3
	VMOVUPD (DI)(AX*8), Y4
	VSUBPD  Y3, Y4, Y4
	VMOVUPD Y4, (DI)(AX*8)
	VMULPD  Y2, Y1, Y5
	VMOVUPD (DX)(AX*8), Y6
	VSUBPD  Y5, Y6, Y6
	VMOVUPD Y6, (DX)(AX*8)
	ADDQ    $4, AX
	JMP     axloop

axdone:
	VZEROUPPER
	RET
