package contract

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// The lifecycle an envelope and a step test share (a recommendation
// certificate has its own, with EXECUTED and EXPIRED states: certlife.go)
//
//	ISSUED ──Approve──▶ APPROVED ──Revoke──▶ REVOKED
//	  └──expiry──────────┴──expiry──▶ (expired: no write)
//
// and the checks of their validity window and signature fields.

// approvalRecord is a document's lifecycle record (its unsigned fields,
// by pointer so that the transitions write them) and what the checks and
// transitions read of it: how it names itself, its id, proposer and
// validity window.
type approvalRecord struct {
	// noun names the document in messages ("envelope", "step test");
	// aNoun is it with its article ("an envelope", "a step test").
	noun, aNoun         string
	id, createdBy       string
	issuedAt, expiresAt time.Time

	status       *CertStatus
	approvedBy   *string
	approvedAt   *time.Time
	revokedBy    *string
	revokedAt    *time.Time
	revokeReason *string
}

// checkValidity adds the problems of a validity window: both times set,
// expiresAt after issuedAt and at most maxTTL later.
func checkValidity(p *problems, issuedAt, expiresAt time.Time, maxTTL time.Duration) {
	checkTime(p, "issuedAt", issuedAt, true)
	checkTime(p, "expiresAt", expiresAt, true)
	if !issuedAt.IsZero() && !expiresAt.IsZero() {
		if !expiresAt.After(issuedAt) {
			p.add("expiresAt", "must be after issuedAt")
		} else if expiresAt.Sub(issuedAt) > maxTTL {
			p.add("expiresAt", "at most %s after issuedAt", maxTTL)
		}
	}
}

// checkSignedFields adds the problems of a signed document's key id,
// certificate hash and signature (their form, not whether they verify).
func checkSignedFields(p *problems, keyID, hash, signature string) {
	if len(keyID) != KeyIDLen || !isHash(keyID+strings.Repeat("0", 64-KeyIDLen)) {
		p.add("keyId", "must be %d lower-case hex characters", KeyIDLen)
	}
	checkHash(p, "certificateHash", hash, true)
	if sig, err := base64.StdEncoding.DecodeString(signature); signature == "" || err != nil || len(sig) != ed25519.SignatureSize {
		p.add("signature", "must be a base64 Ed25519 signature (64 bytes)")
	}
}

// check adds the problems of the record: consistent with the status
// (ISSUED, APPROVED or REVOKED), well-formed identities and reason, and
// an approver other than the proposer.
func (r approvalRecord) check(p *problems) {
	approved := *r.approvedBy != "" || !r.approvedAt.IsZero()
	revoked := *r.revokedBy != "" || !r.revokedAt.IsZero() || *r.revokeReason != ""
	switch *r.status {
	case CertIssued:
		if approved || revoked {
			p.add("status", "an ISSUED %s has no approval or revocation", r.noun)
		}
	case CertApproved:
		if *r.approvedBy == "" || r.approvedAt.IsZero() {
			p.add("approvedBy", "required when APPROVED")
		}
		if revoked {
			p.add("revokedBy", "only a REVOKED %s has a revocation record", r.noun)
		}
	case CertRevoked:
		if *r.revokedBy == "" || r.revokedAt.IsZero() || strings.TrimSpace(*r.revokeReason) == "" {
			p.add("revokedBy", "revokedBy, revokedAt and revokeReason are required when REVOKED")
		}
	default:
		p.add("status", "%s is ISSUED, APPROVED or REVOKED, not %q", r.aNoun, string(*r.status))
	}
	checkOptRef(p, "approvedBy", *r.approvedBy)
	checkOptRef(p, "revokedBy", *r.revokedBy)
	checkText(p, "revokeReason", *r.revokeReason, false)
	if *r.approvedBy != "" && SameIdentity(*r.approvedBy, r.createdBy) {
		p.add("approvedBy", "the proposer %q cannot approve their own %s", r.createdBy, r.noun)
	}
}

// approve moves an ISSUED, unexpired document to APPROVED by by at now.
// The proposer never approves (AML_FORBIDDEN).
func (r approvalRecord) approve(by string, now time.Time) error {
	switch {
	case strings.TrimSpace(by) == "":
		return core.FieldErrorf(core.CodeInvalidArgument, "approvedBy", "the approver is required")
	case *r.status != CertIssued:
		return core.FieldErrorf(core.CodeConflict, "status", "cannot approve %s %s: it is %s (must be ISSUED)", r.noun, r.id, *r.status)
	case !now.Before(r.expiresAt):
		return certErr(core.CodeCertExpired, "expiresAt", "%s %s expired at %s", r.noun, r.id, r.expiresAt.UTC().Format(time.RFC3339Nano))
	case SameIdentity(by, r.createdBy):
		return core.FieldErrorf(core.CodeForbidden, "approvedBy", "%s proposed this %s and cannot approve it; another person must", by, r.noun)
	case now.Before(r.issuedAt):
		return core.FieldErrorf(core.CodeInvalidArgument, "approvedAt", "approval time is before issuedAt")
	}
	*r.status, *r.approvedBy, *r.approvedAt = CertApproved, by, now.UTC()
	return nil
}

// revoke moves an ISSUED or APPROVED document to REVOKED (by, reason
// required).
func (r approvalRecord) revoke(by, reason string, now time.Time) error {
	switch {
	case strings.TrimSpace(by) == "":
		return core.FieldErrorf(core.CodeInvalidArgument, "revokedBy", "who revokes is required")
	case strings.TrimSpace(reason) == "":
		return core.FieldErrorf(core.CodeInvalidArgument, "revokeReason", "a reason is required")
	case *r.status != CertIssued && *r.status != CertApproved:
		return core.FieldErrorf(core.CodeConflict, "status", "cannot revoke %s %s: it is %s (must be ISSUED or APPROVED)", r.noun, r.id, *r.status)
	}
	*r.status, *r.revokedBy, *r.revokedAt, *r.revokeReason = CertRevoked, by, now.UTC(), reason
	return nil
}
