package linear

import (
	"math"
	"testing"
)

// DaISy winding (see shared/datasets/daisy_winding/SOURCE.md): est = rows
// 0..1665, val = rows 1666..2499, NRMSE per output over val samples k ≥ m.

func TestWindingARXBaseline(t *testing.T) {
	d := loadWinding(t)
	cases := []struct {
		o        ARXOrders
		osa, sim float64 // in-house mean NRMSE
	}{
		{ARXOrders{NA: 4, NB: 4, NK: 0, Diag: true}, 0.1915, 0.248},
		{ARXOrders{NA: 4, NB: 4, NK: 0}, 0.1849, 0.2551},
		{ARXOrders{NA: 4, NB: 4, NK: 1}, 0.217, 0.444},
		{ARXOrders{NA: 2, NB: 2, NK: 1}, 0.2223, 0.4597},
	}
	for _, c := range cases {
		// in-house protocol: subtract estimation means, LS without intercept
		m, err := FitARXOpts(d.yEst, d.uEst, c.o, ARXOptions{Scaling: CenterOnly, NoIntercept: true})
		if err != nil {
			t.Fatal(err)
		}
		start := c.o.MaxLag()
		osa := NRMSE(d.yVal, m.PredictOneStep(d.yVal, d.uVal), start)
		sim := NRMSE(d.yVal, m.Simulate(d.uVal, d.yVal[:start]), start)
		t.Logf("winding %v: one-step NRMSE %.4f (mean %.4f, ref %.4f), free-run %.4f (mean %.4f, ref %.4f)", c.o, osa, Mean(osa), c.osa, sim, Mean(sim), c.sim)
		if math.Abs(Mean(osa)-c.osa) > 0.001 || math.Abs(Mean(sim)-c.sim) > 0.001 {
			t.Errorf("%v does not reproduce the in-house baseline", c.o)
		}
	}
}

func TestWindingStateSpace(t *testing.T) {
	d := loadWinding(t)
	// Selection inside the estimation data only: fit on est rows 0..1110,
	// score free-run on est rows 1111..1665, over block rows and orders.
	const nTr = 1111
	base := SubspaceOptions{Feedthrough: true, Refine: true, RefineIters: 30, NInit: 4}
	orders := []int{2, 3, 4, 5, 6, 7, 8}
	bestV, bestN, bestS := math.Inf(1), 0, 0
	for _, s := range []int{5, 10, 15} {
		o := base
		o.BlockRows = s
		sel, scores, err := SelectStateSpace(d.yEst[:nTr], d.uEst[:nTr], d.yEst[nTr:], d.uEst[nTr:], orders, o)
		if err != nil {
			t.Fatal(err)
		}
		v := scores[sel.N-orders[0]].Value
		t.Logf("  i=%d: inner-validation best n=%d mean NRMSE %.4f", s, sel.N, v)
		if v < bestV {
			bestV, bestN, bestS = v, sel.N, s
		}
	}
	o := base
	o.Order, o.BlockRows = bestN, bestS
	m, err := FitSubspace(d.yEst, d.uEst, o)
	if err != nil {
		t.Fatal(err)
	}
	sim4 := NRMSE(d.yVal, m.SimulateFrom(d.yVal, d.uVal, 4), 4)
	sim5 := NRMSE(d.yVal, m.SimulateFrom(d.yVal, d.uVal, 5), 5)
	t.Logf("winding state space n=%d i=%d (D estimated, PEM %d LM steps, ρ(A)=%.4f): free-run NRMSE %.4f mean %.4f (n_init=4), mean %.4f (n_init=5); ARX diag 4/4/0 ref 0.248; target ≤ 0.25",
		m.N, m.BlockRows, m.RefineIters, m.SpectralRadius(), sim4, Mean(sim4), Mean(sim5))
	if Mean(sim4) > 0.25 || Mean(sim5) > 0.25 {
		t.Errorf("winding state-space free-run mean NRMSE %.4f / %.4f > 0.25", Mean(sim4), Mean(sim5))
	}
	o.Refine = false
	m0, err := FitSubspace(d.yEst, d.uEst, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("winding: same n, i without PEM refinement: mean NRMSE %.4f", Mean(NRMSE(d.yVal, m0.SimulateFrom(d.yVal, d.uVal, 4), 4)))
}
