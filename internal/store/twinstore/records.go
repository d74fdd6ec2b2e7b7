package twinstore

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Records is the method set of *Store: what the twin packages, the API and
// the CLI ask of a back-end's twin records. Both back-ends' stores satisfy
// it by embedding a *Store (see internal/store.Store).
type Records interface {
	ActiveRun(ctx context.Context, lineID string) (string, error)
	AppendAudit(ctx context.Context, actor, action, subject, lineID string, payload any) (audit.Entry, error)
	ApproveCertificate(ctx context.Context, id, approver string, pub ed25519.PublicKey, now time.Time) (*contract.CertRecord, error)
	ApproveCertificateAs(ctx context.Context, id string, by Approver, key CertSigner, now time.Time) (*contract.CertRecord, error)
	AuditWrites(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRow, error)
	AuditLog() *audit.Log
	Channel(ctx context.Context, lineID string) (*contract.ChannelProfile, error)
	ClaimCalibration(ctx context.Context, maxConcurrent int, by string, now time.Time) (claimed *contract.CalibrationRequest, running int, err error)
	ClaimWrite(ctx context.Context, c contract.WriteClaimRequest) (int64, error)
	ClaimCertificateWrite(ctx context.Context, c contract.WriteClaimRequest, pub ed25519.PublicKey) (int64, error)
	CompleteCalibration(ctx context.Context, id, newModelID string, now time.Time, cooldown time.Duration, by string) error
	DeploymentKeyID(ctx context.Context) (string, error)
	CreateCalibration(ctx context.Context, r contract.CalibrationRequest, now time.Time) (created *contract.CalibrationRequest, active *contract.CalibrationRequest, err error)
	ExpireDue(ctx context.Context, now time.Time, ids ...string) ([]string, error)
	FailCalibration(ctx context.Context, id, msg string, now time.Time, by string) error
	FreezeScene(ctx context.Context, id, version, by, expectHash string) (*contract.SceneContract, error)
	GetCalibration(ctx context.Context, id string) (contract.CalibrationRequest, error)
	GetAttestation(ctx context.Context, subject, kind string) (*Attestation, error)
	GetCertificate(ctx context.Context, id string, pub ed25519.PublicKey) (*contract.CertRecord, error)
	GetChannel(ctx context.Context, lineID string) (*contract.ChannelRecord, error)
	GetObjective(ctx context.Context, id string) (*contract.ObjectiveProfile, string, error)
	GetScene(ctx context.Context, id, version string) (*contract.SceneContract, error)
	GetSnapshot(ctx context.Context, id string) (*contract.TwinSnapshot, error)
	GetSnapshotInfo(ctx context.Context, id string) (*contract.TwinSnapshot, contract.SnapshotInfo, error)
	GetTrial(ctx context.Context, id string) (contract.TrialRecord, error)
	IssueCertificate(ctx context.Context, trialID, requester string, key CertSigner, ttl time.Duration, now time.Time) (*contract.CertRecord, error)
	LastWriteID(ctx context.Context, lineID string) (int64, error)
	LatestGateEval(ctx context.Context, modelID string) (contract.GateEvalRecord, error)
	Lease(ctx context.Context, name string) (Lease, bool, error)
	ListCalibrations(ctx context.Context, now time.Time) ([]contract.CalibrationRequest, error)
	ListCertificates(ctx context.Context, f contract.CertFilter, pub ed25519.PublicKey) ([]contract.CertListItem, error)
	ListScenes(ctx context.Context, lineID string) ([]*contract.SceneContract, error)
	ListShadow(ctx context.Context, modelID string) ([]contract.ShadowRecord, error)
	ListSnapshots(ctx context.Context, lineID string, limit int) ([]contract.SnapshotInfo, error)
	ListTrials(ctx context.Context, f contract.TrialFilter) ([]contract.TrialRecord, error)
	LoadCertificate(ctx context.Context, id string) (*contract.CertRecord, error)
	MarkCertificateExecuted(ctx context.Context, id, by string, pub ed25519.PublicKey, now time.Time, extra map[string]any) (*contract.CertRecord, error)
	NameRoles(ctx context.Context, name string) ([]string, error)
	PutGateEval(ctx context.Context, r contract.GateEvalRecord) error
	PutObjective(ctx context.Context, o *contract.ObjectiveProfile) (string, error)
	PutScene(ctx context.Context, c *contract.SceneContract) error
	PutShadow(ctx context.Context, r contract.ShadowRecord) error
	PutSnapshot(ctx context.Context, t *contract.TwinSnapshot, strict bool) error
	PutTrial(ctx context.Context, t *contract.VirtualTrial, purpose, gateEvalID string) (contract.TrialRecord, error)
	Record(ctx context.Context, r contract.WriteRecord) error
	RegisterSigningKey(ctx context.Context, key CertSigner, by string) error
	// RotateSigningKey replaces the current deployment key old by next
	// through a succession both sign.
	RotateSigningKey(ctx context.Context, old, next CertSigner, by string, now time.Time) error
	// Keyring is the keys trusted from anchor, the data directory's key:
	// it and the keys it retired through valid successions.
	Keyring(ctx context.Context, anchor ed25519.PublicKey) (*Keyring, error)
	RecordWrite(ctx context.Context, actor string, r contract.WriteRow) (int64, error)
	RenewLease(ctx context.Context, name, holder string, now time.Time) error
	RevokeCertificate(ctx context.Context, id, by, reason string, pub ed25519.PublicKey, now time.Time) (*contract.CertRecord, error)
	SQL() *sqldb.DB
	SetCalibrationJob(ctx context.Context, id, datasetID, jobID, by string) error
	SetChannel(ctx context.Context, c contract.ChannelRecord, by string) (*contract.ChannelRecord, error)
	TwinPromotionEvidence(ctx context.Context, modelID string) (contract.TwinPromotionEvidence, error)
	WriteRows(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRow, error)
	Writes(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error)
}

var _ Records = (*Store)(nil)
