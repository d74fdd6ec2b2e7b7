package app

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Human-time approvals. A certificate lives minutes (15 by default), the
// snapshot its moves start from must be seconds old when they are written
// (guard.DefaultSnapshotMaxAge). An approval after that window is not
// refused: execute re-validates. It takes a fresh snapshot of the
// certificate's scene on its line (the path of snapshot.take, stored),
// re-runs the certified candidate trajectory from it with the
// certificate's model, scene version and objective (engine.RunTrial,
// stored as a trial), and writes only when the re-run passes every
// constraint on its tube, is in distribution and still improves on
// holding. The certified setpoints are what is written; the moves start
// from the fresh snapshot's values, and every guard check (freshness,
// moves, maxDeltaPerAction from the fresh value, bounds, history) holds
// against them. Otherwise the write is refused
// AML_CERT_REVALIDATION_FAILED with the reason and its figures.

// certMaxAge is the snapshot age limit executions are judged with.
const certMaxAge = guard.DefaultSnapshotMaxAge

// needsRevalidation reports whether executing r at now must re-validate:
// an APPROVED, unexpired certificate whose certified snapshot is older
// than the guard's limit (or stamped after now). Any other certificate
// goes to the guard as it is, which denies it with its own reason.
func (a *App) needsRevalidation(ctx context.Context, r *contract.CertRecord, now time.Time) (contract.TrialRecord, *contract.TwinSnapshot, bool) {
	c := r.Cert
	if c == nil || c.Status != contract.CertApproved || cert.Expired(c, now) {
		return contract.TrialRecord{}, nil, false
	}
	tr, err := a.d.Store.GetTrial(ctx, c.TrialID)
	if err != nil || tr.Hash != c.TrialHash {
		return tr, nil, false
	}
	snap, err := a.d.Store.GetSnapshot(ctx, tr.Trial.SnapshotID)
	if err != nil || snap.SnapshotHash != c.SnapshotHash {
		return tr, nil, false
	}
	age := now.Sub(snap.CapturedAt)
	return tr, snap, age > certMaxAge || age < 0
}

// revalidate re-runs the certified trajectory of r (trial tr, certified
// snapshot orig) from a fresh snapshot taken for p at now. It returns the
// stored fresh snapshot (nil when none could be taken) and the outcome;
// a failure to take or run anything is an outcome with OK false and its
// reason, never an error.
func (a *App) revalidate(ctx context.Context, p Principal, r *contract.CertRecord, tr contract.TrialRecord, orig *contract.TwinSnapshot, now time.Time) (*contract.TwinSnapshot, *govern.Revalidation) {
	c := r.Cert
	rv := &govern.Revalidation{CertifiedSnapshotID: orig.SnapshotID, CertifiedCapturedAt: orig.CapturedAt}
	fail := func(format string, args ...any) *govern.Revalidation {
		rv.OK, rv.Reason = false, fmt.Sprintf(format, args...)
		return rv
	}
	age := now.Sub(orig.CapturedAt).Round(time.Second)
	scene, err := a.d.Store.GetScene(ctx, c.SceneID, c.SceneVersion)
	if err != nil {
		return nil, fail("scene %s@%s: %v", c.SceneID, c.SceneVersion, err)
	}
	obj, objHash, err := a.d.Store.GetObjective(ctx, tr.Trial.ObjectiveID)
	if err != nil {
		return nil, fail("objective %s: %v", tr.Trial.ObjectiveID, err)
	}
	if objHash != c.ObjectiveHash {
		return nil, fail("objective %s changed since the certificate was issued (hash %s, certified %s): the certified objective cannot be re-run", obj.ObjectiveID, objHash, c.ObjectiveHash)
	}
	m, err := a.d.Store.GetModel(ctx, tr.Trial.ModelID)
	if err != nil {
		return nil, fail("model %s: %v", tr.Trial.ModelID, err)
	}
	if m.ArtifactHash != c.ModelHash {
		return nil, fail("model %s hashes to %s, the certificate signed %s", m.ID, m.ArtifactHash, c.ModelHash)
	}
	strict := false
	if _, info, err := a.d.Store.GetSnapshotInfo(ctx, orig.SnapshotID); err == nil {
		strict = info.Strict
	}
	// The line's current state: its newest run, the certified snapshot's
	// phase, the model's estimator and bindings; as strict as the
	// certified snapshot was.
	taken, err := a.takeSnapshot(ctx, p, scene, SnapshotTakeRequest{Scene: scene.SceneID, SceneVersion: scene.SceneVersion, Model: m.ID, Phase: orig.Phase, Strict: strict})
	if err != nil {
		return nil, fail("the certified snapshot %s is %v old, and a fresh snapshot could not be taken: %v", orig.SnapshotID, age, err)
	}
	fresh := taken.Snapshot
	rv.SnapshotID, rv.CapturedAt = fresh.SnapshotID, fresh.CapturedAt
	if q := fresh.DataQuality; !q.Fresh {
		return fresh, fail("the fresh snapshot %s is not fresh: stale node(s) %s, completeness %.2f", fresh.SnapshotID, strings.Join(q.StaleNodeIDs, ", "), q.Completeness)
	}
	res, err := engine.RunTrial(ctx, a.d.Store, a.d.DataDir, m.ID, engine.TrialInput{Scene: scene, Snapshot: fresh, Objective: obj,
		Candidate: tr.Trial.CandidateControlTrajectory, TrialID: a.newID("trial"), CreatedBy: p.Name, Now: now.UTC()})
	if err != nil {
		return fresh, fail("the certified trajectory could not be re-run from fresh snapshot %s: %v", fresh.SnapshotID, err)
	}
	rec, err := a.d.Store.PutTrial(ctx, res.Trial, contract.TrialManual, "")
	if err != nil {
		return fresh, fail("the re-run could not be stored: %v", err)
	}
	a.trialDone(rec, "revalidation")
	t, d := res.Trial, res.Detail
	b := t.BaselineComparison
	rv.TrialID, rv.Passed, rv.RejectCode = t.TrialID, t.Passed(), t.RejectCode
	rv.Improvement, rv.BaselineCost, rv.CandidateCost = b.Improvement, b.BaselineCost, b.CandidateCost
	rv.OODDistance, rv.OODThreshold = t.OutOfDistribution.Distance, d.OOD.Threshold
	rv.Targets = targetEnds(obj, t, d)
	if !rv.Passed {
		return fresh, fail("%s", rerunFailure(t, d))
	}
	if !(b.Improvement > 0) {
		return fresh, fail("re-run %s no longer improves on holding: improvement %.6g (baseline cost %.6g, candidate cost %.6g)", t.TrialID, b.Improvement, b.BaselineCost, b.CandidateCost)
	}
	rv.OK = true
	return fresh, rv
}

// rerunFailure says why a re-run does not pass, with its figures.
func rerunFailure(t *contract.VirtualTrial, d *engine.TrialDetail) string {
	var out []string
	for _, r := range t.Rejections {
		out = append(out, fmt.Sprintf("control safety at step %d: %s: %s", r.Step, r.Field, r.Message))
	}
	for _, r := range t.ConstraintResults {
		if r.Passed || r.NotEvaluated {
			continue
		}
		at := ""
		if r.FirstViolationStep != nil {
			at = fmt.Sprintf(" at step %d", *r.FirstViolationStep)
		}
		if r.Edge != "" {
			at += " (" + r.Edge + " edge)"
		}
		out = append(out, fmt.Sprintf("constraint %s fails%s: %s", r.ID, at, r.Detail))
	}
	if o := t.OutOfDistribution; !o.Accepted && t.RejectCode != contract.RejectControlSafety {
		out = append(out, fmt.Sprintf("out of distribution (%s): distance %.4g vs threshold %.4g at step %d, disagreement %.4g vs at most %.4g",
			o.RejectCode, d.OOD.MaxDistance, d.OOD.Threshold, d.OOD.StepOfMax, d.OOD.Disagreement, d.OOD.MaxDisagreement))
	}
	if len(out) == 0 {
		for _, r := range t.ConstraintResults {
			if r.NotEvaluated {
				out = append(out, fmt.Sprintf("constraint %s not evaluated: %s", r.ID, r.Detail))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "rejected: "+t.RejectCode)
	}
	const shown = 4 // the rest is in the stored re-run trial
	more := ""
	if len(out) > shown {
		more = fmt.Sprintf("; and %d more finding(s) in trial %s", len(out)-shown, t.TrialID)
		out = out[:shown]
	}
	return fmt.Sprintf("re-run %s from the fresh snapshot does not pass (%s): %s%s", t.TrialID, t.RejectCode, strings.Join(out, "; "), more)
}

// targetEnds are the objective's targets at the horizon's end of a trial:
// from the detail's traces, else from the trial's predicted trajectory.
func targetEnds(obj *contract.ObjectiveProfile, t *contract.VirtualTrial, d *engine.TrialDetail) []govern.TargetEnd {
	var out []govern.TargetEnd
	for _, v := range sortedTargets(obj) {
		tr := targetTrace(v, t, d)
		if tr == nil || len(tr.Mean) == 0 {
			continue
		}
		k := len(tr.Mean) - 1
		out = append(out, govern.TargetEnd{VariableID: v, Step: k, Target: obj.Targets[v], Mean: tr.Mean[k], Lower: tr.Lower[k], Upper: tr.Upper[k]})
	}
	return out
}

func sortedTargets(obj *contract.ObjectiveProfile) []string {
	if obj == nil {
		return nil
	}
	vs := make([]string, 0, len(obj.Targets))
	for v := range obj.Targets {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	return vs
}

// targetTrace is variable v's trace in d, else built from t's predicted
// trajectory and tube (no baseline then); nil when neither has it.
func targetTrace(v string, t *contract.VirtualTrial, d *engine.TrialDetail) *engine.Trace {
	if d != nil {
		for i := range d.Traces {
			if d.Traces[i].ID == v && len(d.Traces[i].Mean) > 0 {
				return &d.Traces[i]
			}
		}
	}
	if t == nil {
		return nil
	}
	tr := &engine.Trace{ID: v}
	for k, step := range t.PredictedTrajectory {
		m, ok := step[v]
		if !ok {
			return nil
		}
		lo, hi := m, m
		if k < len(t.PredictedLower) && k < len(t.PredictedUpper) {
			lo, hi = t.PredictedLower[k][v], t.PredictedUpper[k][v]
		}
		tr.Mean, tr.Lower, tr.Upper = append(tr.Mean, m), append(tr.Lower, lo), append(tr.Upper, hi)
	}
	if len(tr.Mean) == 0 {
		return nil
	}
	return tr
}

// freshSeed are the node values of certificate c's moves from snap: what
// the default recording writer starts with.
func freshSeed(c *contract.RecommendationCertificate, scene *contract.SceneContract, snap *contract.TwinSnapshot) map[string]float64 {
	out := map[string]float64{}
	for _, m := range govern.FirstStepMoves(c, scene, snap) {
		if !math.IsNaN(m.From) {
			out[m.NodeID] = m.From
		}
	}
	return out
}

// CertTarget is one objective target of a certificate as its approver
// reviews it: the certified trial's predicted mean and tube at every
// step against the target value, in the unit of the node bound to the
// target variable, and what holding the snapshot's setpoints predicts.
type CertTarget struct {
	VariableID string  `json:"variableId"`
	NodeID     string  `json:"nodeId"`
	Unit       string  `json:"unit"`
	Target     float64 `json:"target"`
	// Mean, Lower and Upper are the certified trial's prediction and tube
	// per horizon step.
	Mean  []float64 `json:"mean"`
	Lower []float64 `json:"lower"`
	Upper []float64 `json:"upper"`
	// Baseline is holding's predicted mean per step (absent when the
	// model could not be loaded to re-run the trial).
	Baseline []float64 `json:"baseline,omitempty"`
	// WorstStep is the step where the tube reaches farthest from the
	// target.
	WorstStep int `json:"worstStep"`
}

// certTargets are the certificate's targets (nil when its trial, snapshot
// or objective are gone). The prediction is the stored trial's (what the
// certificate hashed); the baseline comes from re-running that trial on
// its own snapshot with the certified model (deterministic), which also
// gives the model's node bindings.
func (a *App) certTargets(ctx context.Context, r *contract.CertRecord) []CertTarget {
	c := r.Cert
	tr, err := a.d.Store.GetTrial(ctx, c.TrialID)
	if err != nil {
		return nil
	}
	obj, _, err := a.d.Store.GetObjective(ctx, tr.Trial.ObjectiveID)
	if err != nil {
		return nil
	}
	scene, _ := a.d.Store.GetScene(ctx, c.SceneID, c.SceneVersion)
	var detail *engine.TrialDetail
	bindings := map[string]string{}
	if m, err := a.d.Store.GetModel(ctx, tr.Trial.ModelID); err == nil && m.ArtifactHash == c.ModelHash && scene != nil {
		if tw, err := engine.Load(ctx, a.d.Store, a.d.DataDir, m.ID); err == nil {
			bindings = tw.Bindings()
			if snap, err := a.d.Store.GetSnapshot(ctx, tr.Trial.SnapshotID); err == nil {
				if _, d, err := tw.Trial(ctx, engine.TrialInput{Scene: scene, Snapshot: snap, Objective: obj, Candidate: tr.Trial.CandidateControlTrajectory,
					TrialID: tr.Trial.TrialID, CreatedBy: tr.Trial.CreatedBy, Now: tr.Trial.CreatedAt}); err == nil {
					detail = d
				}
			}
		}
	}
	var out []CertTarget
	for _, v := range sortedTargets(obj) {
		stored := targetTrace(v, tr.Trial, nil)
		if stored == nil {
			continue
		}
		ct := CertTarget{VariableID: v, NodeID: v, Target: obj.Targets[v], Mean: stored.Mean, Lower: stored.Lower, Upper: stored.Upper}
		if scene != nil {
			if sv := scene.Variable(v); sv != nil {
				ct.Unit = sv.Unit
				if sv.NodeID != "" {
					ct.NodeID = sv.NodeID
				}
			}
		}
		if n, ok := bindings[v]; ok && n != "" && (scene == nil || scene.Variable(v) == nil || scene.Variable(v).NodeID == "") {
			ct.NodeID = n
		}
		if n, err := a.d.Store.GetNode(ctx, ct.NodeID); err == nil && n.Unit != "" {
			ct.Unit = n.Unit
		}
		if dt := targetTrace(v, nil, detail); dt != nil && len(dt.Baseline) == len(ct.Mean) {
			ct.Baseline = dt.Baseline
		}
		worst := -1.0
		for k := range ct.Mean {
			if d := math.Max(math.Abs(ct.Lower[k]-ct.Target), math.Abs(ct.Upper[k]-ct.Target)); d > worst {
				worst, ct.WorstStep = d, k
			}
		}
		out = append(out, ct)
	}
	return out
}

// CertExecution says whether a certificate can still be executed, and if
// not, why: what an inbox shows instead of an expiry countdown.
type CertExecution struct {
	// State is one of awaiting_approval (ISSUED: an approval first),
	// executable (APPROVED, its snapshot fresh), revalidates (APPROVED,
	// its snapshot older than the guard's limit: execute re-runs the
	// trajectory from a fresh snapshot and writes only when that passes),
	// expired, final (EXECUTED, REVOKED, EXPIRED) or unverified (its hash,
	// signature or audit entry does not check out).
	State string `json:"state" jsonschema:"awaiting_approval, executable, revalidates, expired, final or unverified"`
	// Executable is true for executable and revalidates.
	Executable bool   `json:"executable"`
	Reason     string `json:"reason" jsonschema:"what the state means for this certificate"`
	// ExpiresAt is set only while the expiry still matters (awaiting
	// approval or executable): a certificate that cannot execute has no
	// countdown.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Certificate execution states (CertExecution.State).
const (
	CertAwaitingApproval = "awaiting_approval"
	CertExecutable       = "executable"
	CertRevalidates      = "revalidates"
	CertExpiredState     = "expired"
	CertFinal            = "final"
	CertUnverified       = "unverified"
)

// CertExecutionOf is r's execution state at the application's clock;
// verified and problem are the store's verification of r (a
// contract.CertListItem's, or true for a record GetCertificate returned).
func (a *App) CertExecutionOf(ctx context.Context, r *contract.CertRecord, verified bool, problem string) CertExecution {
	now := a.o.Now()
	c := r.Cert
	if c == nil {
		return CertExecution{State: CertUnverified, Reason: "no certificate"}
	}
	exp := c.ExpiresAt
	switch {
	case !verified:
		return CertExecution{State: CertUnverified, Reason: "cannot execute: the certificate does not verify (" + problem + ")"}
	case c.Status.Final():
		return CertExecution{State: CertFinal, Reason: fmt.Sprintf("cannot execute: %s", c.Status)}
	case cert.Expired(c, now):
		return CertExecution{State: CertExpiredState, Reason: "cannot execute: expired at " + c.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z")}
	case c.Status == contract.CertIssued:
		return CertExecution{State: CertAwaitingApproval, Reason: "needs a person's approval before it can execute", ExpiresAt: &exp}
	}
	if _, _, stale := a.needsRevalidation(ctx, r, now); stale {
		return CertExecution{State: CertRevalidates, Executable: true, ExpiresAt: &exp,
			Reason: fmt.Sprintf("its snapshot is older than %s: execute re-runs the certified trajectory from a fresh snapshot and writes only if that still passes", certMaxAge)}
	}
	return CertExecution{State: CertExecutable, Executable: true, ExpiresAt: &exp, Reason: "approved; executable until it expires"}
}
