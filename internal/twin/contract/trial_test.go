package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTrialCandidateExecutedAlwaysFalse(t *testing.T) {
	tr := exampleTrial()
	if tr.Executed() || tr.CandidateExecuted.Bool() {
		t.Fatal("executed")
	}
	b, err := json.Marshal(tr)
	mustNil(t, err)
	if !strings.Contains(string(b), `"candidateExecuted":false`) {
		t.Fatalf("JSON lacks candidateExecuted:false: %s", b)
	}
	tr2, err := ParseTrial(b)
	mustNil(t, err)
	h1, _ := tr.Hash()
	h2, _ := tr2.Hash()
	if h1 != h2 {
		t.Fatal("round trip changed the hash")
	}
	for _, bad := range []string{"true", "null", `"false"`, "0", "1"} {
		nb := strings.Replace(string(b), `"candidateExecuted":false`, `"candidateExecuted":`+bad, 1)
		_, err := ParseTrial([]byte(nb))
		wantProblems(t, err, "candidateExecuted")
		var v VirtualTrial
		if err := json.Unmarshal([]byte(nb), &v); err == nil {
			t.Errorf("json.Unmarshal accepted candidateExecuted %s", bad)
		}
	}
	// An absent field is false too.
	nb := strings.Replace(string(b), `"candidateExecuted":false,`, ``, 1)
	if nb == string(b) {
		nb = strings.Replace(string(b), `,"candidateExecuted":false`, ``, 1)
	}
	_, err = ParseTrial([]byte(nb))
	mustNil(t, err)
}

func TestTrialAgainstScene(t *testing.T) {
	s := DefaultInjectionScene()
	tr := exampleTrial()
	mustNil(t, tr.CheckAgainst(s))
	if !tr.Passed() {
		t.Fatal(tr.FailureReasons())
	}

	cases := []struct {
		name   string
		mutate func(t *VirtualTrial)
		fields []string
	}{
		{"step above maxStep", func(t *VirtualTrial) { t.CandidateControlTrajectory[1]["hold_pressure"] = 67.5 }, []string{"candidateControlTrajectory[1].hold_pressure"}},
		{"out of range", func(t *VirtualTrial) { t.CandidateControlTrajectory[0]["hold_time"] = 3.9 }, []string{"candidateControlTrajectory[0].hold_time"}},
		{"missing control", func(t *VirtualTrial) { delete(t.CandidateControlTrajectory[2], "hold_time") }, []string{"candidateControlTrajectory[2].hold_time"}},
		{"not a control", func(t *VirtualTrial) { t.CandidateControlTrajectory[2]["weight"] = 1 }, []string{"candidateControlTrajectory[2].weight"}},
		{"constraint not evaluated", func(t *VirtualTrial) { t.ConstraintResults = t.ConstraintResults[:4] }, []string{"constraintResults"}},
		{"invented constraint", func(t *VirtualTrial) {
			t.ConstraintResults = append(t.ConstraintResults, ConstraintResult{ID: "x", Passed: true})
		}, []string{"constraintResults[5].id"}},
		{"empty trajectory", func(t *VirtualTrial) { t.CandidateControlTrajectory, t.PredictedTrajectory = nil, nil }, []string{"candidateControlTrajectory"}},
		{"prediction length", func(t *VirtualTrial) { t.PredictedTrajectory = t.PredictedTrajectory[:1] }, []string{"predictedTrajectory"}},
		{"coverage", func(t *VirtualTrial) { t.Uncertainty.Coverage = 1.1 }, []string{"uncertainty.coverage"}},
		{"ensemble", func(t *VirtualTrial) { t.Uncertainty.EnsembleSize = 0 }, []string{"uncertainty.ensembleSize"}},
		{"reject without code", func(t *VirtualTrial) { t.OutOfDistribution.Accepted = false }, []string{"outOfDistribution.rejectCode"}},
		{"improvement sign", func(t *VirtualTrial) { t.BaselineComparison.Improvement = -0.4 }, []string{"baselineComparison.improvement"}},
		{"violation step on pass", func(t *VirtualTrial) { n := 1; t.ConstraintResults[0].FirstViolationStep = &n }, []string{"constraintResults[0].firstViolationStep"}},
		{"objective not in scene", func(t *VirtualTrial) { t.ObjectiveID = "other" }, []string{"objectiveId"}},
		{"dup result", func(t *VirtualTrial) { t.ConstraintResults[1].ID = "weight" }, []string{"constraintResults[1].id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := exampleTrial()
			tc.mutate(tr)
			wantProblems(t, tr.CheckAgainst(s), tc.fields...)
		})
	}
}

func TestTrialFailureReasons(t *testing.T) {
	tr := exampleTrial()
	n := 2
	tr.ConstraintResults[3] = ConstraintResult{ID: "pressure", Passed: false, Detail: "pressure=91 above 90", FirstViolationStep: &n}
	tr.OutOfDistribution = OutOfDistribution{Distance: 9, Accepted: false, RejectCode: "OOD_DISTANCE"}
	mustNil(t, tr.Validate())
	r := tr.FailureReasons()
	if tr.Passed() || len(r) != 2 || !strings.Contains(r[0], "pressure") || !strings.Contains(r[1], "OOD_DISTANCE") {
		t.Fatalf("reasons: %v", r)
	}
	d1, _ := exampleTrial().ConstraintDigest()
	d2, _ := tr.ConstraintDigest()
	if d1 == d2 || len(d1) != 64 {
		t.Fatal("constraint digest")
	}
}
