package contract

import (
	"crypto/ed25519"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// EnvelopeSchemaVersion is the envelope certificate schema this package
// writes and the newest it reads.
const EnvelopeSchemaVersion = 1

// Limits of an operating envelope.
const (
	// EnvelopeMaxTTL is the longest an envelope may live: a person looks
	// at the line again at least once a shift.
	EnvelopeMaxTTL = 12 * time.Hour
	// EnvelopeMaxMovesPerHour caps maxMovesPerHour.
	EnvelopeMaxMovesPerHour = 3600
)

// EnvelopeCertificate is an operating envelope a person approves under
// the bounded_auto control policy instead of each move: within it the
// twin re-optimises each cycle from a fresh snapshot and writes through
// the write guard, which checks every write against it. It names the
// line, the frozen scene (by hash) and the model it is for, per
// manipulated variable the bounds every target must lie in, how many
// moves (node writes) it allows per rolling hour, and its expiry. The
// issuer signs its body (every field except EnvelopeUnsignedFields) with
// the deployment key, like a recommendation certificate; the lifecycle
// record (approval, revocation) is kept outside the signature and
// trusted only where the deployment key signed it (package
// twin/envelope).
//
//	ISSUED ──Approve──▶ APPROVED ──Revoke / stop──▶ REVOKED
//	  │                    │
//	  └──expiry────────────┴──expiry──▶ (expired: no write)
//
// There is no EXECUTED state: an envelope authorises many writes until
// it expires, is revoked, or the supervisor stops it (which revokes it,
// naming why, so that only a person's new approval resumes writing).
type EnvelopeCertificate struct {
	SchemaVersion int       `json:"schemaVersion"`
	EnvelopeID    string    `json:"envelopeId"`
	CreatedAt     time.Time `json:"createdAt"`
	CreatedBy     string    `json:"createdBy"` // who proposed it; never its approver
	LineID        string    `json:"lineId"`
	SceneID       string    `json:"sceneId"`
	SceneVersion  string    `json:"sceneVersion"`
	SceneHash     string    `json:"sceneHash"`
	ModelID       string    `json:"modelId"`
	ObjectiveID   string    `json:"objectiveId,omitempty"`
	// Bounds maps every manipulated variable the supervisor may move to
	// the closed interval its targets must lie in.
	Bounds map[string]ChannelBound `json:"bounds"`
	// MaxMovesPerHour is how many node writes the envelope allows in any
	// rolling hour.
	MaxMovesPerHour int       `json:"maxMovesPerHour"`
	IssuedAt        time.Time `json:"issuedAt"`
	ExpiresAt       time.Time `json:"expiresAt"`
	KeyID           string    `json:"keyId"`

	// Not signed:
	CertificateHash string     `json:"certificateHash"`
	Signature       string     `json:"signature"`
	Status          CertStatus `json:"status"`
	ApprovedBy      string     `json:"approvedBy,omitempty"`
	ApprovedAt      time.Time  `json:"approvedAt,omitzero"`
	RevokedBy       string     `json:"revokedBy,omitempty"`
	RevokedAt       time.Time  `json:"revokedAt,omitzero"`
	RevokeReason    string     `json:"revokeReason,omitempty"`
}

// EnvelopeUnsignedFields lists the top-level JSON fields outside an
// envelope's signed body.
var EnvelopeUnsignedFields = []string{
	"certificateHash", "signature", "status", "approvedBy", "approvedAt", "revokedBy", "revokedAt", "revokeReason",
}

// BodyHash is the hex sha256 of the canonical JSON of the envelope
// without EnvelopeUnsignedFields, times in UTC.
func (e *EnvelopeCertificate) BodyHash() (string, error) {
	x := *e
	x.CreatedAt, x.IssuedAt, x.ExpiresAt = utc(x.CreatedAt), utc(x.IssuedAt), utc(x.ExpiresAt)
	return hashWithout(&x, EnvelopeUnsignedFields...)
}

// ParseEnvelope decodes and validates an envelope certificate (structure
// only; Verify checks the signature).
func ParseEnvelope(data []byte) (*EnvelopeCertificate, error) {
	var e EnvelopeCertificate
	if err := decodeStrict(data, &e); err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

// Validate checks the envelope's structure and the consistency of its
// lifecycle record with its status (ISSUED, APPROVED or REVOKED; EXPIRED
// is judged on the clock, see Expired). Every bound is finite with
// min ≤ max, at least one; maxMovesPerHour in 1…EnvelopeMaxMovesPerHour;
// expiresAt after issuedAt and at most EnvelopeMaxTTL later; the
// approver is not the proposer.
func (e *EnvelopeCertificate) Validate() error {
	var p problems
	checkSchemaVersion(&p, e.SchemaVersion, EnvelopeSchemaVersion)
	checkRef(&p, "envelopeId", e.EnvelopeID)
	checkTime(&p, "createdAt", e.CreatedAt, true)
	checkRef(&p, "createdBy", e.CreatedBy)
	checkRef(&p, "lineId", e.LineID)
	checkRef(&p, "sceneId", e.SceneID)
	if _, err := parseSemver(e.SceneVersion); err != nil {
		p.add("sceneVersion", "%v", err)
	}
	checkHash(&p, "sceneHash", e.SceneHash, true)
	checkRef(&p, "modelId", e.ModelID)
	checkOptRef(&p, "objectiveId", e.ObjectiveID)
	if len(e.Bounds) == 0 {
		p.add("bounds", "at least one manipulated variable is required")
	}
	for _, v := range sortedKeys(e.Bounds) {
		b := e.Bounds[v]
		if !isName(v) {
			p.add("bounds", "%q is not a variable id", truncate(v, 40))
		}
		if !finite(b.Min) || !finite(b.Max) || b.Min > b.Max {
			p.add("bounds."+v, "must be finite with min ≤ max, got [%v, %v]", b.Min, b.Max)
		}
	}
	if e.MaxMovesPerHour < 1 || e.MaxMovesPerHour > EnvelopeMaxMovesPerHour {
		p.add("maxMovesPerHour", "must be 1…%d", EnvelopeMaxMovesPerHour)
	}
	checkValidity(&p, e.IssuedAt, e.ExpiresAt, EnvelopeMaxTTL)
	checkSignedFields(&p, e.KeyID, e.CertificateHash, e.Signature)
	e.approval().check(&p)
	return p.err()
}

// Verify checks that e is well formed, that certificateHash is the hash
// of its signed body, that keyId names pub and that the signature is
// pub's. Any change to a signed field fails with AML_CERT_INVALID.
func (e *EnvelopeCertificate) Verify(pub ed25519.PublicKey) error {
	if e == nil {
		return certErr(core.CodeCertInvalid, "", "no envelope certificate")
	}
	return verifySigned(pub, signedDoc{noun: "envelope", sigNoun: "envelope ", validate: e.Validate,
		keyID: e.KeyID, hash: e.CertificateHash, signature: e.Signature, bodyHash: e.BodyHash})
}

// Expired reports whether the envelope's expiry has passed at now.
func (e *EnvelopeCertificate) Expired(now time.Time) bool { return !now.Before(e.ExpiresAt) }

// Approve moves an ISSUED, unexpired envelope to APPROVED by by at now.
// The proposer (createdBy) never approves (AML_FORBIDDEN).
func (e *EnvelopeCertificate) Approve(by string, now time.Time) error {
	return e.approval().approve(by, now)
}

// Revoke moves an ISSUED or APPROVED envelope to REVOKED (by, reason
// required).
func (e *EnvelopeCertificate) Revoke(by, reason string, now time.Time) error {
	return e.approval().revoke(by, reason, now)
}

// EnvelopeActionPrefix is the prefix of the write-history certificate id
// of every action (cycle) under envelope id: "<id>/" followed by the
// cycle's id. The guard counts an envelope's moves by it.
func EnvelopeActionPrefix(id string) string { return "envelope:" + id + "/" }

// approval is e's lifecycle record (approval.go).
func (e *EnvelopeCertificate) approval() approvalRecord {
	return approvalRecord{noun: "envelope", aNoun: "an envelope", id: e.EnvelopeID, createdBy: e.CreatedBy, issuedAt: e.IssuedAt, expiresAt: e.ExpiresAt,
		status: &e.Status, approvedBy: &e.ApprovedBy, approvedAt: &e.ApprovedAt, revokedBy: &e.RevokedBy, revokedAt: &e.RevokedAt, revokeReason: &e.RevokeReason}
}
