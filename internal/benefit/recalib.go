package benefit

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/recal"
	"github.com/aml-project/aml/internal/twin/shadow"
)

// Recalibration is one recalibration the envelope mode carried out: the
// trigger that fired at the end of a study run, the recalibration
// scheduler's request and the candidate model it trained, and that
// model's twin gate on its shadow evidence (the study runs after it).
type Recalibration struct {
	// Run is the study run (0-based) at whose end the trigger fired,
	// RunID its stored run; Trigger is the study's trigger
	// ("disturbance": |the twin's drift estimate| > DriftEstimateMax),
	// SchedulerTriggers the recalibration scheduler's (recal.Triggers of
	// the signals it computed from the store).
	Run               int      `json:"run"`
	RunID             string   `json:"runId"`
	Trigger           string   `json:"trigger"`
	DriftEstimate     float64  `json:"driftEstimate"`
	DriftEstimateMax  float64  `json:"driftEstimateMax"`
	SchedulerTriggers []string `json:"schedulerTriggers"`
	RequestID         string   `json:"requestId,omitempty"`
	// DatasetID and NewModelID are the rebuilt dataset (the model's spec
	// with the stored study runs) and the model trained on it with the
	// same trainer, params and seed; NewModelTestRMSE its test RMSE (g).
	DatasetID        string   `json:"datasetId,omitempty"`
	NewModelID       string   `json:"newModelId,omitempty"`
	NewModelTestRMSE *float64 `json:"newModelTestRmse,omitempty"`
	// ShadowRuns are the study runs after the new model that its shadow
	// evidence scored; ShadowCoverage the pooled coverage of its band,
	// ShadowErrorRatio its pooled shadow window RMSE over its test RMSE.
	ShadowRuns       int      `json:"shadowRuns"`
	ShadowCoverage   *float64 `json:"shadowCoverage,omitempty"`
	ShadowErrorRatio *float64 `json:"shadowErrorRatio,omitempty"`
	// The new model's twin gate (internal/twin/gate, stored): profile,
	// result and failed checks.
	GateEvalID  string   `json:"gateEvalId,omitempty"`
	GateProfile string   `json:"gateProfile"`
	GatePassed  bool     `json:"gatePassed"`
	GateRejects []string `json:"gateRejects"`
	// GateFailures are the failed checks with their values and
	// thresholds (why the gate did not pass).
	GateFailures []eval.Check `json:"gateFailures,omitempty"`
	// GateTrials are the gate's virtual trials on replayed snapshots of
	// the new dataset's test runs; GateNoRecommendation the visited
	// points where no candidate passed and GateSnapshotFailures those
	// where no snapshot could be taken, each with its first reason.
	GateTrials           int    `json:"gateTrials"`
	GateNoRecommendation int    `json:"gateNoRecommendation"`
	GateSnapshotFailures int    `json:"gateSnapshotFailures"`
	GateFirstProblem     string `json:"gateFirstProblem,omitempty"`
	// GateNoRecommendationPoints are those points, each with why holding
	// the baseline fails there (its failed constraints with their values,
	// its OOD code: internal/twin/engine's NoPass).
	GateNoRecommendationPoints []gate.SnapshotFailure `json:"gateNoRecommendationPoints,omitempty"`
	// PreviousGatePassed and PreviousGateRejects are the twin gate of the
	// model it replaces, evaluated at the same time on its own shadow
	// evidence (every study run after it), for comparison.
	PreviousGatePassed  bool     `json:"previousGatePassed"`
	PreviousGateRejects []string `json:"previousGateRejects"`
	// Note says why a step did not happen (no request, no model, no
	// shadow run before the study's end).
	Note string `json:"note,omitempty"`
}

// recalibrator is the envelope mode's line history and recalibration:
// every study run is stored (run record, samples, context segment) as the
// line's connector would, so the recalibration scheduler and the shadow
// evidence see the runs after the model; a trigger recalibrates through
// the scheduler (recal.ComputeSignals, RequestAt, RunNext: the model's
// dataset spec rebuilt with the new runs, the same trainer retrained in
// process) and, ShadowRuns runs later, the new model's shadow evidence is
// collected and its twin gate evaluated.
type recalibrator struct {
	o       Options
	hdr     sim.Header
	scene   *contract.SceneContract // frozen
	objID   string
	modelID string
	samples []core.Sample
	out     []Recalibration
	pending int // index in out awaiting its gate, -1: none
	runsNew int // study runs stored since the pending model
}

func newRecalibrator(o Options, scene *contract.SceneContract, objID, modelID string) *recalibrator {
	cfg := sim.DefaultInjectionConfig()
	created := time.UnixMilli(cfg.StartMs).UTC()
	hdr := sim.Header{Config: cfg, RecipeParams: sim.RecipeParams(), Nodes: sim.InjectionNodes(cfg.LineID, created),
		Line:    core.Line{ID: cfg.LineID, Name: "Injection moulding line (simulated)", CreatedAt: created},
		Product: core.Product{ID: cfg.ProductID, LineID: cfg.LineID, Name: "Injection-moulded part A (simulated)", CreatedAt: created},
		Recipe:  core.Recipe{ID: cfg.RecipeID, LineID: cfg.LineID, ProductID: cfg.ProductID, Name: "Injection recipe A (simulated)", CreatedAt: created}}
	return &recalibrator{o: o, hdr: hdr, scene: scene, objID: objID, modelID: modelID, pending: -1}
}

// record keeps one step's measured values for the run's store.
func (rc *recalibrator) record(l *loop, s sim.ClosedSample) {
	c := rc.hdr.Config
	for j, n := range sim.ClosedNodes() {
		rc.samples = append(rc.samples, core.Sample{Node: n, TsUs: s.TsMs * 1000, Value: s.Measured[j], State: core.StateOK,
			Line: c.LineID, Product: c.ProductID, Recipe: c.RecipeID, Run: l.runID(l.line.Run())})
	}
}

// endRun stores study run r (it ended at global step g) and, when a new
// model waits for its gate and has ShadowRuns runs after it, evaluates it.
func (rc *recalibrator) endRun(ctx context.Context, l *loop, r int) error {
	c := rc.hdr.Config
	start := l.base + int64(r)*int64(rc.o.RunSteps)*1000
	end := start + int64(rc.o.RunSteps-1)*1000
	run := core.Run{ID: l.runID(r), LineID: c.LineID, ProductID: c.ProductID, RecipeID: c.RecipeID, StartedMs: start, EndedMs: &end, Status: core.RunEnded}
	out := &sim.Output{Header: rc.hdr, Runs: []sim.RunData{{Run: run, Samples: rc.samples}}}
	if _, err := out.Write(ctx, rc.o.Store, nil); err != nil {
		return err
	}
	rc.samples = rc.samples[:0]
	if rc.pending >= 0 {
		rc.runsNew++
		if rc.runsNew >= rc.o.ShadowRuns {
			return rc.gate(ctx, l, r)
		}
	}
	return nil
}

// clock is the study's clock at global step g of l's mode, as a func.
func clock(l *loop, g int) func() time.Time {
	t := l.at(g)
	return func() time.Time { return t }
}

// trigger recalibrates after study run r, whose end the study's
// disturbance trigger fired at (drift estimate drift): the scheduler's
// signals, request and one worker step that retrains in process. Only
// Options.Retrains recalibrations are carried out, and none while a new
// model waits for its gate.
func (rc *recalibrator) trigger(ctx context.Context, l *loop, r int, drift float64) error {
	if len(rc.out) >= rc.o.Retrains || rc.pending >= 0 || r+1 < rc.o.RecalMinRuns {
		return nil
	}
	g := (r + 1) * rc.o.RunSteps
	now := clock(l, g)
	rec := Recalibration{Run: r, RunID: l.runID(r), Trigger: "disturbance", DriftEstimate: drift, DriftEstimateMax: recal.DisturbanceScoreMax * l.testRMSE,
		SchedulerTriggers: []string{}, GateProfile: eval.ProfileTwinMeasured, GateRejects: []string{}, PreviousGateRejects: []string{}}
	dist, err := rc.disturbances(ctx, rc.modelID)
	if err != nil {
		return err
	}
	sig, err := recal.ComputeSignals(ctx, rc.o.Store, rc.o.DataDir, rc.modelID, rc.scene.SceneID, recal.SignalOptions{Now: now, Shadow: shadow.Options{Disturbances: dist}})
	if err != nil {
		return err
	}
	pol := recal.DefaultPolicy()
	d, err := recal.RequestAt(ctx, rc.o.Store, *sig, pol, Engineer, now())
	if err != nil {
		return err
	}
	rec.SchedulerTriggers, rec.RequestID = d.Triggers, d.RequestID
	if !d.Accepted {
		rec.Note = "the recalibration scheduler did not queue a request: " + d.Reason
		rc.out = append(rc.out, rec)
		return nil
	}
	runner := jobs.NewRunner(rc.o.Store, jobs.Options{DataDir: rc.o.DataDir, Trainers: rc.o.Trainers, Bus: events.New(), Now: now})
	if rc.o.RecalWindow > 0 {
		if err := rc.retrainRecent(ctx, runner, d.RequestID, pol, now); err != nil {
			return err
		}
	} else if _, err := recal.RunNext(ctx, rc.o.Store, runner, recal.RunOptions{DataDir: rc.o.DataDir, MaxConcurrent: pol.MaxConcurrentRuns, RunJob: true, Now: now}); err != nil {
		return err
	}
	req, err := rc.o.Store.GetCalibration(ctx, d.RequestID)
	if err != nil {
		return err
	}
	rec.DatasetID, rec.NewModelID = req.DatasetID, req.NewModelID
	if req.NewModelID == "" {
		rec.Note = fmt.Sprintf("recalibration %s ended %s without a model: %s", req.RequestID, req.State, req.Error)
		rc.out = append(rc.out, rec)
		return nil
	}
	if m, err := rc.o.Store.GetModel(ctx, req.NewModelID); err == nil {
		rec.NewModelTestRMSE = num(testRMSEOf(m.Metrics))
	}
	rc.o.Logf("   envelope: recalibration %s after run %d (drift estimate %.3f g > %.3f g; scheduler triggers %v): model %s",
		req.RequestID, r, drift, rec.DriftEstimateMax, d.Triggers, req.NewModelID)
	rc.out = append(rc.out, rec)
	rc.pending, rc.runsNew = len(rc.out)-1, 0
	return nil
}

// retrainRecent is the worker step of request id on the line's recent
// runs: it claims the request (as recal.RunNext does), builds the model's
// dataset spec on the Options.RecalWindow most recent ended runs of its
// line, product and recipe (instead of all of them: the wear drifts, and
// the oldest runs are the furthest from the line's state now), trains it
// with the model's job's trainer, params and seed (parent that job) and
// settles the request with the new model (cooldown) or as failed.
func (rc *recalibrator) retrainRecent(ctx context.Context, runner *jobs.Runner, id string, pol recal.Policy, now func() time.Time) error {
	st := rc.o.Store
	claimed, _, err := st.ClaimCalibration(ctx, pol.MaxConcurrentRuns, Engineer, now())
	if err != nil {
		return err
	}
	if claimed == nil || claimed.RequestID != id {
		return core.Errorf(core.CodeInternal, "recalibration %s could not be claimed", id)
	}
	fail := func(err error) error { return st.FailCalibration(ctx, id, err.Error(), now(), Engineer) }
	m, err := st.GetModel(ctx, rc.modelID)
	if err != nil {
		return err
	}
	ds, err := st.GetDataset(ctx, m.DatasetID)
	if err != nil {
		return err
	}
	var spec dataset.Spec
	if err := json.Unmarshal([]byte(ds.SpecJSON), &spec); err != nil {
		return core.Wrap(core.CodeDatasetTampered, err, "dataset %s spec", ds.ID)
	}
	runs, err := st.ListRuns(ctx, core.RunFilter{Line: m.LineID, Product: m.ProductID, Recipe: m.RecipeID, Status: core.RunEnded})
	if err != nil {
		return err
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedMs < runs[j].StartedMs })
	runs = runs[max(0, len(runs)-rc.o.RecalWindow):]
	spec.RunIDs = spec.RunIDs[:0]
	for _, r := range runs {
		spec.RunIDs = append(spec.RunIDs, r.ID)
	}
	spec.FromMs, spec.ToMs = nil, nil
	built, err := dataset.Build(ctx, st, &spec, dataset.Options{DataDir: rc.o.DataDir, CreatedBy: "recal:" + id})
	if err != nil {
		return fail(err)
	}
	old, err := st.GetJob(ctx, m.JobID)
	if err != nil {
		return err
	}
	j, err := runner.Submit(ctx, jobs.SubmitRequest{DatasetID: built.Dataset.ID, TrainerRef: old.TrainerRef, Params: old.Params, Seed: old.Seed,
		ParentID: old.ID, ChangeNote: fmt.Sprintf("recalibration %s of model %s on the %d most recent runs", id, m.ID, len(runs)), CreatedBy: Engineer})
	if err != nil {
		return fail(err)
	}
	if err := st.SetCalibrationJob(ctx, id, built.Dataset.ID, j.ID, Engineer); err != nil {
		return err
	}
	if err := runner.Run(ctx, j.ID, 0); err != nil {
		return err
	}
	if j, err = st.GetJob(ctx, j.ID); err != nil {
		return err
	}
	if j.Status != core.JobDone || j.ModelID == "" {
		return fail(fmt.Errorf("job %s ended %s: %s", j.ID, j.Status, j.Error))
	}
	return st.CompleteCalibration(ctx, id, j.ModelID, now(), time.Duration(pol.CooldownSec)*time.Second, Engineer)
}

// gate collects the pending new model's shadow evidence on the study runs
// after it and evaluates its twin gate, at the end of run r.
func (rc *recalibrator) gate(ctx context.Context, l *loop, r int) error {
	rec := &rc.out[rc.pending]
	rc.pending = -1
	now := clock(l, (r+1)*rc.o.RunSteps)
	dist, err := rc.disturbances(ctx, rec.NewModelID)
	if err != nil {
		return err
	}
	if _, err := shadow.Collect(ctx, rc.o.Store, rc.o.DataDir, rec.NewModelID, shadow.Options{Now: now, Disturbances: dist}); err != nil {
		return err
	}
	res, err := gate.Evaluate(ctx, rc.o.Store, rc.o.DataDir, rec.NewModelID, gate.Options{SceneID: rc.scene.SceneID, SceneVersion: rc.scene.SceneVersion,
		ObjectiveID: rc.objID, Profile: rec.GateProfile, By: Engineer, Now: now(), Seed: rc.o.Seed})
	if err != nil {
		return err
	}
	rec.GateEvalID, rec.GatePassed, rec.GateProfile = res.GateEvalID, res.Report.Passed, res.Report.Profile
	if res.Report.RejectCodes != nil {
		rec.GateRejects = res.Report.RejectCodes
	}
	rec.GateTrials, rec.GateNoRecommendation, rec.GateSnapshotFailures = len(res.Trials), len(res.NoRecommendation), len(res.Failures)
	switch {
	case len(res.Failures) > 0:
		rec.GateFirstProblem = res.Failures[0].Code + ": " + res.Failures[0].Error
	case len(res.NoRecommendation) > 0:
		rec.GateFirstProblem = res.NoRecommendation[0].Code + ": " + res.NoRecommendation[0].Error
	}
	rec.GateNoRecommendationPoints = res.NoRecommendation
	for _, c := range res.Report.Checks {
		if !c.Passed {
			rec.GateFailures = append(rec.GateFailures, c)
		}
	}
	rec.ShadowRuns, rec.ShadowCoverage, rec.ShadowErrorRatio = res.Input.ShadowRuns, num(res.Input.ShadowCoverage), num(res.Input.ShadowErrorRatio)
	// the replaced model's gate at the same time, on its shadow evidence
	if dist, err = rc.disturbances(ctx, rc.modelID); err != nil {
		return err
	}
	if _, err := shadow.Collect(ctx, rc.o.Store, rc.o.DataDir, rc.modelID, shadow.Options{Now: now, Disturbances: dist}); err != nil {
		return err
	}
	prev, err := gate.Evaluate(ctx, rc.o.Store, rc.o.DataDir, rc.modelID, gate.Options{SceneID: rc.scene.SceneID, SceneVersion: rc.scene.SceneVersion,
		ObjectiveID: rc.objID, Profile: rec.GateProfile, By: Engineer, Now: now(), Seed: rc.o.Seed})
	if err != nil {
		return err
	}
	rec.PreviousGatePassed, rec.PreviousGateRejects = prev.Report.Passed, prev.Report.RejectCodes
	if rec.PreviousGateRejects == nil {
		rec.PreviousGateRejects = []string{}
	}
	rc.o.Logf("   envelope: model %s's twin gate %s (%s) on %d shadow runs: passed %v %v; the model it replaces: passed %v %v", rec.NewModelID, res.GateEvalID,
		rec.GateProfile, rec.ShadowRuns, rec.GatePassed, rec.GateRejects, rec.PreviousGatePassed, rec.PreviousGateRejects)
	for _, g := range []struct {
		who string
		r   *gate.Result
	}{{"new", res}, {"replaced", prev}} {
		rc.o.Logf("   envelope: %s model's gate: %d trials, %d points without a recommendation, %d snapshot failures; checks %s",
			g.who, len(g.r.Trials), len(g.r.NoRecommendation), len(g.r.Failures), checkValues(g.r.Report.Checks))
	}
	return nil
}

// finish notes a new model that had no study run after it.
func (rc *recalibrator) finish(ctx context.Context, l *loop) error {
	if rc.pending < 0 {
		return nil
	}
	if rc.runsNew > 0 {
		return rc.gate(ctx, l, rc.o.Runs-1)
	}
	rc.out[rc.pending].Note = "the study ended before a run after the new model: no shadow evidence, no gate"
	rc.pending = -1
	return nil
}

// disturbances are the study scene's declared unmeasured disturbances by
// model modelID's dataset target (the twin's bindings), as internal/app
// gives them to the shadow evidence.
func (rc *recalibrator) disturbances(ctx context.Context, modelID string) (map[string]contract.UnmeasuredDisturbance, error) {
	if len(rc.scene.UnmeasuredDisturbances) == 0 {
		return nil, nil
	}
	tw, err := engine.Load(ctx, rc.o.Store, rc.o.DataDir, modelID)
	if err != nil {
		return nil, err
	}
	b := tw.Bindings()
	out := map[string]contract.UnmeasuredDisturbance{}
	for _, d := range rc.scene.UnmeasuredDisturbances {
		if n, ok := b[d.Target]; ok {
			out[n] = d
		}
	}
	return out, nil
}

// checkValues lists a gate's checks with their values, thresholds and
// verdicts, for the study's log.
func checkValues(cs []eval.Check) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		v := "ok"
		if !c.Passed {
			v = "FAIL"
		}
		fmt.Fprintf(&b, "%s %.4g %s %.4g %s", c.ID, c.Value, c.Op, c.Threshold, v)
	}
	return b.String()
}

// testRMSEOf is the first target's test RMSE in a model's metrics (NaN
// without).
func testRMSEOf(metrics json.RawMessage) float64 {
	var met struct {
		Test struct {
			Targets []struct {
				RMSE float64 `json:"rmse"`
			} `json:"targets"`
		} `json:"test"`
	}
	if json.Unmarshal(metrics, &met) != nil || len(met.Test.Targets) == 0 {
		return math.NaN()
	}
	return met.Test.Targets[0].RMSE
}

// num is v, nil when not finite (JSON has no NaN).
func num(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return &v
}
