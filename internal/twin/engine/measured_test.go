package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/twin/contract"
)

// The guards and states no target calibrates are judged on the physics
// started at what the line measures, not on the model's fitted state: the
// hybrid's initial-state fit explains the part weight and may move the
// melt-temperature state far from the line's measurement of it (weight
// depends on temperature), and the scene's hard range on the post-step
// temperature must not then be judged on a value the measurement
// contradicts — neither passing a line that is too hot nor refusing one
// that is fine.
func TestMeasuredGuardJudgedOnMeasurement(t *testing.T) {
	f := getFixture(t)
	obj := contract.DefaultInjectionObjective()
	setAll := func(node string, fn func(float64) float64) func(w *contract.SnapshotWindow) {
		return func(w *contract.SnapshotWindow) {
			for _, v := range w.Values[node] {
				if v != nil {
					*v = fn(*v)
				}
			}
		}
	}
	cases := []struct {
		name string
		run  int
		end  int
		edit func(w *contract.SnapshotWindow)
		// the premise: the model's fitted melt temperature at the last
		// row is inside (fittedIn) or outside the hard range 235–260 °C
		fittedIn bool
		passes   bool // the temperature constraint holds
	}{
		// the line measures 263 °C (a heater running away, invisible in
		// the part weight), the fitted state stays near the setpoint:
		// holding must be refused on the temperature
		{"too hot measured", 1, 200, setAll("melt_temperature", func(float64) float64 { return 263 }), true, false},
		// the part weight offset by ±1 g: the fit puts the melt at about
		// 286 °C or 214 °C while the line measures 257 °C
		{"fit above the range", 0, 200, setAll("part_weight", func(v float64) float64 { return v + 1 }), false, true},
		{"fit below the range", 0, 200, setAll("part_weight", func(v float64) float64 { return v - 1 }), false, true},
	}
	for _, c := range cases {
		s := f.snapshotEdit(t, c.run, c.end, c.edit)
		sc := contract.DefaultInjectionScene()
		p, err := f.twin.newPlan(sc, s, obj)
		if err != nil {
			t.Fatal(err)
		}
		melt := -1
		for j, n := range f.twin.states {
			if n == "melt_temperature" {
				melt = j
			}
		}
		fitted, measured := p.start.last[melt], s.StateEstimate["melt_temperature"]
		if in := fitted >= 235 && fitted <= 260; in != c.fittedIn {
			t.Fatalf("%s: the premise fails: the fitted melt temperature is %.1f °C (measured %.1f °C)", c.name, fitted, measured)
		}
		tr, d := trialOf(t, f.twin, sc, s, obj, hold(s, 60, nil), "measured-"+strings.ReplaceAll(c.name, " ", "-"))
		var r *contract.ConstraintResult
		for i := range tr.ConstraintResults {
			if tr.ConstraintResults[i].ID == "temperature" {
				r = &tr.ConstraintResults[i]
			}
		}
		if r == nil {
			t.Fatalf("%s: no temperature constraint result", c.name)
		}
		if r.Passed != c.passes {
			t.Errorf("%s: temperature passed %v (%s), want %v (fitted %.1f °C, measured %.1f °C)", c.name, r.Passed, r.Detail, c.passes, fitted, measured)
		}
		// the traces start from the measurement
		for _, id := range []string{"melt_temperature", "temperature"} {
			tc := traceOf(d, id)
			if tc == nil || len(tc.Mean) == 0 {
				t.Fatalf("%s: no trace of %s", c.name, id)
			}
			if dv := tc.Mean[0] - measured; dv < -3 || dv > 3 {
				t.Errorf("%s: %s starts at %.2f, %.2f away from the measured %.2f", c.name, id, tc.Mean[0], dv, measured)
			}
		}
		if c.passes {
			continue
		}
		if r.Edge != "exact" || r.FirstViolationStep == nil || *r.FirstViolationStep != 0 || !strings.Contains(r.Detail, "> max 260") {
			t.Errorf("%s: temperature %q at step %v: %s", c.name, r.Edge, r.FirstViolationStep, r.Detail)
		}
		if tr.Passed() || tr.RejectCode != contract.RejectConstraint {
			t.Errorf("%s: the trial is not refused on its constraint (%q)", c.name, tr.RejectCode)
		}
		// and no candidate is recommended: the optimiser names the guard
		res, err := f.twin.Optimize(context.Background(), OptimizeInput{Scene: sc, Snapshot: s, Objective: obj,
			Seed: 3, TrialID: "measured-opt", CreatedBy: "test", Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		if res.Best != nil {
			t.Errorf("%s: the optimiser recommends a candidate", c.name)
		}
		if !strings.Contains(res.NoPass, "temperature value ") {
			t.Errorf("%s: NoPass %q does not name the temperature", c.name, res.NoPass)
		}
	}
}

// An obs or guard the dataset measures with a column of its own (the
// line's sink_rate) is judged on both its physics value and its anchored
// level (last measurement plus the physics' change): a line measuring a
// sink rate beyond the scene's limit is refused although the physics
// predicts a small one.
func TestMeasuredOutputJudgedOnBoth(t *testing.T) {
	f := getFixture(t)
	obj := contract.DefaultInjectionObjective()
	s := f.snapshotEdit(t, 1, 200, func(w *contract.SnapshotWindow) {
		for _, v := range w.Values["sink_rate"] {
			if v != nil {
				*v = 1.5
			}
		}
	})
	sc := contract.DefaultInjectionScene()
	tr, d := trialOf(t, f.twin, sc, s, obj, hold(s, 60, nil), "measured-sink")
	tc := traceOf(d, "sink_rate")
	if tc == nil || !tc.Anchored {
		t.Fatal("the sink_rate trace is missing or not anchored")
	}
	if tc.Lower[0] >= 1 || tc.Upper[0] < 1.4 {
		t.Errorf("sink_rate at step 0: [%.3f, %.3f], want the physics value below 1 and the measured level about 1.5", tc.Lower[0], tc.Upper[0])
	}
	for _, r := range tr.ConstraintResults {
		if r.ID != "sink_rate" {
			continue
		}
		if r.Passed || r.Edge != "upper" || !strings.Contains(r.Detail, "> max 1") {
			t.Errorf("sink_rate: passed %v edge %q: %s", r.Passed, r.Edge, r.Detail)
		}
	}
	if tr.Passed() {
		t.Error("the trial passes")
	}
}
