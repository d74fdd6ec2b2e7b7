package contract

import (
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

func fp(x float64) *float64 { return &x }

// wantProblems asserts err is AML_CONTRACT_INVALID (HTTP 422) and has a
// problem at every field in fields (a field may repeat: prefix match with
// "~").
func wantProblems(t *testing.T, err error, fields ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want AML_CONTRACT_INVALID at %v, got nil", fields)
	}
	if core.CodeOf(err) != CodeContractInvalid {
		t.Fatalf("want code %s, got %s: %v", CodeContractInvalid, core.CodeOf(err), err)
	}
	var ae *core.Error
	if !asErr(err, &ae) || ae.Kind() != core.KindUnprocessable {
		t.Fatalf("want kind unprocessable (HTTP 422), got %+v", ae)
	}
	ps := ProblemsOf(err)
	for _, f := range fields {
		found := false
		for _, p := range ps {
			if p.Field == f || (strings.HasPrefix(f, "~") && strings.HasPrefix(p.Field, f[1:])) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem at %q; problems: %v", f, ps)
		}
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func exampleTrial() *VirtualTrial {
	return &VirtualTrial{
		SchemaVersion: TrialSchemaVersion,
		CreatedAt:     t0,
		CreatedBy:     "twin-runtime",
		TrialID:       "trial-1",
		SnapshotID:    "snap-1",
		ModelID:       "hybrid-1",
		ObjectiveID:   "weight-quality",
		CandidateControlTrajectory: []map[string]float64{
			{"hold_pressure": 65, "hold_time": 8, "melt_temperature_setpoint": 247},
			{"hold_pressure": 67, "hold_time": 8.5, "melt_temperature_setpoint": 248},
			{"hold_pressure": 68, "hold_time": 8.5, "melt_temperature_setpoint": 249},
		},
		PredictedTrajectory: []map[string]float64{{"weight": 32.1}, {"weight": 32.3}, {"weight": 32.4}},
		Uncertainty:         Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:   OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"},
			{ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"},
			{ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: BaselineComparison{BaselineCost: 1.0, CandidateCost: 0.6, Improvement: 0.4},
		Provenance:         map[string]string{"solver": "discrete"},
	}
}
