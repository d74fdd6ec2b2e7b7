// Package gate evaluates a twin model's acceptance gate with inputs the
// platform measures itself, never numbers a trainer or a caller supplies.
//
// The gate is the seed's evaluateHybridGates (eval.TwinGate, profile
// twin-v3 by default: twin-v1 plus shadow evidence, coverage with its measurement tolerance). Its inputs come from
// three places:
//
//   - model accuracy, calibration rows and test coverage from the model's
//     stored evaluation (the job runner's eval.Evaluate, eval.Calibrate and
//     Conformal.MeasureCoverage on the dataset's val and test splits);
//   - virtual trials run FOR THIS EVALUATION: snapshots are replayed at
//     evenly spaced instants of the dataset's test runs (runs the model was
//     not fitted or calibrated on; for a static dataset, which splits rows,
//     the runs its test rows come from) through the live snapshot path
//     (internal/twin/snapshot with the model as state estimator), the
//     optimiser (safe_small_step: the seed's small steps) proposes its
//     recommendation at each — the lowest-cost candidate passing
//     constraints, UQ and OOD — and that trial is stored with purpose
//     "gate" and this evaluation's id. A point where no candidate passes
//     (the twin would recommend nothing, e.g. the line is already out of
//     spec and no small step brings it back) is reported in NoRecommendation
//     with the optimiser's reason and is not a trial; planning visits up to
//     twice the wanted number of points, so G6's counts fail only when the
//     twin cannot recommend at enough of them. The physics failure rate is
//     the share of all candidates rolled out at the visited points whose
//     physics failed (MODEL_FAILURE);
//   - shadow evidence already stored for the model (internal/twin/shadow:
//     runs that ended after the model was made): the number of runs, the
//     pooled window coverage of the conformal band and the ratio of the
//     pooled shadow window RMSE to the test split's RMSE.
//
// The result is stored in twin_gate_evals (audited "twin.gate"); the
// registry reads the latest one when a twin model is promoted to
// production, and the optimiser's tuning mode follows it
// (eval.ChooseTuningMode).
package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

// DefaultSnapshots is the number of replayed snapshots (and so trials) per
// evaluation: two more than twin-v1's minimum trial count, so one snapshot
// that cannot be taken does not fail the gate by itself.
const DefaultSnapshots = 12

// MaxSnapshots is the most replayed snapshots one evaluation may ask for
// (each is a stored snapshot and an optimisation): gate.evaluate refuses
// more before any work starts.
const MaxSnapshots = 200

// Options configure Evaluate.
type Options struct {
	// SceneID/SceneVersion name the scene (version "": the latest).
	SceneID, SceneVersion string
	// ObjectiveID (""): the scene's first objective profile.
	ObjectiveID string
	// Snapshots is the number of replayed snapshots (0: DefaultSnapshots).
	Snapshots int
	// Profile is the twin acceptance profile (""): eval.ProfileTwinMeasured.
	Profile string
	// By is the actor; Now the evaluation time (zero: wall clock).
	By  string
	Now time.Time
	// Seed orders the optimiser's polls.
	Seed uint64
}

// TrialRef summarises one gate trial.
type TrialRef struct {
	TrialID        string  `json:"trialId"`
	SnapshotID     string  `json:"snapshotId"`
	RunID          string  `json:"runId"`
	AtMs           int64   `json:"atMs"`
	Passed         bool    `json:"passed"`
	RejectCode     string  `json:"rejectCode,omitempty"`
	HardViolations int     `json:"hardViolations"`
	OODAccepted    bool    `json:"oodAccepted"`
	Coverage       float64 `json:"coverage"`
	Improvement    float64 `json:"improvement"`
}

// SnapshotFailure is a planned point that gave no trial: its snapshot could
// not be taken, or no candidate passed there.
type SnapshotFailure struct {
	RunID string `json:"runId"`
	AtMs  int64  `json:"atMs"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// Result is one gate evaluation.
type Result struct {
	GateEvalID string              `json:"gateEvalId"`
	ModelID    string              `json:"modelId"`
	SceneID    string              `json:"sceneId"`
	Scene      string              `json:"sceneVersion"`
	Objective  string              `json:"objectiveId"`
	CreatedAt  time.Time           `json:"createdAt"`
	CreatedBy  string              `json:"createdBy"`
	Input      eval.TwinGateInput  `json:"input"`
	Report     eval.TwinGateReport `json:"report"`
	TuningMode string              `json:"tuningMode"`
	Trials     []TrialRef          `json:"trials"`
	Failures   []SnapshotFailure   `json:"snapshotFailures,omitempty"`
	// NoRecommendation: visited points where no candidate passed.
	NoRecommendation []SnapshotFailure `json:"noRecommendation,omitempty"`
	// Shadow is the pooled stored shadow evidence.
	Shadow shadow.Summary `json:"shadow"`
}

// modelMetrics is the part of a model's metrics JSON the gate reads.
type modelMetrics struct {
	Conformal *eval.Conformal      `json:"conformal"`
	Coverage  *eval.CoverageReport `json:"coverage"`
}

// Evaluate runs the gate for model modelID and stores the result.
func Evaluate(ctx context.Context, st store.Store, dataDir, modelID string, o Options) (*Result, error) {
	if o.Now.IsZero() {
		o.Now = time.Now().UTC()
	}
	if o.By == "" {
		o.By = "aml"
	}
	if o.Snapshots <= 0 {
		o.Snapshots = DefaultSnapshots
	}
	if o.Profile == "" {
		o.Profile = eval.ProfileTwinMeasured
	}
	prof, err := eval.LookupTwinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	m, err := st.GetModel(ctx, modelID)
	if err != nil {
		return nil, err
	}
	tw, err := engine.Load(ctx, st, dataDir, modelID)
	if err != nil {
		return nil, err
	}
	var met eval.Metrics
	var mm modelMetrics
	if len(m.Metrics) == 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "modelId", "model %s has no stored evaluation", modelID)
	}
	if err := json.Unmarshal(m.Metrics, &met); err != nil {
		return nil, core.Errorf(core.CodeInternal, "model %s: metrics: %v", modelID, err)
	}
	if err := json.Unmarshal(m.Metrics, &mm); err != nil {
		return nil, core.Errorf(core.CodeInternal, "model %s: metrics: %v", modelID, err)
	}
	scene, err := st.GetScene(ctx, o.SceneID, o.SceneVersion)
	if err != nil {
		return nil, err
	}
	objID := o.ObjectiveID
	if objID == "" {
		if len(scene.ObjectiveProfileIDs) == 0 {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "objective", "scene %s names no objective profile: give one", scene.SceneID)
		}
		objID = scene.ObjectiveProfileIDs[0]
	}
	obj, _, err := st.GetObjective(ctx, objID)
	if err != nil {
		return nil, err
	}
	ds, err := st.GetDataset(ctx, m.DatasetID)
	if err != nil {
		return nil, err
	}
	man, err := dataset.FetchManifest(ctx, st, dataDir, ds)
	if err != nil {
		return nil, err
	}
	r := &Result{GateEvalID: newID("gate", o.Now), ModelID: modelID, SceneID: scene.SceneID, Scene: scene.SceneVersion,
		Objective: obj.ObjectiveID, CreatedAt: o.Now, CreatedBy: o.By, Trials: []TrialRef{}}

	// Gate trials on replayed snapshots of the test runs.
	failures, rolled := 0, 0
	for i, p := range plan(man, tw.H, obj.HorizonSteps, 2*o.Snapshots) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(r.Trials) >= o.Snapshots {
			break
		}
		at := time.UnixMilli(p.atMs).UTC()
		snap, _, err := snapshot.Take(ctx, st, scene, snapshot.Options{Now: at, Replay: true, RunID: p.run, Estimator: tw,
			Bindings: tw.Bindings(), CreatedBy: o.By, Clock: func() time.Time { return o.Now }})
		if err == nil {
			err = st.PutSnapshot(ctx, snap, false)
		}
		if err != nil {
			r.Failures = append(r.Failures, SnapshotFailure{RunID: p.run, AtMs: p.atMs, Code: core.CodeOf(err), Error: err.Error()})
			continue
		}
		trialID := fmt.Sprintf("%s-t%02d", r.GateEvalID, i)
		res, err := tw.Optimize(ctx, engine.OptimizeInput{Scene: scene, Snapshot: snap, Objective: obj, Mode: engine.ModeSafeSmallStep,
			Seed: o.Seed + uint64(i), TrialID: trialID, CreatedBy: o.By, Now: o.Now})
		if err != nil {
			return nil, err
		}
		for _, c := range res.Ranked {
			if c.RejectCode == contract.RejectControlSafety {
				continue // never rolled out
			}
			rolled++
			if c.RejectCode == contract.RejectModelFailure {
				failures++
			}
		}
		trial := res.Best
		if trial == nil {
			r.NoRecommendation = append(r.NoRecommendation, SnapshotFailure{RunID: p.run, AtMs: p.atMs, Code: "NO_PASSING_CANDIDATE", Error: res.NoPass})
			continue
		}
		if _, err := st.PutTrial(ctx, trial, contract.TrialGate, r.GateEvalID); err != nil {
			return nil, err
		}
		r.Trials = append(r.Trials, TrialRef{TrialID: trial.TrialID, SnapshotID: snap.SnapshotID, RunID: p.run, AtMs: p.atMs,
			Passed: trial.Passed(), RejectCode: trial.RejectCode, HardViolations: trial.HardViolations(),
			OODAccepted: trial.OutOfDistribution.Accepted, Coverage: trial.Uncertainty.Coverage,
			Improvement: trial.BaselineComparison.Improvement})
	}
	outcomes := make([]eval.TrialOutcome, len(r.Trials))
	for i, t := range r.Trials {
		outcomes[i] = eval.TrialOutcome{ID: t.TrialID, HardViolations: t.HardViolations, OODAccepted: t.OODAccepted,
			Coverage: t.Coverage, Rejected: t.RejectCode != ""}
	}
	failRate := math.NaN()
	if rolled > 0 {
		failRate = float64(failures) / float64(rolled)
	}
	in := eval.TwinInputFromMeasurements(&met, mm.Conformal, mm.Coverage, outcomes, failRate)

	// Shadow evidence, as stored by internal/twin/shadow.
	rows, err := st.ListShadow(ctx, modelID)
	if err != nil {
		return nil, err
	}
	runs := make([]shadow.RunEvidence, 0, len(rows))
	for _, row := range rows {
		var ev shadow.RunEvidence
		if err := json.Unmarshal(row.Evidence, &ev); err != nil {
			return nil, core.Errorf(core.CodeInternal, "shadow evidence of run %s: %v", row.RunID, err)
		}
		runs = append(runs, ev)
	}
	r.Shadow = shadow.Summarize(runs)
	in.ShadowRuns = r.Shadow.Scored
	in.ShadowCoverage = float64(r.Shadow.Coverage)
	in.ShadowErrorRatio = errorRatio(r.Shadow.WindowRMSE, met.Test.Targets)

	r.Input = in
	r.Report = eval.TwinGate(in, prof)
	r.TuningMode = eval.ChooseTuningMode(r.Report)
	rep, err := json.Marshal(r)
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "gate report: %v", err)
	}
	if err := st.PutGateEval(ctx, contract.GateEvalRecord{GateEvalID: r.GateEvalID, ModelID: modelID, CreatedAt: o.Now,
		CreatedBy: o.By, Passed: r.Report.Passed, TuningMode: r.TuningMode, Report: rep}); err != nil {
		return nil, err
	}
	return r, nil
}

// errorRatio is the mean over targets of shadow window RMSE / test RMSE
// (NaN when either is missing).
func errorRatio(shadowRMSE []shadow.Num, test []eval.TargetMetrics) float64 {
	if len(shadowRMSE) == 0 || len(shadowRMSE) != len(test) {
		return math.NaN()
	}
	sum := 0.0
	for k, s := range shadowRMSE {
		if !(test[k].RMSE > 0) {
			return math.NaN()
		}
		sum += float64(s) / test[k].RMSE
	}
	return sum / float64(len(shadowRMSE))
}

// point is one planned replay instant.
type point struct {
	run  string
	atMs int64
}

// plan spreads n replay instants over the dataset's test runs (val runs
// when there are no test runs): round-robin over the runs in their
// manifest order, at evenly spaced fractions of each run's usable stretch
// (after the first H steps of history, before the last horizon steps).
// A static dataset splits rows, not runs: its test runs are the runs its
// test rows come from (man.Split.Test.RunIDs).
func plan(man *dataset.Manifest, H, horizon, n int) []point {
	var runs []dataset.ManifestRun
	inSplit := func(r dataset.ManifestRun, split string) bool {
		if man.Kind != dataset.KindStatic {
			return r.Split == split
		}
		part := man.Split.Test
		if split == dataset.SplitVal {
			part = man.Split.Val
		}
		return slices.Contains(part.RunIDs, r.RunID)
	}
	for _, split := range []string{dataset.SplitTest, dataset.SplitVal} {
		for _, r := range man.Runs {
			// Only runs with a usable stretch (see below).
			if inSplit(r, split) && r.GridSteps-horizon-1 > H+1 {
				runs = append(runs, r)
			}
		}
		if len(runs) > 0 {
			break
		}
	}
	if len(runs) == 0 {
		return nil
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].StartMs < runs[j].StartMs })
	per := (n + len(runs) - 1) / len(runs)
	var pts []point
	for q := 0; q < per && len(pts) < n; q++ {
		for _, r := range runs {
			if len(pts) >= n {
				break
			}
			lo, hi := H+1, r.GridSteps-horizon-1
			step := lo + (hi-lo)*(q+1)/(per+1)
			pts = append(pts, point{run: r.RunID, atMs: r.StartMs + int64(step)*man.BeatMs})
		}
	}
	return pts
}

func newID(prefix string, now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", prefix, now.UTC().Format("20060102T150405.000"), hex.EncodeToString(b[:]))
}
