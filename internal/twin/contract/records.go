package contract

import (
	"encoding/json"
	"time"
)

// The records of this file are the rows the twin's record store
// (internal/store/twinstore) keeps around the documents: a stored
// document with the columns derived from it, the filters that select
// them, and the twin's bookkeeping (shadow evidence, gate evaluations,
// recalibration requests). The domain packages read and write them
// through the store's methods and depend on this package, not on the
// store.

// CertRecord is a stored certificate with its row metadata.
type CertRecord struct {
	Cert   *RecommendationCertificate `json:"certificate"`
	LineID string                     `json:"lineId"`
	// AuditSeq and AuditHash name the audit entry that recorded the issue:
	// a head the log must still contain (audit.VerifyHead).
	AuditSeq  int64     `json:"auditSeq"`
	AuditHash string    `json:"auditHash"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// CertFilter selects stored certificates; empty fields match anything.
type CertFilter struct {
	Status CertStatus
	LineID string
	// Limit caps the result (≤ 0: 1000).
	Limit int
}

// CertListItem is one certificate of a list with its verification result
// (a list shows tampered rows instead of failing).
type CertListItem struct {
	CertRecord
	Verified bool   `json:"verified"`
	Problem  string `json:"problem,omitempty"`
}

// Trial purposes (TrialRecord.Purpose).
const (
	TrialManual   = "manual"
	TrialOptimize = "optimize"
	TrialGate     = "gate"
	TrialDemo     = "demo"
)

// TrialRecord is a stored virtual trial with the columns derived from it.
type TrialRecord struct {
	Trial      *VirtualTrial `json:"trial"`
	LineID     string        `json:"lineId"`
	Purpose    string        `json:"purpose"`
	GateEvalID string        `json:"gateEvalId,omitempty"`
	// Passed: every constraint passed and the candidate was accepted as in
	// distribution (VirtualTrial.Passed). Improvement is not part of
	// passing; certificates require it separately.
	Passed bool `json:"passed"`
	// RejectCode is empty when passed; else the trial's reject code
	// (Reject*), derived for a trial that recorded none.
	RejectCode     string  `json:"rejectCode,omitempty"`
	HardViolations int     `json:"hardViolations"`
	OODAccepted    bool    `json:"oodAccepted"`
	Improvement    float64 `json:"improvement"`
	Hash           string  `json:"hash"`
}

// TrialFilter selects stored trials; empty fields match anything.
type TrialFilter struct {
	ModelID, GateEvalID, LineID string
	// Limit caps the result (≤ 0: 1000).
	Limit int
}

// SnapshotInfo is one stored snapshot's row, without its body.
type SnapshotInfo struct {
	SnapshotID   string    `json:"snapshotId"`
	SceneID      string    `json:"sceneId"`
	SceneVersion string    `json:"sceneVersion"`
	LineID       string    `json:"lineId"`
	CapturedAt   time.Time `json:"capturedAt"`
	CreatedAt    time.Time `json:"createdAt"`
	CreatedBy    string    `json:"createdBy"`
	Strict       bool      `json:"strict"`
	Hash         string    `json:"hash"`
}

// ShadowRecord is one row of shadow evidence: model ModelID's predictions
// compared with what the line did on run RunID, a run that ended after
// the model was made and is not in its dataset. The platform computes it
// (internal/twin/shadow) from the store; neither a gate nor a trainer
// writes it.
type ShadowRecord struct {
	ModelID   string
	RunID     string
	CreatedAt time.Time
	// Steps is the number of scored grid steps of the run.
	Steps int
	// NRMSE and Coverage are the headline figures (see shadow.RunEvidence);
	// NaN is stored as NULL and read back as NaN.
	NRMSE    float64
	Coverage float64
	// Evidence is the full per-run evidence as JSON.
	Evidence json.RawMessage
}

// TwinPromotionEvidence is what promoting a twin model to production needs
// to know (registry.Move): how many shadow runs are stored for it, and its
// latest twin gate evaluation.
type TwinPromotionEvidence struct {
	ShadowRuns int
	// GateEvalID is the latest gate evaluation's id ("" when there is
	// none); GatePassed its verdict.
	GateEvalID string
	GatePassed bool
	GateAt     time.Time
}

// GateEvalRecord is one twin gate evaluation: the twin acceptance profile
// applied to inputs the platform measured for model ModelID. Report is the
// full result as JSON (internal/twin/gate).
type GateEvalRecord struct {
	GateEvalID string
	ModelID    string
	CreatedAt  time.Time
	CreatedBy  string
	Passed     bool
	TuningMode string
	Report     json.RawMessage
}

// Recalibration request states (CalibrationRequest.State).
const (
	CalibrationQueued   = "queued"
	CalibrationRunning  = "running"
	CalibrationCooldown = "cooldown"
	CalibrationDone     = "done"
	CalibrationFailed   = "failed"
)

// CalibrationRequest is one recalibration request (internal/twin/recal).
// At most one request per DedupKey is queued, running or cooling down; the
// store enforces it (a partial unique index).
type CalibrationRequest struct {
	RequestID  string          `json:"requestId"`
	DedupKey   string          `json:"dedupKey"`
	SceneID    string          `json:"sceneId"`
	LineID     string          `json:"lineId"`
	RecipeID   string          `json:"recipeId"`
	ModelID    string          `json:"modelId"`
	State      string          `json:"state"`
	Reason     string          `json:"reason"`
	Signals    json.RawMessage `json:"signals"`
	Policy     json.RawMessage `json:"policy"`
	DatasetID  string          `json:"datasetId,omitempty"`
	JobID      string          `json:"jobId,omitempty"`
	NewModelID string          `json:"newModelId,omitempty"`
	Error      string          `json:"error,omitempty"`
	CreatedBy  string          `json:"createdBy"`
	CreatedAt  time.Time       `json:"createdAt"`
	StartedAt  *time.Time      `json:"startedAt,omitempty"`
	// CompletedAt is when the request ended (done or failed);
	// CooldownUntil = CompletedAt + the policy's cooldown for a request
	// that completed: the key stays taken until then.
	CompletedAt   *time.Time `json:"completedAt,omitempty"`
	CooldownUntil *time.Time `json:"cooldownUntil,omitempty"`
}
