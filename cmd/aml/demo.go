package main

// aml demo: the whole twin loop on the embedded store, end to end.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/service"

	"github.com/aml-project/aml/examples"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/spf13/cobra"
)

// demoResult is what aml demo --json prints.
type demoResult struct {
	DataDir       string  `json:"dataDir"`
	Runs          int     `json:"runs"`
	Samples       int     `json:"samples"`
	DatasetID     string  `json:"datasetId"`
	DatasetSHA256 string  `json:"datasetSha256"`
	JobID         string  `json:"jobId"`
	ModelID       string  `json:"modelId"`
	ModelGates    bool    `json:"modelGatesPassed"`
	TestNRMSE     float64 `json:"testRolloutNrmse"`
	TestCoverage  float64 `json:"testCoverage"`
	ShadowRuns    int     `json:"shadowRuns"`
	// Recalibrated: the first model failed the twin gate on its shadow
	// evidence and was replaced by a recalibrated one (PreviousModelID).
	Recalibrated    bool     `json:"recalibrated"`
	PreviousModelID string   `json:"previousModelId,omitempty"`
	GateEvalID      string   `json:"gateEvalId"`
	GatePassed      bool     `json:"gatePassed"`
	GateRejects     []string `json:"gateRejectCodes"`
	Stage           string   `json:"stage"`
	SnapshotID      string   `json:"snapshotId"`
	TuningMode      string   `json:"tuningMode"`
	Candidates      int      `json:"candidatesEvaluated"`
	TrialID         string   `json:"trialId"`
	Improvement     float64  `json:"improvement"`
	BaselineCost    float64  `json:"baselineCost"`
	CandidateCost   float64  `json:"candidateCost"`
	// Moves: the certificate's setpoints at step 0, with the snapshot's.
	SetpointsBefore map[string]float64 `json:"setpointsBefore"`
	SetpointsAfter  map[string]float64 `json:"setpointsAfter"`
	CertificateID   string             `json:"certificateId"`
	CertStatus      string             `json:"certificateStatus"`
	CertVerified    bool               `json:"certificateVerified"`
	// Live (aml demo --live): the line's part-weight error before and
	// after the approved move, measured on samples ingested over OPC UA.
	Live         *liveSummary `json:"live,omitempty"`
	Before       *liveWindow  `json:"before,omitempty"`
	After        *liveWindow  `json:"after,omitempty"`
	Written      int          `json:"written"`
	WriteOutcome string       `json:"writeOutcome"`
	// Writer is where the setpoints went: "recording" (in process) or
	// "opcua" (the live line, --live).
	Writer string `json:"writer"`
	// DemoClock is the simulated line's clock at the recommendation (the
	// demo's own clock, in the past: see demoAnchor).
	DemoClock time.Time `json:"demoClock"`
	Seconds   float64   `json:"seconds"`
	Note      string    `json:"note,omitempty"`
}

func newDemoCmd(a *app) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole loop on a fresh data dir: simulate, build, train, gate, shadow, optimise, certify, approve, write",
		Long: `Runs AML's main job end to end on the embedded store in --data (which must
hold no data yet):

  1. simulate the injection-moulding line (24 runs of 30 min at 1 s);
  2. build the part-weight dataset (examples/specs/injection_weight.json);
  3. train the hybrid twin model (examples/physics/injection.aml + a neural
     residual ensemble; hybrid_residual@1) and evaluate it;
  4. store and freeze the injection scene and its objective;
  5. move the model to shadow and simulate 3 more runs after it was made
     (on a serviced mould: its wear restarts from new; --wear-continues
     lets it grow on, which the model cannot see); collect shadow evidence
     (its predictions vs what the line did);
  6. evaluate the twin gate (twin-v2: accuracy, coverage, fresh trials on
     test-run snapshots, shadow evidence) and promote to production; when
     the gate fails on the shadow evidence, recalibrate once (signals,
     request, rebuild with the new runs, retrain) and repeat 5–6 with the
     new model;
  7. take a snapshot at the end of the newest run, optimise the setpoints;
  8. issue a signed certificate for the best trial, approve it as another
     person, and execute it through the write guard with a recording writer
     (nothing leaves the process), then verify the certificate.

With --live, steps 7–8 run on a live line instead: the simulated line is
served over OPC UA in this process (accelerated, --speed), the OPC UA
connector ingests it into the store, the snapshot is taken from the live
samples, the approved certificate's setpoints are written over OPC UA
through the write guard and read back, and the part weight's distance to
its target is measured on the ingested samples before and after the move
(JSON: before.targetError, after.targetError, written). The history the
model is trained on (steps 1–6) is simulated offline, as without --live.

The demo runs on the simulated line's own clock (reported as demoClock):
its history starts at 06:00 UTC on the latest day that lets everything,
the governed write included, end at least an hour before now, so the
demo's data and figures do not depend on the hour it runs. Every step is stored and audited, so the
usual commands (aml model show, aml twin gate, aml cert verify, aml audit
verify ...) work on the data dir afterwards.`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			logf := func(format string, args ...any) {
				if !a.jsonOut {
					fmt.Fprintf(a.stdout, format+"\n", args...)
				}
			}
			res, err := runDemo(cmd.Context(), a, s, o, logf)
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) { printDemo(w, res) })
		},
	}
	cmd.Flags().Uint64Var(&o.seed, "seed", 7, "seed of the simulated line")
	cmd.Flags().IntVar(&o.runs, "runs", 24, "simulated runs before the model (12 train / 6 val / 6 test at 24)")
	cmd.Flags().BoolVar(&o.live, "live", false, "recommend and write on a live line: the simulated line served over OPC UA (in process), ingested by the OPC UA connector, the approved move written over OPC UA and read back; reports the part weight's distance to its target before and after")
	cmd.Flags().Float64Var(&o.speed, "speed", 20, "with --live: simulated seconds per wall second")
	cmd.Flags().BoolVar(&o.wearContinues, "wear-continues", false, "let the mould keep wearing in the runs after the model (which it cannot see): the shadow coverage falls to the twin gate's G8 limit (0.806 against 0.80 at the demo's clock, so it passes); when the gate fails on its shadow evidence the demo goes through recalibration")
	return cmd
}

// demoOptions are aml demo's flags.
type demoOptions struct {
	seed          uint64
	runs          int
	wearContinues bool
	live          bool
	speed         float64
}

// The demo's people: an engineer builds, trains and recommends, an
// approver freezes the scene, promotes and approves, an operator executes.
var (
	demoEngineer = auth.Principal{Name: "demo-engineer", Role: auth.RoleEngineer}
	demoApprover = auth.Principal{Name: "demo-approver", Role: auth.RoleApprover}
	demoOperator = auth.Principal{Name: "demo-operator", Role: auth.RoleApprover}
)

// runDemo is a sequence of application calls (internal/app) on the demo's
// own clock, by the demo's people; only simulating the line and running the
// training job in this process are the demo's own.
func runDemo(ctx context.Context, a *app, s store.Store, o demoOptions, logf func(string, ...any)) (*demoResult, error) {
	seed, nRuns := o.seed, o.runs
	t0 := time.Now()
	res := &demoResult{DataDir: a.dataDir}
	existing, err := s.ListRuns(ctx, core.RunFilter{})
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		return nil, core.FieldErrorf(core.CodeConflict, "data", "the data dir %s already holds %d runs: aml demo needs a fresh one (use --data DIR)", a.dataDir, len(existing))
	}
	if nRuns < 12 {
		return nil, usagef("--runs must be at least 12 (the gate needs 3 train runs and test runs to trial on)")
	}
	eng, appr, oper := demoEngineer, demoApprover, demoOperator

	// 1. The line's history: nRuns runs on the demo's own clock (lineNow,
	// demoAnchor), which every later step reads.
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = nRuns, seed
	span := time.Duration(nRuns) * (cfg.RunDuration + cfg.GapBetweenRuns)
	cfg.StartMs = demoAnchor(time.Now(), span).UnixMilli()
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := out.Write(ctx, s, nil); err != nil {
		return nil, err
	}
	// The model is made a minute after the history's last run.
	line := &demoClock{t: time.UnixMilli(*out.Runs[len(out.Runs)-1].Run.EndedMs).UTC().Add(time.Minute)}
	res.Runs, res.Samples = len(out.Runs), out.SampleCount()
	logf("1. simulated %d runs of the injection line (%d samples)", res.Runs, res.Samples)

	key, err := a.certKey()
	if err != nil {
		return nil, err
	}
	bus := events.New()
	runner := jobs.NewRunner(s, jobs.Options{DataDir: a.dataDir, Trainers: trainers(), Bus: bus, Logger: a.log, Now: line.now})
	ap := amlapp.New(&service.Deps{Store: s, DataDir: a.dataDir, Runner: runner, Bus: bus, Key: key, Log: a.log}, amlapp.Options{Now: line.now, Version: version})

	// 2. Dataset.
	raw, err := fs.ReadFile(examples.FS, "specs/injection_weight.json")
	if err != nil {
		return nil, err
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		return nil, err
	}
	built, err := ap.DatasetBuild(ctx, eng, amlapp.DatasetBuildRequest{Spec: *spec})
	if err != nil {
		return nil, err
	}
	res.DatasetID, res.DatasetSHA256 = built.Dataset.ID, built.Dataset.SHA256
	logf("2. built dataset %s (sha256 %.12s…)", res.DatasetID, res.DatasetSHA256)

	// 3. Hybrid model. The physics file goes into the data dir so the job
	// and later recalibrations find it.
	phys, err := fs.ReadFile(examples.FS, "physics/injection.aml")
	if err != nil {
		return nil, err
	}
	physPath := filepath.Join(a.dataDir, "physics", "injection.aml")
	if err := os.MkdirAll(filepath.Dir(physPath), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(physPath, phys, 0o644); err != nil {
		return nil, err
	}
	if physPath, err = filepath.Abs(physPath); err != nil {
		return nil, err
	}
	params, _ := json.Marshal(map[string]any{"physics": physPath, "mapping": map[string]any{"outputs": map[string]string{"weight": "part_weight"}}})
	job, err := ap.JobSubmit(ctx, eng, amlapp.JobSubmitRequest{DatasetID: built.Dataset.ID, Trainer: "hybrid_residual@1", Seed: 1, Params: params})
	if err != nil {
		return nil, err
	}
	logf("3. training hybrid_residual@1 (job %s) …", job.ID)
	if err := runner.Run(ctx, job.ID, 0); err != nil {
		return nil, err
	}
	if job, err = ap.JobShow(ctx, eng, amlapp.JobRequest{ID: job.ID}); err != nil {
		return nil, err
	}
	if job.Status != core.JobDone {
		return nil, core.Errorf(core.CodeInternal, "training job %s ended %s: %s", job.ID, job.Status, job.Error)
	}
	res.JobID, res.ModelID, res.ModelGates = job.ID, job.ModelID, job.GatePassed
	var met struct {
		Test struct {
			MeanNRMSE float64 `json:"meanNrmse"`
		} `json:"test"`
		Coverage struct {
			Measured float64 `json:"measured"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal(job.Metrics, &met); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "training job %s: metrics", job.ID)
	}
	res.TestNRMSE, res.TestCoverage = met.Test.MeanNRMSE, met.Coverage.Measured
	logf("   model %s: test rollout NRMSE %.4f, 90%% interval coverage on test %.3f, model gates passed %v", res.ModelID, res.TestNRMSE, res.TestCoverage, res.ModelGates)
	model, err := ap.ModelShow(ctx, eng, amlapp.ModelRequest{ID: res.ModelID})
	if err != nil {
		return nil, err
	}

	// 4. Scene and objective.
	// The built-in scene, written at the demo's clock (its trials and
	// gate run on that clock, which must not be before the scene).
	preset := contract.DefaultInjectionScene()
	preset.CreatedAt = line.now().Truncate(time.Millisecond)
	put, err := ap.ScenePut(ctx, eng, amlapp.ScenePutRequest{Scene: preset})
	if err != nil {
		return nil, err
	}
	if _, err := ap.SceneFreeze(ctx, appr, amlapp.SceneFreezeRequest{ID: put.SceneID, Version: put.SceneVersion, ExpectHash: put.Hash}); err != nil {
		return nil, err
	}
	sc, err := ap.SceneShow(ctx, eng, amlapp.SceneShowRequest{ID: put.SceneID, Version: put.SceneVersion})
	if err != nil {
		return nil, err
	}
	op, err := ap.ObjectivePut(ctx, eng, amlapp.ObjectivePutRequest{Preset: amlapp.PresetDefaultInjection})
	if err != nil {
		return nil, err
	}
	obj, err := ap.ObjectiveShow(ctx, eng, amlapp.ObjectiveShowRequest{ID: op.ObjectiveID})
	if err != nil {
		return nil, err
	}
	scene := sc.Scene
	logf("4. scene %s@%s frozen, objective %s (weight → %.1f g)", scene.SceneID, scene.SceneVersion, op.ObjectiveID, obj.Objective.Targets["weight"])

	// 5–6. Shadow runs, twin gate, promotion. When the gate fails on the
	// shadow evidence (the line drifted: mould wear grows run by run), the
	// recalibration scheduler retrains on the new runs and the new model
	// goes through shadow runs and the gate in its turn (once: the policy's
	// cooldown then holds the key).
	var more *sim.Output
	nextRun := nRuns
	for round := 0; ; round++ {
		if _, err := ap.ModelPromote(ctx, eng, amlapp.ModelPromoteRequest{ID: res.ModelID, To: core.StageShadow, Reason: "demo: shadow runs"}); err != nil {
			return nil, err
		}
		later := sim.DefaultInjectionConfig()
		later.Runs, later.Seed, later.FirstRun = 3, seed, nextRun
		if o.wearContinues {
			later.AgeRuns = nextRun
		}
		later.RunDuration, later.GapBetweenRuns = 10*time.Minute, time.Minute
		later.StartMs = model.Model.CreatedAt.Add(time.Minute).Truncate(time.Second).UnixMilli()
		if more != nil { // after the previous shadow runs
			later.StartMs = max(later.StartMs, *more.Runs[len(more.Runs)-1].Run.EndedMs+time.Minute.Milliseconds())
		}
		if more, err = sim.GenerateInjection(later); err != nil {
			return nil, err
		}
		if _, err := more.Write(ctx, s, nil); err != nil {
			return nil, err
		}
		nextRun += later.Runs
		// Evidence, gate and any recalibration a minute after the shadow
		// runs ended.
		line.set(time.UnixMilli(*more.Runs[len(more.Runs)-1].Run.EndedMs).Add(time.Minute))
		ev, err := ap.ShadowCollect(ctx, eng, amlapp.ShadowCollectRequest{Model: res.ModelID})
		if err != nil {
			return nil, err
		}
		res.ShadowRuns = ev.Summary.Scored
		rmse := math.NaN()
		if len(ev.Summary.WindowRMSE) > 0 {
			rmse = float64(ev.Summary.WindowRMSE[0])
		}
		logf("5. shadow: %d runs after model %s: %.1f%% of part weights inside the 90%% band, window RMSE %.3f g", res.ShadowRuns, res.ModelID, 100*float64(ev.Summary.Coverage), rmse)

		g, err := ap.GateEvaluate(ctx, eng, amlapp.GateEvaluateRequest{Model: res.ModelID, Scene: scene.SceneID, SceneVersion: scene.SceneVersion, Seed: seed})
		if err != nil {
			return nil, err
		}
		res.GateEvalID, res.GatePassed, res.GateRejects, res.TuningMode = g.GateEvalID, g.Report.Passed, g.Report.RejectCodes, g.TuningMode
		res.Stage = core.StageShadow
		if g.Report.Passed {
			if _, err := ap.ModelPromote(ctx, appr, amlapp.ModelPromoteRequest{ID: res.ModelID, To: core.StageProduction, Expect: core.StageShadow,
				Reason: "demo: twin gate passed with shadow evidence"}); err != nil {
				return nil, err
			}
			res.Stage = core.StageProduction
		}
		logf("6. twin gate %s: passed %v %v (%d trials); model stage %s", g.GateEvalID, g.Report.Passed, g.Report.RejectCodes, len(g.Trials), res.Stage)
		if g.Report.Passed || round > 0 {
			break
		}
		// Recalibrate: signals from the store, a request, one worker step
		// that rebuilds the dataset with the new runs and retrains in
		// process. The new model is a candidate.
		cal, err := ap.Calibrate(ctx, eng, amlapp.CalibrateRequest{Model: res.ModelID, Scene: scene.SceneID, Run: true, InProcess: true})
		if err != nil {
			return nil, err
		}
		dec := cal.Decision
		if !dec.Accepted {
			logf("   recalibration not started: %s", dec.Reason)
			break
		}
		reqs, err := ap.CalibrationList(ctx, eng, amlapp.CalibrationListRequest{Line: scene.LineID})
		if err != nil {
			return nil, err
		}
		var req *twinstore.CalibrationRequest
		for i := range reqs.Items {
			if reqs.Items[i].RequestID == dec.RequestID {
				req = &reqs.Items[i]
			}
		}
		if req == nil || req.NewModelID == "" {
			return nil, core.Errorf(core.CodeInternal, "recalibration %s ended without a model (step %+v; request %+v)", dec.RequestID, cal.Step, req)
		}
		logf("   recalibration %s (triggers %v): dataset %s, job %s → candidate model %s", req.RequestID, dec.Triggers, req.DatasetID, req.JobID, req.NewModelID)
		res.Recalibrated, res.PreviousModelID, res.ModelID, res.DatasetID = true, res.ModelID, req.NewModelID, req.DatasetID
		if model, err = ap.ModelShow(ctx, eng, amlapp.ModelRequest{ID: res.ModelID}); err != nil {
			return nil, err
		}
	}

	if o.live {
		if err := runDemoLive(ctx, a, s, ap, line, o, res, liveInputs{scene: scene, obj: obj.Objective, bus: bus, last: more.Runs[len(more.Runs)-1], nextRun: nextRun}, logf); err != nil {
			return nil, err
		}
		res.Seconds = time.Since(t0).Seconds()
		return res, nil
	}

	// 7–8. Snapshot at the end of the newest run, optimisation,
	// certificate, approval by another person, governed write (a
	// recording writer: nothing leaves the process).
	last := more.Runs[len(more.Runs)-1].Run
	clock := time.UnixMilli(*last.EndedMs + 1000).UTC()
	res.DemoClock = clock
	line.t = clock
	ok, err := demoRecommend(ctx, ap, res, recommendInput{scene: scene, runID: last.ID, seed: seed, tick: func() { line.t = line.t.Add(time.Second) },
		writer: func(snap *contract.TwinSnapshot) (guard.Writer, func(), error) {
			return guard.NewRecordingWriter(snap.ControlValues), func() {}, nil
		}}, logf)
	if err != nil {
		return nil, err
	}
	if ok {
		res.Writer = "recording"
		logf("8. certificate %s issued by %s, approved by %s, executed by %s: %d setpoints written (%s); verified %v",
			res.CertificateID, eng.Name, appr.Name, oper.Name, res.Written, res.WriteOutcome, res.CertVerified)
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// recommendInput is what the recommendation steps need.
type recommendInput struct {
	scene *contract.SceneContract
	runID string
	seed  uint64
	// tick moves the demo's clock on between issue, approval and write.
	tick func()
	// written, if set, is called right after the governed write.
	written func()
	// writer opens the machine writer for the snapshot's setpoints (and
	// its closer).
	writer func(snap *contract.TwinSnapshot) (guard.Writer, func(), error)
}

// demoRecommend is steps 7–8 as application calls: snapshot of the run,
// optimisation, a certificate for the best trial issued by the engineer,
// approved by the approver, the line's channel set, the governed write by
// the operator, and the certificate's verification. It reports whether a
// move was written (false with res.Note when there was nothing to
// recommend).
func demoRecommend(ctx context.Context, ap *amlapp.App, res *demoResult, in recommendInput, logf func(string, ...any)) (bool, error) {
	eng, appr, oper := demoEngineer, demoApprover, demoOperator
	at := amlapp.Instant(ap.Now().UnixMilli())
	snap, err := ap.SnapshotTake(ctx, eng, amlapp.SnapshotTakeRequest{Scene: in.scene.SceneID, SceneVersion: in.scene.SceneVersion, Run: in.runID,
		At: &at, Model: res.ModelID, Phase: "holding"})
	if err != nil {
		return false, err
	}
	res.SnapshotID = snap.Snapshot.SnapshotID
	opt, err := ap.Optimize(ctx, eng, amlapp.OptimizeRequest{Model: res.ModelID, Snapshot: snap.Snapshot.SnapshotID, Mode: res.TuningMode, Seed: in.seed})
	if err != nil {
		return false, err
	}
	res.Candidates = opt.Result.Evaluated
	best := opt.Result.Best
	if best == nil {
		res.Note = "no candidate passed constraints, UQ and OOD: " + opt.Result.NoPass
		return false, nil
	}
	bc := best.BaselineComparison
	res.TrialID, res.Improvement, res.BaselineCost, res.CandidateCost = best.TrialID, bc.Improvement, bc.BaselineCost, bc.CandidateCost
	res.SetpointsBefore, res.SetpointsAfter = snap.Snapshot.ControlValues, best.CandidateControlTrajectory[0]
	logf("7. snapshot %s; %s over %d candidates: trial %s improves the cost %.4g → %.4g", res.SnapshotID, res.TuningMode, res.Candidates, best.TrialID, bc.BaselineCost, bc.CandidateCost)
	if !(bc.Improvement > 0) {
		res.Note = "the best passing candidate is holding the setpoints: nothing to recommend"
		return false, nil
	}
	rec, err := ap.CertIssue(ctx, eng, amlapp.CertIssueRequest{Trial: best.TrialID})
	if err != nil {
		return false, err
	}
	id := rec.Cert.RecommendationID
	res.CertificateID = id
	in.tick()
	if _, err := ap.CertApprove(ctx, appr, amlapp.CertRequest{ID: id}); err != nil {
		return false, err
	}
	if _, err := ap.ChannelSet(ctx, appr, amlapp.ChannelSetRequest{Line: in.scene.LineID, Profile: guard.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned,
		SceneID: in.scene.SceneID, SceneVersion: in.scene.SceneVersion}); err != nil {
		return false, err
	}
	w, closeW, err := in.writer(snap.Snapshot)
	if err != nil {
		return false, err
	}
	defer closeW()
	in.tick()
	x, err := ap.CertExecute(ctx, oper, amlapp.CertExecuteRequest{ID: id, Run: in.runID, Writer: w})
	if err != nil {
		return false, err
	}
	if in.written != nil {
		in.written()
	}
	res.Written, res.WriteOutcome = x.Written(), x.Status
	_, verr := ap.CertVerify(ctx, appr, amlapp.CertRequest{ID: id})
	res.CertVerified = verr == nil
	if c, err := ap.CertShow(ctx, appr, amlapp.CertRequest{ID: id}); err == nil {
		res.CertStatus = string(c.Cert.Status)
	}
	return true, nil
}

// demoClock is the demo's own clock, the simulated line's: it stamps the
// model, the scene, the shadow evidence, the gate and the recalibration,
// and is moved forward as the demo simulates more of the line.
type demoClock struct {
	t time.Time
	// follow, when set, is the clock instead (the live line's).
	follow func() time.Time
}

func (c *demoClock) now() time.Time {
	if c.follow != nil {
		return c.follow().UTC()
	}
	return c.t
}

func (c *demoClock) set(t time.Time) {
	if t.After(c.t) {
		c.t = t.UTC()
	}
}

// demoAnchor is the first sample of the demo's history: the time of day of
// sim.DefaultStartMs (06:00 UTC) on the latest day that lets the whole demo
// — the history (span) and up to two rounds of shadow runs — end at least an
// hour before now. The simulated line's only time-of-day input is the
// ambient temperature's daily cycle, so a fixed time of day makes the
// demo's samples, model and figures the same whatever hour it runs; and
// every record it makes, its governed write included, lies in the past.
func demoAnchor(now time.Time, span time.Duration) time.Time {
	const day = 24 * time.Hour
	tod := time.Duration(sim.DefaultStartMs%day.Milliseconds()) * time.Millisecond
	latest := now.UTC().Add(-span - 3*time.Hour)
	a := latest.Truncate(day).Add(tod)
	if a.After(latest) {
		a = a.Add(-day)
	}
	return a
}

func printDemo(w io.Writer, r *demoResult) {
	fmt.Fprintf(w, "\nsummary (%.1f s)\n", r.Seconds)
	fmt.Fprintf(w, "  dataset      %s\n  model        %s (stage %s)\n  twin gate    %s passed=%v %v\n", r.DatasetID, r.ModelID, r.Stage, r.GateEvalID, r.GatePassed, r.GateRejects)
	if r.TrialID != "" {
		fmt.Fprintf(w, "  trial        %s improvement %.4g (cost %.4g → %.4g)\n", r.TrialID, r.Improvement, r.BaselineCost, r.CandidateCost)
		fmt.Fprintf(w, "  setpoints    %s\n            →  %s\n", fmtControls(r.SetpointsBefore), fmtControls(r.SetpointsAfter))
	}
	if r.CertificateID != "" {
		fmt.Fprintf(w, "  certificate  %s %s (verify: aml cert verify %s)\n  written      %d (%s, %s writer)\n", r.CertificateID, r.CertStatus, r.CertificateID, r.Written, r.WriteOutcome, r.Writer)
	}
	if r.Before != nil && r.After != nil {
		fmt.Fprintf(w, "  live line    part weight %.3f g → %.3f g; distance to the %.1f g target %.3f g → %.3f g (OPC UA, %s)\n",
			r.Before.MeanWeight, r.After.MeanWeight, r.Live.Target, r.Before.TargetError, r.After.TargetError, r.Live.Endpoint)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "  note         %s\n", r.Note)
	}
}
