package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// ProfileTwin is the twin (hybrid model) acceptance profile, a port of the
// upstream evaluateHybridGates with its DEFAULT_ACCEPTANCE_PROFILE.
const ProfileTwin = "twin-v1"

// ProfileTwinShadow is twin-v1 plus shadow evidence (G8): the model's
// predictions compared with what the line did on runs that ended after the
// model was made. Promotion of a twin model to production uses it.
const ProfileTwinShadow = "twin-v2"

// ProfileTwinMeasured is twin-v2 whose interval coverage checks (G4, G7)
// allow for the sampling error of a coverage measured on finite splits:
// coverage ≥ target − CoverageTolerance(target, calibration windows, test
// windows), the tolerance of the model gates' interval rule. A 90 %
// interval calibrated on the val windows covers about 90 % of the test
// windows; twin-v2 asking for ≥ 0.90 exactly fails half of the honest
// models. The default twin profile.
const ProfileTwinMeasured = "twin-v3"

// Twin stages and tuning modes.
const (
	TwinStageCandidate     = "candidate"
	TwinStageWriteEligible = "write_eligible"
	TuningPreciseSearch    = "precise_search"
	TuningSafeSmallStep    = "safe_small_step"
)

// TwinProfile is a versioned twin acceptance profile. A published profile
// never changes; different thresholds are a new profile (new ID).
type TwinProfile struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	// Model accuracy and data (G0–G3).
	OneStepTestNrmseMax float64 `json:"oneStepTestNrmseMax"`
	RolloutTestNrmseMax float64 `json:"rolloutTestNrmseMax"`
	ValTestGapMax       float64 `json:"valTestGapMax"`
	MinRows             int     `json:"minRows"`
	MinRuns             int     `json:"minRuns"`
	// Uncertainty (G4, G6, G7).
	CoverageTarget                 float64 `json:"coverageTarget"`
	MinCalibrationRows             int     `json:"minCalibrationRows"`
	MinWriteEligibleCandidateCount int     `json:"minWriteEligibleCandidateCount"`
	MinTrialCount                  int     `json:"minTrialCount"`
	// Physics (G5, G6).
	HardConstraintViolationRateMax float64 `json:"hardConstraintViolationRateMax"`
	SolverFailureRateMax           float64 `json:"solverFailureRateMax"`
	// Shadow evidence (G8; 0 MinShadowRuns: no G8 checks, as twin-v1).
	MinShadowRuns       int     `json:"minShadowRuns,omitempty"`
	ShadowErrorRatioMax float64 `json:"shadowErrorRatioMax,omitempty"`
	ShadowCoverageMin   float64 `json:"shadowCoverageMin,omitempty"`
	// CoverageTolerance: G4 and G7 accept a coverage down to
	// CoverageTarget − [CoverageTolerance] of the measurement (twin-v3).
	CoverageTolerance bool `json:"coverageTolerance,omitempty"`
	// OneSidedGap: G3 checks (test − val) / val, not |test − val| / val
	// (twin-v3): a test error lower than the validation error is no
	// failure to generalise.
	OneSidedGap bool `json:"oneSidedGap,omitempty"`
}

// coverageFloor is the lowest coverage p's G4 and G7 accept.
func (p TwinProfile) coverageFloor(in TwinGateInput) float64 {
	if !p.CoverageTolerance {
		return p.CoverageTarget
	}
	return p.CoverageTarget - CoverageTolerance(p.CoverageTarget, in.CalibrationRows, in.CoverageWindows)
}

// twinProfiles are the published twin profiles. Never edit one: add a new
// version.
var twinProfiles = []TwinProfile{{
	ID: ProfileTwin, Version: 1,
	OneStepTestNrmseMax: 0.10, RolloutTestNrmseMax: 0.25, ValTestGapMax: 0.20, MinRows: 500, MinRuns: 3,
	CoverageTarget: 0.90, MinCalibrationRows: 300, MinWriteEligibleCandidateCount: 10, MinTrialCount: 10,
	HardConstraintViolationRateMax: 0, SolverFailureRateMax: 0,
}, {
	ID: ProfileTwinShadow, Version: 1,
	OneStepTestNrmseMax: 0.10, RolloutTestNrmseMax: 0.25, ValTestGapMax: 0.20, MinRows: 500, MinRuns: 3,
	CoverageTarget: 0.90, MinCalibrationRows: 300, MinWriteEligibleCandidateCount: 10, MinTrialCount: 10,
	HardConstraintViolationRateMax: 0, SolverFailureRateMax: 0,
	MinShadowRuns: 3, ShadowErrorRatioMax: 1.5, ShadowCoverageMin: 0.80,
}, {
	ID: ProfileTwinMeasured, Version: 1,
	OneStepTestNrmseMax: 0.10, RolloutTestNrmseMax: 0.25, ValTestGapMax: 0.20, MinRows: 500, MinRuns: 3,
	CoverageTarget: 0.90, MinCalibrationRows: 300, MinWriteEligibleCandidateCount: 10, MinTrialCount: 10,
	HardConstraintViolationRateMax: 0, SolverFailureRateMax: 0,
	MinShadowRuns: 3, ShadowErrorRatioMax: 1.5, ShadowCoverageMin: 0.80, CoverageTolerance: true, OneSidedGap: true,
}}

// DefaultTwinProfile is twin-v1: the upstream DEFAULT_ACCEPTANCE_PROFILE
// thresholds (one-step ≤ 0.10, rollout ≤ 0.25, gap ≤ 0.20, rows ≥ 500,
// runs ≥ 3, coverage ≥ 0.90, calibration rows ≥ 300, ≥ 10 candidates,
// ≥ 10 trials, hard-violation rate ≤ 0, solver failure rate ≤ 0).
func DefaultTwinProfile() TwinProfile { return twinProfiles[0] }

// TwinProfiles returns every published twin profile.
func TwinProfiles() []TwinProfile { return append([]TwinProfile(nil), twinProfiles...) }

// LookupTwinProfile returns the twin profile whose ID is exactly id. There
// is no substring, prefix or case-insensitive matching (upstream picked
// thresholds by a substring of the scene id): "twin-v1" is twin-v1,
// "my-twin-v1-scene" is an error.
func LookupTwinProfile(id string) (TwinProfile, error) {
	ids := make([]string, len(twinProfiles))
	for i, p := range twinProfiles {
		if p.ID == id {
			return p, nil
		}
		ids[i] = p.ID
	}
	for _, p := range profiles {
		if p.ID == id {
			return TwinProfile{}, core.FieldErrorf(core.CodeInvalidArgument, "profile", "%q is a model gate profile (LookupProfile), not a twin acceptance profile; one of %s", id, strings.Join(ids, ", "))
		}
	}
	return TwinProfile{}, core.FieldErrorf(core.CodeInvalidArgument, "profile", "unknown twin acceptance profile %q; one of %s", id, strings.Join(ids, ", "))
}

// TrialOutcome is one virtual trial's measured outcome.
type TrialOutcome struct {
	// ID identifies the trial; trials are counted once per distinct,
	// non-empty ID.
	ID string `json:"id"`
	// HardViolations is the number of hard constraints the trial's
	// predicted trajectory violated.
	HardViolations int `json:"hardViolations"`
	// OODAccepted is the OOD check of the trial's input ([OOD.Check]).
	OODAccepted bool `json:"oodAccepted"`
	// Coverage is the coverage of the interval the trial used, measured
	// on test data ([CoverageReport.Measured]).
	Coverage float64 `json:"coverage"`
	// Rejected says the trial's candidate was rejected (e.g. by the
	// trial's range/step checks): it counts as a trial but not as a
	// write-eligible candidate.
	Rejected bool `json:"rejected"`
}

// TwinGateInput are the measured inputs of the twin acceptance gate.
type TwinGateInput struct {
	// Rows is the number of unique train grid steps (not windows, which
	// overlap H+F-fold): Metrics.TrainUniqueSteps.
	Rows int `json:"rows"`
	// Runs is the number of train runs: Metrics.TrainRuns.
	Runs int `json:"runs"`
	// Test-split accuracy and the val/test gap, as computed by Evaluate.
	OneStepTestNRMSE float64 `json:"oneStepTestNrmse"`
	RolloutTestNRMSE float64 `json:"rolloutTestNrmse"`
	ValTestGap       float64 `json:"valTestGap"`
	// RolloutValNRMSE is the val split's mean NRMSE (for the one-sided
	// G3 of twin-v3).
	RolloutValNRMSE float64 `json:"rolloutValNrmse"`
	// CalibrationRows is the number of calibration (val) windows the
	// conformal widths came from: Conformal.CalibrationWindows.
	CalibrationRows int `json:"calibrationRows"`
	// CalibrationCoverage is the interval's coverage MEASURED on the test
	// split (CoverageReport.Measured), never on the calibration windows.
	CalibrationCoverage float64 `json:"calibrationCoverage"`
	// CoverageWindows is the number of test windows the coverage was
	// measured on (CoverageReport.TestWindows).
	CoverageWindows int `json:"coverageWindows,omitempty"`
	// Trials are the virtual trials run with the model.
	Trials []TrialOutcome `json:"trials"`
	// PhysicsSolverFailureRate is the fraction of physics solves that
	// failed.
	PhysicsSolverFailureRate float64 `json:"physicsSolverFailureRate"`
	// Shadow evidence: the number of runs that ended after the model was
	// made on which its window predictions were compared with the line,
	// the ratio of the pooled shadow window RMSE to the test split's RMSE
	// (mean over targets: 1 means as accurate as on the test split) and
	// the share of measured values inside the conformal band. Computed by
	// the platform from stored samples (internal/twin/shadow), never
	// supplied by a trainer or by the gate itself.
	ShadowRuns       int     `json:"shadowRuns"`
	ShadowErrorRatio float64 `json:"shadowErrorRatio"`
	ShadowCoverage   float64 `json:"shadowCoverage"`
}

// twinInputJSON is TwinGateInput with its floats written as null when not
// finite (a measurement that does not exist, as no shadow runs yet).
type twinInputJSON struct {
	Rows                     int            `json:"rows"`
	Runs                     int            `json:"runs"`
	OneStepTestNRMSE         jf             `json:"oneStepTestNrmse"`
	RolloutTestNRMSE         jf             `json:"rolloutTestNrmse"`
	ValTestGap               jf             `json:"valTestGap"`
	RolloutValNRMSE          jf             `json:"rolloutValNrmse"`
	CalibrationRows          int            `json:"calibrationRows"`
	CalibrationCoverage      jf             `json:"calibrationCoverage"`
	CoverageWindows          int            `json:"coverageWindows,omitempty"`
	Trials                   []TrialOutcome `json:"trials"`
	PhysicsSolverFailureRate jf             `json:"physicsSolverFailureRate"`
	ShadowRuns               int            `json:"shadowRuns"`
	ShadowErrorRatio         jf             `json:"shadowErrorRatio"`
	ShadowCoverage           jf             `json:"shadowCoverage"`
}

// MarshalJSON writes non-finite values as null.
func (in TwinGateInput) MarshalJSON() ([]byte, error) {
	return json.Marshal(twinInputJSON{in.Rows, in.Runs, jf(in.OneStepTestNRMSE), jf(in.RolloutTestNRMSE), jf(in.ValTestGap), jf(in.RolloutValNRMSE), in.CalibrationRows,
		jf(in.CalibrationCoverage), in.CoverageWindows, in.Trials, jf(in.PhysicsSolverFailureRate), in.ShadowRuns, jf(in.ShadowErrorRatio), jf(in.ShadowCoverage)})
}

// UnmarshalJSON reads null as NaN.
func (in *TwinGateInput) UnmarshalJSON(b []byte) error {
	var j twinInputJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*in = TwinGateInput{j.Rows, j.Runs, float64(j.OneStepTestNRMSE), float64(j.RolloutTestNRMSE), float64(j.ValTestGap), float64(j.RolloutValNRMSE), j.CalibrationRows,
		float64(j.CalibrationCoverage), j.CoverageWindows, j.Trials, float64(j.PhysicsSolverFailureRate), j.ShadowRuns, float64(j.ShadowErrorRatio), float64(j.ShadowCoverage)}
	return nil
}

// TwinInputFromMeasurements builds a gate input from platform-computed
// numbers only: m from [Evaluate], c from [Calibrate], cov from
// [Conformal.MeasureCoverage] (test split). A nil argument leaves its
// inputs undefined (NaN or 0), which fails the corresponding checks.
func TwinInputFromMeasurements(m *Metrics, c *Conformal, cov *CoverageReport, trials []TrialOutcome, solverFailureRate float64) TwinGateInput {
	nan := math.NaN()
	in := TwinGateInput{OneStepTestNRMSE: nan, RolloutTestNRMSE: nan, ValTestGap: nan, RolloutValNRMSE: nan, CalibrationCoverage: nan,
		Trials: trials, PhysicsSolverFailureRate: solverFailureRate, ShadowErrorRatio: nan, ShadowCoverage: nan}
	if m != nil {
		in.Rows, in.Runs = m.TrainUniqueSteps, m.TrainRuns
		in.OneStepTestNRMSE, in.RolloutTestNRMSE, in.ValTestGap = m.Test.MeanOneStepNRMSE, m.Test.MeanNRMSE, m.ValTestGap
		in.RolloutValNRMSE = m.Val.MeanNRMSE
	}
	if c != nil {
		in.CalibrationRows = c.CalibrationWindows
	}
	if cov != nil && cov.Split == dataset.SplitTest {
		in.CalibrationCoverage, in.CoverageWindows = cov.Measured, cov.TestWindows
	}
	return in
}

// TwinGateReport is a twin profile applied to measured inputs.
type TwinGateReport struct {
	Profile string `json:"profile"`
	Version int    `json:"version"`
	Passed  bool   `json:"passed"`
	// Stage is "write_eligible" when every check passes, else "candidate".
	Stage  string  `json:"stage"`
	Checks []Check `json:"checks"`
	// RejectCodes are the IDs of the failed checks, in check order.
	RejectCodes []string `json:"rejectCodes"`
}

// TwinGate applies twin profile p to measured inputs in: the upstream
// evaluateHybridGates checks, in its order,
//
//	G0_ROWS             rows (unique train steps)            ≥ MinRows
//	G0_RUNS             train runs                           ≥ MinRuns
//	G1_SINGLE_STEP      test one-step NRMSE                  ≤ OneStepTestNrmseMax
//	G2_ROLLOUT          test rollout NRMSE                   ≤ RolloutTestNrmseMax
//	G3_GENERALIZATION   |test − val| / val                   ≤ ValTestGapMax
//	G4_CALIBRATION_ROWS calibration windows                  ≥ MinCalibrationRows
//	G4_COVERAGE         coverage measured on TEST            ≥ CoverageTarget
//	G5_PHYSICS_FAILURE  physics solver failure rate          ≤ SolverFailureRateMax
//	G6_CANDIDATE_COUNT  distinct trials not rejected         ≥ MinWriteEligibleCandidateCount
//	G6_TRIAL_COUNT      distinct trials                      ≥ MinTrialCount
//	G6_HARD_VIOLATION   share of trials with a hard violation ≤ HardConstraintViolationRateMax,
//	                    and at least one trial
//	G7_UQ_OOD           every trial OOD-accepted and coverage ≥ CoverageTarget (1 = yes),
//	                    and at least one trial
//	G8_SHADOW_RUNS      shadow runs                          ≥ MinShadowRuns      (profiles with MinShadowRuns > 0)
//	G8_SHADOW_ACCURACY  shadow window RMSE / test RMSE       ≤ ShadowErrorRatioMax
//	G8_SHADOW_COVERAGE  shadow measurements inside the band  ≥ ShadowCoverageMin
//
// Thresholds are inclusive; an undefined (NaN) value fails. Stage is
// "write_eligible" when every check passes, else "candidate"; RejectCodes
// lists the failed checks' IDs.
//
// Differences from upstream, each stricter or equal: G4_COVERAGE takes the
// coverage measured on the test split (upstream measured it on the data
// its quantile came from, so it always passed); trials are counted once
// per distinct non-empty ID (upstream counted any stored trial rows);
// G6_CANDIDATE_COUNT counts only trials not rejected (upstream counted
// every trial for both counts); G6_HARD_VIOLATION uses the profile's
// HardConstraintViolationRateMax (upstream hard-coded zero violations —
// the same result at twin-v1's rate 0). G6_HARD_VIOLATION and G7_UQ_OOD
// look at every trial, duplicates and rejected ones included.
func TwinGate(in TwinGateInput, p TwinProfile) TwinGateReport {
	r := TwinGateReport{Profile: p.ID, Version: p.Version, Checks: []Check{}, RejectCodes: []string{}}
	add := func(id, name string, v float64, op string, t float64, passed bool, what string) {
		c := Check{ID: id, Name: name, Value: v, Threshold: t, Op: op, Passed: passed}
		verdict := "passes"
		if !passed {
			verdict = "fails"
			r.RejectCodes = append(r.RejectCodes, id)
		}
		c.Detail = fmt.Sprintf("%s is %s; %s %s %s", what, num(v), verdict, op, num(t))
		r.Checks = append(r.Checks, c)
	}
	rule := func(id, name string, v float64, op string, t float64, what string) {
		add(id, name, v, op, t, compare(v, op, t), what)
	}
	rule("G0_ROWS", "train data: unique grid steps", float64(in.Rows), OpGE, float64(p.MinRows), "unique train grid steps (rows, not windows)")
	rule("G0_RUNS", "train data: runs", float64(in.Runs), OpGE, float64(p.MinRuns), "train runs")
	rule("G1_SINGLE_STEP", "one-step accuracy (test)", in.OneStepTestNRMSE, OpLE, p.OneStepTestNrmseMax, "test one-step NRMSE, mean over targets")
	rule("G2_ROLLOUT", "rollout accuracy over the horizon (test)", in.RolloutTestNRMSE, OpLE, p.RolloutTestNrmseMax, "test rollout NRMSE over the horizon, mean over targets")
	if p.OneSidedGap {
		rule("G3_GENERALIZATION", "generalisation (test no worse than val)", ValTestExcess(in.RolloutTestNRMSE, in.RolloutValNRMSE), OpLE, p.ValTestGapMax, "(test − val) / val of mean NRMSE")
	} else {
		rule("G3_GENERALIZATION", "val/test consistency", in.ValTestGap, OpLE, p.ValTestGapMax, "|test − val| / val of mean NRMSE")
	}
	rule("G4_CALIBRATION_ROWS", "calibration data: windows", float64(in.CalibrationRows), OpGE, float64(p.MinCalibrationRows), "calibration (val) windows")
	floor := p.coverageFloor(in)
	covWhat := "conformal interval coverage measured on the test split"
	if floor != p.CoverageTarget {
		covWhat = fmt.Sprintf("conformal interval coverage measured on the test split (target %.3g less the measurement's tolerance %.3g)", p.CoverageTarget, p.CoverageTarget-floor)
	}
	rule("G4_COVERAGE", "interval coverage (measured on test)", in.CalibrationCoverage, OpGE, floor, covWhat)
	rule("G5_PHYSICS_FAILURE", "physics solver failures", in.PhysicsSolverFailureRate, OpLE, p.SolverFailureRateMax, "physics solver failure rate")

	seen := map[string]bool{}
	trials, candidates, violating, unsafe := 0, 0, 0, 0
	var unsafeIDs []string
	for _, t := range in.Trials {
		if t.ID != "" && !seen[t.ID] {
			seen[t.ID] = true
			trials++
			if !t.Rejected {
				candidates++
			}
		}
		if t.HardViolations > 0 {
			violating++
		}
		if !t.OODAccepted || !(t.Coverage >= floor) {
			unsafe++
			if len(unsafeIDs) < 5 {
				unsafeIDs = append(unsafeIDs, fmt.Sprintf("%q", t.ID))
			}
		}
	}
	ignored := ""
	if n := len(in.Trials) - trials; n > 0 {
		ignored = fmt.Sprintf(" (%d trial record(s) with an empty or repeated ID not counted)", n)
	}
	rule("G6_CANDIDATE_COUNT", "write-eligible candidate trials", float64(candidates), OpGE, float64(p.MinWriteEligibleCandidateCount),
		fmt.Sprintf("distinct trials not rejected%s", ignored))
	rule("G6_TRIAL_COUNT", "virtual trials", float64(trials), OpGE, float64(p.MinTrialCount),
		fmt.Sprintf("distinct trials%s", ignored))
	rate := math.NaN()
	if len(in.Trials) > 0 {
		rate = float64(violating) / float64(len(in.Trials))
	}
	rule("G6_HARD_VIOLATION", "hard-constraint violations", rate, OpLE, p.HardConstraintViolationRateMax,
		fmt.Sprintf("share of trials violating a hard constraint (%d of %d)", violating, len(in.Trials)))
	safe := len(in.Trials) > 0 && unsafe == 0
	v := 0.0
	if safe {
		v = 1
	}
	what := "all trials OOD-accepted with coverage ≥ target (1 yes, 0 no)"
	switch {
	case len(in.Trials) == 0:
		what += "; there are no trials"
	case unsafe > 0:
		what += fmt.Sprintf("; %d trial(s) fail UQ/OOD: %s", unsafe, strings.Join(unsafeIDs, ", "))
		if unsafe > len(unsafeIDs) {
			what += ", …"
		}
	}
	add("G7_UQ_OOD", "uncertainty and OOD of every trial", v, OpEQ, 1, safe, what)

	if p.MinShadowRuns > 0 {
		rule("G8_SHADOW_RUNS", "shadow evidence: runs", float64(in.ShadowRuns), OpGE, float64(p.MinShadowRuns),
			"runs ended after the model was made, compared with its predictions")
		rule("G8_SHADOW_ACCURACY", "shadow evidence: accuracy", in.ShadowErrorRatio, OpLE, p.ShadowErrorRatioMax,
			"shadow-run window RMSE / test-split RMSE (mean over targets)")
		rule("G8_SHADOW_COVERAGE", "shadow evidence: interval coverage", in.ShadowCoverage, OpGE, p.ShadowCoverageMin,
			"share of shadow-run measurements inside the conformal band")
	}

	r.Passed = len(r.RejectCodes) == 0
	r.Stage = TwinStageCandidate
	if r.Passed {
		r.Stage = TwinStageWriteEligible
	}
	return r
}

// ChooseTuningMode is "precise_search" when the gate passed and
// "safe_small_step" otherwise.
func ChooseTuningMode(r TwinGateReport) string {
	if r.Passed {
		return TuningPreciseSearch
	}
	return TuningSafeSmallStep
}
