package contract

import (
	"strings"
	"testing"
)

func TestDefaultInjectionObjective(t *testing.T) {
	o := DefaultInjectionObjective()
	if err := o.CheckAgainst(DefaultInjectionScene()); err != nil {
		t.Fatal(err)
	}
	h1, _ := o.Hash()
	h2, _ := DefaultInjectionObjective().Hash()
	if h1 != h2 {
		t.Fatal("the default objective's hash is not reproducible")
	}
}

// The tube, reject code and rejection fields of a trial: valid
// combinations pass, each broken rule is reported with its path, and the
// new fields are covered by the hash.
func TestTrialTubeAndRejections(t *testing.T) {
	ok := func() *VirtualTrial {
		tr := exampleTrial()
		tr.PredictedTrajectory = make([]map[string]float64, len(tr.CandidateControlTrajectory))
		tr.PredictedLower = make([]map[string]float64, len(tr.CandidateControlTrajectory))
		tr.PredictedUpper = make([]map[string]float64, len(tr.CandidateControlTrajectory))
		for i := range tr.PredictedTrajectory {
			tr.PredictedTrajectory[i] = map[string]float64{"weight": 32}
			tr.PredictedLower[i] = map[string]float64{"weight": 31.9}
			tr.PredictedUpper[i] = map[string]float64{"weight": 32.1}
		}
		return tr
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, field string
		edit        func(*VirtualTrial)
	}{
		{"one edge only", "predictedLower", func(v *VirtualTrial) { v.PredictedUpper = nil }},
		{"mean outside", "predictedLower[0].weight", func(v *VirtualTrial) { v.PredictedLower[0]["weight"] = 32.05 }},
		{"missing key", "predictedLower[1].weight", func(v *VirtualTrial) { v.PredictedUpper[1] = map[string]float64{"x": 1} }},
		{"unknown code", "rejectCode", func(v *VirtualTrial) { v.RejectCode = "NOPE" }},
		{"safety without findings", "rejections", func(v *VirtualTrial) { v.RejectCode = RejectControlSafety }},
		{"findings without safety", "rejections", func(v *VirtualTrial) {
			v.Rejections = []Rejection{{Step: 0, Field: "candidateControlTrajectory[0].hold_pressure", Message: "too far"}}
		}},
		{"finding step", "rejections[0].step", func(v *VirtualTrial) {
			v.RejectCode = RejectControlSafety
			v.Rejections = []Rejection{{Step: 99, Field: "x", Message: "m"}}
		}},
		{"not evaluated but passed", "constraintResults[0].notEvaluated", func(v *VirtualTrial) { v.ConstraintResults[0].NotEvaluated = true }},
		{"edge on a pass", "constraintResults[0].edge", func(v *VirtualTrial) { v.ConstraintResults[0].Edge = "lower" }},
		{"bad edge", "constraintResults[0].edge", func(v *VirtualTrial) {
			v.ConstraintResults[0].Passed = false
			v.ConstraintResults[0].Edge = "middle"
		}},
	}
	for _, c := range cases {
		tr := ok()
		c.edit(tr)
		err := tr.Validate()
		found := false
		for _, p := range ProblemsOf(err) {
			found = found || p.Field == c.field
		}
		if !found {
			t.Errorf("%s: want a problem at %s, got %v", c.name, c.field, err)
		}
	}
	tr := ok()
	tr.RejectCode = RejectControlSafety
	tr.Rejections = []Rejection{{Step: 1, Field: "candidateControlTrajectory[1].hold_pressure", Message: "moves 3 from the previous step, more than 2"}}
	for i := range tr.ConstraintResults {
		tr.ConstraintResults[i] = ConstraintResult{ID: tr.ConstraintResults[i].ID, Detail: "not evaluated", NotEvaluated: true}
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if tr.Passed() || !tr.Rejected() || tr.HardViolations() != 0 {
		t.Fatalf("passed %v rejected %v violations %d", tr.Passed(), tr.Rejected(), tr.HardViolations())
	}
	if r := tr.FailureReasons(); !strings.Contains(strings.Join(r, "; "), "control safety: candidateControlTrajectory[1].hold_pressure") {
		t.Fatalf("reasons %v", r)
	}
	h1, _ := tr.Hash()
	tr.Rejections[0].Message = "other"
	if h2, _ := tr.Hash(); h1 == h2 {
		t.Fatal("rejections are not hashed")
	}
	b, _ := ok().Hash()
	tr2 := ok()
	tr2.PredictedUpper[0]["weight"] = 32.2
	if a, _ := tr2.Hash(); a == b {
		t.Fatal("the tube is not hashed")
	}
}
