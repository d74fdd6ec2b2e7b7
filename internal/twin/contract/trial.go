package contract

import (
	"bytes"
	"math"
	"time"
)

// TrialSchemaVersion is the virtual trial schema this package writes and
// the newest it reads.
const TrialSchemaVersion = 1

// AlwaysFalse is a boolean that can only be false. It marshals to JSON
// false and refuses anything else (true, null, strings) on unmarshal, so a
// Go value of a contract holding it cannot claim that a virtual trial's
// candidate was executed.
type AlwaysFalse struct{}

// Bool returns false.
func (AlwaysFalse) Bool() bool { return false }

// MarshalJSON writes false.
func (AlwaysFalse) MarshalJSON() ([]byte, error) { return []byte("false"), nil }

// UnmarshalJSON accepts only false.
func (*AlwaysFalse) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "false" {
		return nil
	}
	return Invalidf("candidateExecuted", "must be false (a virtual trial never executes its candidate), got %s", truncate(string(b), 40))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Uncertainty summarises the ensemble spread of a trial's prediction.
type Uncertainty struct {
	MaxStd       float64 `json:"maxStd"`       // ≥ 0
	Coverage     float64 `json:"coverage"`     // 0…1
	EnsembleSize int     `json:"ensembleSize"` // ≥ 1
}

// OutOfDistribution is the verdict on whether a candidate lies where the
// model was trained. RejectCode is set exactly when not accepted.
type OutOfDistribution struct {
	Distance     float64 `json:"distance"`     // ≥ 0
	Disagreement float64 `json:"disagreement"` // ≥ 0
	Accepted     bool    `json:"accepted"`
	RejectCode   string  `json:"rejectCode,omitempty"`
}

// ConstraintResult is one scene constraint evaluated over a trial.
type ConstraintResult struct {
	ID                 string `json:"id"`
	Passed             bool   `json:"passed"`
	Detail             string `json:"detail"`
	FirstViolationStep *int   `json:"firstViolationStep,omitempty"` // only when failed
	// Edge names the trajectory the first violation was found on: "lower"
	// or "upper" (an edge of the prediction interval tube), "mean", or
	// "exact" for a quantity known exactly (a control), "tube" for a
	// condition that fails somewhere inside the tube (interval evaluation
	// of a custom constraint). Only when failed.
	Edge string `json:"edge,omitempty"`
	// NotEvaluated marks a failed result that was never evaluated: the
	// candidate was rejected before its rollout (RejectCode CONTROL_SAFETY)
	// or the rollout failed. It is not a measured violation.
	NotEvaluated bool `json:"notEvaluated,omitempty"`
}

// Trial reject codes: why a trial does not pass (VirtualTrial.RejectCode).
// Codes are part of the public contract: never rename one, only add.
const (
	// RejectControlSafety: the candidate itself is unsafe (unknown or
	// missing control, non-finite value, outside the control's range or
	// the trust region, a move larger than allowed, moves closer than the
	// write policy's intervals). It was not rolled out; Rejections name
	// every offending field and step.
	RejectControlSafety = "CONTROL_SAFETY"
	// RejectConstraint: a scene constraint failed on the prediction tube.
	RejectConstraint = "CONSTRAINT_VIOLATION"
	// RejectOOD: the candidate's trajectory is outside the model's
	// training envelope or the ensemble disagrees too much.
	RejectOOD = "OUT_OF_DISTRIBUTION"
	// RejectModelFailure: the physics simulation failed during the
	// rollout.
	RejectModelFailure = "MODEL_FAILURE"
)

var rejectCodes = map[string]bool{RejectControlSafety: true, RejectConstraint: true, RejectOOD: true, RejectModelFailure: true}

// Rejection is one finding of a trial's candidate validation.
type Rejection struct {
	// Step is the candidate step (0-based).
	Step int `json:"step"`
	// Field is the JSON path of the offending value, e.g.
	// "candidateControlTrajectory[3].hold_pressure".
	Field   string `json:"field"`
	Message string `json:"message"`
}

// BaselineComparison compares the candidate with holding the baseline.
// Improvement > 0 means the candidate is better; it must agree in sign
// with BaselineCost − CandidateCost.
type BaselineComparison struct {
	BaselineCost  float64 `json:"baselineCost"`
	CandidateCost float64 `json:"candidateCost"`
	Improvement   float64 `json:"improvement"`
}

// VirtualTrial is one candidate control trajectory rolled out on the twin.
// It never touches the line: CandidateExecuted is always false.
type VirtualTrial struct {
	SchemaVersion              int                  `json:"schemaVersion"`
	CreatedAt                  time.Time            `json:"createdAt"`
	CreatedBy                  string               `json:"createdBy"`
	TrialID                    string               `json:"trialId"`
	SnapshotID                 string               `json:"snapshotId"`
	ModelID                    string               `json:"modelId"`
	ObjectiveID                string               `json:"objectiveId"`
	CandidateControlTrajectory []map[string]float64 `json:"candidateControlTrajectory"`
	PredictedTrajectory        []map[string]float64 `json:"predictedTrajectory,omitempty"`
	Uncertainty                Uncertainty          `json:"uncertainty"`
	OutOfDistribution          OutOfDistribution    `json:"outOfDistribution"`
	ConstraintResults          []ConstraintResult   `json:"constraintResults"`
	BaselineComparison         BaselineComparison   `json:"baselineComparison"`
	CandidateExecuted          AlwaysFalse          `json:"candidateExecuted"`
	Provenance                 map[string]string    `json:"provenance,omitempty"`
	// PredictedLower and PredictedUpper are the prediction interval tube
	// around PredictedTrajectory, step by step with the same keys
	// (lower ≤ predicted ≤ upper); constraints are evaluated on its edges.
	PredictedLower []map[string]float64 `json:"predictedLower,omitempty"`
	PredictedUpper []map[string]float64 `json:"predictedUpper,omitempty"`
	// RejectCode is empty for a trial that passes, else one of the Reject*
	// codes (the first reason in the order CONTROL_SAFETY, MODEL_FAILURE,
	// CONSTRAINT_VIOLATION, OUT_OF_DISTRIBUTION).
	RejectCode string `json:"rejectCode,omitempty"`
	// Rejections are the candidate validation's findings (only with
	// RejectCode CONTROL_SAFETY).
	Rejections []Rejection `json:"rejections,omitempty"`
}

// Executed returns false: a virtual trial never executes its candidate.
func (t *VirtualTrial) Executed() bool { return t.CandidateExecuted.Bool() }

// ParseTrial decodes and validates a virtual trial.
func ParseTrial(data []byte) (*VirtualTrial, error) {
	var t VirtualTrial
	if err := decodeStrict(data, &t); err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Validate checks the trial on its own; CheckAgainst checks it against
// its scene.
func (t *VirtualTrial) Validate() error {
	var p problems
	t.check(&p)
	return p.err()
}

func (t *VirtualTrial) check(p *problems) {
	checkSchemaVersion(p, t.SchemaVersion, TrialSchemaVersion)
	checkTime(p, "createdAt", t.CreatedAt, true)
	checkRef(p, "createdBy", t.CreatedBy)
	checkRef(p, "trialId", t.TrialID)
	checkRef(p, "snapshotId", t.SnapshotID)
	checkRef(p, "modelId", t.ModelID)
	checkRef(p, "objectiveId", t.ObjectiveID)
	checkTrajectory(p, "candidateControlTrajectory", t.CandidateControlTrajectory, true)
	checkTrajectory(p, "predictedTrajectory", t.PredictedTrajectory, false)
	if n := len(t.PredictedTrajectory); n > 0 && n != len(t.CandidateControlTrajectory) {
		p.add("predictedTrajectory", "has %d steps, the candidate %d", n, len(t.CandidateControlTrajectory))
	}
	checkUncertainty(p, "uncertainty", t.Uncertainty)
	checkOOD(p, "outOfDistribution", t.OutOfDistribution)
	if len(t.ConstraintResults) == 0 {
		p.add("constraintResults", "at least one constraint result is required")
	}
	if checkCount(p, "constraintResults", len(t.ConstraintResults)) {
		ids := map[string]bool{}
		for i, r := range t.ConstraintResults {
			f := idx("constraintResults", i)
			if checkRef(p, f+".id", r.ID) {
				if ids[r.ID] {
					p.add(f+".id", "duplicate constraint result %q", r.ID)
				}
				ids[r.ID] = true
			}
			checkText(p, f+".detail", r.Detail, false)
			if r.FirstViolationStep != nil {
				switch {
				case r.Passed:
					p.add(f+".firstViolationStep", "only a failed constraint has a first violation step")
				case *r.FirstViolationStep < 0 || *r.FirstViolationStep >= max(len(t.CandidateControlTrajectory), 1):
					p.add(f+".firstViolationStep", "step %d is outside the trajectory", *r.FirstViolationStep)
				}
			}
		}
	}
	checkBaseline(p, "baselineComparison", t.BaselineComparison)
	t.checkTube(p)
	for i, r := range t.ConstraintResults {
		if r.NotEvaluated && (r.Passed || r.FirstViolationStep != nil) {
			p.add(idx("constraintResults", i)+".notEvaluated", "a result that was not evaluated has failed and has no violation step")
		}
		switch r.Edge {
		case "":
		case "lower", "upper", "mean", "exact", "tube":
			if r.Passed {
				p.add(idx("constraintResults", i)+".edge", "only a failed constraint names an edge")
			}
		default:
			p.add(idx("constraintResults", i)+".edge", "must be lower, upper, mean, exact or tube, not %q", r.Edge)
		}
	}
	if t.RejectCode != "" && !rejectCodes[t.RejectCode] {
		p.add("rejectCode", "unknown reject code %q", t.RejectCode)
	}
	if t.RejectCode == RejectControlSafety && len(t.Rejections) == 0 {
		p.add("rejections", "a CONTROL_SAFETY rejection names at least one finding")
	}
	if len(t.Rejections) > 0 && t.RejectCode != RejectControlSafety {
		p.add("rejections", "only a CONTROL_SAFETY rejection has findings")
	}
	if checkCount(p, "rejections", len(t.Rejections)) {
		for i, r := range t.Rejections {
			f := idx("rejections", i)
			if r.Step < 0 || r.Step >= max(len(t.CandidateControlTrajectory), 1) {
				p.add(f+".step", "step %d is outside the trajectory", r.Step)
			}
			checkRef(p, f+".field", r.Field)
			checkText(p, f+".message", r.Message, true)
		}
	}
	if checkCount(p, "provenance", len(t.Provenance)) {
		for _, k := range sortedKeys(t.Provenance) {
			checkRef(p, "provenance", k)
			checkText(p, "provenance."+k, t.Provenance[k], false)
		}
	}
}

// checkTube checks the interval tube: both edges or neither, as long as
// the prediction, with its keys, and lower ≤ predicted ≤ upper.
func (t *VirtualTrial) checkTube(p *problems) {
	lo, hi := t.PredictedLower, t.PredictedUpper
	if len(lo) == 0 && len(hi) == 0 {
		return
	}
	checkTrajectory(p, "predictedLower", lo, false)
	checkTrajectory(p, "predictedUpper", hi, false)
	n := len(t.PredictedTrajectory)
	if len(lo) != n || len(hi) != n {
		p.add("predictedLower", "the tube has %d and %d steps, the prediction %d", len(lo), len(hi), n)
		return
	}
	for i := 0; i < n; i++ {
		m := t.PredictedTrajectory[i]
		if len(lo[i]) != len(m) || len(hi[i]) != len(m) {
			p.add(idx("predictedLower", i), "the tube's keys differ from the prediction's")
			continue
		}
		for _, k := range sortedKeys(m) {
			l, okL := lo[i][k]
			h, okH := hi[i][k]
			if !okL || !okH {
				p.add(idx("predictedLower", i)+"."+k, "missing from the tube")
				continue
			}
			if !(l <= m[k] && m[k] <= h) {
				p.add(idx("predictedLower", i)+"."+k, "tube [%v, %v] does not contain the prediction %v", l, h, m[k])
			}
		}
	}
}

func checkTrajectory(p *problems, field string, tr []map[string]float64, required bool) {
	if required && len(tr) == 0 {
		p.add(field, "at least one step is required")
	}
	if !checkCount(p, field, len(tr)) {
		return
	}
	for i, step := range tr {
		f := idx(field, i)
		if len(step) == 0 {
			p.add(f, "empty step")
		}
		checkValues(p, f, step)
	}
}

func checkUncertainty(p *problems, f string, u Uncertainty) {
	if !finite(u.MaxStd) || u.MaxStd < 0 {
		p.add(f+".maxStd", "must be a finite number ≥ 0")
	}
	if !finite(u.Coverage) || u.Coverage < 0 || u.Coverage > 1 {
		p.add(f+".coverage", "must be within [0, 1]")
	}
	if u.EnsembleSize < 1 {
		p.add(f+".ensembleSize", "must be ≥ 1")
	}
}

func checkOOD(p *problems, f string, o OutOfDistribution) {
	if !finite(o.Distance) || o.Distance < 0 {
		p.add(f+".distance", "must be a finite number ≥ 0")
	}
	if !finite(o.Disagreement) || o.Disagreement < 0 {
		p.add(f+".disagreement", "must be a finite number ≥ 0")
	}
	switch {
	case o.Accepted && o.RejectCode != "":
		p.add(f+".rejectCode", "must be empty when accepted")
	case !o.Accepted && o.RejectCode == "":
		p.add(f+".rejectCode", "required when not accepted")
	case o.RejectCode != "":
		checkRef(p, f+".rejectCode", o.RejectCode)
	}
}

func checkBaseline(p *problems, f string, b BaselineComparison) {
	ok := checkFinite(p, f+".baselineCost", b.BaselineCost)
	ok = checkFinite(p, f+".candidateCost", b.CandidateCost) && ok
	ok = checkFinite(p, f+".improvement", b.Improvement) && ok
	if !ok {
		return
	}
	d := b.BaselineCost - b.CandidateCost
	if (b.Improvement > 0 && !(d > 0)) || (b.Improvement < 0 && !(d < 0)) || (b.Improvement == 0 && d != 0 && math.Abs(d) > 1e-12*math.Max(math.Abs(b.BaselineCost), 1)) {
		p.add(f+".improvement", "sign of improvement %v disagrees with baselineCost − candidateCost = %v", b.Improvement, d)
	}
}

// FailureReasons lists why the trial does not pass (nil when it passes): a
// failed constraint, or an out-of-distribution rejection. Improvement over
// the baseline is not part of passing; certificates require it separately.
func (t *VirtualTrial) FailureReasons() []string {
	var out []string
	if len(t.ConstraintResults) == 0 {
		out = append(out, "no constraint was evaluated")
	}
	for _, r := range t.ConstraintResults {
		if !r.Passed {
			out = append(out, "constraint "+r.ID+" failed: "+r.Detail)
		}
	}
	if !t.OutOfDistribution.Accepted {
		out = append(out, "out of distribution: "+t.OutOfDistribution.RejectCode)
	}
	for _, r := range t.Rejections {
		out = append(out, "control safety: "+r.Field+": "+r.Message)
	}
	if t.RejectCode != "" && len(out) == 0 {
		out = append(out, "rejected: "+t.RejectCode)
	}
	return out
}

// HardViolations is the number of scene constraints the trial evaluated
// and found violated (a result that was not evaluated does not count).
func (t *VirtualTrial) HardViolations() int {
	n := 0
	for _, r := range t.ConstraintResults {
		if !r.Passed && !r.NotEvaluated {
			n++
		}
	}
	return n
}

// Rejected reports whether the candidate was rejected before its rollout
// (RejectCode CONTROL_SAFETY).
func (t *VirtualTrial) Rejected() bool { return t.RejectCode == RejectControlSafety }

// Passed reports whether every constraint passed and the candidate was
// accepted as in distribution.
func (t *VirtualTrial) Passed() bool { return len(t.FailureReasons()) == 0 }

// CheckAgainst validates the trial and checks it against the scene:
//   - objectiveId is one of the scene's objectiveProfileIds;
//   - every step of the candidate sets exactly the scene's controls, each
//     within [min, max], moving at most maxStep from the previous step;
//   - constraintResults hold exactly one result for every constraint of the
//     scene (all kinds evaluated, none invented).
func (t *VirtualTrial) CheckAgainst(s *SceneContract) error {
	var p problems
	t.check(&p)
	for i, step := range t.CandidateControlTrajectory {
		f := idx("candidateControlTrajectory", i)
		for _, k := range sortedKeys(step) {
			if s.Control(k) == nil {
				p.add(f+"."+k, "%q is not a control of the scene", k)
			}
		}
		for _, c := range s.Controls {
			v, ok := step[c.ID]
			if !ok {
				p.add(f+"."+c.ID, "missing: every step sets every control")
				continue
			}
			if !finite(v) {
				continue
			}
			if (c.Min != nil && v < *c.Min) || (c.Max != nil && v > *c.Max) {
				p.add(f+"."+c.ID, "%v is outside the control's range [%v, %v]", v, bound(c.Min, "-∞"), bound(c.Max, "∞"))
			}
			if i > 0 && c.MaxStep != nil {
				if prev, ok := t.CandidateControlTrajectory[i-1][c.ID]; ok && finite(prev) && math.Abs(v-prev) > *c.MaxStep*(1+1e-12) {
					p.add(f+"."+c.ID, "moves %v from the previous step, more than maxStep %v", math.Abs(v-prev), *c.MaxStep)
				}
			}
		}
	}
	listed := false
	for _, id := range s.ObjectiveProfileIDs {
		listed = listed || id == t.ObjectiveID
	}
	if !listed {
		p.add("objectiveId", "%q is not one of the scene's objectiveProfileIds", t.ObjectiveID)
	}
	want := map[string]bool{}
	for _, c := range s.Constraints {
		want[c.ID] = true
	}
	got := map[string]bool{}
	for i, r := range t.ConstraintResults {
		got[r.ID] = true
		if !want[r.ID] {
			p.add(idx("constraintResults", i)+".id", "%q is not a constraint of the scene", r.ID)
		}
	}
	for _, c := range s.Constraints {
		if !got[c.ID] {
			p.add("constraintResults", "constraint %q was not evaluated", c.ID)
		}
	}
	return p.err()
}

func bound(x *float64, none string) any {
	if x == nil {
		return none
	}
	return *x
}

// Hash is core.CanonicalHash of the whole trial (createdAt in UTC): the
// trialHash a certificate names.
func (t *VirtualTrial) Hash() (string, error) {
	c := *t
	c.CreatedAt = utc(c.CreatedAt)
	return hashWithout(&c)
}

// ConstraintDigest is core.CanonicalHash of the trial's constraintResults
// (as a JSON array, in their order).
func (t *VirtualTrial) ConstraintDigest() (string, error) {
	rs := t.ConstraintResults
	if rs == nil {
		rs = []ConstraintResult{}
	}
	return hashWithout(rs)
}
