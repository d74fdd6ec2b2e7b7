package recal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/shadow"
)

// PolicyVersion is the version of DefaultPolicy.
const PolicyVersion = "twin-calibration-v1"

// Decision reasons of Request.
const (
	ReasonQueued            = "QUEUED"
	ReasonThresholdNotMet   = "TRIGGER_THRESHOLD_NOT_REACHED"
	ReasonActiveOrCooldown  = "ACTIVE_OR_COOLDOWN"
	NoScene                 = "*"
	defaultRecentShadowRuns = 5
	workerActor             = "recal-worker"
)

// Policy is a recalibration policy (the seed's TwinCalibrationPolicy plus
// its two hard-coded thresholds).
type Policy struct {
	PolicyVersion     string  `json:"policyVersion"`
	MinNewRuns        int     `json:"minNewRuns"`
	MinNewRows        int     `json:"minNewRows"`
	CooldownSec       int     `json:"cooldownSec"`
	MaxConcurrentRuns int     `json:"maxConcurrentRuns"`
	ShadowRequired    bool    `json:"shadowRequired"`
	ApprovalRequired  bool    `json:"approvalRequired"`
	DriftScoreMax     float64 `json:"driftScoreMax"`
	ErrorScoreMax     float64 `json:"errorScoreMax"`
}

// DisturbanceScoreMax is the disturbance trigger: an estimated
// unmeasured disturbance larger than twice the target's test RMSE means
// the line has moved away from the data the model learnt, even though the
// disturbance estimate keeps its predictions on target; a model retrained
// with the new runs learns the line where it now is. It applies only where
// a scene declares a disturbance, so the policy (and its version) is
// unchanged.
const DisturbanceScoreMax = 2.0

// DefaultPolicy is twin-calibration-v1.
func DefaultPolicy() Policy {
	return Policy{PolicyVersion: PolicyVersion, MinNewRuns: 3, MinNewRows: 500, CooldownSec: 3600, MaxConcurrentRuns: 1,
		ShadowRequired: true, ApprovalRequired: true, DriftScoreMax: 0.2, ErrorScoreMax: 0.15}
}

// Validate checks the policy. ShadowRequired and ApprovalRequired must be
// true: a recalibrated model always arrives as a candidate that needs
// shadow evidence and a person's promotion.
func (p Policy) Validate() error {
	var probs []core.Problem
	add := func(f, m string) { probs = append(probs, core.Problem{Field: f, Message: m}) }
	if strings.TrimSpace(p.PolicyVersion) == "" || strings.Contains(p.PolicyVersion, ":") {
		add("policyVersion", "required, without ':' (it is part of the dedup key)")
	}
	if p.MinNewRuns < 1 {
		add("minNewRuns", "must be at least 1")
	}
	if p.MinNewRows < 1 {
		add("minNewRows", "must be at least 1")
	}
	if p.CooldownSec < 0 {
		add("cooldownSec", "must not be negative")
	}
	if p.MaxConcurrentRuns < 1 {
		add("maxConcurrentRuns", "must be at least 1")
	}
	if !p.ShadowRequired {
		add("shadowRequired", "must be true: a recalibrated model needs shadow evidence before production")
	}
	if !p.ApprovalRequired {
		add("approvalRequired", "must be true: recalibration produces candidates only; a person promotes")
	}
	if !(p.DriftScoreMax > 0) || math.IsInf(p.DriftScoreMax, 0) {
		add("driftScoreMax", "must be a positive finite number")
	}
	if !(p.ErrorScoreMax > 0) || math.IsInf(p.ErrorScoreMax, 0) {
		add("errorScoreMax", "must be a positive finite number")
	}
	if len(probs) > 0 {
		return core.Invalid(core.CodeInvalidArgument, probs)
	}
	return nil
}

// Signal is what the scheduler measured for one model (see the package
// doc for each figure). DriftScore and ErrorScore are nil when undefined.
type Signal struct {
	SceneID   string   `json:"sceneId"`
	LineID    string   `json:"lineId"`
	ProductID string   `json:"productId"`
	RecipeID  string   `json:"recipeId"`
	ModelID   string   `json:"modelId"`
	DatasetID string   `json:"datasetId"`
	NewRuns   int      `json:"newRuns"`
	NewRows   int      `json:"newRows"`
	NewRunIDs []string `json:"newRunIds"`
	// DriftScore is the share of DriftWindows recent windows outside the
	// training envelope.
	DriftScore   *float64 `json:"driftScore"`
	DriftWindows int      `json:"driftWindows"`
	// ErrorScore = mean over targets of ShadowRMSE[k] / TestRMSE[k], − 1,
	// floored at 0, over ShadowRuns runs. ErrorNRMSE is the mean of those
	// runs' NRMSE (for reading; per-run NRMSE is normalised by a single
	// run's spread and is not compared with the test NRMSE).
	ErrorScore *float64  `json:"errorScore"`
	ShadowRMSE []float64 `json:"shadowRmse"`
	TestRMSE   []float64 `json:"testRmse"`
	ErrorNRMSE *float64  `json:"errorNrmse"`
	ShadowRuns int       `json:"shadowRuns"`
	// Disturbances are the estimated drifts of the targets with a declared
	// unmeasured disturbance (SignalOptions.Shadow.Disturbances), on the
	// most recent scored shadow run, by dataset target; DisturbanceScore
	// is the largest |estimate| over that target's test RMSE (nil
	// without). The error and drift scores are then those of the
	// disturbance-corrected predictions.
	Disturbances     map[string]shadow.DriftEvidence `json:"disturbances,omitempty"`
	DisturbanceScore *float64                        `json:"disturbanceScore,omitempty"`
	// Reason summarises the signal.
	Reason     string    `json:"reason"`
	ComputedAt time.Time `json:"computedAt"`
}

// Store is what the scheduler reads and writes.
type Store interface {
	shadow.Store
	CreateCalibration(ctx context.Context, r contract.CalibrationRequest, now time.Time) (created, active *contract.CalibrationRequest, err error)
	ClaimCalibration(ctx context.Context, maxConcurrent int, by string, now time.Time) (*contract.CalibrationRequest, int, error)
	SetCalibrationJob(ctx context.Context, id, datasetID, jobID, by string) error
	CompleteCalibration(ctx context.Context, id, newModelID string, now time.Time, cooldown time.Duration, by string) error
	FailCalibration(ctx context.Context, id, msg string, now time.Time, by string) error
	GetCalibration(ctx context.Context, id string) (contract.CalibrationRequest, error)
	ListCalibrations(ctx context.Context, now time.Time) ([]contract.CalibrationRequest, error)
}

// SignalOptions tune ComputeSignals; the zero value is the default.
type SignalOptions struct {
	// RecentRuns is how many of the most recent shadow runs the drift and
	// error scores pool (default 5).
	RecentRuns int
	// Shadow are the options of the shadow evidence collection.
	Shadow shadow.Options
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ComputeSignals measures model modelID's recalibration signals from the
// store (see the package doc). It refreshes the model's shadow evidence
// (shadow.Collect, stored) on the runs that ended after it was made.
func ComputeSignals(ctx context.Context, st Store, dataDir, modelID, sceneID string, opts SignalOptions) (*Signal, error) {
	if opts.RecentRuns <= 0 {
		opts.RecentRuns = defaultRecentShadowRuns
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Shadow.Now == nil {
		opts.Shadow.Now = opts.Now
	}
	if sceneID == "" {
		sceneID = NoScene
	}
	l, err := shadow.Load(ctx, st, dataDir, modelID)
	if err != nil {
		return nil, err
	}
	m := l.Model
	sig := &Signal{SceneID: sceneID, LineID: m.LineID, ProductID: m.ProductID, RecipeID: m.RecipeID, ModelID: m.ID, DatasetID: m.DatasetID,
		NewRunIDs: []string{}, ComputedAt: opts.Now().UTC()}
	runs, err := l.NewRuns(ctx, st, false)
	if err != nil {
		return nil, err
	}
	beat := max(1, l.Manifest.BeatMs)
	for _, r := range runs {
		sig.NewRuns++
		sig.NewRunIDs = append(sig.NewRunIDs, r.ID)
		if span := *r.EndedMs - r.StartedMs; span >= 0 {
			sig.NewRows += int(span/beat) + 1
		}
	}
	so := opts.Shadow
	so.MaxRuns = max(so.MaxRuns, opts.RecentRuns)
	ev, err := shadow.Collect(ctx, st, dataDir, modelID, so)
	if err != nil {
		return nil, err
	}
	recent := ev.Runs
	if len(recent) > opts.RecentRuns {
		recent = recent[len(recent)-opts.RecentRuns:]
	}
	sum := shadow.Summarize(recent)
	sig.ShadowRuns = sum.Scored
	sig.DriftWindows = sum.Windows
	if v := float64(sum.OODRejected); finite(v) {
		sig.DriftScore = &v
	}
	if v := float64(sum.NRMSE); finite(v) {
		sig.ErrorNRMSE = &v
	}
	if len(sum.WindowRMSE) == len(l.TestRMSE) && len(sum.WindowRMSE) > 0 {
		ratios := 0.0
		ok := true
		for k, r := range sum.WindowRMSE {
			t := l.TestRMSE[k]
			if !finite(float64(r)) || !finite(t) || !(t > 0) {
				ok = false
				break
			}
			sig.ShadowRMSE = append(sig.ShadowRMSE, float64(r))
			sig.TestRMSE = append(sig.TestRMSE, t)
			ratios += float64(r) / t
		}
		if ok {
			e := math.Max(0, ratios/float64(len(sum.WindowRMSE))-1)
			sig.ErrorScore = &e
		} else {
			sig.ShadowRMSE, sig.TestRMSE = nil, nil
		}
	}
	if len(sum.Drift) > 0 {
		sig.Disturbances = sum.Drift
		score, ok := 0.0, false
		for k, tgt := range l.Manifest.Targets {
			d, has := sum.Drift[tgt]
			if !has || k >= len(l.TestRMSE) || !finite(l.TestRMSE[k]) || !(l.TestRMSE[k] > 0) || !finite(float64(d.Estimate)) {
				continue
			}
			score, ok = math.Max(score, math.Abs(float64(d.Estimate))/l.TestRMSE[k]), true
		}
		if ok {
			sig.DisturbanceScore = &score
		}
	}
	sig.Reason = describe(sig)
	return sig, nil
}

func describe(s *Signal) string {
	f := func(p *float64) string {
		if p == nil {
			return "undefined"
		}
		return fmt.Sprintf("%.3f", *p)
	}
	r := fmt.Sprintf("%d new run(s), %d new row(s); drift %s over %d window(s); error %s over %d shadow run(s)",
		s.NewRuns, s.NewRows, f(s.DriftScore), s.DriftWindows, f(s.ErrorScore), s.ShadowRuns)
	if s.DisturbanceScore != nil {
		r += "; disturbance " + f(s.DisturbanceScore) + " × test RMSE"
	}
	return r
}

// Triggers returns which of the policy's triggers the signal reaches
// ("newRuns", "newRows", "drift", "error", "disturbance"); none means no recalibration.
func Triggers(s Signal, p Policy) []string {
	var out []string
	if s.NewRuns >= p.MinNewRuns {
		out = append(out, "newRuns")
	}
	if s.NewRows >= p.MinNewRows {
		out = append(out, "newRows")
	}
	if s.DriftScore != nil && *s.DriftScore > p.DriftScoreMax {
		out = append(out, "drift")
	}
	if s.ErrorScore != nil && *s.ErrorScore > p.ErrorScoreMax {
		out = append(out, "error")
	}
	if s.DisturbanceScore != nil && *s.DisturbanceScore > DisturbanceScoreMax {
		out = append(out, "disturbance")
	}
	return out
}

// DedupKey is scene:line:recipe:policyVersion.
func DedupKey(s Signal, p Policy) string {
	scene := s.SceneID
	if scene == "" {
		scene = NoScene
	}
	return scene + ":" + s.LineID + ":" + s.RecipeID + ":" + p.PolicyVersion
}

// Decision is the answer to a Request.
type Decision struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
	// RequestID is the queued request, or the active one that blocks.
	RequestID     string     `json:"requestId,omitempty"`
	State         string     `json:"state,omitempty"`
	CooldownUntil *time.Time `json:"cooldownUntil,omitempty"`
	DedupKey      string     `json:"dedupKey"`
	Triggers      []string   `json:"triggers"`
	Signal        Signal     `json:"signal"`
}

// Request decides on signal sig under policy p on behalf of by, at the
// current time (RequestAt with time.Now()).
func Request(ctx context.Context, st Store, sig Signal, p Policy, by string) (*Decision, error) {
	return RequestAt(ctx, st, sig, p, by, time.Now())
}

// RequestAt is Request at time now: TRIGGER_THRESHOLD_NOT_REACHED when no
// trigger is reached; ACTIVE_OR_COOLDOWN (with the blocking request) when
// a request with the same dedup key is queued, running or cooling down at
// now; otherwise the request is queued (QUEUED) and audited. Refusals are
// decisions, not errors; an invalid policy or signal is an error.
func RequestAt(ctx context.Context, st Store, sig Signal, p Policy, by string, now time.Time) (*Decision, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(by) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "by", "the requesting person or service is required")
	}
	if sig.LineID == "" || sig.ModelID == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "signal", "the signal names no line or model; compute it with ComputeSignals")
	}
	if sig.SceneID == "" {
		sig.SceneID = NoScene
	}
	d := &Decision{Signal: sig, DedupKey: DedupKey(sig, p), Triggers: Triggers(sig, p)}
	if d.Triggers == nil {
		d.Triggers = []string{}
	}
	if len(d.Triggers) == 0 {
		d.Reason = ReasonThresholdNotMet
		return d, nil
	}
	sj, err := core.CanonicalJSON(sig)
	if err != nil {
		return nil, err
	}
	pj, err := core.CanonicalJSON(p)
	if err != nil {
		return nil, err
	}
	req := contract.CalibrationRequest{RequestID: newID(now), DedupKey: d.DedupKey, SceneID: sig.SceneID, LineID: sig.LineID, RecipeID: sig.RecipeID,
		ModelID: sig.ModelID, Reason: "triggers: " + strings.Join(d.Triggers, ", ") + "; " + sig.Reason, Signals: sj, Policy: pj, CreatedBy: by}
	created, active, err := st.CreateCalibration(ctx, req, now)
	if err != nil {
		return nil, err
	}
	if active != nil {
		d.Reason = ReasonActiveOrCooldown
		d.RequestID, d.State, d.CooldownUntil = active.RequestID, active.State, active.CooldownUntil
		return d, nil
	}
	d.Accepted, d.Reason, d.RequestID, d.State = true, ReasonQueued, created.RequestID, created.State
	return d, nil
}

func newID(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return "recal-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// RunOptions tune RunNext.
type RunOptions struct {
	// DataDir is the data directory (datasets and artifacts).
	DataDir string
	// MaxConcurrent bounds the running requests (default
	// DefaultPolicy().MaxConcurrentRuns).
	MaxConcurrent int
	// RunJob runs the submitted job in this process (runner.Run) and
	// settles the request at once; otherwise the job system's workers run
	// it and a later RunNext settles the request.
	RunJob bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Step is what one RunNext did.
type Step struct {
	// Settled are the requests whose job had ended and that were marked
	// done (cooldown) or failed.
	Settled []contract.CalibrationRequest `json:"settled"`
	// Claimed is the request claimed in this step (nil: none queued, or
	// Running ≥ MaxConcurrent).
	Claimed *contract.CalibrationRequest `json:"claimed,omitempty"`
	// Running is the number of running requests before the claim.
	Running int `json:"running"`
}

// RunNext is one worker step (see the package doc): settle running
// requests whose job ended, then claim the oldest queued request (if
// fewer than MaxConcurrent are running), rebuild its dataset and submit
// its job. A failure of the rebuild or the submission fails the request
// (recorded, not returned); an error is returned only when the store
// fails.
func RunNext(ctx context.Context, st Store, runner *jobs.Runner, opts RunOptions) (*Step, error) {
	if runner == nil {
		return nil, core.Errorf(core.CodeInternal, "recal.RunNext: nil job runner")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultPolicy().MaxConcurrentRuns
	}
	step := &Step{Settled: []contract.CalibrationRequest{}}
	if err := settle(ctx, st, step, opts); err != nil {
		return nil, err
	}
	r, running, err := st.ClaimCalibration(ctx, opts.MaxConcurrent, workerActor, opts.Now())
	step.Running = running
	if err != nil || r == nil {
		return step, err
	}
	jobID, err := start(ctx, st, runner, r, opts)
	if err != nil {
		if ferr := st.FailCalibration(context.WithoutCancel(ctx), r.RequestID, err.Error(), opts.Now(), workerActor); ferr != nil {
			return nil, ferr
		}
	} else if opts.RunJob {
		if err := runner.Run(ctx, jobID, 0); err != nil {
			return nil, err
		}
		if err := settle(ctx, st, step, opts); err != nil {
			return nil, err
		}
	}
	got, err := st.GetCalibration(ctx, r.RequestID)
	if err != nil {
		return nil, err
	}
	step.Claimed = &got
	return step, nil
}

// settle marks running requests whose job has ended.
func settle(ctx context.Context, st Store, step *Step, opts RunOptions) error {
	all, err := st.ListCalibrations(ctx, opts.Now())
	if err != nil {
		return err
	}
	for _, r := range all {
		if r.State != contract.CalibrationRunning || r.JobID == "" {
			continue
		}
		j, err := st.GetJob(ctx, r.JobID)
		if err != nil {
			return err
		}
		if !j.Status.Terminal() {
			continue
		}
		now := opts.Now()
		if j.Status == core.JobDone && j.ModelID != "" {
			var p Policy
			if err := json.Unmarshal(r.Policy, &p); err != nil {
				return core.Wrap(core.CodeInternal, err, "recalibration request %s policy", r.RequestID)
			}
			if err := st.CompleteCalibration(ctx, r.RequestID, j.ModelID, now, time.Duration(p.CooldownSec)*time.Second, workerActor); err != nil {
				return err
			}
		} else {
			msg := fmt.Sprintf("job %s ended %s", j.ID, j.Status)
			if j.Error != "" {
				msg += ": " + j.ErrorCode + ": " + j.Error
			}
			if err := st.FailCalibration(ctx, r.RequestID, msg, now, workerActor); err != nil {
				return err
			}
		}
		got, err := st.GetCalibration(ctx, r.RequestID)
		if err != nil {
			return err
		}
		step.Settled = append(step.Settled, got)
	}
	return nil
}

// start rebuilds the dataset of claimed request r and submits its job.
func start(ctx context.Context, st Store, runner *jobs.Runner, r *contract.CalibrationRequest, opts RunOptions) (string, error) {
	l, err := shadow.Load(ctx, st, opts.DataDir, r.ModelID)
	if err != nil {
		return "", err
	}
	newRuns, err := l.NewRuns(ctx, st, false)
	if err != nil {
		return "", err
	}
	if len(newRuns) == 0 {
		return "", core.Errorf(core.CodeDatasetEmpty, "model %s: no ended run outside its dataset any more", r.ModelID)
	}
	spec, err := RebuildSpec(l.Dataset, l.Manifest, newRuns)
	if err != nil {
		return "", err
	}
	res, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: opts.DataDir, CreatedBy: "recal:" + r.RequestID})
	if err != nil {
		return "", err
	}
	old, err := st.GetJob(ctx, l.Model.JobID)
	if err != nil {
		return "", err
	}
	j, err := runner.Submit(ctx, jobs.SubmitRequest{DatasetID: res.Dataset.ID, TrainerRef: old.TrainerRef, Params: old.Params, Seed: old.Seed,
		ParentID: old.ID, ChangeNote: fmt.Sprintf("recalibration %s of model %s with %d new run(s)", r.RequestID, l.Model.ID, len(newRuns)),
		EnvName: old.EnvName, Timeout: time.Duration(old.TimeoutSec) * time.Second, Stall: time.Duration(old.StallSec) * time.Second, CreatedBy: r.CreatedBy})
	if err != nil {
		return "", err
	}
	if err := st.SetCalibrationJob(ctx, r.RequestID, res.Dataset.ID, j.ID, workerActor); err != nil {
		return "", err
	}
	return j.ID, nil
}

// RebuildSpec is the spec of dataset d (manifest man) extended with
// newRuns for a recalibration. The old runs keep the split they had and
// the new runs are trained on:
//
//   - a by_run spec becomes an explicit one: every run keeps the split the
//     manifest records for it (train, val or test) and the new runs are
//     appended to trainRunIds (ratios 0, as explicit requires; the seed is
//     kept). Re-drawing the by_run split over old and new runs together
//     would reshuffle it — former train runs would move to val or test
//     and the test split would no longer be the one the replaced model
//     was measured on — so the new model's test figures (and its twin
//     gate's replayed test runs) would not compare with the old model's,
//     and the runs that carry the drift could land in test only;
//   - an explicit spec gets the new runs appended to trainRunIds;
//   - a time_blocks spec is unchanged (every run is split into blocks of
//     its own; a run's blocks are drawn from the seed and its position,
//     and the new runs, which end after the old ones, come last).
//
// A spec that lists runIds gets the new runs appended; a spec that
// selects every ended run picks them up by itself. An upper time bound
// (toMs) before a new run's end is lifted so the new runs are not cut
// away. Everything else — nodes, cleaning, windows, seed — is unchanged.
// The held-out check of the new runs' regime is the new model's shadow
// evidence: the runs that end after it (twin-v3's G8).
func RebuildSpec(d core.Dataset, man *dataset.Manifest, newRuns []core.Run) (*dataset.Spec, error) {
	var spec dataset.Spec
	if err := json.Unmarshal([]byte(d.SpecJSON), &spec); err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "dataset %s spec", d.ID)
	}
	ids := make([]string, 0, len(newRuns))
	last := int64(math.MinInt64)
	for _, r := range newRuns {
		ids = append(ids, r.ID)
		if r.EndedMs != nil {
			last = max(last, *r.EndedMs)
		}
	}
	byRun := spec.Split.Mode == dataset.SplitModeByRun || (spec.Split.Mode == "" && spec.Purpose != dataset.PurposeStaticResponse)
	if byRun {
		if man == nil || man.Kind != dataset.KindDynamic {
			return nil, core.Errorf(core.CodeInternal, "dataset %s: a by_run rebuild needs the dataset's dynamic manifest", d.ID)
		}
		spec.Split = dataset.Split{Seed: spec.Split.Seed, Mode: dataset.SplitModeExplicit,
			TrainRunIDs: append([]string{}, man.Split.Train.RunIDs...),
			ValRunIDs:   append([]string{}, man.Split.Val.RunIDs...),
			TestRunIDs:  append([]string{}, man.Split.Test.RunIDs...)}
	}
	if spec.Split.Mode == dataset.SplitModeExplicit {
		spec.Split.TrainRunIDs = appendNew(spec.Split.TrainRunIDs, ids)
	}
	if len(spec.RunIDs) > 0 {
		spec.RunIDs = appendNew(spec.RunIDs, ids)
	}
	if spec.ToMs != nil && *spec.ToMs < last {
		spec.ToMs = nil
	}
	return &spec, nil
}

func appendNew(list, add []string) []string {
	seen := map[string]bool{}
	for _, v := range list {
		seen[v] = true
	}
	out := append([]string{}, list...)
	for _, v := range add {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// List returns every recalibration request, newest first (expired
// cooldowns shown as done).
func List(ctx context.Context, st Store, now time.Time) ([]contract.CalibrationRequest, error) {
	return st.ListCalibrations(ctx, now)
}
