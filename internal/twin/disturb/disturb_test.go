package disturb

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The disturbance filter on a simulated record of prediction errors: a
// step bias (output_bias) and a ramp (integrated white noise) under
// measurement noise of 0.03 g with ok-flagged outliers, as the simulated
// line's part weight has. The estimate converges within the stated
// tolerance: within 0.02 g of the true bias (a step of 0.6 g) and within
// 3 of its own standard deviations; the outliers are gated out.
func TestFilterConverges(t *testing.T) {
	const noise = 0.03
	for _, tc := range []struct {
		name     string
		bias     func(k int) float64
		q        float64
		tol      float64
		outliers int
	}{
		{"step", func(k int) float64 { return 0.6 }, 0, 0.02, 0},
		{"step-late", func(k int) float64 {
			if k < 60 {
				return 0
			}
			return 0.6
		}, 1e-4, 0.03, 0},
		{"ramp", func(k int) float64 { return 0.002 * float64(k) }, 1e-5, 0.03, 0},
		{"step-outliers", func(k int) float64 { return 0.6 }, 0, 0.02, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			H := 240
			e := make([]float64, H)
			for k := range e {
				e[k] = tc.bias(k) + noise*rng.NormFloat64()
			}
			for i := 0; i < tc.outliers; i++ {
				e[20+50*i] += 20 * noise
			}
			e[7] = math.NaN() // a gap
			b, P, used, rej := Run(e, 1, tc.q, noise*noise)
			truth := tc.bias(H - 1)
			if d := math.Abs(b - truth); d > tc.tol || d > 3*math.Sqrt(P)+1e-9 && tc.q > 0 {
				t.Fatalf("estimate %.4f, truth %.4f, sd %.4f", b, truth, math.Sqrt(P))
			}
			wantRej := tc.outliers
			if tc.name == "step-late" {
				wantRej = GateRun - 1 // the step's first rows, then it is taken
			}
			if rej != wantRej || used != H-1-wantRej {
				t.Fatalf("used %d rejected %d", used, rej)
			}
		})
	}
	// without a walk the variance only shrinks; with one it stays above q
	_, P0, _, _ := Run(make([]float64, 500), 1, 0, 0.01)
	_, P1, _, _ := Run(make([]float64, 500), 1, 1e-4, 0.01)
	if !(P0 < 0.01/400) || !(P1 > 1e-4) {
		t.Fatalf("P0 %g P1 %g", P0, P1)
	}
}

// The filter's weights reproduce its estimate, and the joint estimate
// recovers a bias the state estimate absorbs in part (alpha 0.6: 40 % of
// the bias is left in the errors), falling back to the prior where the
// state absorbs all of it.
func TestWeightsAndJoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const H, noise, bias = 200, 0.03, 0.6
	e := make([]float64, H)
	for k := range e {
		e[k] = bias + noise*rng.NormFloat64()
	}
	for _, q := range []float64{0, 1e-4} {
		mask := Mask(e, 1, q, noise*noise)
		b, P, _, _ := Run(e, 1, q, noise*noise)
		c, c0, Pw := Weights(mask, 1, q, noise*noise)
		s, sum := 0.0, c0
		for k := range c {
			s += c[k] * e[k]
			sum += c[k]
		}
		if math.Abs(s-b) > 1e-12 || math.Abs(sum-1) > 1e-12 || math.Abs(P-Pw) > 1e-15 {
			t.Fatalf("q %g: weights give %.6f (Σ %.6f), the filter %.6f; P %g %g", q, s, sum, b, P, Pw)
		}
		alpha := make([]float64, H)
		r0 := make([]float64, H)
		for k := range r0 {
			alpha[k] = 0.6
			r0[k] = (1-alpha[k])*bias + noise*rng.NormFloat64()
		}
		bj, Pj := Joint(r0, alpha, mask, 1, q, noise*noise)
		if math.Abs(bj-bias) > 4*math.Sqrt(Pj) || math.Abs(bj-bias) > 0.05 {
			t.Fatalf("q %g: joint %.4f ± %.4f, bias %.1f", q, bj, math.Sqrt(Pj), bias)
		}
		for k := range alpha {
			alpha[k] = 1
		}
		if bj, Pj := Joint(r0, alpha, mask, 1, q, noise*noise); bj != 0 || math.Abs(Pj-(1+float64(H-1)*q)) > 1e-9 {
			t.Fatalf("fully absorbed: %.4f ± %.4f, want the prior", bj, math.Sqrt(Pj))
		}
	}
}
