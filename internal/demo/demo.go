package demo

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aml-project/aml/examples"
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Result is what the demo did and measured (aml demo --json).
type Result struct {
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
	// demo's own clock, in the past: see Anchor).
	DemoClock time.Time `json:"demoClock"`
	Seconds   float64   `json:"seconds"`
	Note      string    `json:"note,omitempty"`
}

// Options configure a demo run.
type Options struct {
	// Store is a fresh store (no runs yet); DataDir its data directory.
	Store   store.Store
	DataDir string
	// Key signs the certificates; Trainers are the native trainers.
	Key      *cert.KeyPair
	Trainers *jobs.Trainers
	Log      *slog.Logger
	// Logf prints the demo's progress lines (nil: silent).
	Logf func(format string, args ...any)
	// Seed of the simulated line; Runs before the model (≥ 12).
	Seed uint64
	Runs int
	// Trainer is the twin model's trainer: "" or hybrid_residual@1 (the
	// physics file examples/physics/injection.aml plus a residual, with
	// the built-in scene and objective), or one of ColumnTrainers, whose
	// quantities are the dataset's columns, with TrainerParams (without:
	// DefaultColumnParams), on ColumnScene and ColumnObjective.
	Trainer       string
	TrainerParams json.RawMessage
	// WearContinues lets the mould keep wearing after the model.
	WearContinues bool
	// Live recommends and writes on a live line served over OPC UA, at
	// Speed simulated seconds per wall second; DebugLogs keeps the OPC UA
	// server library's logs.
	Live      bool
	Speed     float64
	DebugLogs bool
	// Now is the wall clock the demo's own clock is anchored before
	// (default time.Now), and the clock the write history records the
	// governed write at (the application's WallNow: the demo's own clock
	// may run ahead of it); Version is reported by the application.
	Now     func() time.Time
	Version string
}

// The demo's people: an engineer builds, trains and recommends, an
// approver freezes the scene, promotes and approves, an operator executes.
var (
	Engineer = auth.Principal{Name: "demo-engineer", Role: auth.RoleEngineer}
	Approver = auth.Principal{Name: "demo-approver", Role: auth.RoleApprover}
	Operator = auth.Principal{Name: "demo-operator", Role: auth.RoleApprover}
)

// Run is a sequence of application calls (internal/app) on the demo's
// own clock, by the demo's people; only simulating the line and running the
// training job in this process are the demo's own.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := o.Store
	seed, nRuns := o.Seed, o.Runs
	t0 := time.Now()
	res := &Result{DataDir: o.DataDir}
	existing, err := s.ListRuns(ctx, core.RunFilter{})
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		return nil, core.FieldErrorf(core.CodeConflict, "data", "the data dir %s already holds %d runs: aml demo needs a fresh one (use --data DIR)", o.DataDir, len(existing))
	}
	if o.Trainer != "" && o.Trainer != "hybrid_residual@1" && !slices.Contains(ColumnTrainers, o.Trainer) {
		return nil, core.FieldErrorf(core.CodeUsage, "trainer", "--trainer %q: the demo trains hybrid_residual@1 or one of %s", o.Trainer, strings.Join(ColumnTrainers, ", "))
	}
	if p, ok := DefaultColumnParams[o.Trainer]; ok && len(o.TrainerParams) == 0 {
		o.TrainerParams = json.RawMessage(p)
	}
	if nRuns < 12 {
		return nil, core.FieldErrorf(core.CodeUsage, "runs", "--runs must be at least 12 (the gate needs 3 train runs and test runs to trial on)")
	}
	eng, appr, oper := Engineer, Approver, Operator

	// 1. The line's history: nRuns runs on the demo's own clock (line,
	// Anchor), which every later step reads.
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = nRuns, seed
	span := time.Duration(nRuns) * (cfg.RunDuration + cfg.GapBetweenRuns)
	cfg.StartMs = Anchor(o.Now(), span).UnixMilli()
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := out.Write(ctx, s, nil); err != nil {
		return nil, err
	}
	// The model is made a minute after the history's last run.
	line := &lineClock{t: time.UnixMilli(*out.Runs[len(out.Runs)-1].Run.EndedMs).UTC().Add(time.Minute)}
	res.Runs, res.Samples = len(out.Runs), out.SampleCount()
	logf("1. simulated %d runs of the injection line (%d samples)", res.Runs, res.Samples)

	key := o.Key
	bus := events.New()
	runner := jobs.NewRunner(s, jobs.Options{DataDir: o.DataDir, Trainers: o.Trainers, Bus: bus, Logger: o.Log, Now: line.now})
	ap := amlapp.New(&service.Deps{Store: s, DataDir: o.DataDir, Runner: runner, Bus: bus, Key: key, Log: o.Log}, amlapp.Options{Now: line.now, WallNow: o.Now, Version: o.Version})

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

	// 3. The twin model: by default the hybrid. The physics model is
	// stored content (physics.put): the job and later recalibrations name
	// it by id.
	trainer, params, hybrid := o.Trainer, o.TrainerParams, o.Trainer == "" || o.Trainer == "hybrid_residual@1"
	if hybrid {
		phys, err := fs.ReadFile(examples.FS, "physics/injection.aml")
		if err != nil {
			return nil, err
		}
		pm, err := ap.PhysicsPut(ctx, eng, amlapp.PhysicsPutRequest{Source: string(phys), FileName: "injection.aml"})
		if err != nil {
			return nil, err
		}
		trainer = "hybrid_residual@1"
		params, _ = json.Marshal(map[string]any{"physics": pm.ID, "mapping": map[string]any{"outputs": map[string]string{"weight": "part_weight"}}})
	}
	job, err := ap.JobSubmit(ctx, eng, amlapp.JobSubmitRequest{DatasetID: built.Dataset.ID, Trainer: trainer, Seed: 1, Params: params})
	if err != nil {
		return nil, err
	}
	logf("3. training %s (job %s) …", trainer, job.ID)
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
	preset, objReq, target := contract.DefaultInjectionScene(), amlapp.ObjectivePutRequest{Preset: amlapp.PresetDefaultInjection}, "weight"
	if !hybrid {
		preset, objReq.Preset, objReq.Objective, target = ColumnScene(), "", ColumnObjective(), "part_weight"
	}
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
	op, err := ap.ObjectivePut(ctx, eng, objReq)
	if err != nil {
		return nil, err
	}
	obj, err := ap.ObjectiveShow(ctx, eng, amlapp.ObjectiveShowRequest{ID: op.ObjectiveID})
	if err != nil {
		return nil, err
	}
	scene := sc.Scene
	logf("4. scene %s@%s frozen, objective %s (%s → %.1f g)", scene.SceneID, scene.SceneVersion, op.ObjectiveID, target, obj.Objective.Targets[target])

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
		if o.WearContinues {
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
		var req *contract.CalibrationRequest
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

	if o.Live {
		if err := runLive(ctx, s, ap, line, o, res, liveInputs{scene: scene, obj: obj.Objective, bus: bus, last: more.Runs[len(more.Runs)-1], nextRun: nextRun}, logf); err != nil {
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
	ok, err := recommend(ctx, ap, res, recommendInput{scene: scene, runID: last.ID, seed: seed, tick: func() { line.t = line.t.Add(time.Second) },
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

// recommend is steps 7–8 as application calls: snapshot of the run,
// optimisation, a certificate for the best trial issued by the engineer,
// approved by the approver, the line's channel set, the governed write by
// the operator, and the certificate's verification. It reports whether a
// move was written (false with res.Note when there was nothing to
// recommend).
func recommend(ctx context.Context, ap *amlapp.App, res *Result, in recommendInput, logf func(string, ...any)) (bool, error) {
	eng, appr, oper := Engineer, Approver, Operator
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
	if _, err := ap.ChannelSet(ctx, appr, amlapp.ChannelSetRequest{Line: in.scene.LineID, Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned,
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

// lineClock is the demo's own clock, the simulated line's: it stamps the
// model, the scene, the shadow evidence, the gate and the recalibration,
// and is moved forward as the demo simulates more of the line.
type lineClock struct {
	t time.Time
	// follow, when set, is the clock instead (the live line's).
	follow func() time.Time
}

func (c *lineClock) now() time.Time {
	if c.follow != nil {
		return c.follow().UTC()
	}
	return c.t
}

func (c *lineClock) set(t time.Time) {
	if t.After(c.t) {
		c.t = t.UTC()
	}
}

// Anchor is the first sample of the demo's history: the time of day of
// sim.DefaultStartMs (06:00 UTC) on the latest day that lets the whole demo
// — the history (span) and up to two rounds of shadow runs — end at least an
// hour before now. The simulated line's only time-of-day input is the
// ambient temperature's daily cycle, so a fixed time of day makes the
// demo's samples, model and figures the same whatever hour it runs; and
// every record it makes, its governed write included, lies in the past.
func Anchor(now time.Time, span time.Duration) time.Time {
	const day = 24 * time.Hour
	tod := time.Duration(sim.DefaultStartMs%day.Milliseconds()) * time.Millisecond
	latest := now.UTC().Add(-span - 3*time.Hour)
	a := latest.Truncate(day).Add(tod)
	if a.After(latest) {
		a = a.Add(-day)
	}
	return a
}

// ColumnTrainers are the trainers Options.Trainer may name besides
// hybrid_residual@1: the twin runs their models on the dataset's columns.
// (one_step@1 with its default parameters fails its model gates on the
// demo's line, and linear_state_space@1 trains for minutes: neither is
// offered.)
var ColumnTrainers = []string{"narx_mlp@1", "neural_state_space@1"}

// DefaultColumnParams are the demo's parameters of each of ColumnTrainers.
var DefaultColumnParams = map[string]string{"narx_mlp@1": DefaultNARXParams, "neural_state_space@1": DefaultNSSParams}

// DefaultNARXParams are the demo's narx_mlp@1 parameters: a small network
// (one hidden layer of 8), a few epochs — seconds of training; the twin
// gate passes with it on the demo's line (TestDemoNARXTwin).
const DefaultNARXParams = `{"na":3,"nb":3,"nk":1,"hidden":[8],"epochs":10,"fineTuneEpochs":3,"seqLen":10}`

// DefaultNSSParams are the demo's neural_state_space@1 parameters: order
// 2, an encoder over 3 rows, one hidden layer of 8, a few epochs from the
// subspace start — seconds of training; the twin gate passes with it on
// the demo's line (TestDemoNSSTwin).
const DefaultNSSParams = `{"order":2,"na":3,"nb":3,"hidden":[8],"epochs":5,"seqLen":10,"batch":8}`

// ColumnScene is the injection line's scene for a twin model whose
// quantities are the dataset's columns by node id (narx_mlp@1,
// neural_state_space@1; the linear
// models too): the built-in scene's controls and write policy, the part
// weight (node part_weight) as the target with its hard range, no physics
// states or guards.
func ColumnScene() *contract.SceneContract {
	f := func(x float64) *float64 { return &x }
	sc := contract.DefaultInjectionScene()
	sc.SceneID, sc.PhysicsProfileID = "injection-columns", ""
	sc.States, sc.Guards, sc.Disturbances = nil, nil, nil
	sc.Observations = []contract.SceneVariable{{ID: "part_weight", Role: contract.RoleTarget, PhysicalMeaning: "part weight", Unit: "g", Min: f(31), Max: f(34)}}
	sc.Constraints = []contract.Constraint{{ID: "weight", Kind: contract.KindHardRange, Variable: "part_weight", Min: f(31), Max: f(34)}}
	sc.ObjectiveProfileIDs = []string{"injection-columns-objective"}
	return sc
}

// ColumnObjective is ColumnScene's objective: the built-in objective with
// its weight target on node part_weight.
func ColumnObjective() *contract.ObjectiveProfile {
	obj := contract.DefaultInjectionObjective()
	obj.ObjectiveID = "injection-columns-objective"
	t, w := obj.Targets["weight"], obj.Weights["weight"]
	obj.Targets, obj.Weights = map[string]float64{"part_weight": t}, map[string]float64{"part_weight": w}
	return obj
}
