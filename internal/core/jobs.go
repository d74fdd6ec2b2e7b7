package core

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// JobStatus is a training job's state. The transition table is the
// upstream seed's (terminals are final; done only from evaluating, or from
// provisioning for trainers without a training step) plus one edge the seed
// did through a side door: an active job whose attempt died of an
// infrastructure failure (killed process, lost worker) may go back to queued
// through RequeueJob, at most MaxRetries times. No terminal is ever left.
type JobStatus string

const (
	JobQueued       JobStatus = "queued"
	JobProvisioning JobStatus = "provisioning"
	JobTraining     JobStatus = "training"
	JobEvaluating   JobStatus = "evaluating"
	JobDone         JobStatus = "done"
	JobFailed       JobStatus = "failed"
	JobCancelled    JobStatus = "cancelled"
	JobTimeout      JobStatus = "timeout"
	JobInterrupted  JobStatus = "interrupted"
)

// JobTransitions is the seed's table: from → allowed next states.
var JobTransitions = map[JobStatus][]JobStatus{
	JobQueued:       {JobProvisioning, JobTraining, JobCancelled, JobFailed, JobInterrupted},
	JobProvisioning: {JobTraining, JobEvaluating, JobDone, JobFailed, JobCancelled, JobTimeout, JobInterrupted},
	JobTraining:     {JobEvaluating, JobFailed, JobCancelled, JobTimeout, JobInterrupted},
	JobEvaluating:   {JobDone, JobFailed, JobCancelled, JobTimeout, JobInterrupted},
	JobDone:         {},
	JobFailed:       {},
	JobCancelled:    {},
	JobTimeout:      {},
	JobInterrupted:  {},
}

// AllJobStatuses lists every status.
var AllJobStatuses = []JobStatus{JobQueued, JobProvisioning, JobTraining, JobEvaluating, JobDone, JobFailed, JobCancelled, JobTimeout, JobInterrupted}

// CanTransition reports whether from → to is in the table.
func CanTransition(from, to JobStatus) bool {
	for _, s := range JobTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CanRequeue reports whether a job in status s may be sent back to queued
// for an infrastructure retry.
func CanRequeue(s JobStatus) bool {
	return s == JobProvisioning || s == JobTraining || s == JobEvaluating
}

func (s JobStatus) String() string { return string(s) }

// Terminal reports whether s is final.
func (s JobStatus) Terminal() bool { return len(JobTransitions[s]) == 0 && s != "" }

// Active reports whether a worker is (or should be) working on the job.
func (s JobStatus) Active() bool { return CanRequeue(s) }

// Job is one training run = one experiment.
type Job struct {
	ID             string          `json:"id"`
	DatasetID      string          `json:"datasetId"`
	DatasetSHA256  string          `json:"datasetSha256"`
	TrainerRef     string          `json:"trainer"`
	Params         json.RawMessage `json:"params"`
	Seed           int64           `json:"seed"`
	ParentID       string          `json:"parentId,omitempty"`
	ChangeNote     string          `json:"changeNote,omitempty"`
	EnvName        string          `json:"env,omitempty"`
	GateProfile    string          `json:"gateProfile,omitempty"` // the model gate profile named at submit; empty: the purpose's default
	Status         JobStatus       `json:"status"`
	Stage          string          `json:"stage"`
	Progress       float64         `json:"progress"`
	Metrics        json.RawMessage `json:"metrics,omitempty"`
	Gates          json.RawMessage `json:"gates,omitempty"`
	GatePassed     bool            `json:"gatePassed"`
	ArtifactsPath  string          `json:"artifactsPath,omitempty"`
	ModelID        string          `json:"modelId,omitempty"`
	ErrorCode      string          `json:"errorCode,omitempty"`
	Error          string          `json:"error,omitempty"`
	Attempt        int             `json:"attempt"`
	RetryCount     int             `json:"retryCount"`
	MaxRetries     int             `json:"maxRetries"`
	TimeoutSec     int             `json:"timeoutSec"`
	StallSec       int             `json:"stallSec"`
	CancelRequest  bool            `json:"cancelRequested"`
	Worker         string          `json:"worker,omitempty"`
	HeartbeatAt    *time.Time      `json:"heartbeatAt,omitempty"`
	LastProgressAt *time.Time      `json:"lastProgressAt,omitempty"`
	CreatedBy      string          `json:"createdBy"`
	CreatedAt      time.Time       `json:"createdAt"`
	StartedAt      *time.Time      `json:"startedAt,omitempty"`
	EndedAt        *time.Time      `json:"endedAt,omitempty"`
}

// JobFilter selects jobs; empty fields match anything.
type JobFilter struct {
	DatasetID string
	Status    JobStatus
	Limit     int
}

// JobLimits are checked atomically with the insert of a new job.
type JobLimits struct {
	MaxQueued     int // jobs queued or active in total
	MaxPerDataset int // experiments (jobs of any status) per dataset
}

// Model stages.
const (
	StageCandidate  = "candidate"
	StageShadow     = "shadow"
	StageProduction = "production"
	StageRetired    = "retired"
)

// stageMoves are the stage changes a store accepts (internal/registry adds
// the checks a move needs: gates, shadow evidence, artifact hash).
var stageMoves = map[string][]string{
	StageCandidate:  {StageShadow, StageProduction, StageRetired},
	StageShadow:     {StageProduction, StageRetired, StageCandidate},
	StageProduction: {StageRetired, StageShadow},
	StageRetired:    {},
}

// CheckStageMove validates a model stage change before a store makes it:
// the move must be one of the allowed ones and say who makes it. Both
// back-ends call it, so they refuse the same moves the same way.
func CheckStageMove(from, to, by string) error {
	allowed := false
	for _, st := range stageMoves[from] {
		allowed = allowed || st == to
	}
	if !allowed {
		return FieldErrorf(CodeInvalidArgument, "stage", "a model cannot move %s → %s", from, to)
	}
	if strings.TrimSpace(by) == "" {
		return FieldErrorf(CodeInvalidArgument, "by", "who moves the model is required")
	}
	return nil
}

// Model is a registered trained model.
type Model struct {
	ID              string          `json:"id"`
	JobID           string          `json:"jobId"`
	DatasetID       string          `json:"datasetId"`
	LineID          string          `json:"lineId"`
	ProductID       string          `json:"productId"`
	RecipeID        string          `json:"recipeId"`
	Purpose         string          `json:"purpose"`
	ObjectiveID     string          `json:"objectiveId"`
	TrainerRef      string          `json:"trainer"`
	Stage           string          `json:"stage"`
	ArtifactKind    string          `json:"artifactKind"`
	SchemaVersion   int             `json:"schemaVersion"`
	ModelInterface  string          `json:"modelInterface"`
	ArtifactPath    string          `json:"artifactPath"`
	ArtifactHash    string          `json:"artifactHash"`
	ArtifactsPruned bool            `json:"artifactsPruned"`
	Legacy          string          `json:"legacy,omitempty"`
	LineageVerified bool            `json:"lineageVerified"`
	Twin            bool            `json:"twin"`
	GatePassed      bool            `json:"gatePassed"`
	Metrics         json.RawMessage `json:"metrics,omitempty"`
	Gates           json.RawMessage `json:"gates,omitempty"`
	CreatedAt       time.Time       `json:"createdAt"`
	StageChangedAt  time.Time       `json:"stageChangedAt"`
	StageChangedBy  string          `json:"stageChangedBy,omitempty"`
}

// ModelFilter selects models; empty fields match anything.
type ModelFilter struct {
	Line, Product, Recipe, Purpose, Stage, DatasetID string
}

// StageChange is one entry of a model's stage history.
type StageChange struct {
	ModelID string    `json:"modelId"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	By      string    `json:"by"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// Jobs is the job and model registry port. Every state change is a
// compare-and-set in one SQL statement (or one transaction where two rows
// change together).
type Jobs interface {
	// CreateJob inserts a queued job and its dataset reference, refusing
	// with AML_QUEUE_FULL / AML_QUOTA_EXCEEDED past the limits (checked in
	// the same transaction).
	CreateJob(ctx context.Context, j Job, lim JobLimits) error
	GetJob(ctx context.Context, id string) (Job, error)
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error)
	// ClaimJob moves a queued job to provisioning for worker, starting a new
	// attempt. AML_JOB_CONFLICT if it is not queued.
	ClaimJob(ctx context.Context, id, worker string) (Job, error)
	// TransitionJob moves id from → to (both checked against the table) on
	// behalf of worker, the owner of the job's current attempt: a worker
	// whose job was taken over (requeued and claimed by another) gets
	// AML_JOB_CONFLICT.
	TransitionJob(ctx context.Context, id, worker string, from, to JobStatus, stage string) error
	// ReportProgress records progress of an active job owned by worker.
	ReportProgress(ctx context.Context, id, worker string, progress float64, stage string) error
	// Heartbeat marks the owning worker alive.
	Heartbeat(ctx context.Context, id, worker string) error
	// EndJob moves an active or queued job to a terminal failure status.
	EndJob(ctx context.Context, id string, from, to JobStatus, code, msg string) error
	// RequeueJob sends an active job back to queued for an infrastructure
	// retry; AML_JOB_CONFLICT when it is not in from or out of retries.
	RequeueJob(ctx context.Context, id string, from JobStatus, code, msg string) error
	// RequestCancel cancels a queued job at once, or flags an active one for
	// its worker; it returns the job as it is afterwards.
	RequestCancel(ctx context.Context, id string) (Job, error)
	// FinishJob moves the job to done and registers m (if not nil) in one
	// transaction; neither happens without the other. Only worker, the
	// owner of the current attempt, can finish it (AML_JOB_CONFLICT).
	FinishJob(ctx context.Context, id, worker string, from JobStatus, metrics, gates json.RawMessage, gatePassed bool, artifactsPath string, m *Model) error

	GetModel(ctx context.Context, id string) (Model, error)
	ListModels(ctx context.Context, f ModelFilter) ([]Model, error)
	// MoveModelStage moves a model from → to (compare-and-set,
	// AML_STAGE_RACE when it lost). Moving to production retires the
	// current production model of the same (line, product, recipe,
	// purpose, objective) in the same transaction; the database holds at
	// most one production model per key (partial unique index).
	MoveModelStage(ctx context.Context, id, from, to, by, reason string) error
	ModelHistory(ctx context.Context, id string) ([]StageChange, error)
	MarkModelPruned(ctx context.Context, id string) error
}
