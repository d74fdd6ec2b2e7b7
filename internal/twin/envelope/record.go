package envelope

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Audit actions of an envelope's lifecycle and its cycles (subject: the
// envelope id; a cycle's writes are audited under the action id
// contract.EnvelopeActionPrefix(id) + cycle id, as "write.start" and
// "write.attempt" like a certificate's).
const (
	AuditIssue   = "envelope.issue"
	AuditApprove = "envelope.approve"
	AuditRevoke  = "envelope.revoke"
	AuditStop    = "envelope.stop"
	AuditCycle   = "envelope.cycle"
)

// Event kinds published on the bus.
const (
	// EventStatus: an envelope was issued, approved or revoked.
	EventStatus = "envelope.status"
	// EventStopped: the supervisor stopped an envelope and asks for a
	// person (the alarm).
	EventStopped = "envelope.stopped"
)

// ApprovalKind is the kind of a signed envelope approval statement.
const ApprovalKind = "aml.envelope.approval/1"

// Signer signs with the deployment key (cert.KeyPair).
type Signer interface {
	SigningKey() (id string, pub ed25519.PublicKey)
	SignDigest(hexHash string) (string, error)
}

// RecordStore is what the envelope records need of the store (the
// audit log and the keyring; store.Store implements it).
type RecordStore interface {
	AuditLog() *audit.Log
	Keyring(ctx context.Context, anchor ed25519.PublicKey) (*twinstore.Keyring, error)
	NameRoles(ctx context.Context, name string) ([]string, error)
}

// ApprovalStatement is what an envelope approval signs.
type ApprovalStatement struct {
	Kind         string `json:"kind"`
	EnvelopeID   string `json:"envelopeId"`
	EnvelopeHash string `json:"envelopeHash"`
	ApprovedBy   string `json:"approvedBy"`
	ApproverRole string `json:"approverRole"`
	ApprovedAt   int64  `json:"approvedAt"` // epoch ms
	KeyID        string `json:"keyId"`
}

// Record is an envelope as its signed audit trail has it.
type Record struct {
	Envelope *contract.EnvelopeCertificate `json:"envelope"`
	// Expired: past expiresAt at the time it was loaded.
	Expired bool `json:"expired"`
	// IssueSeq and ApproveSeq are the audit entries of its issue and
	// approval (0: none).
	IssueSeq   int64 `json:"issueSeq"`
	ApproveSeq int64 `json:"approveSeq,omitempty"`
	// Stop is why the supervisor stopped it (empty unless stopped).
	Stop string `json:"stop,omitempty"`
}

// Issue records a signed, ISSUED envelope (cert.IssueEnvelope) in the
// audit log ("envelope.issue", with the whole envelope) and signs the
// log's head. An id already issued is refused AML_CONFLICT.
func Issue(ctx context.Context, st RecordStore, key Signer, e *contract.EnvelopeCertificate) (*Record, error) {
	if e == nil || e.Status != contract.CertIssued {
		return nil, core.Errorf(core.CodeInvalidArgument, "only an ISSUED envelope is recorded")
	}
	_, pub := key.SigningKey()
	if err := e.Verify(pub); err != nil {
		return nil, err
	}
	log := st.AuditLog()
	prev, err := log.Query(ctx, audit.Query{Subject: e.EnvelopeID, Action: AuditIssue, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(prev) > 0 {
		return nil, core.FieldErrorf(core.CodeConflict, "envelopeId", "envelope %s was issued already (audit entry %d)", e.EnvelopeID, prev[0].Seq)
	}
	if _, err := log.AppendSigned(ctx, key, e.CreatedBy, AuditIssue, e.EnvelopeID, e.LineID, map[string]any{"envelope": e, "certificateHash": e.CertificateHash}); err != nil {
		return nil, err
	}
	return Load(ctx, st, pub, e.EnvelopeID, e.IssuedAt)
}

// Approve approves an ISSUED envelope as by (a person with the approver
// or admin role, never its proposer): it signs the approval statement
// with key, appends "envelope.approve" holding it and signs the log's
// head.
func Approve(ctx context.Context, st RecordStore, key Signer, id string, by twinstore.Approver, now time.Time) (*Record, error) {
	_, pub := key.SigningKey()
	r, err := Load(ctx, st, pub, id, now)
	if err != nil {
		return nil, err
	}
	if by.Role != twinstore.RoleApprover && by.Role != twinstore.RoleAdmin {
		return nil, core.FieldErrorf(core.CodeForbidden, "approvedBy", "%s has role %q: only a person with the approver or admin role approves an envelope", by.Name, by.Role)
	}
	e := r.Envelope
	now = now.UTC().Truncate(time.Millisecond)
	if err := e.Approve(by.Name, now); err != nil {
		return nil, err
	}
	kid, _ := key.SigningKey()
	att, err := twinstore.SignStatement(key, id, twinstore.AttestApprove, ApprovalStatement{Kind: ApprovalKind, EnvelopeID: id, EnvelopeHash: e.CertificateHash,
		ApprovedBy: by.Name, ApproverRole: by.Role, ApprovedAt: now.UnixMilli(), KeyID: kid}, now)
	if err != nil {
		return nil, err
	}
	log := st.AuditLog()
	if _, err := log.AppendSigned(ctx, key, by.Name, AuditApprove, id, e.LineID, map[string]any{"approval": att, "statementHash": att.Hash}); err != nil {
		return nil, err
	}
	return Load(ctx, st, pub, id, now)
}

// Revoke revokes an ISSUED or APPROVED envelope (by, reason required):
// "envelope.revoke". A revocation only ever stops writing, so it needs no
// signature of its own; the hash chain and its signed checkpoints keep it.
func Revoke(ctx context.Context, st RecordStore, key Signer, id, by, reason string, now time.Time) (*Record, error) {
	_, pub := key.SigningKey()
	r, err := Load(ctx, st, pub, id, now)
	if err != nil {
		return nil, err
	}
	if err := r.Envelope.Revoke(by, reason, now); err != nil {
		return nil, err
	}
	log := st.AuditLog()
	if _, err := log.AppendSigned(ctx, key, by, AuditRevoke, id, r.Envelope.LineID, map[string]any{"reason": reason, "at": now.UnixMilli()}); err != nil {
		return nil, err
	}
	return Load(ctx, st, pub, id, now)
}

// Load replays envelope id from its audit trail, verified: the issue
// entry's envelope verifies with a key of the keyring anchored at pub; an
// approval entry counts only with a statement signed by such a key that
// matches the envelope (id, hash, approver not its proposer, approver or
// admin role, not an agent's token name); a revocation or stop entry
// revokes it. AML_NOT_FOUND when it was never issued, AML_CERT_INVALID
// when what is recorded does not verify. now decides Expired.
func Load(ctx context.Context, st RecordStore, pub ed25519.PublicKey, id string, now time.Time) (*Record, error) {
	if strings.TrimSpace(id) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "id", "envelope id is required")
	}
	ring, err := st.Keyring(ctx, pub)
	if err != nil {
		return nil, err
	}
	entries, err := st.AuditLog().Trail(ctx, id)
	if err != nil {
		return nil, err
	}
	var r *Record
	for _, en := range entries {
		switch en.Action {
		case AuditIssue:
			if r != nil {
				return nil, core.Errorf(core.CodeCertInvalid, "envelope %s has two issue entries (%d, %d)", id, r.IssueSeq, en.Seq)
			}
			var p struct {
				Envelope json.RawMessage `json:"envelope"`
			}
			if err := json.Unmarshal(en.Payload, &p); err != nil {
				return nil, core.Errorf(core.CodeCertInvalid, "issue entry %d of envelope %s does not decode: %v", en.Seq, id, err)
			}
			e, err := contract.ParseEnvelope(p.Envelope)
			if err != nil {
				return nil, core.Wrap(core.CodeCertInvalid, err, "envelope "+id)
			}
			if err := e.Verify(ring.Key(e.KeyID)); err != nil {
				return nil, err
			}
			if e.EnvelopeID != id || e.Status != contract.CertIssued {
				return nil, core.Errorf(core.CodeCertInvalid, "issue entry %d records envelope %s as %s", en.Seq, e.EnvelopeID, e.Status)
			}
			r = &Record{Envelope: e, IssueSeq: en.Seq}
		case AuditApprove:
			if r == nil || r.Envelope.Status != contract.CertIssued {
				continue // an approval out of order authorises nothing
			}
			if err := checkApproval(ctx, st, ring, r.Envelope, en); err != nil {
				return nil, err
			}
			r.ApproveSeq = en.Seq
		case AuditRevoke, AuditStop:
			if r == nil || r.Envelope.Status == contract.CertRevoked {
				continue
			}
			var p struct {
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(en.Payload, &p)
			if strings.TrimSpace(p.Reason) == "" {
				p.Reason = en.Action
			}
			e := r.Envelope
			e.Status, e.RevokedBy, e.RevokedAt, e.RevokeReason = contract.CertRevoked, en.Actor, en.At.UTC(), p.Reason
			if en.Action == AuditStop {
				r.Stop = p.Reason
			}
		}
	}
	if r == nil {
		return nil, core.Errorf(core.CodeNotFound, "envelope %s was never issued", id)
	}
	r.Expired = r.Envelope.Expired(now)
	return r, nil
}

func checkApproval(ctx context.Context, st RecordStore, ring *twinstore.Keyring, e *contract.EnvelopeCertificate, en audit.Entry) error {
	var s ApprovalStatement
	a, err := twinstore.TrailApproval(en, ring, "envelope", e.EnvelopeID, &s)
	if err != nil {
		return err
	}
	switch {
	case s.Kind != ApprovalKind || s.EnvelopeID != e.EnvelopeID || s.EnvelopeHash != e.CertificateHash || a.Subject != e.EnvelopeID || s.KeyID != a.KeyID:
		return core.Errorf(core.CodeCertInvalid, "the signed approval at entry %d belongs to another envelope or key", en.Seq)
	case s.ApprovedBy != en.Actor:
		return core.Errorf(core.CodeCertInvalid, "the signed approval at entry %d names %s, the entry %s", en.Seq, s.ApprovedBy, en.Actor)
	case s.ApproverRole != twinstore.RoleApprover && s.ApproverRole != twinstore.RoleAdmin:
		return core.Errorf(core.CodeCertInvalid, "envelope %s was approved with role %q: only the approver or admin role approves", e.EnvelopeID, s.ApproverRole)
	}
	roles, err := st.NameRoles(ctx, s.ApprovedBy)
	if err != nil {
		return err
	}
	for _, r := range roles {
		if r == "agent" {
			return core.Errorf(core.CodeCertInvalid, "envelope %s was approved as %s, the name of an agent's API token: only a person approves", e.EnvelopeID, s.ApprovedBy)
		}
	}
	if err := e.Approve(s.ApprovedBy, time.UnixMilli(s.ApprovedAt)); err != nil {
		return core.Wrap(core.CodeCertInvalid, err, fmt.Sprintf("the approval at entry %d", en.Seq))
	}
	return nil
}

// List returns the envelopes issued on lineID ("" every line), newest
// first, at most limit, each loaded and verified; one that does not
// verify is left out and named in bad.
func List(ctx context.Context, st RecordStore, pub ed25519.PublicKey, lineID string, limit int, now time.Time) (out []*Record, bad []string, err error) {
	return audit.Replay(ctx, st.AuditLog(), AuditIssue, lineID, limit, func(ctx context.Context, id string) (*Record, error) {
		return Load(ctx, st, pub, id, now)
	})
}

var _ Signer = (*cert.KeyPair)(nil)
