package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/envlease"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/safefile"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
)

// Store is what the runner needs from storage.
type Store interface {
	core.Datasets
	core.Jobs
}

// Options configure a Runner.
type Options struct {
	DataDir string
	// Trainers are the native trainers offered and the model formats they
	// write (a trained artifact is evaluated with them); none when nil.
	Trainers *Trainers
	Bus      *events.Bus
	Envs     *envlease.Manager
	Logger   *slog.Logger
	// HeartbeatEvery is how often a running job's heartbeat is written and
	// its cancel flag polled (default 500ms). A job whose heartbeat is older
	// than 10× this is considered lost by Recover.
	HeartbeatEvery time.Duration
	// Limits checked when a job is submitted.
	Limits core.JobLimits
	// Artifacts, when set, is where datasets are fetched from and model
	// artifacts are put, for workers that share no filesystem with the
	// machine that built the dataset (a PostgreSQL artifact store). Nil:
	// the store's own (artifact.For: PostgreSQL's), or for SQLite none —
	// the files in DataDir are the truth.
	Artifacts artifact.Store
	// Now is the clock that stamps a registered model's creation time —
	// the instant shadow evidence and recalibration compare run ends
	// against. Nil: time.Now. Tests inject a fixed clock so that simulated
	// runs at fixed times fall before or after the model as they intend.
	Now func() time.Time
}

// Runner executes jobs. One per worker process.
type Runner struct {
	st     Store
	opt    Options
	worker string
	queue  *Queue
	log    *slog.Logger

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
}

// Defaults for new jobs.
const (
	DefaultTimeout = 30 * time.Minute
	DefaultStall   = 10 * time.Minute
	// MaxTimeout is the longest wall-clock limit (and stall limit) a
	// job may ask for: job.submit refuses more before queueing, so no
	// request holds a worker without end.
	MaxTimeout        = 24 * time.Hour
	DefaultMaxRetries = 2
	DefaultMaxQueued  = 100
	DefaultPerDataset = 50
)

// NewRunner creates a runner with a unique worker identity
// (host/pid/nonce).
func NewRunner(st Store, opt Options) *Runner {
	if opt.HeartbeatEvery <= 0 {
		opt.HeartbeatEvery = 500 * time.Millisecond
	}
	if opt.Trainers == nil {
		opt.Trainers = NewTrainers()
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	// Job directories are handed to child processes (cwd, AML_JOB_DIR):
	// they must not depend on this process's working directory.
	if opt.DataDir != "" {
		if abs, err := filepath.Abs(opt.DataDir); err == nil {
			opt.DataDir = abs
		}
	}
	host, _ := os.Hostname()
	var b [3]byte
	rand.Read(b[:])
	return &Runner{st: st, opt: opt, worker: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:])), log: opt.Logger, running: map[string]context.CancelCauseFunc{}}
}

// sharedArtifacts is Options.Artifacts, or else the store's own shared
// artifact store (artifact.For: PostgreSQL), so that every runner on a
// back-end with shared artifacts — a worker, aml serve, the demo, the
// recalibration scheduler — fetches datasets and shares models alike.
func (r *Runner) sharedArtifacts(ctx context.Context) (artifact.Store, error) {
	if r.opt.Artifacts != nil {
		return r.opt.Artifacts, nil
	}
	return artifact.For(ctx, r.st, r.opt.DataDir)
}

// Worker is this runner's identity.
func (r *Runner) Worker() string { return r.worker }

// SubmitRequest is a new job.
type SubmitRequest struct {
	DatasetID  string
	TrainerRef string
	Params     json.RawMessage
	Seed       int64
	ParentID   string
	ChangeNote string
	EnvName    string
	Timeout    time.Duration
	Stall      time.Duration
	CreatedBy  string
	// GateProfile names the model gate profile the job's model is judged
	// by (eval.ProfileForJob); empty: the dataset purpose's default.
	GateProfile string
}

func newJobID() string {
	var b [4]byte
	rand.Read(b[:])
	return "job-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// IsNative reports whether ref names one of the runner's native trainers.
func (r *Runner) IsNative(ref string) bool {
	_, ok := r.opt.Trainers.Get(ref)
	return ok
}

// Trainer returns the native trainer ref names.
func (r *Runner) Trainer(ref string) (Trainer, bool) { return r.opt.Trainers.Get(ref) }

// TrainerRefs lists the native trainers' references.
func (r *Runner) TrainerRefs() []string { return r.opt.Trainers.Refs() }

// extTrainer returns the registration of ext:NAME.
func (r *Runner) extTrainer(ctx context.Context, name string) (core.ExtTrainer, error) {
	s, ok := r.st.(core.ExtTrainers)
	if !ok {
		return core.ExtTrainer{}, core.Errorf(core.CodeStoreUnavailable, "this store keeps no trainer registrations")
	}
	t, err := s.GetTrainer(ctx, name)
	if core.CodeOf(err) == core.CodeNotFound {
		return t, core.FieldErrorf(core.CodeInvalidArgument, "trainer", "no external trainer is registered as %q (aml trainer list; an admin registers one with aml trainer register)", name)
	}
	return t, err
}

// physics reads a stored physics model (TrainContext.Physics).
func (r *Runner) physics(ctx context.Context, id string) (core.PhysicsModel, error) {
	s, ok := r.st.(core.PhysicsModels)
	if !ok {
		return core.PhysicsModel{}, core.Errorf(core.CodeStoreUnavailable, "this store keeps no physics models")
	}
	return s.GetPhysics(ctx, id)
}

// Submit validates and inserts a queued job, then dispatches it.
func (r *Runner) Submit(ctx context.Context, req SubmitRequest) (core.Job, error) {
	if err := r.opt.Trainers.ValidateRef(req.TrainerRef); err != nil {
		return core.Job{}, err
	}
	var ext core.ExtTrainer
	if name, ok := IsExt(req.TrainerRef); ok {
		var err error
		if ext, err = r.extTrainer(ctx, name); err != nil {
			return core.Job{}, err
		}
	}
	if len(req.Params) == 0 {
		req.Params = json.RawMessage("{}")
	}
	var pm map[string]any
	if err := json.Unmarshal(req.Params, &pm); err != nil {
		return core.Job{}, core.FieldErrorf(core.CodeInvalidArgument, "params", "params must be a JSON object: %v", err)
	}
	canon, err := core.CanonicalJSON(req.Params)
	if err != nil {
		return core.Job{}, err
	}
	d, err := r.st.GetDataset(ctx, req.DatasetID)
	if err != nil {
		return core.Job{}, err
	}
	if req.GateProfile != "" {
		if _, err := eval.ProfileForJob(d.Purpose, req.GateProfile); err != nil {
			return core.Job{}, err
		}
	}
	if req.ParentID != "" {
		if _, err := r.st.GetJob(ctx, req.ParentID); err != nil {
			return core.Job{}, err
		}
	}
	if req.EnvName == "" {
		if p, ok := IsExec(req.TrainerRef); ok && strings.HasSuffix(p, ".py") && r.opt.Envs != nil {
			req.EnvName = "python"
		}
		if strings.HasSuffix(ext.Command, ".py") && r.opt.Envs != nil {
			req.EnvName = "python"
		}
	}
	if req.EnvName != "" && r.opt.Envs != nil {
		// Refuse at once during a rebuild rather than queue a job that
		// cannot start.
		l, err := r.opt.Envs.Acquire(ctx, req.EnvName, "submit-check")
		if err != nil {
			return core.Job{}, err
		}
		l.Release()
	}
	timeout, stall := req.Timeout, req.Stall
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if stall <= 0 {
		stall = DefaultStall
	}
	lim := r.opt.Limits
	if lim.MaxQueued == 0 {
		lim.MaxQueued = DefaultMaxQueued
	}
	if lim.MaxPerDataset == 0 {
		lim.MaxPerDataset = DefaultPerDataset
	}
	j := core.Job{ID: newJobID(), DatasetID: d.ID, DatasetSHA256: d.SHA256, TrainerRef: req.TrainerRef, Params: canon, Seed: req.Seed,
		ParentID: req.ParentID, ChangeNote: req.ChangeNote, EnvName: req.EnvName, GateProfile: req.GateProfile, MaxRetries: DefaultMaxRetries,
		TimeoutSec: int(timeout.Round(time.Second) / time.Second), StallSec: int(stall.Round(time.Second) / time.Second), CreatedBy: req.CreatedBy}
	if j.TimeoutSec < 1 {
		j.TimeoutSec = 1
	}
	if j.StallSec < 1 {
		j.StallSec = 1
	}
	if err := r.st.CreateJob(ctx, j, lim); err != nil {
		return core.Job{}, err
	}
	j.Status, j.CreatedAt = core.JobQueued, time.Now().UTC()
	r.publish(events.JobState, d.LineID, j.ID, map[string]any{"status": core.JobQueued})
	if r.queue != nil {
		if err := r.queue.Enqueue(ctx, j.ID, 0); err != nil {
			return core.Job{}, err
		}
	}
	return j, nil
}

// Retry creates a new experiment from a finished (not done) job: same
// dataset, trainer, params and seed, parent = the old job.
func (r *Runner) Retry(ctx context.Context, id, by string) (core.Job, error) {
	old, err := r.st.GetJob(ctx, id)
	if err != nil {
		return core.Job{}, err
	}
	if !old.Status.Terminal() {
		return core.Job{}, core.FieldErrorf(core.CodeJobConflict, "status", "job %s is %s; only a finished job can be retried", id, old.Status)
	}
	return r.Submit(ctx, SubmitRequest{DatasetID: old.DatasetID, TrainerRef: old.TrainerRef, Params: old.Params, Seed: old.Seed, ParentID: old.ID,
		ChangeNote: "retry of " + old.ID, EnvName: old.EnvName, Timeout: time.Duration(old.TimeoutSec) * time.Second,
		Stall: time.Duration(old.StallSec) * time.Second, CreatedBy: by, GateProfile: old.GateProfile})
}

// Cancel cancels a queued job at once, or asks the worker of a running job
// to stop it (the runner polls the flag; in-process jobs stop immediately).
func (r *Runner) Cancel(ctx context.Context, id string) (core.Job, error) {
	j, err := r.st.RequestCancel(ctx, id)
	if err != nil {
		return j, err
	}
	r.mu.Lock()
	if c, ok := r.running[id]; ok {
		c(errCancelled)
	}
	r.mu.Unlock()
	if j.Status == core.JobCancelled {
		r.publish(events.JobState, "", id, map[string]any{"status": j.Status})
	}
	return j, nil
}

var (
	errCancelled = errors.New("cancelled")
	errTimeout   = errors.New("wall timeout")
	errStalled   = errors.New("stalled")
	// errFenced: the job was taken from this attempt (its worker was
	// judged lost and the job requeued or claimed by another): the attempt
	// stops and leaves the job alone — it is not its job any more.
	errFenced = errors.New("job taken over by another attempt")
)

func (r *Runner) publish(kind, line, id string, data map[string]any) {
	r.opt.Bus.Publish(events.Event{Kind: kind, Line: line, ID: id, Data: data})
}

// JobDir is where a job's files live.
func (r *Runner) JobDir(id string) string { return filepath.Join(r.opt.DataDir, "jobs", id) }

// attempt carries one try's mutable state.
type attempt struct {
	r        *Runner
	ctx      context.Context
	cancel   context.CancelCauseFunc
	job      core.Job
	ds       core.Dataset
	status   core.JobStatus
	dsErr    error
	progress chan struct{} // a signal per progress report (stall watchdog)
	lastProg time.Time
	mu       sync.Mutex
}

func (a *attempt) setStatus(to core.JobStatus, stage string) error {
	if err := a.r.st.TransitionJob(context.WithoutCancel(a.ctx), a.job.ID, a.r.worker, a.status, to, stage); err != nil {
		return err
	}
	a.status = to
	a.r.publish(events.JobState, a.ds.LineID, a.job.ID, map[string]any{"status": to, "stage": stage})
	return nil
}

// report records progress (throttled to ~10 writes/s) and feeds the stall
// watchdog.
func (a *attempt) report(frac float64, stage string) {
	select {
	case a.progress <- struct{}{}:
	default:
	}
	a.mu.Lock()
	if time.Since(a.lastProg) < 100*time.Millisecond && stage == "" && frac < 1 {
		a.mu.Unlock()
		return
	}
	a.lastProg = time.Now()
	a.mu.Unlock()
	if err := a.r.st.ReportProgress(context.WithoutCancel(a.ctx), a.job.ID, a.r.worker, frac, stage); err == nil {
		a.r.publish(events.JobProgress, a.ds.LineID, a.job.ID, map[string]any{"progress": frac, "stage": stage})
	}
}

// end moves the job to a terminal failure status from wherever it is.
func (a *attempt) end(to core.JobStatus, code, msg string) error {
	err := a.r.st.EndJob(context.WithoutCancel(a.ctx), a.job.ID, a.status, to, code, msg)
	if err == nil {
		a.status = to
		a.r.publish(events.JobState, a.ds.LineID, a.job.ID, map[string]any{"status": to, "errorCode": code, "error": msg})
	}
	return err
}

// requeue gives an infrastructure failure another try, or fails the job
// when it has none left.
func (a *attempt) requeue(code, msg string) error {
	ctx := context.WithoutCancel(a.ctx)
	if err := a.r.st.RequeueJob(ctx, a.job.ID, a.status, code, msg); err != nil {
		return a.end(core.JobFailed, code, msg+" (no retries left)")
	}
	a.status = core.JobQueued
	a.r.publish(events.JobState, a.ds.LineID, a.job.ID, map[string]any{"status": core.JobQueued, "retry": a.job.RetryCount + 1, "reason": msg})
	if a.r.queue != nil {
		return a.r.queue.Enqueue(ctx, a.job.ID, a.job.RetryCount+1)
	}
	return nil
}

// Run executes try `try` of job id. It returns an error only when the
// store failed; job failures are recorded on the job.
func (r *Runner) Run(ctx context.Context, id string, try int) error {
	j, err := r.st.GetJob(ctx, id)
	if err != nil {
		return err
	}
	if j.Status != core.JobQueued || j.RetryCount != try {
		return nil // stale or duplicate dispatch
	}
	j, err = r.st.ClaimJob(ctx, id, r.worker)
	if core.CodeOf(err) == core.CodeJobConflict {
		return nil // someone else claimed it
	} else if err != nil {
		return err
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a := &attempt{r: r, ctx: actx, cancel: cancel, job: j, status: core.JobProvisioning, progress: make(chan struct{}, 1)}
	r.mu.Lock()
	r.running[id] = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
	}()
	a.ds, a.dsErr = r.st.GetDataset(ctx, j.DatasetID)
	r.publish(events.JobState, a.ds.LineID, id, map[string]any{"status": core.JobProvisioning, "attempt": j.Attempt})
	// Heartbeat and cross-process cancel polling.
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(r.opt.HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
				bg := context.WithoutCancel(actx)
				if err := r.st.Heartbeat(bg, id, r.worker); err != nil {
					r.log.Warn("job heartbeat failed", "job", id, "attempt", j.Attempt, "err", err)
				}
				cur, err := r.st.GetJob(bg, id)
				if err != nil {
					continue
				}
				if cur.Attempt != j.Attempt || cur.Worker != r.worker {
					// Fenced: another worker judged this one lost (a
					// heartbeat stall longer than the lost-worker limit)
					// and the job moved on without it.
					r.log.Warn("job taken over; stopping this attempt", "job", id, "attempt", j.Attempt, "now", cur.Attempt, "worker", cur.Worker)
					cancel(errFenced)
					return
				}
				if cur.CancelRequest {
					cancel(errCancelled)
					return
				}
			}
		}
	}()
	err = a.execute()
	cancel(nil)
	<-hbDone
	return err
}

// outcome turns the attempt context's cause into a terminal status.
func (a *attempt) stopped(parent context.Context) (bool, error) {
	cause := context.Cause(a.ctx)
	switch {
	case cause == nil:
		return false, nil
	case errors.Is(cause, errCancelled):
		return true, a.end(core.JobCancelled, "", "cancelled")
	case errors.Is(cause, errTimeout):
		return true, a.end(core.JobTimeout, core.CodeJobTimeout, fmt.Sprintf("training ran longer than %ds", a.job.TimeoutSec))
	case errors.Is(cause, errStalled):
		return true, a.end(core.JobTimeout, core.CodeJobStalled, fmt.Sprintf("no progress for %ds", a.job.StallSec))
	case errors.Is(cause, errFenced):
		return true, nil
	default:
		// The worker is stopping (parent context): hand the job back.
		return true, a.requeue(core.CodeWorkerLost, "worker stopped during the job: "+cause.Error())
	}
}

func (a *attempt) execute() error {
	r, j := a.r, a.job
	ctx := a.ctx
	// --- provisioning: verify the dataset, lease the environment, prepare
	// the job directory. Watchdogs are not running yet.
	d, err := a.ds, a.dsErr
	if err != nil {
		return a.end(core.JobFailed, core.CodeOf(err), err.Error())
	}
	if d.SHA256 != j.DatasetSHA256 {
		return a.end(core.JobFailed, core.CodeDatasetTampered, fmt.Sprintf("dataset %s hash %.12s differs from %.12s recorded at submit", d.ID, d.SHA256, j.DatasetSHA256))
	}
	shared, err := r.sharedArtifacts(ctx)
	if err != nil {
		return a.requeue(core.CodeWorkerLost, "open the shared artifact store: "+err.Error())
	}
	if shared != nil {
		// Materialise the dataset from the shared store (chunks, files and
		// tree verified); Verify below then checks the dataset hash.
		if _, err := shared.Fetch(ctx, d.Path, ""); err != nil {
			if core.CodeOf(err) == core.CodeStoreUnavailable {
				return a.requeue(core.CodeWorkerLost, "fetch dataset: "+err.Error())
			}
			if artifact.IsTampered(err) {
				return a.end(core.JobFailed, core.CodeDatasetTampered, err.Error())
			}
			return a.end(core.JobFailed, core.CodeOf(err), "fetch dataset: "+err.Error())
		}
	}
	if _, err := dataset.Verify(r.opt.DataDir, d); err != nil {
		return a.end(core.JobFailed, core.CodeDatasetTampered, err.Error())
	}
	if stop, err := a.stopped(ctx); stop {
		return err
	}
	if j.EnvName != "" && r.opt.Envs != nil {
		lease, err := r.opt.Envs.Acquire(ctx, j.EnvName, "job "+j.ID)
		if err != nil {
			return a.end(core.JobFailed, core.CodeOf(err), err.Error())
		}
		defer lease.Release()
	}
	dir := r.JobDir(j.ID)
	art := filepath.Join(dir, "artifacts")
	// A retried attempt starts clean.
	if err := os.RemoveAll(art); err != nil {
		return a.end(core.JobFailed, core.CodeInternal, err.Error())
	}
	for _, p := range []string{art, filepath.Join(dir, "tmp"), filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return a.end(core.JobFailed, core.CodeInternal, err.Error())
		}
	}
	dsDir := filepath.Join(r.opt.DataDir, filepath.FromSlash(d.Path))
	bundle, err := dataset.OpenBundle(dsDir)
	if err != nil {
		return a.end(core.JobFailed, core.CodeOf(err), err.Error())
	}
	jobJSON := map[string]any{"jobId": j.ID, "datasetId": d.ID, "datasetPath": dsDir, "datasetSha256": d.SHA256, "trainer": j.TrainerRef,
		"params": j.Params, "seed": j.Seed, "artifactsDir": art, "attempt": j.Attempt, "purpose": d.Purpose}
	b, err := json.MarshalIndent(jobJSON, "", "  ")
	if err == nil {
		err = writeJobFile(filepath.Join(dir, "job.json"), b)
	}
	if err != nil {
		return a.end(core.JobFailed, core.CodeInternal, "write job.json: "+err.Error())
	}

	native, isNative := r.opt.Trainers.Get(j.TrainerRef)
	if !isNative || native.HasTrainingStep() {
		if err := a.setStatus(core.JobTraining, "training"); err != nil {
			return err
		}
		// --- training, under the wall-timeout and stall watchdogs.
		wd := a.watchdogs()
		terr := a.train(native, isNative, dir, art, bundle)
		wd()
		if stop, err := a.stopped(ctx); stop {
			return err
		}
		if terr != nil {
			var infra *infraError
			if errors.As(terr, &infra) {
				return a.requeue(core.CodeWorkerLost, infra.msg)
			}
			return a.end(core.JobFailed, core.CodeTrainerFailed, terr.Error())
		}
	} else {
		tc := &TrainContext{Job: j, JobDir: dir, ArtifactsDir: art, Dataset: bundle, Params: j.Params, Seed: j.Seed, Progress: a.report, Log: os.Stderr, Physics: r.physics}
		if err := native.Train(ctx, tc); err != nil {
			if stop, serr := a.stopped(ctx); stop {
				return serr
			}
			return a.end(core.JobFailed, core.CodeTrainerFailed, err.Error())
		}
	}
	// --- evaluation by the platform.
	if a.status == core.JobTraining {
		if err := a.setStatus(core.JobEvaluating, "evaluating"); err != nil {
			return err
		}
	}
	m, metricsJSON, gatesJSON, passed, err := a.evaluate(d, bundle, art)
	if stop, serr := a.stopped(ctx); stop {
		return serr
	}
	if err != nil {
		return a.end(core.JobFailed, core.CodeOf(err), "evaluation: "+err.Error())
	}
	if shared != nil {
		// Share the model before it is registered: a registered model's
		// artifact is always fetchable. Its tree hash is the model's
		// ArtifactHash (same construction).
		bg := context.WithoutCancel(ctx)
		t, err := shared.Put(bg, m.ArtifactPath, art)
		if core.CodeOf(err) == core.CodeConflict {
			// An earlier try of this job (its worker lost before the job was
			// done) stored another artifact; no model references it, and only
			// the claimant of the job gets here.
			if err = shared.Delete(bg, m.ArtifactPath); err == nil {
				t, err = shared.Put(bg, m.ArtifactPath, art)
			}
		}
		if err == nil && t.SHA256 != m.ArtifactHash {
			err = core.Errorf(core.CodeModelTampered, "artifact changed after evaluation: tree %.12s, evaluated %.12s", t.SHA256, m.ArtifactHash)
		}
		if core.CodeOf(err) == core.CodeStoreUnavailable {
			return a.requeue(core.CodeWorkerLost, "store model artifact: "+err.Error())
		} else if err != nil {
			return a.end(core.JobFailed, core.CodeOf(err), "store model artifact: "+err.Error())
		}
	}
	if err := r.st.FinishJob(context.WithoutCancel(ctx), j.ID, r.worker, a.status, metricsJSON, gatesJSON, passed, art, m); err != nil {
		if core.CodeOf(err) == core.CodeJobConflict {
			if stop, serr := a.stopped(ctx); stop {
				return serr
			}
		}
		return a.end(core.JobFailed, core.CodeOf(err), err.Error())
	}
	a.status = core.JobDone
	r.publish(events.JobState, d.LineID, j.ID, map[string]any{"status": core.JobDone, "modelId": m.ID, "gatePassed": passed})
	return nil
}

// infraError marks a failure that is not the trainer's fault.
type infraError struct{ msg string }

func (e *infraError) Error() string { return e.msg }

// watchdogs starts the wall-timeout and stall timers; the returned func
// stops them.
func (a *attempt) watchdogs() func() {
	done := make(chan struct{})
	wall := time.Duration(a.job.TimeoutSec) * time.Second
	stall := time.Duration(a.job.StallSec) * time.Second
	go func() {
		wt := time.NewTimer(wall)
		st := time.NewTimer(stall)
		defer wt.Stop()
		defer st.Stop()
		for {
			select {
			case <-done:
				return
			case <-a.ctx.Done():
				return
			case <-wt.C:
				a.cancel(errTimeout)
				return
			case <-st.C:
				a.cancel(errStalled)
				return
			case <-a.progress:
				if !st.Stop() {
					select {
					case <-st.C:
					default:
					}
				}
				st.Reset(stall)
			}
		}
	}()
	return func() { close(done) }
}

func (a *attempt) train(native Trainer, isNative bool, dir, art string, b *dataset.Bundle) error {
	j := a.job
	if isNative {
		logf, err := safefile.OpenFile(filepath.Join(dir, "logs", "trainer.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open trainer log: %w", err)
		}
		tc := &TrainContext{Job: j, JobDir: dir, ArtifactsDir: art, Dataset: b, Params: j.Params, Seed: j.Seed, Progress: a.report, Log: logf, Physics: a.r.physics}
		terr := native.Train(a.ctx, tc)
		if err := logf.Close(); err != nil {
			terr = errors.Join(terr, fmt.Errorf("close trainer log: %w", err))
		}
		return terr
	}
	allow := []string{"VIRTUAL_ENV", "PYTHONPATH"}
	path, isExec := IsExec(j.TrainerRef)
	if name, ok := IsExt(j.TrainerRef); ok {
		t, err := a.r.extTrainer(a.ctx, name)
		if err != nil {
			return err
		}
		path, allow = t.Command, append(allow, t.Env...)
	} else if !isExec {
		return fmt.Errorf("unknown trainer %q", j.TrainerRef)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	cmd := []string{abs}
	if strings.HasSuffix(abs, ".py") {
		cmd = []string{"python3", abs}
	}
	// Under Landlock the trainer reads its job directory, the dataset, its
	// program and environment and the system's libraries — not the rest of
	// the data directory (the database, the signing key, other jobs).
	spec := extrun.Spec{Command: cmd, JobDir: dir, Env: map[string]string{"AML_SEED": strconv.FormatInt(j.Seed, 10), "AML_JOB_ID": j.ID},
		AllowEnv: allow, Readable: []string{filepath.Join(a.r.opt.DataDir, filepath.FromSlash(a.ds.Path))}, Protect: []string{a.r.opt.DataDir}}
	if j.EnvName != "" && a.r.opt.Envs != nil {
		if envDir, ok := a.r.opt.Envs.Dir(j.EnvName); ok {
			spec.Readable = append(spec.Readable, envDir)
			if _, err := os.Stat(filepath.Join(envDir, "bin", "python3")); err == nil && strings.HasSuffix(abs, ".py") {
				spec.Command = []string{filepath.Join(envDir, "bin", "python3"), abs}
			}
		}
	}
	res, err := extrun.Run(a.ctx, spec, func(e extrun.Event) {
		switch e.Type {
		case "progress":
			if e.Progress != nil {
				a.report(*e.Progress, "")
			}
		case "stage":
			a.report(-1, e.Stage)
		}
	})
	if err != nil {
		return err
	}
	rb, err := json.MarshalIndent(res, "", "  ")
	if err == nil {
		err = writeJobFile(filepath.Join(dir, "trainer-result.json"), rb)
	}
	if err != nil {
		return fmt.Errorf("write trainer-result.json: %w", err)
	}
	if res.Malformed > 0 || res.Truncated > 0 {
		a.r.log.Warn("trainer protocol problems", "job", j.ID, "malformed", res.Malformed, "truncated", res.Truncated)
	}
	switch res.Reason {
	case "exited":
		if res.ExitCode != 0 {
			msg := fmt.Sprintf("trainer exited with code %d", res.ExitCode)
			if res.LastError != "" {
				msg += ": " + res.LastError
			}
			return errors.New(msg)
		}
		return nil
	case "killed":
		return &infraError{msg: fmt.Sprintf("trainer process killed by %s", res.Signal)}
	case "start_failed":
		return fmt.Errorf("trainer could not start: %s", res.LastError)
	default: // cancelled, timeout, stalled: the context cause tells which
		return fmt.Errorf("trainer stopped: %s", res.Reason)
	}
}

// evaluate computes the platform's metrics and gates and builds the model
// row.
func (a *attempt) evaluate(d core.Dataset, b *dataset.Bundle, art string) (*core.Model, json.RawMessage, json.RawMessage, bool, error) {
	p, err := model.Load(art, b.Manifest, model.LoadOptions{ExecPredict: extrun.Predict, Formats: a.r.opt.Trainers.Formats()})
	if err != nil {
		return nil, nil, nil, false, err
	}
	metrics, err := eval.Evaluate(a.ctx, b, p)
	if err != nil {
		return nil, nil, nil, false, err
	}
	prof, err := eval.ProfileForJob(d.Purpose, a.job.GateProfile)
	if err != nil {
		return nil, nil, nil, false, err
	}
	hash, err := model.ArtifactHash(art)
	if err != nil {
		return nil, nil, nil, false, err
	}
	mj, ev, err := a.uncertainty(b, p, metrics)
	if err != nil {
		return nil, nil, nil, false, err
	}
	ev.ArtifactPresent = true
	gates := eval.GateEvidence(prof, metrics, ev)
	gj, _ := json.Marshal(gates)
	var rb [3]byte
	rand.Read(rb[:])
	m := &core.Model{ID: "model-" + strings.TrimPrefix(a.job.ID, "job-") + "-" + hex.EncodeToString(rb[:]), JobID: a.job.ID, DatasetID: d.ID,
		LineID: d.LineID, ProductID: d.ProductID, RecipeID: d.RecipeID, Purpose: d.Purpose, TrainerRef: a.job.TrainerRef,
		ArtifactKind: p.Format(), SchemaVersion: 1, ModelInterface: interfaceOf(d.Purpose), ArtifactPath: relTo(a.r.opt.DataDir, art),
		ArtifactHash: hash, LineageVerified: d.LineageVerified, GatePassed: gates.Passed, Metrics: mj, Gates: gj,
		CreatedAt: a.r.opt.Now().UTC()}
	return m, mj, gj, gates.Passed, nil
}

// ConformalCoverage is the target coverage of the intervals calibrated at
// evaluation.
const ConformalCoverage = 0.90

// uncertainty adds the platform's uncertainty figures to the metrics: split
// conformal intervals calibrated on the val windows with their coverage
// measured on the test windows (never on the calibration windows), and the
// training envelope for out-of-distribution checks. Both are skipped with a
// reason when the splits are too small. It also measures the model's
// stability (eval.MeasureStability: its free run on the test split and the
// poles of its linear dynamics). The returned evidence carries the interval
// and its measured coverage (or why there is none) and the stability for
// the gates.
func (a *attempt) uncertainty(b *dataset.Bundle, p model.Predictor, m *eval.Metrics) (json.RawMessage, eval.Evidence, error) {
	var ev eval.Evidence
	base, err := json.Marshal(m)
	if err != nil {
		return nil, ev, err
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(base, &out); err != nil {
		return nil, ev, err
	}
	add := func(key string, v any, err error) {
		if err == nil {
			var b []byte
			if b, err = json.Marshal(v); err == nil {
				out[key] = b
				return
			}
		}
		out[key+"Skipped"], _ = json.Marshal(err.Error())
		if ev.CoverageSkipped == "" && key != "ood" {
			ev.CoverageSkipped = key + ": " + err.Error()
		}
	}
	c, cerr := eval.Calibrate(a.ctx, b, p, ConformalCoverage)
	add("conformal", c, cerr)
	if cerr == nil {
		cov, err := c.MeasureCoverage(a.ctx, b, p)
		add("coverage", cov, err)
		if err == nil {
			ev.Conformal, ev.Coverage = c, cov
		}
	}
	o, oerr := eval.FitOOD(b, 0.995)
	add("ood", o, oerr)
	// stability (gates G7a, G7b): the test free run from H measured steps
	// and the poles of the model's linear dynamics, where it has them
	st, err := eval.MeasureStability(a.ctx, b, p, b.Manifest.HistorySteps)
	if err != nil {
		return nil, ev, err
	}
	ev.Stability = st
	if out["stability"], err = json.Marshal(st); err != nil {
		return nil, ev, err
	}
	js, err := json.Marshal(out)
	return js, ev, err
}

func interfaceOf(purpose string) string {
	if purpose == dataset.PurposeStaticResponse {
		return "static_response"
	}
	return "one_step"
}

func relTo(base, p string) string {
	if rel, err := filepath.Rel(base, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return p
}

// LostAfter is how old a worker's heartbeat must be for its job to count
// as lost on a shared database: rescueAfter (aml worker --rescue-after),
// at least 10 s — heartbeats come every HeartbeatEvery (0.5 s), and a
// shorter threshold would take a busy machine's worker for a dead one.
func LostAfter(rescueAfter time.Duration) time.Duration { return max(rescueAfter, 10*time.Second) }

// LostEvery is how often WatchLost looks: a quarter of LostAfter, between
// 1 s and 15 s.
func LostEvery(rescueAfter time.Duration) time.Duration {
	return min(max(LostAfter(rescueAfter)/4, time.Second), 15*time.Second)
}

// WatchLost runs Recover every `every` until ctx ends, so that a job whose
// worker died (SIGKILL, power loss, a machine gone) is requeued within
// about staleAfter + every, instead of waiting for the queue's own rescue
// (River's rescuer passes every 30 s). A job of this runner is never
// counted as lost (workerLost), so running it alongside live jobs is safe.
func (r *Runner) WatchLost(ctx context.Context, every, staleAfter time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rq, in, err := r.Recover(ctx, staleAfter)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Warn("lost-worker check failed", "err", err)
		case rq+in > 0:
			r.log.Info("recovered jobs of lost workers", "requeued", rq, "interrupted", in)
		}
	}
}

// Recover makes sure no job stays active without a live worker: a job whose
// worker is gone is requeued if it has retries left, else interrupted.
// staleAfter is how old a heartbeat must be for a worker on another host to
// count as lost.
func (r *Runner) Recover(ctx context.Context, staleAfter time.Duration) (requeued, interrupted int, err error) {
	host, _ := os.Hostname()
	// Heartbeats are stamped by the store's clock (the wall clock), so
	// their age is measured against it.
	now := time.Now()
	for _, st := range []core.JobStatus{core.JobProvisioning, core.JobTraining, core.JobEvaluating} {
		jobs, err := r.st.ListJobs(ctx, core.JobFilter{Status: st, Limit: 100_000})
		if err != nil {
			return requeued, interrupted, err
		}
		for _, j := range jobs {
			if !workerLost(j, r.worker, host, staleAfter, now) {
				continue
			}
			switch r.recoverJob(ctx, j) {
			case core.JobQueued:
				requeued++
			case core.JobInterrupted:
				interrupted++
			}
		}
	}
	return requeued, interrupted, nil
}

// recoverJob hands the active job j of a lost worker back: requeued (and
// dispatched as the next try) if it has retries left, else interrupted.
// Both are compare-and-set on j's status, so when several workers recover
// the same job at once exactly one wins. It returns the status set, or ""
// when another process changed the job first.
func (r *Runner) recoverJob(ctx context.Context, j core.Job) core.JobStatus {
	r.killOrphan(j.ID)
	if j.RetryCount < j.MaxRetries {
		if err := r.st.RequeueJob(ctx, j.ID, j.Status, core.CodeWorkerLost, "worker "+j.Worker+" was lost"); err == nil {
			r.publish(events.JobState, "", j.ID, map[string]any{"status": core.JobQueued, "reason": "worker lost"})
			if r.queue != nil {
				if err := r.queue.Enqueue(ctx, j.ID, j.RetryCount+1); err != nil {
					r.log.Warn("enqueue recovered job failed", "job", j.ID, "retry", j.RetryCount+1, "err", err)
				}
			}
			return core.JobQueued
		}
	}
	if err := r.st.EndJob(ctx, j.ID, j.Status, core.JobInterrupted, core.CodeWorkerLost, "worker "+j.Worker+" was lost and no retry is left"); err == nil {
		r.publish(events.JobState, "", j.ID, map[string]any{"status": core.JobInterrupted})
		return core.JobInterrupted
	}
	return ""
}

// workerLost: the worker runs on this host and its pid is dead (or it is
// this very process from an earlier life: same pid, another identity), or
// its heartbeat is older than staleAfter at now. self is this runner's identity: a job it runs is
// never lost, whatever asks (a River retry dispatch of a long job may land
// on the very worker that is still training it).
func workerLost(j core.Job, self, host string, staleAfter time.Duration, now time.Time) bool {
	if j.Worker == self {
		return false
	}
	parts := strings.Split(j.Worker, "/")
	if len(parts) == 3 && parts[0] == host {
		pid, err := strconv.Atoi(parts[1])
		if err == nil && (pid == os.Getpid() || syscall.Kill(pid, 0) != nil) {
			return true
		}
	}
	return j.HeartbeatAt == nil || now.Sub(*j.HeartbeatAt) > staleAfter
}

// killOrphan kills the process group of a trainer whose worker died.
func (r *Runner) killOrphan(id string) {
	b, err := safefile.ReadFileNoFollow(extrun.PidFile(r.JobDir(id)), 32)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // best effort: the group may already be gone (ESRCH)
	}
	_ = os.Remove(extrun.PidFile(r.JobDir(id))) // best effort: the next launch of the job overwrites it
}

// writeJobFile writes a runner file into a job directory, which a trainer
// can change: whatever is at path (a link the trainer left, a FIFO) is
// removed and the file created anew, without following a link (mode 0600).
func writeJobFile(path string, b []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := safefile.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

// Trainers are the native trainers this runner offers (the benefit study
// trains its twin with them in a scratch store).
func (r *Runner) Trainers() *Trainers { return r.opt.Trainers }
