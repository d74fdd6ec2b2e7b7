package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// TrialInput is one virtual trial's request.
type TrialInput struct {
	Scene     *contract.SceneContract
	Snapshot  *contract.TwinSnapshot // with its Window
	Objective *contract.ObjectiveProfile
	// Candidate is the control trajectory: per horizon step (exactly
	// Objective.HorizonSteps steps) every scene control id → setpoint.
	Candidate []map[string]float64
	TrialID   string
	CreatedBy string
	Now       time.Time
}

// TrialResult is a trial's record with its detail.
type TrialResult struct {
	Trial  *contract.VirtualTrial `json:"trial"`
	Detail *TrialDetail           `json:"detail"`
}

// Trace is one quantity over the horizon, for plots: the candidate's mean
// and tube, and the baseline's (holding the snapshot's controls).
type Trace struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // control, disturbance, state, output
	// Calibrated: the quantity is a dataset target the model was evaluated
	// on — hybrid prediction with a conformal tube. Otherwise it comes from
	// the calibrated physics alone (or is a control/held input) and has no
	// tube: lower = mean = upper.
	Calibrated bool `json:"calibrated"`
	// Anchored: a physics-only quantity the dataset also measures: a
	// state started at its last measurement (the physics from the
	// measured states, not from the model's fitted state), or an obs or
	// guard shown as its last measurement plus the physics' predicted
	// change, its lower/upper the physics value and that level (a
	// constraint must hold on both).
	Anchored      bool      `json:"anchored"`
	Mean          []float64 `json:"mean"`
	Lower         []float64 `json:"lower"`
	Upper         []float64 `json:"upper"`
	Baseline      []float64 `json:"baseline"`
	BaselineLower []float64 `json:"baselineLower"`
	BaselineUpper []float64 `json:"baselineUpper"`
}

// Cost is a cost split into its terms.
type Cost struct {
	// Target: Σ_steps Σ_targets weight·(mean − setpoint)².
	Target float64 `json:"target"`
	// Variance: Σ_steps Σ_targets weight·(σ_conformal² + σ_ensemble²), the
	// prediction variance, so uncertainty is never rewarded.
	Variance float64 `json:"variance"`
	// Control: Σ_steps Σ_controls cost·|u_t − u_{t−1}| (u_{−1} the
	// snapshot's value).
	Control float64 `json:"control"`
	Total   float64 `json:"total"`
}

// OODDetail explains a trial's OOD verdict.
type OODDetail struct {
	MaxDistance     float64 `json:"maxDistance"`
	StepOfMax       int     `json:"stepOfMax"`
	Threshold       float64 `json:"threshold"`
	Disagreement    float64 `json:"disagreement"`
	MaxDisagreement float64 `json:"maxDisagreement"`
	Accepted        bool    `json:"accepted"`
	Code            string  `json:"code,omitempty"`
}

// TrialDetail is what a trial's record does not hold: the full traces for
// plots and how the numbers were made.
type TrialDetail struct {
	Steps   int   `json:"steps"`
	BeatMs  int64 `json:"beatMs"`
	StartMs int64 `json:"startMs"` // time of horizon step 0
	// Traces: every scene control, then every model output and state the
	// scene declares (and the objective's targets).
	Traces       []Trace            `json:"traces"`
	InitialState map[string]float64 `json:"initialState"` // model state at the window's last row
	Cost         Cost               `json:"cost"`
	BaselineCost Cost               `json:"baselineCost"`
	OOD          OODDetail          `json:"ood"`
	// CalibratedOutputs are the quantities with a conformal tube; every
	// other predicted quantity comes from the physics alone.
	CalibratedOutputs []string `json:"calibratedOutputs"`
	TubeMethod        string   `json:"tubeMethod"`
	WindowGaps        int      `json:"windowGaps"`
	// Disturbances are the scene's declared unmeasured disturbances as
	// estimated from the window (disturb.go); the targets' means include
	// them and their tubes their uncertainty. Omitted without.
	Disturbances []DisturbanceEstimate `json:"disturbances,omitempty"`
}

// TubeMethod documents the tube in every detail.
const TubeMethod = "mean ± (conformal half-width + ensemble std); past the calibrated horizon F the half-width is max_f W[f]·√((k+1)/F)"

// TubeMethodDisturbance documents the tube of a trial whose scene declares
// unmeasured disturbances.
const TubeMethodDisturbance = TubeMethod + "; a target with a declared unmeasured disturbance: mean + its estimate b, half-width + z·√(P + (k+1)·q) (P the estimate's variance, q its walk's per step)"

// Trial runs one virtual trial: validate the candidate (rejected with
// CONTROL_SAFETY, still returned and recordable), roll it out from a fresh
// copy of the snapshot's start, evaluate every scene constraint on the
// tube's edges, judge OOD, and compare its cost with holding the
// snapshot's controls. CandidateExecuted is always false. Errors are for
// inputs that cannot make a trial at all (invalid contracts, a window the
// model cannot start from, a candidate with a step that has no usable
// value or the wrong number of steps).
func (t *Twin) Trial(ctx context.Context, in TrialInput) (*contract.VirtualTrial, *TrialDetail, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	p, err := t.newPlan(in.Scene, in.Snapshot, in.Objective)
	if err != nil {
		return nil, nil, err
	}
	return p.trial(in)
}

// trial validates, evaluates and records one candidate on plan p.
func (p *plan) trial(in TrialInput) (*contract.VirtualTrial, *TrialDetail, error) {
	if in.TrialID == "" || in.CreatedBy == "" || in.Now.IsZero() {
		return nil, nil, core.Errorf(core.CodeInvalidArgument, "a trial needs a trial id, its author and the time")
	}
	if len(in.Candidate) != p.T {
		return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "candidate", "the candidate has %d steps, the objective's horizon is %d", len(in.Candidate), p.T)
	}
	cand, recorded, rej := p.validate(in.Candidate)
	for i, step := range recorded {
		if len(step) == 0 {
			return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, fmt.Sprintf("candidate[%d]", i), "step %d has no finite value of a scene control", i)
		}
	}
	var res *evalResult
	if len(rej) > 0 {
		res = &evalResult{rejectCode: contract.RejectControlSafety, rejections: rej, oodCode: "NOT_EVALUATED", fail: p.T}
	} else {
		res = p.evaluate(p.newScratch(), cand, true)
		if res.modelErr != "" {
			res.rejectCode = contract.RejectModelFailure
		}
	}
	res.recorded = recorded
	return p.record(in, res, cand)
}

// validate checks a candidate against the scene, the trust region and the
// write policy. It returns the candidate as [T][scene controls] (nil when
// rejected), the trajectory to record (finite values of scene controls
// only: what was dropped is named in the rejections) and the findings.
func (p *plan) validate(c []map[string]float64) ([][]float64, []map[string]float64, []contract.Rejection) {
	var rej []contract.Rejection
	field := func(k int, id string) string { return fmt.Sprintf("candidateControlTrajectory[%d].%s", k, id) }
	add := func(k int, id, format string, args ...any) {
		rej = append(rej, contract.Rejection{Step: k, Field: field(k, id), Message: fmt.Sprintf(format, args...)})
	}
	isCtrl := map[string]int{}
	for i, id := range p.sceneCtrl {
		isCtrl[id] = i
	}
	nc := len(p.sceneCtrl)
	out := make([][]float64, len(c))
	recorded := make([]map[string]float64, len(c))
	lastMove := make([]int, nc)
	for i := range lastMove {
		lastMove[i] = math.MinInt / 2
	}
	lastAction, actions := math.MinInt/2, 0
	for k, step := range c {
		out[k] = make([]float64, nc)
		recorded[k] = map[string]float64{}
		keys := make([]string, 0, len(step))
		for id := range step {
			keys = append(keys, id)
		}
		sort.Strings(keys)
		for _, id := range keys {
			if _, ok := isCtrl[id]; !ok {
				add(k, id, "%q is not a control of the scene", id)
			}
		}
		moved := false
		for i, id := range p.sceneCtrl {
			v, ok := step[id]
			switch {
			case !ok:
				add(k, id, "missing: every step sets every control")
				continue
			case math.IsNaN(v) || math.IsInf(v, 0):
				add(k, id, "not a finite number")
				continue
			}
			recorded[k][id] = v
			out[k][i] = v
			tol := 1e-9 * math.Max(1, math.Abs(v))
			if v < p.lo[i]-tol || v > p.hi[i]+tol {
				add(k, id, "%v is outside the allowed range [%v, %v] (scene range ∩ trust region)", v, p.lo[i], p.hi[i])
			}
			if d := math.Abs(v - p.baseline[i]); d > p.trDelta[i]+tol {
				add(k, id, "deviates %v from the snapshot's %v, more than the trust region's maxDelta %v", d, p.baseline[i], p.trDelta[i])
			}
			prev := p.baseline[i]
			if k > 0 {
				if pv, ok := c[k-1][id]; ok && !math.IsNaN(pv) && !math.IsInf(pv, 0) {
					prev = pv
				}
			}
			d := math.Abs(v - prev)
			if d > p.stepMax[i]+tol {
				add(k, id, "moves %v from the previous step, more than %v (min of maxStep, writePolicy.maxDeltaPerAction, trust region maxDelta)", d, p.stepMax[i])
			}
			if d > tol {
				if k-lastMove[i] < p.nodeSteps {
					add(k, id, "moves %d step(s) after its previous move; the write policy's minNodeIntervalSec needs %d", k-lastMove[i], p.nodeSteps)
				}
				lastMove[i] = k
				moved = true
			}
		}
		if moved {
			if k-lastAction < p.lineSteps {
				add(k, p.sceneCtrl[0], "an action %d step(s) after the previous one; the write policy's minLineActionIntervalSec needs %d", k-lastAction, p.lineSteps)
			}
			lastAction = k
			actions++
			if actions > p.maxMoves {
				add(k, p.sceneCtrl[0], "action %d exceeds the write policy's maxActionsPerRun %d", actions, p.maxMoves)
			}
		}
	}
	if len(rej) > 0 {
		return nil, recorded, rej
	}
	return out, recorded, nil
}

// record builds the trial record and its detail.
func (p *plan) record(in TrialInput, res *evalResult, cand [][]float64) (*contract.VirtualTrial, *TrialDetail, error) {
	t := p.t
	tr := &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: in.Now.UTC(), CreatedBy: in.CreatedBy, TrialID: in.TrialID,
		SnapshotID: p.snap.SnapshotID, ModelID: t.modelID, ObjectiveID: p.obj.ObjectiveID,
		CandidateControlTrajectory: res.recorded,
		Uncertainty:                contract.Uncertainty{MaxStd: res.maxSpread, Coverage: clamp01(t.measuredCov), EnsembleSize: max(1, t.members)},
		OutOfDistribution:          contract.OutOfDistribution{Distance: finiteOr(res.oodDist, math.MaxFloat64), Disagreement: finiteOr(res.disagreement, math.MaxFloat64), Accepted: res.oodAccepted, RejectCode: res.oodCode},
		RejectCode:                 res.rejectCode,
		Rejections:                 res.rejections,
		Provenance: map[string]string{
			"estimator": t.EstimatorVersion(), "tube": "conformal+ensemble/1", "coverageTarget": strconv.FormatFloat(t.coverage, 'g', -1, 64),
			"horizonSteps": strconv.Itoa(p.T), "beatMs": strconv.FormatInt(t.beatMs, 10),
		},
	}
	if p.snap.SnapshotHash != "" {
		tr.Provenance["snapshotHash"] = p.snap.SnapshotHash
	}
	if res.oodAccepted {
		tr.OutOfDistribution.RejectCode = ""
	}
	// constraint results
	for i, cc := range p.cons {
		cr := contract.ConstraintResult{ID: cc.c.ID}
		switch {
		case res.cons != nil:
			r := res.cons[i]
			cr.Passed, cr.Detail, cr.NotEvaluated = r.passed, r.detail, r.notEvaluated
			if !r.passed && !r.notEvaluated {
				s := r.step
				cr.FirstViolationStep, cr.Edge = &s, r.edge
			}
		case res.rejectCode == contract.RejectControlSafety:
			cr.NotEvaluated, cr.Detail = true, "not evaluated: the candidate was rejected before its rollout (CONTROL_SAFETY)"
		default:
			cr.NotEvaluated, cr.Detail = true, "not evaluated: "+res.modelErr
		}
		tr.ConstraintResults = append(tr.ConstraintResults, cr)
	}
	// cost
	base := p.base
	cc := base.cost
	if res.cons != nil {
		cc = res.cost
	}
	tr.BaselineComparison = contract.BaselineComparison{BaselineCost: base.cost, CandidateCost: cc, Improvement: base.cost - cc}
	if res.cons == nil {
		tr.Provenance["cost"] = "not evaluated: the candidate was not rolled out; its cost is reported as the baseline's"
	}
	d := &TrialDetail{Steps: p.T, BeatMs: t.beatMs, StartMs: p.s.endMs + t.beatMs, InitialState: map[string]float64{},
		BaselineCost: base.costOf(), Cost: base.costOf(), TubeMethod: TubeMethod, WindowGaps: p.s.gaps,
		OOD: OODDetail{MaxDistance: res.oodDist, StepOfMax: res.oodStep, Disagreement: res.disagreement, MaxDisagreement: MaxDisagreement,
			Accepted: res.oodAccepted, Code: tr.OutOfDistribution.RejectCode}}
	if t.ood != nil {
		d.OOD.Threshold = t.ood.Threshold
	}
	if t.static {
		d.TubeMethod = TubeMethodStatic
	}
	if d.Disturbances = p.disturbanceReport(); d.Disturbances != nil {
		d.TubeMethod = TubeMethodDisturbance
	}
	if res.cons != nil {
		d.Cost = res.costOf()
	}
	for j, n := range t.states {
		d.InitialState[n] = p.start.last[j]
	}
	for j, n := range p.start.names { // a linear model's abstract states
		d.InitialState[n] = p.start.last[j]
	}
	// traces and the predicted trajectory (only for rolled-out candidates)
	if res.cons != nil && res.mean != nil {
		shown := p.shownVars()
		nv := len(p.vars)
		for _, v := range shown {
			vv := p.vars[v]
			tc := Trace{ID: vv.name, Kind: vv.kind, Calibrated: vv.target >= 0, Anchored: p.anchored[v]}
			for k := 0; k < p.T; k++ {
				tc.Mean = append(tc.Mean, res.mean[k*nv+v])
				tc.Lower = append(tc.Lower, res.lo[k*nv+v])
				tc.Upper = append(tc.Upper, res.hi[k*nv+v])
				tc.Baseline = append(tc.Baseline, base.mean[k*nv+v])
				tc.BaselineLower = append(tc.BaselineLower, base.lo[k*nv+v])
				tc.BaselineUpper = append(tc.BaselineUpper, base.hi[k*nv+v])
			}
			if tc.Calibrated {
				d.CalibratedOutputs = append(d.CalibratedOutputs, vv.name)
			}
			d.Traces = append(d.Traces, tc)
		}
		scenePredicted := map[string]bool{}
		for _, l := range [][]contract.SceneVariable{p.scene.Observations, p.scene.Guards} {
			for _, sv := range l {
				if v, ok := p.varIdx[sv.ID]; ok && (p.vars[v].kind == kindOutput || p.vars[v].kind == kindState) {
					scenePredicted[sv.ID] = true
				}
			}
		}
		if len(scenePredicted) > 0 {
			ids := sortedKeys(scenePredicted)
			for k := 0; k < p.T; k++ {
				m, lo, hi := map[string]float64{}, map[string]float64{}, map[string]float64{}
				for _, id := range ids {
					v := p.varIdx[id]
					m[id], lo[id], hi[id] = res.mean[k*nv+v], res.lo[k*nv+v], res.hi[k*nv+v]
				}
				tr.PredictedTrajectory = append(tr.PredictedTrajectory, m)
				tr.PredictedLower = append(tr.PredictedLower, lo)
				tr.PredictedUpper = append(tr.PredictedUpper, hi)
			}
		}
	}
	// A rolled-out candidate passed validation, so its record satisfies
	// the scene (CheckAgainst); a rejected one is recorded as submitted
	// (less what cannot be stored) and need only be a valid record.
	check := func() error { return tr.CheckAgainst(p.scene) }
	if len(res.rejections) > 0 {
		check = tr.Validate
	}
	if err := check(); err != nil {
		return nil, nil, core.Wrap(core.CodeInternal, err, "the trial record the engine built is invalid")
	}
	return tr, d, nil
}

// shownVars are the variables a detail traces: the scene's controls, then
// the model outputs and states the scene declares or the objective
// targets.
func (p *plan) shownVars() []int {
	var out []int
	seen := map[int]bool{}
	add := func(id string) {
		if v, ok := p.varIdx[id]; ok && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, id := range p.sceneCtrl {
		add(id)
	}
	for _, l := range [][]contract.SceneVariable{p.scene.Observations, p.scene.Guards, p.scene.States} {
		for _, sv := range l {
			add(sv.ID)
		}
	}
	for _, tm := range p.terms {
		add(p.vars[tm.v].name)
	}
	return out
}

func (r *evalResult) costOf() Cost {
	return Cost{Target: r.costTarget, Variance: r.costVariance, Control: r.costControl, Total: r.cost}
}

func clamp01(v float64) float64 {
	if !(v >= 0) {
		return 0
	}
	return math.Min(1, v)
}

func finiteOr(v, alt float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return alt
	}
	return v
}
