package engine

import (
	"math"
	"testing"

	"github.com/aml-project/aml/internal/twin/contract"
)

// driftScene is the default injection scene with a declared disturbance
// on the part weight (schema 2).
func driftScene(model contract.DisturbanceModel, maxAbs float64) *contract.SceneContract {
	sc := contract.DefaultInjectionScene()
	sc.SchemaVersion = 2
	d := contract.UnmeasuredDisturbance{ID: "mould_wear", Target: "weight", Model: model, PriorSD: 1}
	if model == contract.DisturbanceIntegratedWhiteNoise {
		q := 0.002
		d.ProcessSDPerStep = &q
	}
	if maxAbs > 0 {
		d.MaxAbs = &maxAbs
	}
	sc.UnmeasuredDisturbances = []contract.UnmeasuredDisturbance{d}
	return sc
}

// biased returns a copy of snapshot s whose part weight window carries an
// extra bias(k) at row k.
func biased(s *contract.TwinSnapshot, bias func(k int) float64) *contract.TwinSnapshot {
	w := *s.Window
	w.Values = map[string][]*float64{}
	for k, v := range s.Window.Values {
		w.Values[k] = v
	}
	pw := make([]*float64, w.Steps)
	for i, p := range s.Window.Values["part_weight"] {
		if p != nil {
			v := *p + bias(i)
			pw[i] = &v
		}
	}
	w.Values["part_weight"] = pw
	out := *s
	out.Window, out.SnapshotHash = &w, ""
	return &out
}

// On the hybrid twin, a step (0.6 g) and a ramp (0.01 g per step) injected
// into a real window's part weight move the predicted part weight over
// the whole horizon by the injected offset at the window's end, within
// 0.06 g (the difference of the predictions with and without the
// injection: the window's own residual is the model's); the tube widens
// by the estimate's uncertainty, and without a declaration nothing is
// estimated.
func TestTwinDisturbanceEstimate(t *testing.T) {
	f := getFixture(t)
	obj := contract.DefaultInjectionObjective()
	s := highSnap(t, f)
	for _, tc := range []struct {
		name  string
		model contract.DisturbanceModel
		bias  func(k int) float64
		tol   float64
	}{
		{"step", contract.DisturbanceOutputBias, func(int) float64 { return 0.6 }, 0.06},
		{"ramp", contract.DisturbanceIntegratedWhiteNoise, func(k int) float64 { return 0.01 * float64(k) }, 0.06},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := driftScene(tc.model, 0)
			_, d0 := trialOf(t, f.twin, sc, s, obj, hold(s, 60, nil), "d0")
			bs := biased(s, tc.bias)
			_, d1 := trialOf(t, f.twin, sc, bs, obj, hold(bs, 60, nil), "d1")
			if len(d0.Disturbances) != 1 || len(d1.Disturbances) != 1 {
				t.Fatalf("disturbances %+v %+v", d0.Disturbances, d1.Disturbances)
			}
			want := tc.bias(s.Window.Steps - 1)
			// what control needs: the prediction over the horizon moves by
			// the injected offset (the state carries what it absorbs, the
			// estimate the rest)
			w0, w1 := traceOf(d0, "weight"), traceOf(d1, "weight")
			if w0 == nil || w1 == nil {
				t.Fatal("no weight trace")
			}
			for _, k := range []int{0, 29, 59} {
				if got := w1.Mean[k] - w0.Mean[k]; math.Abs(got-want) > tc.tol {
					t.Fatalf("step %d: the prediction moved by %.4f g, the injected offset is %.4f g (tolerance %.3f); estimates %.4f, %.4f",
						k, got, want, tc.tol, d0.Disturbances[0].Estimate, d1.Disturbances[0].Estimate)
				}
			}
			if !(d1.Disturbances[0].SD > 0) || d1.Disturbances[0].Rows < s.Window.Steps/2 {
				t.Fatalf("estimate %+v", d1.Disturbances[0])
			}
		})
	}
	// off: a scene without a declaration gives the trial it always gave
	plain := contract.DefaultInjectionScene()
	_, dp := trialOf(t, f.twin, plain, s, obj, hold(s, 60, nil), "plain")
	if dp.Disturbances != nil {
		t.Fatalf("disturbances without a declaration: %+v", dp.Disturbances)
	}
	sc := driftScene(contract.DisturbanceOutputBias, 0)
	_, dd := trialOf(t, f.twin, sc, s, obj, hold(s, 60, nil), "decl")
	wp, wd := traceOf(dp, "weight"), traceOf(dd, "weight")
	for k := range wp.Mean {
		if !(wd.Upper[k]-wd.Lower[k] > wp.Upper[k]-wp.Lower[k]) {
			t.Fatalf("step %d: the tube does not widen with the estimate's uncertainty", k)
		}
	}
	if len(dd.Disturbances) != 1 {
		t.Fatalf("disturbances %+v", dd.Disturbances)
	}
}

// A disturbance estimate beyond the scene's maxAbs is out of distribution
// (OOD_DISTURBANCE); within it, a drifted window the envelope would reject
// is judged with the drift taken off the target.
func TestTwinDisturbanceOOD(t *testing.T) {
	f := getFixture(t)
	obj := contract.DefaultInjectionObjective()
	s := highSnap(t, f)
	bs := biased(s, func(int) float64 { return 0.8 })
	tr, d := trialOf(t, f.twin, driftScene(contract.DisturbanceOutputBias, 0.3), bs, obj, hold(bs, 60, nil), "far")
	if tr.OutOfDistribution.Accepted || tr.OutOfDistribution.RejectCode != "OOD_DISTURBANCE" || d.Disturbances[0].Limit == nil {
		t.Fatalf("ood %+v", tr.OutOfDistribution)
	}
	plain, _ := trialOf(t, f.twin, contract.DefaultInjectionScene(), bs, obj, hold(bs, 60, nil), "plain")
	decl, _ := trialOf(t, f.twin, driftScene(contract.DisturbanceOutputBias, 2), bs, obj, hold(bs, 60, nil), "decl")
	if !(decl.OutOfDistribution.Distance < plain.OutOfDistribution.Distance) {
		t.Fatalf("the OOD distance with the drift explained %.3f, without %.3f", decl.OutOfDistribution.Distance, plain.OutOfDistribution.Distance)
	}
}

// Every linear class estimates a declared disturbance on its target too
// (state space: its output along the estimated state; ARX: its free run
// from the window's first rows): a step offset injected into the window
// moves the horizon's prediction by the offset.
func TestLinearTwinDisturbance(t *testing.T) {
	f, tws := linearTwins(t)
	for ref, tw := range tws {
		steps, _, _ := tw.Window()
		w, _ := f.window(t, 1, 200, steps)
		s := &contract.TwinSnapshot{Window: w}
		bs := biased(s, func(int) float64 { return 0.6 })
		p0 := horizonEnd(t, tw, s.Window)
		p1 := horizonEnd(t, tw, bs.Window)
		if math.Abs(p1-p0-0.6) > 0.1 {
			t.Fatalf("%s: the prediction moved by %.4f, injected 0.6", ref, p1-p0)
		}
	}
}

// horizonEnd is the first target's prediction 60 steps after window w,
// holding the controls, with a declared output bias on it.
func horizonEnd(t *testing.T, tw *Twin, w *contract.SnapshotWindow) float64 {
	t.Helper()
	s, err := tw.start(w)
	if err != nil {
		t.Fatal(err)
	}
	sc := driftScene(contract.DisturbanceOutputBias, 0)
	sc.UnmeasuredDisturbances[0].Target = tw.outs[0].name
	ds, st, err := tw.disturbances(sc, s, 1.6448536269514722)
	if err != nil {
		t.Fatal(err)
	}
	U := make([][]float64, 60)
	for k := range U {
		U[k] = s.ctrlLast
	}
	r, err := tw.dyn.newRoller().roll(st, U, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Y[59*len(tw.outs)] + ds[0].b
}
