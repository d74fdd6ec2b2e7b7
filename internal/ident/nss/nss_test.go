package nss

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// system is a nonlinear second-order process with small output noise:
//
//	x1+ = 0.7 x1 + 0.2 x2 + tanh(u),  x2+ = −0.3 x1 + 0.5 x2 + 0.8 tanh²(x1),
//	y = x1 + 0.5 x2 (+ σ 0.01 noise)
func system(T int, seed uint64) (y, u [][]float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	x1, x2 := 0.0, 0.0
	for t := 0; t < T; t++ {
		ut := 1.5 * r.NormFloat64()
		if t%3 != 0 {
			ut = u[t-1][0]
		}
		u = append(u, []float64{ut})
		y = append(y, []float64{x1 + 0.5*x2 + 0.01*r.NormFloat64()})
		x1, x2 = 0.7*x1+0.2*x2+math.Tanh(ut), -0.3*x1+0.5*x2+0.8*math.Tanh(x1)*math.Tanh(x1)
	}
	return y, u
}

func rmse(a, b [][]float64, from int) float64 {
	s := 0.0
	for t := from; t < len(a); t++ {
		e := a[t][0] - b[t][0]
		s += e * e
	}
	return math.Sqrt(s / float64(len(a)-from))
}

// The back-propagated gradient of a subsequence's squared error is the
// finite-difference gradient, for every kind of parameter (A, B, C, D,
// E, e0 and the three networks), with and without feedthrough.
func TestSequenceGradient(t *testing.T) {
	for _, ft := range []bool{true, false} {
		y, u := system(200, 3)
		m := &Model{N: 3, NA: 2, NB: 3, NY: 1, NU: 1, Feedthrough: ft, Hidden: []int{5}, UMean: []float64{0}, UStd: []float64{1}, YMean: []float64{0}, YStd: []float64{1}}
		l := m.layout()
		m.P = make([]float64, l.total)
		r := rand.New(rand.NewPCG(7, 7))
		for i := range m.P {
			m.P[i] = 0.3 * r.NormFloat64()
		}
		if !ft {
			clear(m.P[l.oD:l.oE])
		}
		yn, un := normalise(u, y, m.UMean, m.UStd, m.YMean, m.YStd)
		const L, t0 = 12, 20
		w := l.newWork(L)
		g := make([]float64, l.total)
		if _, ok := l.sequence(w, m.P, m, yn, un, t0, L, 2, g); !ok {
			t.Fatal("simulation not finite")
		}
		p := slices.Clone(m.P)
		maxErr := 0.0
		for i := range p {
			if !ft && i >= l.oD && i < l.oE {
				if g[i] != 0 {
					t.Fatalf("feedthrough gradient %g without feedthrough", g[i])
				}
				continue
			}
			const h = 1e-6
			p[i] = m.P[i] + h
			fp, _ := l.sequence(w, p, m, yn, un, t0, L, 2, nil)
			p[i] = m.P[i] - h
			fm, _ := l.sequence(w, p, m, yn, un, t0, L, 2, nil)
			p[i] = m.P[i]
			fd := (fp - fm) / (2 * h)
			e := math.Abs(fd-g[i]) / math.Max(1, math.Abs(fd))
			if e > 1e-5 {
				t.Errorf("feedthrough %v: parameter %d of %d: back-propagation %g, finite difference %g", ft, i, l.total, g[i], fd)
			}
			maxErr = math.Max(maxErr, e)
		}
		t.Logf("feedthrough %v: %d parameters, largest relative error %.2g", ft, l.total, maxErr)
	}
}

func shortConfig(seed uint64) Config {
	return Config{Order: 2, NA: 3, NB: 3, Hidden: []int{16}, Feedthrough: false, LinearInit: true, Epochs: 12, SeqLen: 30, Batch: 8, LR: 3e-3, Seed: seed}
}

// From the linear initialisation: epoch 0 is the linear model (the
// report's starting validation), the model kept is never worse than it on
// the validation block, and on this nonlinear process training beats it
// on a fresh test record.
func TestFitNeverWorseThanLinearAndBeatsIt(t *testing.T) {
	y, u := system(3000, 1)
	yt, ut := system(1500, 2)
	cfg := shortConfig(1)
	var vals []float64
	cfg.Progress = func(ep int, loss, val float64) error { vals = append(vals, val); return nil }
	m, rep, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ValNRMSE > rep.InitValNRMSE {
		t.Fatalf("kept validation NRMSE %g worse than the linear start %g", rep.ValNRMSE, rep.InitValNRMSE)
	}
	if want := slices.Min(append(vals, rep.InitValNRMSE)); rep.ValNRMSE != want {
		t.Fatalf("kept validation %g, the best epoch had %g", rep.ValNRMSE, want)
	}
	// the linear start alone
	cfg0 := shortConfig(1)
	cfg0.Epochs = 0
	m0, rep0, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg0)
	if err != nil {
		t.Fatal(err)
	}
	if rep0.ValNRMSE != rep.InitValNRMSE || rep0.BestEpoch != 0 {
		t.Fatalf("epoch-0 model validation %g, training's start %g", rep0.ValNRMSE, rep.InitValNRMSE)
	}
	const init = 10
	y0 := yt[:init]
	rn, rl := rmse(m.Simulate(ut, y0), yt, init), rmse(m0.Simulate(ut, y0), yt, init)
	t.Logf("test free-run RMSE: neural %.4f, linear start %.4f; %+v", rn, rl, *rep)
	if !(rn < 0.8*rl) {
		t.Errorf("neural free-run RMSE %.4f not below 0.8 × the linear start's %.4f", rn, rl)
	}
}

// One seed gives the same weights, whatever the number of workers; the
// time budget stops training.
func TestFitDeterministic(t *testing.T) {
	y, u := system(1500, 4)
	var ps [][]float64
	for _, workers := range []int{1, 3, 1} {
		cfg := shortConfig(9)
		cfg.Epochs, cfg.Workers = 4, workers
		m, _, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, m.P)
	}
	for i := 1; i < len(ps); i++ {
		if !slices.Equal(ps[0], ps[i]) {
			t.Fatalf("run %d differs from run 0", i)
		}
	}
	cfg := shortConfig(9)
	cfg.Epochs, cfg.Budget, cfg.Patience = 100000, 1, 0
	_, rep, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stop != "budget" || rep.Epochs != 1 {
		t.Fatalf("budget of 1 ns: stop %q after %d epochs", rep.Stop, rep.Epochs)
	}
}

// Without the linear initialisation the model still trains, and a
// model's Check refuses bad shapes and values.
func TestFitRandomInitAndCheck(t *testing.T) {
	y, u := system(1500, 5)
	cfg := shortConfig(2)
	cfg.LinearInit, cfg.Feedthrough, cfg.Epochs = false, true, 3
	m, rep, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if !(rep.ValNRMSE <= rep.InitValNRMSE) {
		t.Fatalf("report %+v", *rep)
	}
	bad := *m
	bad.P = m.P[:len(m.P)-1]
	if bad.Check() == nil {
		t.Error("a short parameter vector passed")
	}
	bad = *m
	bad.lay = nil
	bad.UStd = []float64{0}
	if bad.Check() == nil {
		t.Error("a zero scale passed")
	}
	bad = *m
	bad.P = slices.Clone(m.P)
	bad.P[3] = math.NaN()
	if bad.Check() == nil {
		t.Error("a NaN weight passed")
	}
	if _, _, err := Fit(t.Context(), [][][]float64{y[:40]}, [][][]float64{u[:40]}, cfg); err == nil {
		t.Error("a record shorter than one subsequence trained")
	}
}

// An ensemble's simulation is the mean of its members', the measured
// rows returned as given.
func TestEnsembleMean(t *testing.T) {
	y, u := system(800, 6)
	var e Ensemble
	for s := uint64(1); s <= 2; s++ {
		cfg := shortConfig(s)
		cfg.Epochs = 2
		m, _, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e = append(e, m)
	}
	if e.Lag() != 3 {
		t.Fatalf("lag %d", e.Lag())
	}
	a, b, s := e[0].Simulate(u, y[:5]), e[1].Simulate(u, y[:5]), e.Simulate(u, y[:5])
	for k := range s {
		want := (a[k][0] + b[k][0]) / 2
		if k < 5 {
			want = y[k][0]
		}
		if math.Abs(s[k][0]-want) > 1e-12 {
			t.Fatalf("row %d: %g, want %g", k, s[k][0], want)
		}
	}
}

// With Select record the epoch kept is the best free run over the whole
// training record from its start (the report's figure is that free run's
// NRMSE, recomputed here from the kept model), never worse than the
// linear start there; an unknown criterion is refused before training.
func TestFitSelectRecord(t *testing.T) {
	y, u := system(1500, 3)
	cfg := shortConfig(5)
	cfg.Select = SelectRecord
	var vals []float64
	cfg.Progress = func(ep int, loss, val float64) error { vals = append(vals, val); return nil }
	m, rep, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ValNRMSE > rep.InitValNRMSE {
		t.Fatalf("kept record NRMSE %g worse than the linear start %g", rep.ValNRMSE, rep.InitValNRMSE)
	}
	if want := slices.Min(append(vals, rep.InitValNRMSE)); rep.ValNRMSE != want {
		t.Fatalf("kept %g, the best epoch had %g", rep.ValNRMSE, want)
	}
	lag := m.Lag()
	sim := m.Simulate(u, y[:lag])
	var sse, sum, sum2 float64
	for k := lag; k < len(y); k++ {
		e := sim[k][0] - y[k][0]
		sse += e * e
		sum += y[k][0]
		sum2 += y[k][0] * y[k][0]
	}
	cnt := float64(len(y) - lag)
	mean := sum / cnt
	nr := math.Sqrt(sse/cnt) / math.Sqrt(sum2/cnt-mean*mean)
	if math.Abs(nr-rep.ValNRMSE) > 1e-9*nr {
		t.Fatalf("report %g, the kept model's free run over the record %g", rep.ValNRMSE, nr)
	}
	// the tail criterion scores another block: a different figure
	cfgT := shortConfig(5)
	_, repT, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfgT)
	if err != nil {
		t.Fatal(err)
	}
	if repT.InitValNRMSE == rep.InitValNRMSE {
		t.Fatalf("tail and record criteria gave the same start %g", rep.InitValNRMSE)
	}
	bad := shortConfig(5)
	bad.Select = "test"
	if _, _, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, bad); err == nil || !strings.Contains(err.Error(), "select") {
		t.Fatalf("select %q: %v", bad.Select, err)
	}
}

// LRLinear and LRTransition scale the Adam step of the linear part (A,
// B, C, D, E, e0) and of the transition network f: with factors 1e-3 those
// parameters move from the linear start by under 1 % of what they move
// by at the default (the output network, which keeps its rate, moves as
// much as before — an order of magnitude at least); factors of exactly
// 1 are the default to the bit; a negative or infinite factor is
// refused.
func TestFitLRFactors(t *testing.T) {
	y, u := system(1500, 4)
	fit := func(lin, tr float64, epochs int) (*Model, *Report) {
		cfg := shortConfig(9)
		cfg.Epochs, cfg.Patience, cfg.LRLinear, cfg.LRTransition = epochs, 0, lin, tr
		m, rep, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m, rep
	}
	start, _ := fit(0, 0, 0)
	def, repDef := fit(0, 0, 8)
	ones, _ := fit(1, 1, 8)
	small, repSmall := fit(1e-3, 1e-3, 8)
	if !slices.Equal(def.P, ones.P) {
		t.Fatal("factors of 1 changed the weights")
	}
	if repDef.BestEpoch == 0 || repSmall.BestEpoch == 0 {
		t.Fatalf("an epoch 0 kept (default %d, small factors %d): nothing to compare", repDef.BestEpoch, repSmall.BestEpoch)
	}
	l := start.layout()
	moved := func(m *Model, lo, hi int) float64 {
		d := 0.0
		for i := lo; i < hi; i++ {
			d = max(d, math.Abs(m.P[i]-start.P[i]))
		}
		return d
	}
	for _, part := range []struct {
		name   string
		lo, hi int
		slow   bool
	}{
		{"linear part", l.oA, l.f.Base, true},
		{"transition network", l.f.Base, l.f.Base + l.f.Len(), true},
		{"output network", l.h.Base, l.h.Base + l.h.Len(), false},
	} {
		d, s := moved(def, part.lo, part.hi), moved(small, part.lo, part.hi)
		t.Logf("%s: moved %.3g at the default, %.3g with factors 1e-3", part.name, d, s)
		if part.slow && !(s > 0 && s < 0.01*d) {
			t.Errorf("%s: moved %.3g with factors 1e-3, %.3g at the default: want (0, 1 %%)", part.name, s, d)
		}
		if !part.slow && !(s > 0.1*d) {
			t.Errorf("%s (factor 1): moved %.3g, %.3g at the default", part.name, s, d)
		}
	}
	for _, bad := range []float64{-1, math.Inf(1), math.NaN()} {
		for _, which := range []string{"lrLinear", "lrTransition"} {
			cfg := shortConfig(9)
			if which == "lrLinear" {
				cfg.LRLinear = bad
			} else {
				cfg.LRTransition = bad
			}
			if _, _, err := Fit(t.Context(), [][][]float64{y}, [][][]float64{u}, cfg); err == nil || !strings.Contains(err.Error(), which) {
				t.Errorf("%s %g: %v", which, bad, err)
			}
		}
	}
}
