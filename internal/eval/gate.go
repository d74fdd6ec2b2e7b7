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
)

// Metric names a Rule can test.
const (
	MetricTestMeanOneStepNRMSE = "test.meanOneStepNrmse"
	MetricTestMeanNRMSE        = "test.meanNrmse"
	MetricTestMeanR2           = "test.meanR2"
	MetricValTestGap           = "valTestGap"
	MetricTrainUniqueSteps     = "trainUniqueSteps"
	MetricTrainRuns            = "trainRuns"
	MetricArtifactPresent      = "artifactPresent" // 1 present, 0 absent
)

// Rule is one check of a profile: Metric Op Threshold.
type Rule struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Metric    string  `json:"metric"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
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
	ProfileUpstreamMPC     = "upstream-mpc-v1"
	ProfileUpstreamQuality = "upstream-quality-v1"
	ProfileStatic          = "static-v1"
)

var (
	ruleG1  = Rule{ID: "G1", Name: "one-step accuracy (test)", Metric: MetricTestMeanOneStepNRMSE, Op: OpLE, Threshold: 0.10}
	ruleG2  = Rule{ID: "G2", Name: "rollout accuracy over the horizon (test)", Metric: MetricTestMeanNRMSE, Op: OpLE, Threshold: 0.25}
	ruleG3  = Rule{ID: "G3", Name: "val/test consistency", Metric: MetricValTestGap, Op: OpLE, Threshold: 0.20}
	ruleG4a = Rule{ID: "G4a", Name: "train data: unique grid steps", Metric: MetricTrainUniqueSteps, Op: OpGE, Threshold: 500}
	ruleG4b = Rule{ID: "G4b", Name: "train data: runs", Metric: MetricTrainRuns, Op: OpGE, Threshold: 3}
	ruleG5  = Rule{ID: "G5", Name: "model artifact present", Metric: MetricArtifactPresent, Op: OpEQ, Threshold: 1}
	ruleS1  = Rule{ID: "S1", Name: "explained variance (test)", Metric: MetricTestMeanR2, Op: OpGE, Threshold: 0.8}
	ruleG4s = Rule{ID: "G4a", Name: "train data: rows", Metric: MetricTrainUniqueSteps, Op: OpGE, Threshold: 50}
)

// profiles are the published profiles. Never edit one: add a new version.
var profiles = []Profile{
	{ID: ProfileUpstreamMPC, Version: 1, Purpose: dataset.PurposeMPCSurrogate, Rules: []Rule{ruleG1, ruleG2, ruleG3, ruleG4a, ruleG4b, ruleG5}},
	{ID: ProfileUpstreamQuality, Version: 1, Purpose: dataset.PurposeQualityPredict, Rules: []Rule{ruleG1, ruleG3, ruleG4a, ruleG4b, ruleG5}},
	{ID: ProfileStatic, Version: 1, Purpose: dataset.PurposeStaticResponse, Rules: []Rule{ruleS1, ruleG3, ruleG4s, ruleG5}},
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
// only: mpc_surrogate → upstream-mpc-v1, quality_predict →
// upstream-quality-v1, static_response → static-v1.
func ProfileFor(purpose string) (Profile, error) {
	id, ok := purposeProfile[purpose]
	if !ok {
		return Profile{}, core.FieldErrorf(core.CodeInvalidArgument, "purpose", "no gate profile for purpose %q; known: %s, %s, %s",
			purpose, dataset.PurposeMPCSurrogate, dataset.PurposeQualityPredict, dataset.PurposeStaticResponse)
	}
	return LookupProfile(id)
}

// Gate applies profile p to metrics m (nil metrics fail every metric
// check). artifactPresent says whether the model artifact exists and was
// hashed. Each check carries its value, threshold and a human detail; the
// report passes when every check does.
func Gate(p Profile, m *Metrics, artifactPresent bool) GateReport {
	r := GateReport{Profile: p.ID, Version: p.Version, Passed: len(p.Rules) > 0, Checks: []Check{}}
	for _, rule := range p.Rules {
		v, what := metricValue(rule.Metric, m, artifactPresent)
		c := Check{ID: rule.ID, Name: rule.Name, Value: v, Threshold: rule.Threshold, Op: rule.Op}
		c.Passed = compare(v, rule.Op, rule.Threshold)
		verdict := "passes"
		if !c.Passed {
			verdict = "fails"
		}
		c.Detail = fmt.Sprintf("%s is %s; %s %s %s", what, num(v), verdict, rule.Op, num(rule.Threshold))
		r.Checks = append(r.Checks, c)
		r.Passed = r.Passed && c.Passed
	}
	return r
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
