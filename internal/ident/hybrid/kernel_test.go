package hybrid

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tanhAVX2 is math.Tanh bit for bit: special values, both sides of the
// branch points, and a million random arguments over the ranges a hidden
// unit sees, through the eight-lane loop and the last four-lane group.
func TestTanhAVX2(t *testing.T) {
	t.Logf("AVX2 tanh in use: %v", useTanhAVX2)
	if !useTanhAVX2 {
		return
	}
	c := tanhConst[0]
	xs := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1, -1, 0.625, -0.625,
		math.Nextafter(0.625, 0), math.Nextafter(-0.625, 0), c, -c, math.Nextafter(c, 100), math.Nextafter(-c, -100),
		math.Nextafter(c, 0), 5e-324, -5e-324, 1e-300, 1e300, -1e300, math.MaxFloat64, 709, 710, 1e-8, 0.3, 20}
	rng := rand.New(rand.NewPCG(7, 8))
	for len(xs) < 1_000_000 {
		var x float64
		switch len(xs) % 4 {
		case 0:
			x = 4 * rng.NormFloat64()
		case 1:
			x = 60 * (2*rng.Float64() - 1)
		case 2:
			x = math.Float64frombits(rng.Uint64()) // any bit pattern
		default:
			x = 0.625 * (1 + 1e-6*rng.NormFloat64())
			if rng.IntN(2) == 0 {
				x = -x
			}
		}
		xs = append(xs, x)
	}
	xs = xs[:len(xs)&^7-4] // a multiple of 4 but not of 8: the last four lanes go alone
	got := append([]float64(nil), xs...)
	tanhAVX2(got, &tanhVec)
	bad := 0
	for i, x := range xs {
		want := math.Tanh(x)
		if math.Float64bits(got[i]) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(got[i])) {
			if bad < 10 {
				t.Errorf("tanh(%v [%#x]) = %v [%#x], math.Tanh %v [%#x]", x, math.Float64bits(x), got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d differ", bad, len(xs))
	}
}

// tanhBenchArgs are 32 pre-activations like a hidden layer's (4·N(0,1)).
func tanhBenchArgs() []float64 {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, 32)
	for i := range x {
		x[i] = 4 * rng.NormFloat64()
	}
	return x
}

// BenchmarkTanhAVX2: one hidden layer's 32 tanh in the AVX2 kernel;
// BenchmarkTanhGo is math.Tanh on the same arguments (the comparison).
func BenchmarkTanhAVX2(b *testing.B) {
	if !useTanhAVX2 {
		b.Skip("no AVX2+FMA")
	}
	x := tanhBenchArgs()
	h := make([]float64, len(x))
	for b.Loop() {
		copy(h, x)
		tanhAVX2(h, &tanhVec)
	}
}

func BenchmarkTanhGo(b *testing.B) {
	x := tanhBenchArgs()
	h := make([]float64, len(x))
	for b.Loop() {
		copy(h, x)
		for i, v := range h {
			h[i] = math.Tanh(v)
		}
	}
}
