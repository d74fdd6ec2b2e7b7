package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

var twinCheckIDs = []string{"G0_ROWS", "G0_RUNS", "G1_SINGLE_STEP", "G2_ROLLOUT", "G3_GENERALIZATION",
	"G4_CALIBRATION_ROWS", "G4_COVERAGE", "G5_PHYSICS_FAILURE", "G6_CANDIDATE_COUNT", "G6_TRIAL_COUNT",
	"G6_HARD_VIOLATION", "G7_UQ_OOD"}

func twinTrials(n int) []TrialOutcome {
	out := make([]TrialOutcome, n)
	for i := range out {
		out[i] = TrialOutcome{ID: fmt.Sprintf("trial-%d", i), OODAccepted: true, Coverage: 0.93}
	}
	return out
}

// twinPassing is exactly at every twin-v1 threshold.
func twinPassing() TwinGateInput {
	return TwinGateInput{Rows: 500, Runs: 3, OneStepTestNRMSE: 0.10, RolloutTestNRMSE: 0.25, ValTestGap: 0.20,
		CalibrationRows: 300, CalibrationCoverage: 0.90, Trials: twinTrials(10), PhysicsSolverFailureRate: 0}
}

func twinCheck(t *testing.T, r TwinGateReport, id string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", id, r.Checks)
	return Check{}
}

func TestTwinProfileDefaults(t *testing.T) {
	p := DefaultTwinProfile()
	want := TwinProfile{ID: "twin-v1", Version: 1, OneStepTestNrmseMax: 0.10, RolloutTestNrmseMax: 0.25, ValTestGapMax: 0.20,
		MinRows: 500, MinRuns: 3, CoverageTarget: 0.90, MinCalibrationRows: 300, MinWriteEligibleCandidateCount: 10,
		MinTrialCount: 10, HardConstraintViolationRateMax: 0, SolverFailureRateMax: 0}
	if p != want {
		t.Fatalf("%+v", p)
	}
	got, err := LookupTwinProfile("twin-v1")
	if err != nil || got != want {
		t.Fatalf("%v %+v", err, got)
	}
	v2 := want
	v2.ID, v2.MinShadowRuns, v2.ShadowErrorRatioMax, v2.ShadowCoverageMin = "twin-v2", 3, 1.5, 0.80
	v3 := v2
	v3.ID, v3.CoverageTolerance, v3.OneSidedGap = "twin-v3", true, true
	if ps := TwinProfiles(); len(ps) != 3 || ps[0] != want || ps[1] != v2 || ps[2] != v3 {
		t.Fatalf("%+v", ps)
	}
	// Exact names only: no substring, prefix, case or space matching.
	for _, id := range []string{"scene-twin-v1", "twin-v1-line3", "twin", "TWIN-V1", " twin-v1", ""} {
		if _, err := LookupTwinProfile(id); core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "twin-v1") {
			t.Fatalf("%q: %v", id, err)
		}
	}
	if _, err := LookupTwinProfile(ProfileUpstreamMPC); err == nil || !strings.Contains(err.Error(), "model gate profile") {
		t.Fatalf("metric profile id: %v", err)
	}
}

func TestTwinGatePasses(t *testing.T) {
	r := TwinGate(twinPassing(), DefaultTwinProfile())
	if !r.Passed || r.Stage != TwinStageWriteEligible || len(r.RejectCodes) != 0 || r.Profile != "twin-v1" || r.Version != 1 {
		t.Fatalf("%+v", r)
	}
	if ChooseTuningMode(r) != TuningPreciseSearch {
		t.Fatal(ChooseTuningMode(r))
	}
	ids := make([]string, len(r.Checks))
	for i, c := range r.Checks {
		ids[i] = c.ID
		if !c.Passed || c.Detail == "" || !strings.Contains(c.Detail, "passes") {
			t.Fatalf("%+v", c)
		}
	}
	if !reflect.DeepEqual(ids, twinCheckIDs) {
		t.Fatalf("check order %v", ids)
	}
	c := twinCheck(t, r, "G4_COVERAGE")
	if c.Value != 0.90 || c.Threshold != 0.90 || c.Op != OpGE || !strings.Contains(c.Name, "test") {
		t.Fatalf("%+v", c)
	}
	js, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(js), `"rejectCodes":[]`) || !strings.Contains(string(js), `"stage":"write_eligible"`) {
		t.Fatalf("%v %s", err, js)
	}
}

func TestTwinGateThresholds(t *testing.T) {
	p := DefaultTwinProfile()
	up := func(v float64) float64 { return math.Nextafter(v, math.Inf(1)) }
	down := func(v float64) float64 { return math.Nextafter(v, math.Inf(-1)) }
	for _, tc := range []struct {
		id   string
		past func(*TwinGateInput)
	}{
		{"G0_ROWS", func(in *TwinGateInput) { in.Rows = 499 }},
		{"G0_RUNS", func(in *TwinGateInput) { in.Runs = 2 }},
		{"G1_SINGLE_STEP", func(in *TwinGateInput) { in.OneStepTestNRMSE = up(0.10) }},
		{"G2_ROLLOUT", func(in *TwinGateInput) { in.RolloutTestNRMSE = up(0.25) }},
		{"G3_GENERALIZATION", func(in *TwinGateInput) { in.ValTestGap = up(0.20) }},
		{"G4_CALIBRATION_ROWS", func(in *TwinGateInput) { in.CalibrationRows = 299 }},
		{"G4_COVERAGE", func(in *TwinGateInput) { in.CalibrationCoverage = down(0.90) }},
		{"G5_PHYSICS_FAILURE", func(in *TwinGateInput) { in.PhysicsSolverFailureRate = 1e-9 }},
		{"G6_CANDIDATE_COUNT", func(in *TwinGateInput) { in.Trials[4].Rejected = true }}, // 9 candidates of 10 trials
		{"G6_HARD_VIOLATION", func(in *TwinGateInput) { in.Trials[2].HardViolations = 1 }},
		{"G7_UQ_OOD", func(in *TwinGateInput) { in.Trials[7].OODAccepted = false }},
		{"G7_UQ_OOD", func(in *TwinGateInput) { in.Trials[0].Coverage = down(0.90) }},
		{"G7_UQ_OOD", func(in *TwinGateInput) { in.Trials[0].Coverage = math.NaN() }},
	} {
		in := twinPassing()
		tc.past(&in)
		r := TwinGate(in, p)
		if r.Passed || r.Stage != TwinStageCandidate || !reflect.DeepEqual(r.RejectCodes, []string{tc.id}) {
			t.Fatalf("%s one step past: passed %v stage %s codes %v", tc.id, r.Passed, r.Stage, r.RejectCodes)
		}
		if c := twinCheck(t, r, tc.id); c.Passed || !strings.Contains(c.Detail, "fails") {
			t.Fatalf("%+v", c)
		}
		if ChooseTuningMode(r) != TuningSafeSmallStep {
			t.Fatal(ChooseTuningMode(r))
		}
	}
	// Trial count with a profile needing fewer candidates than trials: 10
	// trials pass, 9 fail.
	q := p
	q.ID, q.MinWriteEligibleCandidateCount = "test", 5
	in := twinPassing()
	if r := TwinGate(in, q); !r.Passed {
		t.Fatalf("%v", r.RejectCodes)
	}
	in.Trials = in.Trials[:9]
	if r := TwinGate(in, q); !reflect.DeepEqual(r.RejectCodes, []string{"G6_TRIAL_COUNT"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	// A non-zero hard-violation rate: 1 of 10 at 0.1 passes, 2 fail.
	q.HardConstraintViolationRateMax = 0.1
	in = twinPassing()
	in.Trials[3].HardViolations = 2
	r := TwinGate(in, q)
	if !r.Passed || twinCheck(t, r, "G6_HARD_VIOLATION").Value != 0.1 {
		t.Fatalf("%v %+v", r.RejectCodes, twinCheck(t, r, "G6_HARD_VIOLATION"))
	}
	in.Trials[5].HardViolations = 1
	if r := TwinGate(in, q); !reflect.DeepEqual(r.RejectCodes, []string{"G6_HARD_VIOLATION"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	// Undefined measurements fail.
	in = twinPassing()
	in.OneStepTestNRMSE, in.CalibrationCoverage = math.NaN(), math.NaN()
	if r := TwinGate(in, p); !reflect.DeepEqual(r.RejectCodes, []string{"G1_SINGLE_STEP", "G4_COVERAGE"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
}

func TestTwinGateTrials(t *testing.T) {
	// No trials fail G6 and G7 even under a profile that asks for none.
	p := DefaultTwinProfile()
	p.ID, p.MinTrialCount, p.MinWriteEligibleCandidateCount = "test", 0, 0
	in := twinPassing()
	in.Trials = nil
	r := TwinGate(in, p)
	if !reflect.DeepEqual(r.RejectCodes, []string{"G6_HARD_VIOLATION", "G7_UQ_OOD"}) || r.Stage != TwinStageCandidate {
		t.Fatalf("%v", r.RejectCodes)
	}
	if c := twinCheck(t, r, "G7_UQ_OOD"); c.Value != 0 || !strings.Contains(c.Detail, "no trials") {
		t.Fatalf("%+v", c)
	}
	r = TwinGate(in, DefaultTwinProfile())
	if !reflect.DeepEqual(r.RejectCodes, []string{"G6_CANDIDATE_COUNT", "G6_TRIAL_COUNT", "G6_HARD_VIOLATION", "G7_UQ_OOD"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	// Repeated or empty IDs count once (or not at all).
	in = twinPassing()
	for i := range in.Trials {
		in.Trials[i].ID = "same"
	}
	in.Trials = append(in.Trials, TrialOutcome{OODAccepted: true, Coverage: 0.95})
	r = TwinGate(in, DefaultTwinProfile())
	if !reflect.DeepEqual(r.RejectCodes, []string{"G6_CANDIDATE_COUNT", "G6_TRIAL_COUNT"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	if c := twinCheck(t, r, "G6_TRIAL_COUNT"); c.Value != 1 || !strings.Contains(c.Detail, "10 trial record(s)") {
		t.Fatalf("%+v", c)
	}
	// A rejected trial still counts against G6_HARD_VIOLATION and G7.
	in = twinPassing()
	in.Trials = append(in.Trials, TrialOutcome{ID: "x", Rejected: true, HardViolations: 1, OODAccepted: false, Coverage: 0.5})
	r = TwinGate(in, DefaultTwinProfile())
	if !reflect.DeepEqual(r.RejectCodes, []string{"G6_HARD_VIOLATION", "G7_UQ_OOD"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	if c := twinCheck(t, r, "G7_UQ_OOD"); !strings.Contains(c.Detail, `"x"`) {
		t.Fatalf("%+v", c)
	}
}

func TestTwinInputFromMeasurements(t *testing.T) {
	m := &Metrics{TrainUniqueSteps: 800, TrainRuns: 4, ValTestGap: 0.05,
		Test: SplitMetrics{MeanOneStepNRMSE: 0.04, MeanNRMSE: 0.12}}
	c := &Conformal{Coverage: 0.9, CalibrationWindows: 400, Split: dataset.SplitVal}
	cov := &CoverageReport{Target: 0.9, Measured: 0.91, Split: dataset.SplitTest, TestWindows: 500}
	in := TwinInputFromMeasurements(m, c, cov, twinTrials(12), 0)
	want := TwinGateInput{Rows: 800, Runs: 4, OneStepTestNRMSE: 0.04, RolloutTestNRMSE: 0.12, ValTestGap: 0.05,
		CalibrationRows: 400, CalibrationCoverage: 0.91, CoverageWindows: 500, Trials: twinTrials(12), ShadowErrorRatio: math.NaN(), ShadowCoverage: math.NaN()}
	if !math.IsNaN(in.ShadowErrorRatio) || !math.IsNaN(in.ShadowCoverage) {
		t.Fatalf("shadow evidence must start undefined: %+v", in)
	}
	in.ShadowErrorRatio, in.ShadowCoverage, want.ShadowErrorRatio, want.ShadowCoverage = 0, 0, 0, 0
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("%+v", in)
	}
	if r := TwinGate(in, DefaultTwinProfile()); !r.Passed {
		t.Fatalf("%v", r.RejectCodes)
	}
	// Coverage measured anywhere but the test split is not taken.
	cov.Split = dataset.SplitVal
	in = TwinInputFromMeasurements(m, c, cov, twinTrials(12), 0)
	if r := TwinGate(in, DefaultTwinProfile()); !reflect.DeepEqual(r.RejectCodes, []string{"G4_COVERAGE"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	// Nothing measured: every measurement check fails.
	r := TwinGate(TwinInputFromMeasurements(nil, nil, nil, nil, math.NaN()), DefaultTwinProfile())
	if len(r.RejectCodes) != len(twinCheckIDs) {
		t.Fatalf("%v", r.RejectCodes)
	}
}

// TestTwinGateShadow: twin-v2 adds the G8 shadow-evidence checks after
// twin-v1's; without shadow runs (or with NaN figures) they fail.
func TestTwinGateShadow(t *testing.T) {
	p, err := LookupTwinProfile(ProfileTwinShadow)
	if err != nil {
		t.Fatal(err)
	}
	in := twinPassing()
	in.ShadowErrorRatio, in.ShadowCoverage = math.NaN(), math.NaN()
	if r := TwinGate(in, p); !reflect.DeepEqual(r.RejectCodes, []string{"G8_SHADOW_RUNS", "G8_SHADOW_ACCURACY", "G8_SHADOW_COVERAGE"}) {
		t.Fatalf("%v", r.RejectCodes)
	}
	// twin-v1 ignores shadow evidence.
	if r := TwinGate(in, DefaultTwinProfile()); !r.Passed {
		t.Fatalf("%v", r.RejectCodes)
	}
	cases := []struct {
		runs     int
		ratio    float64
		coverage float64
		want     []string
	}{
		{3, 1.10, 0.90, []string{}},
		{3, 1.50, 0.80, []string{}}, // thresholds inclusive
		{2, 1.10, 0.90, []string{"G8_SHADOW_RUNS"}},
		{3, 1.51, 0.90, []string{"G8_SHADOW_ACCURACY"}},
		{3, 1.10, 0.79, []string{"G8_SHADOW_COVERAGE"}},
	}
	for _, c := range cases {
		in.ShadowRuns, in.ShadowErrorRatio, in.ShadowCoverage = c.runs, c.ratio, c.coverage
		r := TwinGate(in, p)
		if !reflect.DeepEqual(r.RejectCodes, c.want) || r.Passed != (len(c.want) == 0) {
			t.Errorf("%+v: %v passed=%v", c, r.RejectCodes, r.Passed)
		}
	}
}

// twin-v3 accepts an honest 90 % interval whose test coverage came out a
// little under 0.90 (twin-v2 does not), and still fails a poor one.
func TestTwinCoverageTolerance(t *testing.T) {
	v2, _ := LookupTwinProfile(ProfileTwinShadow)
	v3, _ := LookupTwinProfile(ProfileTwinMeasured)
	in := TwinGateInput{Rows: 800, Runs: 4, OneStepTestNRMSE: 0.04, RolloutTestNRMSE: 0.12, ValTestGap: 0.05, RolloutValNRMSE: 0.125, CalibrationRows: 1400,
		CalibrationCoverage: 0.898, CoverageWindows: 1400, Trials: twinTrials(12), ShadowRuns: 3, ShadowErrorRatio: 1, ShadowCoverage: 0.9}
	for i := range in.Trials {
		in.Trials[i].Coverage = 0.898
	}
	if r := TwinGate(in, v2); r.Passed || !slices.Contains(r.RejectCodes, "G4_COVERAGE") {
		t.Fatalf("twin-v2 on 0.898: %v", r.RejectCodes)
	}
	if r := TwinGate(in, v3); !r.Passed {
		t.Fatalf("twin-v3 on 0.898: %v", r.RejectCodes)
	}
	in.CalibrationCoverage = 0.80
	for i := range in.Trials {
		in.Trials[i].Coverage = 0.80
	}
	if r := TwinGate(in, v3); !reflect.DeepEqual(r.RejectCodes, []string{"G4_COVERAGE", "G7_UQ_OOD"}) {
		t.Fatalf("twin-v3 on 0.80: %v", r.RejectCodes)
	}
}
