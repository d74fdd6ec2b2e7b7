package lsq

import (
	"math/rand/v2"
	"testing"
)

// TestKernelsSameBits: the kernels in use (AVX2 assembly where the CPU has
// it) give the bits of the plain-Go kernels, for every length up to 300.
func TestKernelsSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	vec := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64() * float64(1+i%7)
		}
		return x
	}
	for n := 0; n <= 300; n++ {
		v, a, b := vec(n), vec(n), vec(n)
		// dot products: dispatching dot2 against the pure-Go lanes
		sa, sb := dot2(v, a, b)
		var la, lb [8]float64
		n8 := n &^ 7
		dot2Go(v[:n8], a[:n8], b[:n8], &la, &lb)
		wa := ((la[0] + la[4]) + (la[1] + la[5])) + ((la[2] + la[6]) + (la[3] + la[7]))
		wb := ((lb[0] + lb[4]) + (lb[1] + lb[5])) + ((lb[2] + lb[6]) + (lb[3] + lb[7]))
		for i := n8; i < n; i++ {
			wa += float64(v[i] * a[i])
			wb += float64(v[i] * b[i])
		}
		if sa != wa || sb != wb {
			t.Fatalf("n %d: dot2 (%v, %v), Go (%v, %v)", n, sa, sb, wa, wb)
		}
		// updates
		a2, b2 := append([]float64(nil), a...), append([]float64(nil), b...)
		axpy2(v, a, b, 0.37, -1.9)
		for i := range v {
			a2[i] -= float64(0.37 * v[i])
			b2[i] -= float64(-1.9 * v[i])
			if a[i] != a2[i] || b[i] != b2[i] {
				t.Fatalf("n %d, i %d: axpy2 (%v, %v), Go (%v, %v)", n, i, a[i], b[i], a2[i], b2[i])
			}
		}
	}
	t.Logf("AVX2 kernels in use: %v", useAVX2)
}
