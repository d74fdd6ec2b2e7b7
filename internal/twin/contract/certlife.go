package contract

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// The certificate's own rules: verifying its hash and signature, and its
// lifecycle
//
//	ISSUED ──Approve──▶ APPROVED ──MarkExecuted──▶ EXECUTED
//	  │  ╲                 │  ╲
//	  │   Revoke           │   Revoke ──▶ REVOKED
//	  │                    │
//	  └──expiry────────────┴──expiry──▶ EXPIRED
//
// They are methods of the document so that whoever holds one — the record
// store reading and updating a row, the write guard — applies the same
// rules without depending on the issuer (package twin/cert, which builds,
// signs and keeps the key, and whose functions of the same names call
// these).

// CertIssueInput is what a certificate is issued from (cert.Issue).
type CertIssueInput struct {
	// RecommendationID names the certificate; a random "rec-…" id when
	// empty.
	RecommendationID string
	// CreatedBy is the requester: the identity that asked for the
	// recommendation. The requester can never approve it.
	CreatedBy string
	// Scene is the frozen scene the trial ran on.
	Scene *SceneContract
	// Trial is the virtual trial whose candidate is certified. It must
	// validate against Scene, pass (every constraint passed, accepted as
	// in distribution) and improve on the baseline (improvement > 0).
	Trial *VirtualTrial
	// SnapshotHash, ModelHash and ObjectiveHash (required) and RecipeHash
	// (optional) are hex sha256 of the twin snapshot, the (hybrid) model
	// artifact or manifest, the objective profile and the recipe version.
	SnapshotHash, ModelHash, ObjectiveHash, RecipeHash string
}

// CertKeyID returns the id of a certificate signing key's public half:
// the first KeyIDLen hex characters of its sha256.
func CertKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])[:KeyIDLen]
}

func certErr(code, field, format string, args ...any) *core.Error {
	return core.FieldErrorf(code, field, format, args...)
}

// Verify checks that c is well formed (Validate), that its
// certificateHash is the hash of its signed body, that keyId is the id of
// pub and that the signature is pub's Ed25519 signature of the 32 hash
// bytes. Any change to a signed field, the hash, the signature or the key
// id fails with AML_CERT_INVALID. Verify does not look at status or the
// clock (see CanWrite).
func (c *RecommendationCertificate) Verify(pub ed25519.PublicKey) error {
	if c == nil {
		return certErr(core.CodeCertInvalid, "", "no certificate")
	}
	return verifySigned(pub, signedDoc{noun: "certificate", sigNoun: "", validate: c.Validate,
		keyID: c.KeyID, hash: c.CertificateHash, signature: c.Signature, bodyHash: c.BodyHash})
}

// certTransitions is the certificate state machine: from → allowed
// targets. Final statuses have no entry.
var certTransitions = map[CertStatus][]CertStatus{
	CertIssued:   {CertApproved, CertRevoked, CertExpired},
	CertApproved: {CertExecuted, CertRevoked, CertExpired},
}

// CanMoveTo reports whether the state machine has the transition s → to.
func (s CertStatus) CanMoveTo(to CertStatus) bool {
	for _, t := range certTransitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// Expired reports whether c's expiry has passed at now (now ≥ expiresAt).
func (c *RecommendationCertificate) Expired(now time.Time) bool {
	return !now.Before(c.ExpiresAt)
}

// ExpireIfDue marks an ISSUED or APPROVED certificate whose expiry has
// passed EXPIRED (expiredAt = now) and reports whether it did. A sweeper
// calls it; the transitions call it themselves.
func (c *RecommendationCertificate) ExpireIfDue(now time.Time) bool {
	if !c.Status.CanMoveTo(CertExpired) || !c.Expired(now) {
		return false
	}
	c.Status, c.ExpiredAt = CertExpired, now.UTC()
	return true
}

func (c *RecommendationCertificate) expiredErr() error {
	return certErr(core.CodeCertExpired, "expiresAt", "certificate %s expired at %s", c.RecommendationID, c.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

func (c *RecommendationCertificate) conflict(action string, want ...CertStatus) error {
	ws := make([]string, len(want))
	for i, w := range want {
		ws[i] = string(w)
	}
	return core.FieldErrorf(core.CodeConflict, "status", "cannot %s certificate %s: it is %s (must be %s)", action, c.RecommendationID, c.Status, strings.Join(ws, " or "))
}

// Approve moves an ISSUED certificate to APPROVED, recording approvedBy =
// by and approvedAt = now (outside the signed body: approval is a
// lifecycle record, the issuer's signature covers what was certified).
// Four-eyes rule: by may be neither the certificate's requester
// (createdBy) nor requester (the identity asking for the write, when
// given), compared ignoring case and surrounding space — AML_FORBIDDEN.
// An expired certificate is marked EXPIRED and refused with
// AML_CERT_EXPIRED. Callers verify the signature first (Verify).
func (c *RecommendationCertificate) Approve(by, requester string, now time.Time) error {
	if strings.TrimSpace(by) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "approvedBy", "the approver is required")
	}
	if c.Status != CertIssued {
		return c.conflict("approve", CertIssued)
	}
	if c.ExpireIfDue(now) {
		return c.expiredErr()
	}
	if SameIdentity(by, c.CreatedBy) || (strings.TrimSpace(requester) != "" && SameIdentity(by, requester)) {
		return core.FieldErrorf(core.CodeForbidden, "approvedBy", "%s requested this recommendation and cannot approve it; another person must", by)
	}
	if now.Before(c.IssuedAt) {
		return core.FieldErrorf(core.CodeInvalidArgument, "approvedAt", "approval time is before issuedAt")
	}
	c.Status, c.ApprovedBy, c.ApprovedAt = CertApproved, by, now.UTC()
	return nil
}

// Revoke moves an ISSUED or APPROVED certificate to REVOKED, recording
// by, now and reason (all required). It does not look at expiry: revoking
// a certificate that has lapsed but was not yet marked EXPIRED records why
// it must not be used.
func (c *RecommendationCertificate) Revoke(by, reason string, now time.Time) error {
	if strings.TrimSpace(by) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "revokedBy", "who revokes is required")
	}
	if strings.TrimSpace(reason) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "revokeReason", "a reason is required")
	}
	if !c.Status.CanMoveTo(CertRevoked) {
		return c.conflict("revoke", CertIssued, CertApproved)
	}
	if now.Before(c.IssuedAt) {
		return core.FieldErrorf(core.CodeInvalidArgument, "revokedAt", "revocation time is before issuedAt")
	}
	c.Status, c.RevokedBy, c.RevokedAt, c.RevokeReason = CertRevoked, by, now.UTC(), reason
	return nil
}

// MarkExecuted moves an APPROVED, unexpired certificate to EXECUTED
// (executedAt = now). An expired one is marked EXPIRED and refused with
// AML_CERT_EXPIRED.
func (c *RecommendationCertificate) MarkExecuted(now time.Time) error {
	if c.Status != CertApproved {
		return c.conflict("execute", CertApproved)
	}
	if c.ExpireIfDue(now) {
		return c.expiredErr()
	}
	if now.Before(c.ApprovedAt) {
		return core.FieldErrorf(core.CodeInvalidArgument, "executedAt", "execution time is before approvedAt")
	}
	c.Status, c.ExecutedAt = CertExecuted, now.UTC()
	return nil
}

// CanWrite reports whether c authorises a write at now: only an APPROVED
// certificate before its expiry does. It changes nothing (a guard, not a
// transition): expired → AML_CERT_EXPIRED, any other status →
// AML_CONFLICT. It does not verify the signature (Verify does).
func (c *RecommendationCertificate) CanWrite(now time.Time) error {
	if c == nil {
		return core.Errorf(core.CodeForbidden, "no certificate: writes need an approved certificate")
	}
	switch {
	case c.Status == CertExpired:
		return c.expiredErr()
	case c.Status != CertApproved:
		return c.conflict("write with", CertApproved)
	case c.Expired(now):
		return c.expiredErr()
	}
	return nil
}
