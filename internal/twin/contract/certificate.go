package contract

import (
	"database/sql/driver"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// CertificateSchemaVersion is the certificate schema this package writes
// and the newest it reads.
const CertificateSchemaVersion = 1

// CertStatus is the lifecycle state of a recommendation certificate. It
// has one spelling, upper case, in Go, JSON and every database: the JSON
// and database decoders refuse any other spelling (upstream wrote
// different cases to JSON and DB).
type CertStatus string

// Certificate statuses. EXECUTED, EXPIRED and REVOKED are final.
const (
	CertIssued   CertStatus = "ISSUED"
	CertApproved CertStatus = "APPROVED"
	CertExecuted CertStatus = "EXECUTED"
	CertExpired  CertStatus = "EXPIRED"
	CertRevoked  CertStatus = "REVOKED"
)

// CertStatuses lists every status.
var CertStatuses = []CertStatus{CertIssued, CertApproved, CertExecuted, CertExpired, CertRevoked}

// Valid reports whether s is one of the five statuses (exact spelling).
func (s CertStatus) Valid() bool {
	switch s {
	case CertIssued, CertApproved, CertExecuted, CertExpired, CertRevoked:
		return true
	}
	return false
}

// Final reports whether no transition leaves s.
func (s CertStatus) Final() bool { return s == CertExecuted || s == CertExpired || s == CertRevoked }

// ParseCertStatus accepts exactly the upper-case spellings.
func ParseCertStatus(s string) (CertStatus, error) {
	if st := CertStatus(s); st.Valid() {
		return st, nil
	}
	return "", Invalidf("status", "must be ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED (upper case), not %q", truncate(s, 40))
}

// UnmarshalJSON refuses any spelling but the five upper-case ones.
func (s *CertStatus) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return Invalidf("status", "must be a string")
	}
	st, err := ParseCertStatus(str)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// Value implements driver.Valuer: the database column holds the same
// upper-case spelling as JSON.
func (s CertStatus) Value() (driver.Value, error) {
	if !s.Valid() {
		return nil, Invalidf("status", "refusing to store invalid status %q", string(s))
	}
	return string(s), nil
}

// Scan implements sql.Scanner, accepting only the upper-case spellings.
func (s *CertStatus) Scan(src any) error {
	var str string
	switch v := src.(type) {
	case string:
		str = v
	case []byte:
		str = string(v)
	default:
		return Invalidf("status", "cannot scan %T into a certificate status", src)
	}
	st, err := ParseCertStatus(str)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// RecommendationCertificate certifies that a candidate control trajectory
// passed a virtual trial on a frozen scene, from a given snapshot, model
// and objective. The issuer signs its body (every field except those in
// CertUnsignedFields) with Ed25519; approvals, revocation and execution
// are recorded outside the signature. Package twin/cert issues, verifies
// and moves certificates through their lifecycle.
type RecommendationCertificate struct {
	SchemaVersion    int       `json:"schemaVersion"`
	CreatedAt        time.Time `json:"createdAt"`
	CreatedBy        string    `json:"createdBy"` // who requested the recommendation
	RecommendationID string    `json:"recommendationId"`
	TrialID          string    `json:"trialId"`
	TrialHash        string    `json:"trialHash"`
	SceneID          string    `json:"sceneId"`
	SceneVersion     string    `json:"sceneVersion"`
	SceneHash        string    `json:"sceneHash"`
	SnapshotHash     string    `json:"snapshotHash"`
	ModelHash        string    `json:"modelHash"`
	ObjectiveHash    string    `json:"objectiveHash"`
	RecipeHash       string    `json:"recipeHash,omitempty"`
	// CandidateControlTrajectory is the trial's candidate: the setpoints a
	// write may apply.
	CandidateControlTrajectory []map[string]float64 `json:"candidateControlTrajectory"`
	// ConstraintDigest is the trial's ConstraintDigest.
	ConstraintDigest   string             `json:"constraintDigest"`
	Uncertainty        Uncertainty        `json:"uncertainty"`
	OutOfDistribution  OutOfDistribution  `json:"outOfDistribution"`
	BaselineComparison BaselineComparison `json:"baselineComparison"`
	CandidateExecuted  AlwaysFalse        `json:"candidateExecuted"`
	IssuedAt           time.Time          `json:"issuedAt"`
	ExpiresAt          time.Time          `json:"expiresAt"`
	KeyID              string             `json:"keyId"` // first 16 hex of sha256(public key)

	// Not signed:
	CertificateHash string     `json:"certificateHash"` // hex sha256 of SignedBody
	Signature       string     `json:"signature"`       // base64 Ed25519 over the 32 hash bytes
	Status          CertStatus `json:"status"`
	ApprovedBy      string     `json:"approvedBy,omitempty"`
	ApprovedAt      time.Time  `json:"approvedAt,omitzero"`
	RevokedBy       string     `json:"revokedBy,omitempty"`
	RevokedAt       time.Time  `json:"revokedAt,omitzero"`
	RevokeReason    string     `json:"revokeReason,omitempty"`
	ExecutedAt      time.Time  `json:"executedAt,omitzero"`
	// ExpiredAt records when the certificate was marked EXPIRED (the
	// moment expiry was noticed, ≥ expiresAt).
	ExpiredAt time.Time `json:"expiredAt,omitzero"`
}

// CertUnsignedFields lists the top-level JSON fields outside the signed
// body: the hash and signature themselves, and the lifecycle record.
var CertUnsignedFields = []string{
	"certificateHash", "signature", "status",
	"approvedBy", "approvedAt", "revokedBy", "revokedAt", "revokeReason", "executedAt", "expiredAt",
}

// KeyIDLen is the length of a key id (hex characters).
const KeyIDLen = 16

// SignedBody is the canonical JSON of the certificate without
// CertUnsignedFields, times in UTC. It covers schemaVersion, createdAt,
// createdBy, recommendationId, trialId, trialHash, sceneId, sceneVersion,
// sceneHash, snapshotHash, modelHash, objectiveHash, recipeHash (when
// set), candidateControlTrajectory, constraintDigest, uncertainty,
// outOfDistribution, baselineComparison, candidateExecuted (always false),
// issuedAt, expiresAt and keyId.
func (c *RecommendationCertificate) SignedBody() ([]byte, error) {
	x := *c
	x.CreatedAt, x.IssuedAt, x.ExpiresAt = utc(x.CreatedAt), utc(x.IssuedAt), utc(x.ExpiresAt)
	return canonicalWithout(&x, CertUnsignedFields...)
}

// BodyHash is the hex sha256 of SignedBody: the certificateHash.
func (c *RecommendationCertificate) BodyHash() (string, error) {
	x := *c
	x.CreatedAt, x.IssuedAt, x.ExpiresAt = utc(x.CreatedAt), utc(x.IssuedAt), utc(x.ExpiresAt)
	return hashWithout(&x, CertUnsignedFields...)
}

// ParseCertificate decodes and validates a certificate (structure only:
// package twin/cert verifies the signature).
func ParseCertificate(data []byte) (*RecommendationCertificate, error) {
	var c RecommendationCertificate
	if err := decodeStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the certificate's structure and the consistency of its
// lifecycle record with its status. It does not verify the hash or the
// signature (twin/cert.Verify does) nor look at the clock.
//
//	ISSUED:   no approval, revocation, execution or expiry record
//	APPROVED: approvedBy/approvedAt; no revocation, execution, expiry
//	EXECUTED: approved, executedAt; no revocation or expiry
//	REVOKED:  revokedBy/revokedAt/revokeReason; approval optional
//	EXPIRED:  expiredAt ≥ expiresAt; approval optional
//
// Recorded times lie in [issuedAt, …]; approval and execution happen
// before expiresAt; the approver is not the requester (createdBy).
func (c *RecommendationCertificate) Validate() error {
	var p problems
	checkSchemaVersion(&p, c.SchemaVersion, CertificateSchemaVersion)
	checkTime(&p, "createdAt", c.CreatedAt, true)
	checkRef(&p, "createdBy", c.CreatedBy)
	checkRef(&p, "recommendationId", c.RecommendationID)
	checkRef(&p, "trialId", c.TrialID)
	checkHash(&p, "trialHash", c.TrialHash, true)
	checkRef(&p, "sceneId", c.SceneID)
	if _, err := parseSemver(c.SceneVersion); err != nil {
		p.add("sceneVersion", "%v", err)
	}
	checkHash(&p, "sceneHash", c.SceneHash, true)
	checkHash(&p, "snapshotHash", c.SnapshotHash, true)
	checkHash(&p, "modelHash", c.ModelHash, true)
	checkHash(&p, "objectiveHash", c.ObjectiveHash, true)
	checkHash(&p, "recipeHash", c.RecipeHash, false)
	checkTrajectory(&p, "candidateControlTrajectory", c.CandidateControlTrajectory, true)
	checkHash(&p, "constraintDigest", c.ConstraintDigest, true)
	checkUncertainty(&p, "uncertainty", c.Uncertainty)
	checkOOD(&p, "outOfDistribution", c.OutOfDistribution)
	checkBaseline(&p, "baselineComparison", c.BaselineComparison)
	checkTime(&p, "issuedAt", c.IssuedAt, true)
	checkTime(&p, "expiresAt", c.ExpiresAt, true)
	if !c.IssuedAt.IsZero() && !c.ExpiresAt.IsZero() && !c.ExpiresAt.After(c.IssuedAt) {
		p.add("expiresAt", "must be after issuedAt")
	}
	if len(c.KeyID) != KeyIDLen || !isHash(c.KeyID+strings.Repeat("0", 64-KeyIDLen)) {
		p.add("keyId", "must be %d lower-case hex characters", KeyIDLen)
	}
	checkHash(&p, "certificateHash", c.CertificateHash, true)
	if c.Signature == "" {
		p.add("signature", "required")
	} else if sig, err := base64.StdEncoding.DecodeString(c.Signature); err != nil || len(sig) != 64 {
		p.add("signature", "must be a base64 Ed25519 signature (64 bytes)")
	}

	approved := c.ApprovedBy != "" || !c.ApprovedAt.IsZero()
	revoked := c.RevokedBy != "" || !c.RevokedAt.IsZero() || c.RevokeReason != ""
	executed := !c.ExecutedAt.IsZero()
	expired := !c.ExpiredAt.IsZero()
	must := func(field string, cond bool, msg string) {
		if !cond {
			p.add(field, "%s", msg)
		}
	}
	st := string(c.Status)
	switch c.Status {
	case CertIssued:
		must("approvedBy", !approved, "an ISSUED certificate has no approval")
	case CertApproved, CertExecuted:
		must("approvedBy", c.ApprovedBy != "", "required when "+st)
		must("approvedAt", !c.ApprovedAt.IsZero(), "required when "+st)
	case CertRevoked:
		must("revokedBy", c.RevokedBy != "", "required when REVOKED")
		must("revokedAt", !c.RevokedAt.IsZero(), "required when REVOKED")
		must("revokeReason", strings.TrimSpace(c.RevokeReason) != "", "required when REVOKED")
	case CertExpired:
		must("expiredAt", expired, "required when EXPIRED")
	default:
		p.add("status", "must be ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED, not %q", st)
	}
	if c.Status.Valid() {
		must("revokedBy", !revoked || c.Status == CertRevoked, "only a REVOKED certificate has a revocation record")
		must("executedAt", !executed || c.Status == CertExecuted, "only an EXECUTED certificate has executedAt")
		must("expiredAt", !expired || c.Status == CertExpired, "only an EXPIRED certificate has expiredAt")
	}
	checkOptRef(&p, "approvedBy", c.ApprovedBy)
	checkOptRef(&p, "revokedBy", c.RevokedBy)
	checkText(&p, "revokeReason", c.RevokeReason, false)
	if c.ApprovedBy != "" && SameIdentity(c.ApprovedBy, c.CreatedBy) {
		p.add("approvedBy", "the requester %q cannot approve their own certificate", c.CreatedBy)
	}
	if !c.IssuedAt.IsZero() {
		for _, t := range []struct {
			f  string
			at time.Time
		}{{"approvedAt", c.ApprovedAt}, {"revokedAt", c.RevokedAt}, {"executedAt", c.ExecutedAt}, {"expiredAt", c.ExpiredAt}} {
			if !t.at.IsZero() && t.at.Before(c.IssuedAt) {
				p.add(t.f, "is before issuedAt")
			}
		}
	}
	if !c.ExpiresAt.IsZero() {
		if !c.ApprovedAt.IsZero() && !c.ApprovedAt.Before(c.ExpiresAt) {
			p.add("approvedAt", "is not before expiresAt")
		}
		if executed && !c.ExecutedAt.Before(c.ExpiresAt) {
			p.add("executedAt", "is not before expiresAt")
		}
		if expired && c.ExpiredAt.Before(c.ExpiresAt) {
			p.add("expiredAt", "is before expiresAt")
		}
	}
	if executed && !c.ApprovedAt.IsZero() && c.ExecutedAt.Before(c.ApprovedAt) {
		p.add("executedAt", "is before approvedAt")
	}
	return p.err()
}

// SameIdentity compares two user identities as the four-eyes rule does:
// ignoring surrounding white space, after Unicode NFC normalisation and
// case folding (core.SameName), so that "José" spelt with a combining
// accent or in capitals is still José. Names holding invisible characters
// are refused where they enter (core.CheckName).
func SameIdentity(a, b string) bool {
	return core.SameName(a, b)
}
