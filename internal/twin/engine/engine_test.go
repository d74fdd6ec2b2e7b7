package engine

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Snapshots used below (test runs of the fixture, grid rows):
//   - lowSnap (test run 0, row 600): hold pressure 54 bar, part weight
//     about 31.05 g — just inside the scene's weight range [31, 34], its
//     tube's lower edge below 31;
//   - highSnap (test run 1, row 200): nominal setpoints (65 bar, 8 s,
//     245 degC), part weight about 32.5 g, above the 32.0 g target.
func lowSnap(t testing.TB, f *fixture) *contract.TwinSnapshot  { return f.snapshot(t, 0, 600) }
func highSnap(t testing.TB, f *fixture) *contract.TwinSnapshot { return f.snapshot(t, 1, 200) }

func trialOf(t *testing.T, tw *Twin, sc *contract.SceneContract, s *contract.TwinSnapshot, obj *contract.ObjectiveProfile, cand []map[string]float64, id string) (*contract.VirtualTrial, *TrialDetail) {
	t.Helper()
	tr, d, err := tw.Trial(context.Background(), TrialInput{Scene: sc, Snapshot: s, Objective: obj, Candidate: cand, TrialID: id, CreatedBy: "test", Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("the trial record is invalid: %v", err)
	}
	if tr.Executed() {
		t.Fatal("candidateExecuted")
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := contract.ParseTrial(b); err != nil {
		t.Fatalf("the trial does not round-trip: %v", err)
	}
	return tr, d
}

func traceOf(d *TrialDetail, id string) *Trace {
	for i := range d.Traces {
		if d.Traces[i].ID == id {
			return &d.Traces[i]
		}
	}
	return nil
}

type fakePredictor struct{}

func (fakePredictor) Format() string { return "aml.linear-window/1" }
func (fakePredictor) Horizon() int   { return 10 }
func (fakePredictor) PredictBatch(context.Context, []float32, []float32, int) ([]float32, error) {
	return nil, nil
}

func TestLoadAndWindow(t *testing.T) {
	f := getFixture(t)
	if _, err := New("m", f.bundle.Manifest, fakePredictor{}, nil); core.CodeOf(err) != CodeModelUnsupported {
		t.Fatalf("another format: %v, want %s", err, CodeModelUnsupported)
	}
	if _, err := Load(context.Background(), f.st, f.dir, "no-such-model"); err == nil {
		t.Fatal("an unknown model loads")
	}
	tw := f.twin
	steps, beat, nodes := tw.Window()
	if steps != 30 || beat != 1000 || len(nodes) != 10 || nodes[len(nodes)-1] != "part_weight" {
		t.Fatalf("window %d %d %v", steps, beat, nodes)
	}
	if !tw.Calibrated() || tw.members != 5 || !(tw.measuredCov > 0.8) {
		t.Fatalf("calibrated %v members %d coverage %v", tw.Calibrated(), tw.members, tw.measuredCov)
	}
	b := tw.Bindings()
	for v, n := range map[string]string{"weight": "part_weight", "hold_pressure": "hold_pressure", "melt_temperature": "melt_temperature",
		"ambient_temperature": "ambient_temperature"} {
		if b[v] != n {
			t.Errorf("binding %s = %q, want %q (all: %v)", v, b[v], n, b)
		}
	}
	if _, ok := b["fill_fraction"]; ok {
		t.Errorf("the unmeasured state fill_fraction is bound: %v", b)
	}
}

// EstimateState: measured states take the last valid observation,
// unmeasured ones (fill_fraction) the model's; gaps hold; a needed column
// entirely missing, a short window and a wrong beat are refused.
func TestEstimateState(t *testing.T) {
	f := getFixture(t)
	tw := f.twin
	ctx := context.Background()
	w, last := f.window(t, 0, 600, 30)
	est, ver, err := tw.EstimateState(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if ver != "hybrid-x0fit/1:"+f.modelID {
		t.Fatalf("version %s", ver)
	}
	if est["melt_temperature"] != last["melt_temperature"] || est["cavity_pressure"] != last["cavity_pressure"] {
		t.Fatalf("measured states %v, last values %v", est, last)
	}
	if v := est["fill_fraction"]; !(v >= 0 && v <= 1) {
		t.Fatalf("fill_fraction %v", v)
	}
	// a gap at the end: the last valid value before it
	g, _ := f.window(t, 0, 600, 30)
	prev := *g.Values["melt_temperature"][28]
	g.Values["melt_temperature"][29] = nil
	g.Values["hold_pressure"][29] = nil
	est2, _, err := tw.EstimateState(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if est2["melt_temperature"] != prev {
		t.Fatalf("gap: %v, want the previous value %v", est2["melt_temperature"], prev)
	}
	cases := []struct {
		name, field string
		edit        func(w *contract.SnapshotWindow)
	}{
		{"control missing", "window.values.hold_pressure", func(w *contract.SnapshotWindow) { delete(w.Values, "hold_pressure") }},
		{"control all null", "window.values.hold_time", func(w *contract.SnapshotWindow) {
			for i := range w.Values["hold_time"] {
				w.Values["hold_time"][i] = nil
			}
		}},
		{"target all null", "window.values.part_weight", func(w *contract.SnapshotWindow) {
			for i := range w.Values["part_weight"] {
				w.Values["part_weight"][i] = nil
			}
		}},
		{"short", "window.steps", func(w *contract.SnapshotWindow) {
			w.Steps = 20
			for k, v := range w.Values {
				w.Values[k] = v[10:]
			}
		}},
		{"beat", "window.beatMs", func(w *contract.SnapshotWindow) { w.BeatMs = 500 }},
	}
	for _, c := range cases {
		w, _ := f.window(t, 0, 600, 30)
		c.edit(w)
		_, _, err := tw.EstimateState(ctx, w)
		var ce *core.Error
		if core.CodeOf(err) != CodeWindowInvalid || !asCore(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, want %s at %s", c.name, err, CodeWindowInvalid, c.field)
		}
	}
	// a longer window: its last H rows count
	wl, _ := f.window(t, 0, 600, 45)
	est3, _, err := tw.EstimateState(ctx, wl)
	if err != nil || est3["fill_fraction"] != est["fill_fraction"] {
		t.Fatalf("longer window: %v %v vs %v", err, est3, est)
	}
}

func asCore(err error, ce **core.Error) bool {
	e, ok := err.(*core.Error)
	*ce = e
	return ok
}

// Candidate validation: every unsafe candidate is rejected with
// CONTROL_SAFETY naming the field and step, and the rejected trial is a
// valid, recordable record that was not rolled out.
func TestCandidateValidation(t *testing.T) {
	f := getFixture(t)
	tw := f.twin
	s := highSnap(t, f)
	sc := contract.DefaultInjectionScene()
	obj := contract.DefaultInjectionObjective()
	tight := contract.DefaultInjectionObjective()
	one := 1.0
	tight.TrustRegion["hold_pressure"] = contract.TrustRegion{MaxDelta: &one}
	hp := s.ControlValues["hold_pressure"]
	cases := []struct {
		name  string
		obj   *contract.ObjectiveProfile
		edit  func(c []map[string]float64)
		field string
		msg   string
	}{
		{"unknown control", obj, func(c []map[string]float64) { c[3]["screw_speed"] = 1 }, "candidateControlTrajectory[3].screw_speed", "not a control of the scene"},
		{"missing control", obj, func(c []map[string]float64) { delete(c[5], "hold_time") }, "candidateControlTrajectory[5].hold_time", "missing"},
		{"not finite", obj, func(c []map[string]float64) { c[7]["hold_time"] = math.NaN() }, "candidateControlTrajectory[7].hold_time", "not a finite number"},
		{"out of range", obj, func(c []map[string]float64) {
			for k := range c {
				c[k]["melt_temperature_setpoint"] = 261
			}
		}, "candidateControlTrajectory[0].melt_temperature_setpoint", "outside the allowed range"},
		{"step too large", obj, func(c []map[string]float64) {
			for k := range c {
				c[k]["hold_pressure"] = hp + 3
			}
		}, "candidateControlTrajectory[0].hold_pressure", "more than 2"},
		{"trust region", tight, func(c []map[string]float64) {
			for k := range c {
				c[k]["hold_pressure"] = hp - 1.5
			}
		}, "candidateControlTrajectory[0].hold_pressure", "trust region's maxDelta 1"},
		{"node interval", obj, func(c []map[string]float64) {
			for k := range c {
				c[k]["hold_pressure"] = hp - 1
				if k >= 10 {
					c[k]["hold_pressure"] = hp - 2
				}
			}
		}, "candidateControlTrajectory[10].hold_pressure", "minNodeIntervalSec"},
		{"ramp back", obj, func(c []map[string]float64) { c[30]["hold_time"] += 0.5 }, "candidateControlTrajectory[31].hold_time", "minNodeIntervalSec"},
	}
	for _, c := range cases {
		cand := hold(s, 60, nil)
		c.edit(cand)
		tr, d := trialOf(t, tw, sc, s, c.obj, cand, "val-"+strings.ReplaceAll(c.name, " ", "-"))
		if tr.RejectCode != contract.RejectControlSafety || !tr.Rejected() || tr.Passed() {
			t.Errorf("%s: reject code %q", c.name, tr.RejectCode)
			continue
		}
		found := false
		for _, r := range tr.Rejections {
			found = found || (r.Field == c.field && strings.Contains(r.Message, c.msg))
		}
		if !found {
			t.Errorf("%s: no rejection at %s containing %q: %+v", c.name, c.field, c.msg, tr.Rejections)
		}
		if tr.HardViolations() != 0 || len(tr.PredictedTrajectory) != 0 || d.Traces != nil || tr.OutOfDistribution.Accepted {
			t.Errorf("%s: a rejected candidate was rolled out", c.name)
		}
		for _, r := range tr.ConstraintResults {
			if r.Passed || !r.NotEvaluated {
				t.Errorf("%s: constraint %s passed %v evaluated %v", c.name, r.ID, r.Passed, !r.NotEvaluated)
			}
		}
	}
	// structural problems are errors, not trials
	_, _, err := tw.Trial(context.Background(), TrialInput{Scene: sc, Snapshot: s, Objective: obj, Candidate: hold(s, 59, nil), TrialID: "x", CreatedBy: "t", Now: testNow})
	if core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("wrong length: %v", err)
	}
	bad := hold(s, 60, nil)
	bad[4] = map[string]float64{"hold_time": math.Inf(1)}
	if _, _, err := tw.Trial(context.Background(), TrialInput{Scene: sc, Snapshot: s, Objective: obj, Candidate: bad, TrialID: "x", CreatedBy: "t", Now: testNow}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("an empty step: %v", err)
	}
	// a safe move is not rejected
	tr, _ := trialOf(t, tw, sc, s, obj, hold(s, 60, map[string]float64{"hold_pressure": -2, "hold_time": 0.5}), "ok")
	if tr.RejectCode == contract.RejectControlSafety {
		t.Fatalf("a safe candidate was rejected: %+v", tr.Rejections)
	}
}

// Every constraint kind, evaluated on the tube: table of constraints added
// to the default scene with the expected verdict, edge and step.
func TestConstraintKinds(t *testing.T) {
	f := getFixture(t)
	tw := f.twin
	s := lowSnap(t, f)
	obj := contract.DefaultInjectionObjective()
	fl := func(x float64) *float64 { return &x }
	cases := []struct {
		c            contract.Constraint
		move         map[string]float64
		passed       bool
		edge         string
		step         int
		notEvaluated bool
	}{
		{contract.Constraint{ID: "range_ok", Kind: contract.KindHardRange, Variable: "weight", Min: fl(29), Max: fl(35)}, nil, true, "", 0, false},
		{contract.Constraint{ID: "range_upper", Kind: contract.KindHardRange, Variable: "weight", Max: fl(31.3)}, nil, false, "upper", -1, false},
		{contract.Constraint{ID: "range_control", Kind: contract.KindHardRange, Variable: "hold_pressure", Max: fl(55)}, map[string]float64{"hold_pressure": 2}, false, "exact", 0, false},
		{contract.Constraint{ID: "range_guard", Kind: contract.KindHardRange, Variable: "pressure", Min: fl(54.5)}, nil, false, "exact", 0, false},
		{contract.Constraint{ID: "delta_ok", Kind: contract.KindMaxDelta, Variable: "weight", MaxDelta: fl(1)}, nil, true, "", 0, false},
		{contract.Constraint{ID: "delta_control", Kind: contract.KindMaxDelta, Variable: "hold_pressure", MaxDelta: fl(1)}, map[string]float64{"hold_pressure": 2}, false, "exact", 0, false},
		{contract.Constraint{ID: "delta_weight", Kind: contract.KindMaxDelta, Variable: "weight", MaxDelta: fl(0.001)}, map[string]float64{"hold_pressure": 2}, false, "mean", 0, false},
		{contract.Constraint{ID: "rate_ok", Kind: contract.KindRate, Variable: "hold_pressure", MaxRatePerSec: fl(5)}, map[string]float64{"hold_pressure": 2}, true, "", 0, false},
		{contract.Constraint{ID: "rate_control", Kind: contract.KindRate, Variable: "hold_pressure", MaxRatePerSec: fl(1)}, map[string]float64{"hold_pressure": 2}, false, "exact", 0, false},
		{contract.Constraint{ID: "custom_ok", Kind: contract.KindCustom, Expression: "weight > 29 and flash_rate < 1 [%]"}, nil, true, "", 0, false},
		{contract.Constraint{ID: "custom_tube", Kind: contract.KindCustom, Expression: "weight > 30.95"}, nil, false, "tube", 0, false},
		{contract.Constraint{ID: "custom_mean", Kind: contract.KindCustom, Expression: "weight > 31.2 or hold_pressure > 60"}, nil, false, "mean", 0, false},
		{contract.Constraint{ID: "custom_unknown", Kind: contract.KindCustom, Expression: "viscosity < 3"}, nil, false, "", 0, true},
		{contract.Constraint{ID: "range_unknown", Kind: contract.KindHardRange, Variable: "weight_unknown", Max: fl(1)}, nil, false, "", 0, true},
	}
	for _, c := range cases {
		sc := contract.DefaultInjectionScene()
		sc.Constraints = []contract.Constraint{c.c}
		if c.c.Variable == "weight_unknown" {
			sc.Observations = append(sc.Observations, contract.SceneVariable{ID: "weight_unknown", Role: contract.RoleObservation, PhysicalMeaning: "x", Unit: "g"})
		}
		tr, d := trialOf(t, tw, sc, s, obj, hold(s, 60, c.move), "k-"+c.c.ID)
		r := tr.ConstraintResults[0]
		if c.step < 0 { // the first step whose upper edge is above the max
			w := traceOf(d, "weight")
			for k := range w.Upper {
				if w.Upper[k] > *c.c.Max {
					c.step = k
					break
				}
			}
			if c.step <= 0 || w.Mean[c.step] > *c.c.Max {
				t.Fatalf("%s: the upper edge leaves at step %d with the mean at %v: pick another limit", c.c.ID, c.step, w.Mean[max(0, c.step)])
			}
		}
		if r.Passed != c.passed || r.NotEvaluated != c.notEvaluated || r.Edge != c.edge {
			t.Errorf("%s: passed %v notEvaluated %v edge %q (%s), want %v %v %q", c.c.ID, r.Passed, r.NotEvaluated, r.Edge, r.Detail, c.passed, c.notEvaluated, c.edge)
			continue
		}
		if !c.passed && !c.notEvaluated && (r.FirstViolationStep == nil || *r.FirstViolationStep != c.step) {
			t.Errorf("%s: first violation %v, want %d (%s)", c.c.ID, r.FirstViolationStep, c.step, r.Detail)
		}
		if !c.passed && (tr.Passed() || tr.RejectCode != contract.RejectConstraint) {
			t.Errorf("%s: the trial passes (%q)", c.c.ID, tr.RejectCode)
		}
	}
}

// A candidate whose predicted mean stays inside a hard range but whose
// tube edge leaves it is rejected, at the first step the edge is out.
func TestTubeEdgeRejects(t *testing.T) {
	f := getFixture(t)
	s := lowSnap(t, f)
	sc := contract.DefaultInjectionScene()
	tr, d := trialOf(t, f.twin, sc, s, contract.DefaultInjectionObjective(), hold(s, 60, nil), "edge")
	w := traceOf(d, "weight")
	if w == nil || !w.Calibrated {
		t.Fatal("no calibrated weight trace")
	}
	first := -1
	for k := range w.Mean {
		if w.Mean[k] < 31 || w.Mean[k] > 34 {
			t.Fatalf("the mean leaves the range at step %d (%v): pick another snapshot", k, w.Mean[k])
		}
		if first < 0 && w.Lower[k] < 31 {
			first = k
		}
	}
	if first < 0 {
		t.Fatal("the tube stays inside: pick another snapshot")
	}
	r := tr.ConstraintResults[0]
	if r.ID != "weight" || r.Passed || r.Edge != "lower" || *r.FirstViolationStep != first || tr.Passed() {
		t.Fatalf("weight result %+v (first edge step %d), passed %v", r, first, tr.Passed())
	}
	// the tube: conformal width plus spread, wider past the calibrated horizon
	if !(w.Upper[59]-w.Lower[59] > w.Upper[0]-w.Lower[0]) {
		t.Fatalf("the tube does not widen past F: %v vs %v", w.Upper[59]-w.Lower[59], w.Upper[0]-w.Lower[0])
	}
	if h := (w.Upper[0] - w.Lower[0]) / 2; !(h >= f.twin.widths[0][0]) {
		t.Fatalf("half-width %v below the conformal width %v", h, f.twin.widths[0][0])
	}
	if !strings.Contains(strings.Join(d.CalibratedOutputs, ","), "weight") || traceOf(d, "flash_rate").Calibrated {
		t.Fatalf("calibrated outputs %v", d.CalibratedOutputs)
	}
}

// Rollouts never share history: identical trials give identical records
// in any order, interleaved with other candidates, on a twin with a warm
// cache and on a freshly loaded one.
func TestNoLeakBetweenRollouts(t *testing.T) {
	f := getFixture(t)
	s := highSnap(t, f)
	sc := contract.DefaultInjectionScene()
	obj := contract.DefaultInjectionObjective()
	a := hold(s, 60, map[string]float64{"hold_pressure": -2})
	others := []map[string]float64{{"hold_pressure": 2}, {"melt_temperature_setpoint": 2, "hold_time": -0.5}, nil}
	hash := func(tw *Twin, c []map[string]float64) string {
		tr, _ := trialOf(t, tw, sc, s, obj, c, "same")
		h, err := tr.Hash()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := hash(f.twin, a)
	for _, o := range others {
		hash(f.twin, hold(s, 60, o))
		if h := hash(f.twin, a); h != first {
			t.Fatalf("the trial changed after another candidate %v", o)
		}
	}
	fresh, err := Load(context.Background(), f.st, f.dir, f.modelID)
	if err != nil {
		t.Fatal(err)
	}
	hash(fresh, hold(s, 60, others[0]))
	if h := hash(fresh, a); h != first {
		t.Fatal("a fresh twin gives another trial")
	}
}

// The baseline comparison: holding is 0, a move toward the target is
// positive, away from it negative, and improvement = baseline − candidate.
func TestBaselineComparison(t *testing.T) {
	f := getFixture(t)
	s := highSnap(t, f)
	sc := contract.DefaultInjectionScene()
	obj := contract.DefaultInjectionObjective()
	hold0, d0 := trialOf(t, f.twin, sc, s, obj, hold(s, 60, nil), "hold")
	down, _ := trialOf(t, f.twin, sc, s, obj, hold(s, 60, map[string]float64{"hold_pressure": -2}), "down")
	up, _ := trialOf(t, f.twin, sc, s, obj, hold(s, 60, map[string]float64{"hold_pressure": 2}), "up")
	if w := traceOf(d0, "weight"); !(w.Mean[59] > 32.1) {
		t.Fatalf("the high snapshot's weight is %v: pick another", w.Mean[59])
	}
	if hold0.BaselineComparison.Improvement != 0 {
		t.Fatalf("holding improves by %v", hold0.BaselineComparison.Improvement)
	}
	if !(down.BaselineComparison.Improvement > 0) || !(up.BaselineComparison.Improvement < 0) {
		t.Fatalf("down %+v, up %+v", down.BaselineComparison, up.BaselineComparison)
	}
	for _, tr := range []*contract.VirtualTrial{hold0, down, up} {
		b := tr.BaselineComparison
		if b.Improvement != b.BaselineCost-b.CandidateCost || b.BaselineCost != hold0.BaselineComparison.CandidateCost {
			t.Fatalf("comparison %+v", b)
		}
		if !tr.Passed() {
			t.Fatalf("a trial at the high snapshot fails: %v", tr.FailureReasons())
		}
	}
}

// The optimiser: deterministic for a seed, within the trust region and the
// write policy, and its best candidate lowers the part-weight target error
// of the twin's prediction and of the simulated plant itself.
func TestOptimize(t *testing.T) {
	f := getFixture(t)
	s := highSnap(t, f)
	sc := contract.DefaultInjectionScene()
	obj := contract.DefaultInjectionObjective()
	ctx := context.Background()
	in := OptimizeInput{Scene: sc, Snapshot: s, Objective: obj, Seed: 3, TrialID: "opt", CreatedBy: "test", Now: testNow}
	small, err := f.twin.Optimize(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if small.Mode != ModeSafeSmallStep || small.Evaluated != 7 || len(small.MoveSteps) != 1 || small.MoveSteps[0] != 0 {
		t.Fatalf("small step: mode %s, %d evaluated, move steps %v", small.Mode, small.Evaluated, small.MoveSteps)
	}
	in.Mode = ModePreciseSearch
	r1, err := f.twin.Optimize(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := f.twin.Optimize(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	j1, _ := json.Marshal(r1)
	j2, _ := json.Marshal(r2)
	if string(j1) != string(j2) {
		t.Fatal("two optimisations with one seed differ")
	}
	if r1.Best == nil || small.Best == nil {
		t.Fatalf("no best: %s / %s", r1.NoPass, small.NoPass)
	}
	if r1.Evaluated > DefaultMaxCandidates || r1.Evaluated <= small.Evaluated {
		t.Fatalf("precise search evaluated %d", r1.Evaluated)
	}
	if !(r1.Best.BaselineComparison.CandidateCost <= small.Best.BaselineComparison.CandidateCost) {
		t.Fatalf("precise %v worse than small-step %v", r1.Best.BaselineComparison.CandidateCost, small.Best.BaselineComparison.CandidateCost)
	}
	if err := r1.Best.CheckAgainst(sc); err != nil || !r1.Best.Passed() || !(r1.Best.BaselineComparison.Improvement > 0) {
		t.Fatalf("best: %v passed %v %+v", err, r1.Best.Passed(), r1.Best.BaselineComparison)
	}
	if r1.BestDetail.Cost.Target >= r1.BestDetail.BaselineCost.Target {
		t.Fatalf("the target error does not drop: %+v vs %+v", r1.BestDetail.Cost, r1.BestDetail.BaselineCost)
	}
	for i, c := range r1.Ranked[1:] {
		if c.Passed && !r1.Ranked[i].Passed || (c.Passed == r1.Ranked[i].Passed && c.Cost < r1.Ranked[i].Cost) {
			t.Fatalf("ranking out of order at %d", i+1)
		}
	}
	for id, v := range r1.Best.CandidateControlTrajectory[0] {
		tr := obj.TrustRegion[id]
		if math.Abs(v-s.ControlValues[id]) > *tr.MaxDelta+1e-9 {
			t.Fatalf("%s moves %v", id, v-s.ControlValues[id])
		}
	}
	// another seed: still deterministic, possibly another path
	in.Seed = 4
	if r3, err := f.twin.Optimize(ctx, in); err != nil || r3.Best == nil {
		t.Fatalf("seed 4: %v", err)
	}
	// the simulated plant: from the snapshot's measured state, the best
	// move's true part weight is closer to the target than holding
	trueErr := func(c []map[string]float64) float64 {
		w := s.Window
		last := func(n string) float64 {
			vs := w.Values[n]
			for i := len(vs) - 1; i >= 0; i-- {
				if vs[i] != nil {
					return *vs[i]
				}
			}
			t.Fatalf("no %s", n)
			return 0
		}
		st := sim.State{CavityPressure: last("cavity_pressure"), MeltTemperature: last("melt_temperature"), FillFraction: 1}
		d := sim.Disturbances{AmbientTemperature: last("ambient_temperature"), MaterialBatchFactor: last("material_batch_factor")}
		_, o := sim.TruePlant.Step(st, sim.Controls{HoldPressure: s.ControlValues["hold_pressure"], HoldTime: s.ControlValues["hold_time"],
			MeltTemperatureSetpoint: s.ControlValues["melt_temperature_setpoint"]}, d, 0, 1)
		bias := last("part_weight") - o.PartWeight // the unmeasured mould wear, as seen now
		e := 0.0
		for _, u := range c {
			var out sim.Outputs
			st, out = sim.TruePlant.Step(st, sim.Controls{HoldPressure: u["hold_pressure"], HoldTime: u["hold_time"], MeltTemperatureSetpoint: u["melt_temperature_setpoint"]}, d, bias, 1)
			e += (out.PartWeight - 32) * (out.PartWeight - 32)
		}
		return e
	}
	eb, ec := trueErr(hold(s, 60, nil)), trueErr(r1.Best.CandidateControlTrajectory)
	t.Logf("true plant Σ(weight−32)²: holding %.3f, best %.3f (best moves %v); twin cost %.3f → %.3f, %d candidates",
		eb, ec, r1.Best.CandidateControlTrajectory[0], r1.Best.BaselineComparison.BaselineCost, r1.Best.BaselineComparison.CandidateCost, r1.Evaluated)
	if !(ec < eb) {
		t.Fatalf("on the plant the best move does not lower the weight error: %v vs %v", ec, eb)
	}
	if _, err := f.twin.Optimize(ctx, OptimizeInput{Scene: sc, Snapshot: s, Objective: obj, Mode: "fast"}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("unknown mode: %v", err)
	}
	if ChooseMode(eval.TwinGateReport{Passed: true}) != ModePreciseSearch || ChooseMode(eval.TwinGateReport{}) != ModeSafeSmallStep {
		t.Fatal("ChooseMode")
	}
}

// RunTrial and RunOptimize: the one-call API.
func TestRunAPI(t *testing.T) {
	f := getFixture(t)
	s := highSnap(t, f)
	res, err := RunTrial(context.Background(), f.st, f.dir, f.modelID, TrialInput{Scene: contract.DefaultInjectionScene(), Snapshot: s,
		Objective: contract.DefaultInjectionObjective(), Candidate: hold(s, 60, nil), TrialID: "run", CreatedBy: "test", Now: testNow})
	if err != nil || res.Trial == nil || res.Detail == nil {
		t.Fatalf("RunTrial: %v", err)
	}
	o, err := RunOptimize(context.Background(), f.st, f.dir, f.modelID, OptimizeInput{Scene: contract.DefaultInjectionScene(), Snapshot: s,
		Objective: contract.DefaultInjectionObjective(), TrialID: "run-opt", CreatedBy: "test", Now: testNow})
	if err != nil || o.Best == nil {
		t.Fatalf("RunOptimize: %v", err)
	}
}

// OOD: a window far from the training data (an ambient temperature the
// line never saw) makes every candidate out of distribution; a twin
// without an envelope accepts nothing, and one without a conformal
// calibration refuses trials.
func TestOOD(t *testing.T) {
	f := getFixture(t)
	s := highSnap(t, f)
	sc := contract.DefaultInjectionScene()
	obj := contract.DefaultInjectionObjective()
	w := *s.Window
	w.Values = map[string][]*float64{}
	for k, v := range s.Window.Values {
		w.Values[k] = v
	}
	hot := make([]*float64, w.Steps)
	for i := range hot {
		v := 80.0
		hot[i] = &v
	}
	w.Values["ambient_temperature"] = hot
	odd := *s
	odd.Window, odd.SnapshotHash = &w, ""
	tr, d := trialOf(t, f.twin, sc, &odd, obj, hold(&odd, 60, nil), "ood")
	if tr.OutOfDistribution.Accepted || tr.OutOfDistribution.RejectCode != "OOD_DISTANCE" || tr.Passed() || !(d.OOD.MaxDistance > d.OOD.Threshold) {
		t.Fatalf("ood %+v, detail %+v", tr.OutOfDistribution, d.OOD)
	}
	if tr.HardViolations() == 0 && tr.RejectCode != contract.RejectOOD {
		t.Fatalf("reject code %q", tr.RejectCode)
	}
	ok, _ := trialOf(t, f.twin, sc, s, obj, hold(s, 60, nil), "in")
	if !ok.OutOfDistribution.Accepted || !(ok.OutOfDistribution.Distance > 0) {
		t.Fatalf("the real window is OOD: %+v", ok.OutOfDistribution)
	}
	var mj map[string]json.RawMessage
	m, _ := f.st.GetModel(context.Background(), f.modelID)
	if err := json.Unmarshal(m.Metrics, &mj); err != nil {
		t.Fatal(err)
	}
	delete(mj, "ood")
	noEnv, _ := json.Marshal(mj)
	tw2, err := New(f.modelID, f.bundle.Manifest, f.twin.pred, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tr2, _ := trialOf(t, tw2, sc, s, obj, hold(s, 60, nil), "noenv")
	if tr2.OutOfDistribution.Accepted || tr2.OutOfDistribution.RejectCode != "OOD_NOT_CALIBRATED" {
		t.Fatalf("without an envelope: %+v", tr2.OutOfDistribution)
	}
	tw3, err := New(f.modelID, f.bundle.Manifest, f.twin.pred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tw3.Trial(context.Background(), TrialInput{Scene: sc, Snapshot: s, Objective: obj, Candidate: hold(s, 60, nil), TrialID: "x", CreatedBy: "t", Now: testNow}); core.CodeOf(err) != CodeModelUnsupported {
		t.Fatalf("without a calibration: %v", err)
	}
	if _, _, err := tw3.EstimateState(context.Background(), s.Window); err != nil {
		t.Fatalf("state estimation needs no calibration: %v", err)
	}
}

// A point where no candidate passes names why holding the baseline fails,
// with the failed constraint's value and limit (a gate's
// NoRecommendation and a person reading it see the cause, not only that
// nothing passed).
func TestOptimizeNoPassNamesHolding(t *testing.T) {
	f := getFixture(t)
	s := lowSnap(t, f)
	fl := func(x float64) *float64 { return &x }
	cases := []struct {
		name string
		c    contract.Constraint
		want []string
	}{
		// the guard is held at its snapshot value: no move helps
		{"guard", contract.Constraint{ID: "range_guard", Kind: contract.KindHardRange, Variable: "pressure", Min: fl(54.5)},
			[]string{"holding the baseline: pressure value ", "< min 54.5 at step 0"}},
		// the weight tube's upper edge is above an unreachable max
		{"weight", contract.Constraint{ID: "range_weight", Kind: contract.KindHardRange, Variable: "weight", Max: fl(20)},
			[]string{"holding the baseline: weight upper edge ", "> max 20 at step 0"}},
	}
	for _, c := range cases {
		sc := contract.DefaultInjectionScene()
		sc.Constraints = []contract.Constraint{c.c}
		res, err := f.twin.Optimize(context.Background(), OptimizeInput{Scene: sc, Snapshot: s, Objective: contract.DefaultInjectionObjective(),
			Seed: 3, TrialID: "nopass-" + c.name, CreatedBy: "test", Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		if res.Best != nil {
			t.Fatalf("%s: a candidate passes", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(res.NoPass, w) {
				t.Errorf("%s: NoPass %q does not say %q", c.name, res.NoPass, w)
			}
		}
		if strings.Contains(res.NoPass, "OOD_") {
			t.Errorf("%s: NoPass %q names an OOD failure the snapshot does not have", c.name, res.NoPass)
		}
	}
}
