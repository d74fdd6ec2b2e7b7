package process

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// steps is a random-step input of T rows and nu columns: a new level
// every 4–30 steps.
func steps(r *rand.Rand, T, nu int) [][]float64 {
	u := make([][]float64, T)
	lv := make([]float64, nu)
	hold := make([]int, nu)
	for k := range u {
		u[k] = make([]float64, nu)
		for i := range lv {
			if hold[i] <= 0 {
				lv[i] = 10 + 4*r.NormFloat64()
				hold[i] = 4 + r.IntN(27)
			}
			hold[i]--
			u[k][i] = lv[i]
		}
	}
	return u
}

// record simulates m over a random-step input with an initial transient
// (the inputs were elsewhere before the record), a per-record offset and
// white noise of standard deviation sd.
func record(r *rand.Rand, m *Model, T int, sd, offset float64) ([]float64, [][]float64) {
	nu := len(m.Pairs)
	pre := steps(r, 100, nu)
	u := append(pre, steps(r, T, nu)...)
	sim := m.Simulate(u, nil, 0)
	y := make([]float64, T)
	for k := range y {
		y[k] = sim[100+k] + offset + sd*r.NormFloat64()
	}
	return y, u[100:]
}

func fitOne(t *testing.T, m *Model, st []Structure, seed uint64, records, T int, sd float64) *Result {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	var ys [][]float64
	var us [][][]float64
	for s := 0; s < records; s++ {
		y, u := record(r, m, T, sd, 0.5*r.NormFloat64())
		ys, us = append(ys, y), append(us, u)
	}
	res, err := Fit(context.Background(), ys, us, m.Dt, Options{Structures: st})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func fopdt(K, tau, theta float64) *Model {
	return &Model{Dt: 5, Pairs: []Pair{{Structure: FOPDT, K: K, Tau1: tau, Theta: theta}}, UMean: []float64{10}, Offset: 3}
}

func TestFitFOPDT(t *testing.T) {
	truth := fopdt(1.7, 60, 17.5)
	res := fitOne(t, truth, []Structure{FOPDT}, 1, 2, 600, 0.1)
	for _, p := range res.Params {
		t.Logf("%s = %.4f ± %.4f  [%.4f, %.4f]", p.Name, p.Value, p.StdErr, p.CI95[0], p.CI95[1])
	}
	t.Logf("RMSE %.4f, %d iterations, %s", res.RMSE, res.Iterations, res.Status)
	want := []float64{1.7, 60, 17.5}
	tol := []float64{0.03, 3, 1}
	for i, p := range res.Params {
		if math.Abs(p.Value-want[i]) > tol[i] {
			t.Errorf("%s = %v, want %v ± %v", p.Name, p.Value, want[i], tol[i])
		}
	}
	if math.Abs(res.RMSE-0.1) > 0.01 {
		t.Errorf("RMSE %v, noise 0.1", res.RMSE)
	}
}

// TestCoverage: over 60 simulated records of 1000 steps (different seeds, noise 0.1,
// random offsets and initial transients) the 95 % intervals contain the
// true K, τ and θ at about their stated rate.
func TestCoverage(t *testing.T) {
	truth := fopdt(1.7, 60, 17.5)
	const records = 60
	hits := make([]int, 3)
	want := []float64{1.7, 60, 17.5}
	for seed := uint64(0); seed < records; seed++ {
		res := fitOne(t, truth, []Structure{FOPDT}, 100+seed, 1, 1000, 0.1)
		for i, p := range res.Params {
			if p.CI95[0] <= want[i] && want[i] <= p.CI95[1] {
				hits[i]++
			}
		}
	}
	for i, name := range []string{"K", "tau", "theta"} {
		rate := float64(hits[i]) / records
		t.Logf("%s: the 95%% interval holds the truth in %d of %d records (%.0f%%)", name, hits[i], records, 100*rate)
		if rate < 0.85 {
			t.Errorf("%s: coverage %.2f below 0.85", name, rate)
		}
	}
}

func TestFitSOPDT(t *testing.T) {
	truth := &Model{Dt: 5, Pairs: []Pair{{Structure: SOPDT, K: -2.2, Tau1: 80, Tau2: 25, Theta: 12}}, UMean: []float64{10}}
	res := fitOne(t, truth, []Structure{SOPDT}, 3, 2, 1000, 0.05)
	want := []float64{-2.2, 80, 25, 12}
	for i, p := range res.Params {
		t.Logf("%s = %.4f ± %.4f", p.Name, p.Value, p.StdErr)
		if math.Abs(p.Value-want[i]) > 0.05*math.Abs(want[i])+4*p.StdErr {
			t.Errorf("%s = %v ± %v, want %v", p.Name, p.Value, p.StdErr, want[i])
		}
	}
	if math.Abs(res.RMSE-0.05) > 0.005 {
		t.Errorf("RMSE %v, noise 0.05", res.RMSE)
	}
}

func TestFitIPDT(t *testing.T) {
	// an integrator fed by the deviation of u from a balance of 10.3
	// (UMean 10 in the truth, so a drift of −0.3·K)
	truth := &Model{Dt: 2, Pairs: []Pair{{Structure: IPDT, K: 0.02, Theta: 9}}, UMean: []float64{10.3}}
	res := fitOne(t, truth, []Structure{IPDT}, 5, 3, 500, 0.05)
	for _, p := range res.Params {
		t.Logf("%s = %.5f ± %.5f", p.Name, p.Value, p.StdErr)
	}
	if k := res.Params[0]; math.Abs(k.Value-0.02) > 0.001 {
		t.Errorf("K = %v, want 0.02", k.Value)
	}
	if th := res.Params[1]; math.Abs(th.Value-9) > 0.5 {
		t.Errorf("theta = %v, want 9", th.Value)
	}
	if math.Abs(res.RMSE-0.05) > 0.005 {
		t.Errorf("RMSE %v, noise 0.05", res.RMSE)
	}
}

// TestSelect: "auto" finds SOPDT for a second-order input next to a
// first-order one, and IPDT for an integrating process.
func TestSelect(t *testing.T) {
	for _, c := range []struct {
		truth *Model
		want  []Structure
	}{
		{&Model{Dt: 5, Pairs: []Pair{{Structure: SOPDT, K: 1.5, Tau1: 50, Tau2: 40, Theta: 10}, {Structure: FOPDT, K: -0.8, Tau1: 30, Theta: 5}}, UMean: []float64{10, 10}}, []Structure{SOPDT, FOPDT}},
		{&Model{Dt: 2, Pairs: []Pair{{Structure: IPDT, K: 0.02, Theta: 6}}, UMean: []float64{10.1}}, []Structure{IPDT}},
	} {
		r := rand.New(rand.NewPCG(11, 7))
		var ys [][]float64
		var us [][][]float64
		for s := 0; s < 3; s++ {
			y, u := record(r, c.truth, 500, 0.05, r.NormFloat64())
			ys, us = append(ys, y), append(us, u)
		}
		auto := make([]Structure, len(c.want))
		for i := range auto {
			auto[i] = Auto
		}
		res, cands, err := Select(context.Background(), ys[:2], us[:2], ys[2:], us[2:], c.truth.Dt, Options{Structures: auto}, 20, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cd := range cands {
			t.Logf("%s: validation RMSE %.4f", cd, cd.ValRMSE)
		}
		for i, p := range res.Model.Pairs {
			if p.Structure != c.want[i] {
				t.Errorf("input %d: chose %s, want %s", i, p.Structure, c.want[i])
			}
		}
	}
}
