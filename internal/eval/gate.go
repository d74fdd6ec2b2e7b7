package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// Comparison operators of a check.
const (
	OpLE = "<="
	OpGE = ">="
	OpEQ = "=="
	// OpLT is strict: G7b's pole modulus must be below 1.
	OpLT = "<"
)

// Metric names a Rule can test.
const (
	MetricTestMeanOneStepNRMSE = "test.meanOneStepNrmse"
	MetricTestMeanNRMSE        = "test.meanNrmse"
	MetricTestMeanR2           = "test.meanR2"
	MetricValTestGap           = "valTestGap"
	// MetricValTestExcess is (test − val) / val of the mean NRMSE: how much
	// worse the test split is than the validation split (negative when it
	// is better, which is no failure to generalise).
	MetricValTestExcess    = "valTestExcess"
	MetricTrainUniqueSteps = "trainUniqueSteps"
	MetricTrainRuns        = "trainRuns"
	MetricArtifactPresent  = "artifactPresent" // 1 present, 0 absent
	// MetricTestCoverageError is |measured − calibrated| coverage of the
	// model's conformal interval, measured on the test split
	// ([CoverageReport]); undefined (fails) when no interval was measured.
	MetricTestCoverageError = "test.intervalCoverageError"
	// MetricTestFreeRunDiverged is 1 when the model's free run on the test
	// split diverged ([FreeRun], [DivergenceRangeFactor]), 0 when not;
	// undefined (fails) without stability evidence or when the free run
	// failed; not applicable (passes, saying so) for a model that cannot
	// simulate whole runs.
	MetricTestFreeRunDiverged = "test.freeRunDiverged"
	// MetricMaxPoleModulus is the largest modulus of the model's poles
	// ([PoleReporter]): the state-space spectral radius, the largest root
	// of the ARX A polynomial; not applicable (passes, saying so) for a
	// model without reported linear dynamics.
	MetricMaxPoleModulus = "maxPoleModulus"
)

// Rule is one check of a profile: Metric Op Threshold.
type Rule struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Metric    string  `json:"metric"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	// Sigmas, when set, widens Threshold to Sigmas standard errors of
	// the measured value where that is larger (see [CoverageTolerance]):
	// the check's threshold is then max(Threshold, Sigmas·σ).
	Sigmas float64 `json:"sigmas,omitempty"`
}

// Profile is a versioned acceptance profile. A published profile never
// changes; different thresholds are a new profile (new ID and Version).
type Profile struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	Purpose string `json:"purpose"`
	Rules   []Rule `json:"rules"`
}

// Check is one evaluated rule.
type Check struct {
	ID        string
	Name      string
	Value     float64
	Threshold float64
	Op        string // "<=" | ">=" | "=="
	Passed    bool
	Detail    string
}

type checkJSON struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Value     jf     `json:"value"`
	Threshold jf     `json:"threshold"`
	Op        string `json:"op"`
	Passed    bool   `json:"passed"`
	Detail    string `json:"detail"`
}

// MarshalJSON writes a non-finite value as null.
func (c Check) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkJSON{c.ID, c.Name, jf(c.Value), jf(c.Threshold), c.Op, c.Passed, c.Detail})
}

// UnmarshalJSON reads null as NaN.
func (c *Check) UnmarshalJSON(b []byte) error {
	var j checkJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Check{j.ID, j.Name, float64(j.Value), float64(j.Threshold), j.Op, j.Passed, j.Detail}
	return nil
}

// GateReport is a profile applied to a model's metrics.
type GateReport struct {
	Profile string  `json:"profile"`
	Version int     `json:"version"`
	Passed  bool    `json:"passed"`
	Checks  []Check `json:"checks"`
}

// Profile IDs.
const (
	ProfileUpstreamMPC     = "upstream-mpc-v2"
	ProfileUpstreamQuality = "upstream-quality-v2"
	ProfileStatic          = "static-v1"
	// The first published versions, without the interval rule G6. They
	// stay selectable by name (a job's gateProfile) and are what models
	// judged before v2 record.
	ProfileUpstreamMPCV1     = "upstream-mpc-v1"
	ProfileUpstreamQualityV1 = "upstream-quality-v1"
)

// Interval-coverage tolerance of G6: the measured coverage must be within
// CoverageToleranceMin of the calibrated level, widened to
// CoverageToleranceSigmas standard errors when the splits are small (see
// [CoverageTolerance]).
const (
	CoverageToleranceMin    = 0.05
	CoverageToleranceSigmas = 3
)

var (
	ruleG1 = Rule{ID: "G1", Name: "one-step accuracy (test)", Metric: MetricTestMeanOneStepNRMSE, Op: OpLE, Threshold: 0.10}
	ruleG2 = Rule{ID: "G2", Name: "rollout accuracy over the horizon (test)", Metric: MetricTestMeanNRMSE, Op: OpLE, Threshold: 0.25}
	ruleG3 = Rule{ID: "G3", Name: "val/test consistency", Metric: MetricValTestGap, Op: OpLE, Threshold: 0.20}
	// ruleG3x is G3 one-sided (the v2 profiles): a model whose test error
	// is lower than its validation error generalises; upstream's |gap|
	// failed it.
	ruleG3x = Rule{ID: "G3", Name: "generalisation (test no worse than val)", Metric: MetricValTestExcess, Op: OpLE, Threshold: 0.20}
	ruleG4a = Rule{ID: "G4a", Name: "train data: unique grid steps", Metric: MetricTrainUniqueSteps, Op: OpGE, Threshold: 500}
	ruleG4b = Rule{ID: "G4b", Name: "train data: runs", Metric: MetricTrainRuns, Op: OpGE, Threshold: 3}
	ruleG5  = Rule{ID: "G5", Name: "model artifact present", Metric: MetricArtifactPresent, Op: OpEQ, Threshold: 1}
	ruleS1  = Rule{ID: "S1", Name: "explained variance (test)", Metric: MetricTestMeanR2, Op: OpGE, Threshold: 0.8}
	ruleG4s = Rule{ID: "G4a", Name: "train data: rows", Metric: MetricTrainUniqueSteps, Op: OpGE, Threshold: 50}
	ruleG6  = Rule{ID: "G6", Name: "interval coverage (test) at its level", Metric: MetricTestCoverageError, Op: OpLE,
		Threshold: CoverageToleranceMin, Sigmas: CoverageToleranceSigmas}
	ruleG7a = Rule{ID: "G7a", Name: "stable free run (test)", Metric: MetricTestFreeRunDiverged, Op: OpEQ, Threshold: 0}
	ruleG7b = Rule{ID: "G7b", Name: "stable linear dynamics (|pole| < 1)", Metric: MetricMaxPoleModulus, Op: OpLT, Threshold: 1}
)

// profiles are the published profiles. Never edit one: add a new version.
var profiles = []Profile{
	{ID: ProfileUpstreamMPC, Version: 2, Purpose: dataset.PurposeMPCSurrogate, Rules: []Rule{ruleG1, ruleG2, ruleG3x, ruleG4a, ruleG4b, ruleG5, ruleG6, ruleG7a, ruleG7b}},
	{ID: ProfileUpstreamQuality, Version: 2, Purpose: dataset.PurposeQualityPredict, Rules: []Rule{ruleG1, ruleG3x, ruleG4a, ruleG4b, ruleG5, ruleG6, ruleG7a, ruleG7b}},
	{ID: ProfileStatic, Version: 1, Purpose: dataset.PurposeStaticResponse, Rules: []Rule{ruleS1, ruleG3, ruleG4s, ruleG5}},
	{ID: ProfileUpstreamMPCV1, Version: 1, Purpose: dataset.PurposeMPCSurrogate, Rules: []Rule{ruleG1, ruleG2, ruleG3, ruleG4a, ruleG4b, ruleG5}},
	{ID: ProfileUpstreamQualityV1, Version: 1, Purpose: dataset.PurposeQualityPredict, Rules: []Rule{ruleG1, ruleG3, ruleG4a, ruleG4b, ruleG5}},
}

// purposeProfile is the explicit purpose → profile mapping.
var purposeProfile = map[string]string{
	dataset.PurposeMPCSurrogate:   ProfileUpstreamMPC,
	dataset.PurposeQualityPredict: ProfileUpstreamQuality,
	dataset.PurposeStaticResponse: ProfileStatic,
}

// Profiles returns every published profile.
func Profiles() []Profile {
	out := make([]Profile, len(profiles))
	for i, p := range profiles {
		out[i] = clone(p)
	}
	return out
}

func clone(p Profile) Profile {
	p.Rules = append([]Rule(nil), p.Rules...)
	return p
}

// LookupProfile returns the profile with the given ID.
func LookupProfile(id string) (Profile, error) {
	for _, p := range profiles {
		if p.ID == id {
			return clone(p), nil
		}
	}
	ids := make([]string, len(profiles))
	for i, p := range profiles {
		ids[i] = p.ID
	}
	return Profile{}, core.FieldErrorf(core.CodeInvalidArgument, "profile", "unknown gate profile %q; one of %s", id, strings.Join(ids, ", "))
}

// ProfileFor returns the profile for a dataset purpose, by exact match
// only: mpc_surrogate → upstream-mpc-v2, quality_predict →
// upstream-quality-v2, static_response → static-v1.
func ProfileFor(purpose string) (Profile, error) {
	id, ok := purposeProfile[purpose]
	if !ok {
		return Profile{}, core.FieldErrorf(core.CodeInvalidArgument, "purpose", "no gate profile for purpose %q; known: %s, %s, %s",
			purpose, dataset.PurposeMPCSurrogate, dataset.PurposeQualityPredict, dataset.PurposeStaticResponse)
	}
	return LookupProfile(id)
}

// ProfileForJob is the profile a job is judged by: the one it names (id,
// its gateProfile), which must exist and be for the dataset's purpose, or
// else the purpose's default ([ProfileFor]). Errors name the field
// "gateProfile" and the known profiles.
func ProfileForJob(purpose, id string) (Profile, error) {
	if id == "" {
		return ProfileFor(purpose)
	}
	var ids []string
	for _, p := range profiles {
		if p.ID == id {
			if p.Purpose != purpose {
				return Profile{}, core.FieldErrorf(core.CodeInvalidArgument, "gateProfile", "gate profile %s is for %s datasets, the dataset is %s", id, p.Purpose, purpose)
			}
			return clone(p), nil
		}
		ids = append(ids, p.ID)
	}
	return Profile{}, core.FieldErrorf(core.CodeInvalidArgument, "gateProfile", "unknown gate profile %q; one of %s", id, strings.Join(ids, ", "))
}

// Evidence is what a gate reads besides the metrics.
type Evidence struct {
	// ArtifactPresent says whether the model artifact exists and was
	// hashed (G5).
	ArtifactPresent bool
	// Conformal and Coverage are the interval calibrated on val and its
	// coverage measured on test; nil when none was (G6 then fails).
	Conformal *Conformal
	Coverage  *CoverageReport
	// CoverageSkipped says why no interval was measured, when known.
	CoverageSkipped string
	// Stability is the free-run and pole evidence of G7a and G7b
	// ([MeasureStability]); nil fails both.
	Stability *Stability
}

// CoverageTolerance is G6's tolerance around the calibrated level q for an
// interval calibrated on n val windows and measured on W test windows:
// max(CoverageToleranceMin, CoverageToleranceSigmas·σ) with
//
//	σ² = q(1−q)·(1/(n+2) + 1/W).
//
// The first term is the variance of split-conformal coverage given the
// calibration set (Beta(r, n+1−r), r = ⌈(n+1)q⌉, variance ≈ q(1−q)/(n+2));
// the second the binomial sampling error of a coverage measured on W
// independent windows. Windows are the unit, not the W·F·nTgt values
// (steps and targets of a window err together). A correct interval then
// fails G6 by chance with probability ≈ 0.3 % (3σ) — more when windows
// overlap, which makes neighbours correlated; hence the floor of 5
// points, which large splits reach (n = W ≥ 650 at q = 0.9). At q = 0.9
// with the fewest windows calibration accepts (20) and 20 test windows
// the tolerance is 0.28: 62 %…100 % passes, 40 % and 0 % fail; with
// 100 + 100 windows it is 0.13 (77 %…100 %); from about 650 + 650 it is
// 0.05 (85 %…95 %). G6 does not count a coverage measured on fewer than
// [MinCalibrationWindows] test windows (it fails, saying so), so the
// tolerance never exceeds its value at 20 + 20 windows.
func CoverageTolerance(q float64, n, W int) float64 {
	return math.Max(CoverageToleranceMin, CoverageToleranceSigmas*coverageSigma(q, n, W))
}

// coverageSigma is σ of [CoverageTolerance]; 0 when undefined.
func coverageSigma(q float64, n, W int) float64 {
	if n <= 0 || W <= 0 || !(q > 0 && q < 1) {
		return 0
	}
	return math.Sqrt(q * (1 - q) * (1/float64(n+2) + 1/float64(W)))
}

// Gate applies profile p to metrics m (nil metrics fail every metric
// check). artifactPresent says whether the model artifact exists and was
// hashed. Each check carries its value, threshold and a human detail; the
// report passes when every check does.
func Gate(p Profile, m *Metrics, artifactPresent bool) GateReport {
	return GateEvidence(p, m, Evidence{ArtifactPresent: artifactPresent})
}

// GateEvidence is [Gate] with the evidence G6 (interval) and G7a/G7b
// (stability) read: a profile with G6 fails a model without a measured
// coverage, one with G7a/G7b a model without stability evidence or with a
// diverged free run or a pole on or outside the unit circle, saying why.
// A stability rule that does not apply to the model (no free run, no
// poles) passes with an undefined value and a detail saying so.
func GateEvidence(p Profile, m *Metrics, ev Evidence) GateReport {
	r := GateReport{Profile: p.ID, Version: p.Version, Passed: len(p.Rules) > 0, Checks: []Check{}}
	for _, rule := range p.Rules {
		var v, t float64
		var what string
		applicable := true
		switch rule.Metric {
		case MetricTestCoverageError:
			v, t, what = coverageValue(rule, ev)
		case MetricTestFreeRunDiverged:
			v, applicable, what = freeRunDivergedValue(ev)
			t = rule.Threshold
		case MetricMaxPoleModulus:
			v, applicable, what = maxPoleValue(ev)
			t = rule.Threshold
		default:
			v, what = metricValue(rule.Metric, m, ev.ArtifactPresent)
			t = rule.Threshold
		}
		c := Check{ID: rule.ID, Name: rule.Name, Value: v, Threshold: t, Op: rule.Op}
		if !applicable {
			// a rule that does not apply to the model passes, saying so
			c.Passed, c.Detail = true, what
			r.Checks = append(r.Checks, c)
			continue
		}
		c.Passed = compare(v, rule.Op, t)
		verdict := "passes"
		if !c.Passed {
			verdict = "fails"
		}
		c.Detail = fmt.Sprintf("%s is %s; %s %s %s", what, num(v), verdict, rule.Op, num(t))
		r.Checks = append(r.Checks, c)
		r.Passed = r.Passed && c.Passed
	}
	return r
}

// coverageValue is G6's value |measured − q|, its threshold (the rule's,
// widened by [CoverageTolerance] when the rule has Sigmas) and what it is.
func coverageValue(rule Rule, ev Evidence) (float64, float64, string) {
	c := ev.Coverage
	if c == nil || ev.Conformal == nil || c.TestWindows == 0 || math.IsNaN(c.Measured) {
		why := ""
		if ev.CoverageSkipped != "" {
			why = " (" + ev.CoverageSkipped + ")"
		}
		return math.NaN(), rule.Threshold, "the profile requires a calibrated interval and none was measured on test" + why +
			": |measured − calibrated| coverage"
	}
	if c.TestWindows < MinCalibrationWindows {
		return math.NaN(), rule.Threshold, fmt.Sprintf("the %s %% interval's coverage was measured on %d test window(s), fewer than the %d a coverage needs: "+
			"|measured − calibrated| coverage", num(100*c.Target), c.TestWindows, MinCalibrationWindows)
	}
	t := math.Max(rule.Threshold, rule.Sigmas*coverageSigma(c.Target, ev.Conformal.CalibrationWindows, c.TestWindows))
	// Rounded to 1e-9 so that 0.85 against 0.9 is 0.05, not 0.05 + 4e-17.
	v := math.Round(math.Abs(c.Measured-c.Target)*1e9) / 1e9
	return v, t, fmt.Sprintf("|measured − calibrated| coverage of the %s %% interval on %d test window(s) "+
		"= |%s − %s| (tolerance from %d val and %d test windows)", num(100*c.Target), c.TestWindows, num(c.Measured), num(c.Target),
		ev.Conformal.CalibrationWindows, c.TestWindows)
}

// compare is v op t; NaN never passes.
func compare(v float64, op string, t float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch op {
	case OpLE:
		return v <= t
	case OpGE:
		return v >= t
	case OpEQ:
		return v == t
	case OpLT:
		return v < t
	}
	return false
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "undefined"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return fmt.Sprintf("%.4g", v)
}

// metricValue returns a metric's value and a description of what it is.
func metricValue(metric string, m *Metrics, artifactPresent bool) (float64, string) {
	if metric == MetricArtifactPresent {
		if artifactPresent {
			return 1, "model artifact present (1)"
		}
		return 0, "model artifact missing (0)"
	}
	if m == nil {
		return math.NaN(), metric + " (no metrics)"
	}
	switch metric {
	case MetricTestMeanOneStepNRMSE:
		return m.Test.MeanOneStepNRMSE, "test one-step NRMSE, mean over targets (" +
			perTarget(m.Test, func(t TargetMetrics) float64 { return t.OneStepNRMSE }) + ")"
	case MetricTestMeanNRMSE:
		return m.Test.MeanNRMSE, fmt.Sprintf("test NRMSE over all %s, mean over targets (", stepsOf(m.Test)) +
			perTarget(m.Test, func(t TargetMetrics) float64 { return t.NRMSE }) + ")"
	case MetricTestMeanR2:
		return m.Test.MeanR2, "test R², mean over targets (" +
			perTarget(m.Test, func(t TargetMetrics) float64 { return t.R2 }) + ")"
	case MetricValTestGap:
		return m.ValTestGap, fmt.Sprintf("|test − val| / val of mean NRMSE = |%s − %s| / %s",
			num(m.Test.MeanNRMSE), num(m.Val.MeanNRMSE), num(m.Val.MeanNRMSE))
	case MetricValTestExcess:
		return ValTestExcess(m.Test.MeanNRMSE, m.Val.MeanNRMSE), fmt.Sprintf("(test − val) / val of mean NRMSE = (%s − %s) / %s",
			num(m.Test.MeanNRMSE), num(m.Val.MeanNRMSE), num(m.Val.MeanNRMSE))
	case MetricTrainUniqueSteps:
		return float64(m.TrainUniqueSteps), fmt.Sprintf("number of distinct grid steps (rows) in train = %d", m.TrainUniqueSteps)
	case MetricTrainRuns:
		return float64(m.TrainRuns), fmt.Sprintf("number of train runs = %d", m.TrainRuns)
	}
	return math.NaN(), "unknown metric " + metric
}

func stepsOf(s SplitMetrics) string {
	if len(s.Targets) > 0 && s.Windows > 0 {
		return fmt.Sprintf("%d horizon step(s)", s.Targets[0].N/s.Windows)
	}
	return "horizon steps"
}

func perTarget(s SplitMetrics, f func(TargetMetrics) float64) string {
	if s.Windows == 0 {
		return "the split has no windows"
	}
	parts := make([]string, len(s.Targets))
	for i, t := range s.Targets {
		parts[i] = t.Target + " " + num(f(t))
	}
	return fmt.Sprintf("%d window(s); ", s.Windows) + strings.Join(parts, ", ")
}

// ValTestExcess is (test − val) / val: NaN when val is not positive or
// either is not finite.
func ValTestExcess(test, val float64) float64 {
	if !(val > 0) || math.IsInf(val, 0) || math.IsNaN(test) || math.IsInf(test, 0) {
		return math.NaN()
	}
	return (test - val) / val
}
