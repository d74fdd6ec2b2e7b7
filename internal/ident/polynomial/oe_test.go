package polynomial

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/ident/linear"
)

// oeRecord simulates the output-error process y = 0.5 q⁻¹/(1 − 1.5 q⁻¹ +
// 0.7 q⁻²) u + 2 + e with white output noise (σ = 0.3) and a random
// binary input.
func oeRecord(seed uint64, T int) (y []float64, u [][]float64, clean []float64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	o := OEOrders{NF: 2, NB: 1, NK: []int{1}}
	u = make([][]float64, T)
	v := 1.0
	for k := range u {
		if rng.Float64() < 0.1 {
			v = -v
		}
		u[k] = []float64{v}
	}
	clean = simulate(o, []float64{-1.5, 0.7}, [][]float64{{0.5}}, 2, u, []float64{2, 2})
	y = make([]float64, T)
	for k := range y {
		y[k] = clean[k] + 0.3*rng.NormFloat64()
	}
	return y, u, clean
}

// On an output-error process OE recovers the true parameters and its free
// run beats the ARX fit of the same orders (biased by the noise in its
// regressors), on a fresh record; the covariance gives intervals that
// contain the truth.
func TestOEBeatsARX(t *testing.T) {
	o := OEOrders{NF: 2, NB: 1, NK: []int{1}}
	y, u, _ := oeRecord(1, 2000)
	m, err := FitOE(context.Background(), [][]float64{y}, [][][]float64{u}, o)
	if err != nil {
		t.Fatal(err)
	}
	truth := []float64{-1.5, 0.7, 0.5, 2}
	est := []float64{m.F[0], m.F[1], m.B[0][0], m.C}
	for i, v := range truth {
		sd := math.Sqrt(m.Cov.At(i, i))
		if math.Abs(est[i]-v) > 4*sd || sd > 0.2 {
			t.Errorf("parameter %d: %.4f ± %.4f, truth %v", i, est[i], sd, v)
		}
	}
	if !(m.SpectralRadius < 1) || !(m.Cost < m.ARXCost) {
		t.Fatalf("radius %v, cost %v from the ARX start's %v", m.SpectralRadius, m.Cost, m.ARXCost)
	}
	// a fresh record: free-run error against the noise-free output
	yv, uv, clean := oeRecord(2, 2000)
	ys := make([][]float64, len(yv))
	for k, v := range yv {
		ys[k] = []float64{v}
	}
	arx, err := linear.FitARXOpts(func() [][]float64 {
		out := make([][]float64, len(y))
		for k, v := range y {
			out[k] = []float64{v}
		}
		return out
	}(), u, linear.ARXOrders{NA: 2, NB: 1, NK: 1}, linear.ARXOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arxSim := arx.Simulate(uv, ys[:2])
	oeSim := m.Simulate(uv, yv[:2])
	rmse := func(sim func(k int) float64) float64 {
		s := 0.0
		for k := 2; k < len(clean); k++ {
			e := sim(k) - clean[k]
			s += e * e
		}
		return math.Sqrt(s / float64(len(clean)-2))
	}
	eOE := rmse(func(k int) float64 { return oeSim[k] })
	eARX := rmse(func(k int) float64 { return arxSim[k][0] })
	t.Logf("free-run RMSE against the noise-free output: OE %.4f, ARX %.4f", eOE, eARX)
	if !(eOE < 0.7*eARX) {
		t.Fatalf("OE %.4f does not beat ARX %.4f", eOE, eARX)
	}
}

// Bad orders and short records are refused; an unstable ARX start is
// pulled back inside the unit circle.
func TestOEErrors(t *testing.T) {
	y, u, _ := oeRecord(3, 100)
	for name, o := range map[string]OEOrders{"no nf": {NF: 0, NB: 1, NK: []int{1}}, "no delay": {NF: 1, NB: 1}} {
		if _, err := FitOE(context.Background(), [][]float64{y}, [][][]float64{u}, o); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := FitOE(context.Background(), [][]float64{y[:3]}, [][][]float64{u[:3]}, OEOrders{NF: 2, NB: 1, NK: []int{1}}); err == nil {
		t.Error("a 3-row record accepted")
	}
	if r := spectralRadius(stableStart([]float64{-2.5, 1.6}, 2)); !(r < 1) {
		t.Errorf("stable start radius %v", r)
	}
}
