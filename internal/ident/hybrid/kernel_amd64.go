package hybrid

import (
	"math"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the assembly hidden-layer kernel (same bits as the Go
// loops: every product and every sum rounded separately, in the same
// order).
var useAVX2 = cpu.X86.HasAVX2

// hiddenAVX2 adds, for every hidden unit u and every input k in
// increasing order, w[k·H+u]·x[k] to acc[u] (a product, then a sum, each
// rounded); H = len(acc) is a multiple of 4, in = len(x) ≥ 1 and
// len(w) = H·in (w input-major: packW1).
//
//go:noescape
func hiddenAVX2(w, x, acc []float64)

// useTanhAVX2 selects the assembly tanh (tanhAVX2): math.Tanh bit for bit
// on CPUs where math.Exp runs its fused multiply-add form (AVX and FMA,
// math's own test), which the kernel follows step by step.
var useTanhAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// tanhConst are the constants of math.Tanh and math.Exp (amd64) in the
// order tanhAVX2 reads them, from the same decimal literals.
var tanhConst = [...]float64{
	0.5 * 8.8029691931113054295988e+01,   // 0: 0.5·MAXLOG, beyond it ±1
	0.625,                                // 8: from here tanh = 1 − 2/(exp(2z)+1)
	1,                                    // 16
	2,                                    // 24
	-9.64399179425052238628e-1,           // 32: tanhP
	-9.92877231001918586564e1,            // 40
	-1.61468768441708447952e3,            // 48
	1.12811678491632931402e2,             // 56: tanhQ
	2.23548839060100448583e3,             // 64
	4.84406305325125486048e3,             // 72
	1.4426950408889634073599246810018920, // 80: LOG2E
	0.69314718055966295651160180568695068359375,           // 88: LN2U
	0.28235290563031577122588448175013436025525412068e-12, // 96: LN2L
	0.0625,                   // 104
	2.4801587301587301587e-5, // 112: the Taylor series, highest term first
	1.9841269841269841270e-4, // 120
	1.3888888888888888889e-3, // 128
	8.3333333333333333333e-3, // 136
	4.1666666666666666667e-2, // 144
	1.6666666666666666667e-1, // 152
	0.5,                      // 160
}

// tanhVec is the table tanhAVX2 reads: tanhConst's values and the masks
// it needs, each in four lanes (32 bytes), in the kernel's C_* order.
var tanhVec = func() (v [25][4]float64) {
	c := tanhConst
	vals := [...]float64{
		c[0], c[1], c[2], c[3], // 0.5·MAXLOG, 0.625, 1, 2
		c[4], c[5], c[6], // tanhP
		c[7], c[8], c[9], // tanhQ
		c[10], c[11], c[12], c[13], // LOG2E, LN2U, LN2L, 0.0625
		c[14], c[15], c[16], c[17], c[18], c[19], c[20], // Taylor
		math.Float64frombits(1<<63 - 1), // |.| mask
		math.Float64frombits(1 << 63),   // sign mask
		math.Float64frombits(1023),      // exponent bias (int64 lanes)
		0,
	}
	for i, x := range vals {
		v[i] = [4]float64{x, x, x, x}
	}
	return v
}()

// tanhAVX2 replaces every x[i] by math.Tanh(x[i]), eight (then four) at
// a time; len(x) is a multiple of 4; c is &tanhVec.
//
//go:noescape
func tanhAVX2(x []float64, c *[25][4]float64)
