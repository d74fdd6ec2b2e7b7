package contract

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// lifecycleDoc is an envelope or a step test as the lifecycle test drives
// it: its transitions, its validation, and its unsigned lifecycle record.
type lifecycleDoc interface {
	Approve(by string, now time.Time) error
	Revoke(by, reason string, now time.Time) error
	Validate() error
}

type lifecycleFields struct {
	status                  *CertStatus
	approvedBy, revokedBy   *string
	approvedAt, revokedAt   *time.Time
	revokeReason, createdBy *string
	keyID, hash, signature  *string
}

// TestLifecycleTransitions pins, for an envelope and a step test, every
// refusal of Approve and Revoke (code, field, message) and every finding
// of Validate on an inconsistent lifecycle record, and the records the
// transitions write.
func TestLifecycleTransitions(t *testing.T) {
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	newEnvelope := func() (lifecycleDoc, lifecycleFields) {
		e := EnvelopeCertificate{SchemaVersion: 1, EnvelopeID: "env-1", CreatedAt: at, CreatedBy: "alice", LineID: "line-1", SceneID: "s",
			SceneVersion: "1.0.0", SceneHash: strings.Repeat("a", 64), ModelID: "m", Bounds: map[string]ChannelBound{"hold_time": {Min: 6, Max: 10}},
			MaxMovesPerHour: 6, IssuedAt: at, ExpiresAt: at.Add(time.Hour), KeyID: strings.Repeat("b", 16), CertificateHash: strings.Repeat("c", 64),
			Signature: strings.Repeat("A", 86) + "==", Status: CertIssued}
		return &e, lifecycleFields{&e.Status, &e.ApprovedBy, &e.RevokedBy, &e.ApprovedAt, &e.RevokedAt, &e.RevokeReason, &e.CreatedBy, &e.KeyID, &e.CertificateHash, &e.Signature}
	}
	newStepTest := func() (lifecycleDoc, lifecycleFields) {
		s := stepTestSeed()
		return &s, lifecycleFields{&s.Status, &s.ApprovedBy, &s.RevokedBy, &s.ApprovedAt, &s.RevokedAt, &s.RevokeReason, &s.CreatedBy, &s.KeyID, &s.CertificateHash, &s.Signature}
	}
	show := func(err error) string {
		if err == nil {
			return "ok"
		}
		if ps := ProblemsOf(err); len(ps) > 0 {
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = p.Field + ": " + p.Message
			}
			return strings.Join(s, "; ")
		}
		return err.Error()
	}
	run := func(mk func() (lifecycleDoc, lifecycleFields)) []string {
		var out []string
		add := func(what string, err error) { out = append(out, what+" → "+show(err)) }
		d, f := mk()
		add("approve by nobody", d.Approve(" ", at))
		add("approve by the proposer", d.Approve(" ALICE ", at))
		add("approve before issue", d.Approve("bob", at.Add(-time.Second)))
		add("approve at expiry", d.Approve("bob", at.Add(time.Hour)))
		add("revoke by nobody", d.Revoke("", "why", at))
		add("revoke without reason", d.Revoke("bob", " ", at))
		add("approve", d.Approve("bob", at.Add(time.Minute).In(time.FixedZone("x", 3600))))
		out = append(out, fmt.Sprintf("approved: %s %s %s", *f.status, *f.approvedBy, f.approvedAt.Format(time.RFC3339)))
		add("validate approved", d.Validate())
		add("approve again", d.Approve("carol", at.Add(2*time.Minute)))
		add("revoke", d.Revoke("carol", "drift", at.Add(3*time.Minute)))
		out = append(out, fmt.Sprintf("revoked: %s %s %s %s", *f.status, *f.revokedBy, f.revokedAt.Format(time.RFC3339), *f.revokeReason))
		add("validate revoked", d.Validate())
		add("revoke again", d.Revoke("carol", "drift", at.Add(4*time.Minute)))
		add("approve revoked", d.Approve("carol", at.Add(4*time.Minute)))
		for _, c := range []struct {
			what string
			mut  func(f lifecycleFields)
		}{
			{"issued with an approval", func(f lifecycleFields) { *f.approvedBy = "bob" }},
			{"issued with a revocation", func(f lifecycleFields) { *f.revokeReason = "x" }},
			{"approved without approvedAt", func(f lifecycleFields) { *f.status, *f.approvedBy = CertApproved, "bob" }},
			{"approved and revoked", func(f lifecycleFields) {
				*f.status, *f.approvedBy, *f.approvedAt, *f.revokedBy = CertApproved, "bob", at, "carol"
			}},
			{"revoked without reason", func(f lifecycleFields) { *f.status, *f.revokedBy, *f.revokedAt = CertRevoked, "carol", at }},
			{"unknown status", func(f lifecycleFields) { *f.status = "EXECUTED" }},
			{"approved by the proposer", func(f lifecycleFields) {
				*f.status, *f.approvedBy, *f.approvedAt = CertApproved, "Alice", at
			}},
			{"bad approver id", func(f lifecycleFields) { *f.status, *f.approvedBy, *f.approvedAt = CertApproved, " bob", at }},
			{"bad revocation record", func(f lifecycleFields) {
				*f.status, *f.revokedBy, *f.revokedAt, *f.revokeReason = CertRevoked, "carol\n", at, "drift\x00"
			}},
			{"bad key id", func(f lifecycleFields) { *f.keyID = strings.Repeat("B", 16) }},
			{"bad hash", func(f lifecycleFields) { *f.hash = "" }},
			{"bad signature", func(f lifecycleFields) { *f.signature = "AAAA" }},
		} {
			d, f := mk()
			c.mut(f)
			add("validate "+c.what, d.Validate())
		}
		return out
	}
	want := map[string]string{
		"envelope": `approve by nobody → AML_INVALID_ARGUMENT: approvedBy: the approver is required
approve by the proposer → AML_FORBIDDEN: approvedBy:  ALICE  proposed this envelope and cannot approve it; another person must
approve before issue → AML_INVALID_ARGUMENT: approvedAt: approval time is before issuedAt
approve at expiry → AML_CERT_EXPIRED: expiresAt: envelope env-1 expired at 2026-03-01T09:00:00Z
revoke by nobody → AML_INVALID_ARGUMENT: revokedBy: who revokes is required
revoke without reason → AML_INVALID_ARGUMENT: revokeReason: a reason is required
approve → ok
approved: APPROVED bob 2026-03-01T08:01:00Z
validate approved → ok
approve again → AML_CONFLICT: status: cannot approve envelope env-1: it is APPROVED (must be ISSUED)
revoke → ok
revoked: REVOKED carol 2026-03-01T08:03:00Z drift
validate revoked → ok
revoke again → AML_CONFLICT: status: cannot revoke envelope env-1: it is REVOKED (must be ISSUED or APPROVED)
approve revoked → AML_CONFLICT: status: cannot approve envelope env-1: it is REVOKED (must be ISSUED)
validate issued with an approval → status: an ISSUED envelope has no approval or revocation
validate issued with a revocation → status: an ISSUED envelope has no approval or revocation
validate approved without approvedAt → approvedBy: required when APPROVED
validate approved and revoked → revokedBy: only a REVOKED envelope has a revocation record
validate revoked without reason → revokedBy: revokedBy, revokedAt and revokeReason are required when REVOKED
validate unknown status → status: an envelope is ISSUED, APPROVED or REVOKED, not "EXECUTED"
validate approved by the proposer → approvedBy: the proposer "alice" cannot approve their own envelope
validate bad approver id → approvedBy: has leading or trailing white space
validate bad revocation record → revokedBy: has leading or trailing white space; revokeReason: contains a NUL byte
validate bad key id → keyId: must be 16 lower-case hex characters
validate bad hash → certificateHash: required
validate bad signature → signature: must be a base64 Ed25519 signature (64 bytes)`,
		"step test": `approve by nobody → AML_INVALID_ARGUMENT: approvedBy: the approver is required
approve by the proposer → AML_FORBIDDEN: approvedBy:  ALICE  proposed this step test and cannot approve it; another person must
approve before issue → AML_INVALID_ARGUMENT: approvedAt: approval time is before issuedAt
approve at expiry → AML_CERT_EXPIRED: expiresAt: step test st-1 expired at 2026-03-01T09:00:00Z
revoke by nobody → AML_INVALID_ARGUMENT: revokedBy: who revokes is required
revoke without reason → AML_INVALID_ARGUMENT: revokeReason: a reason is required
approve → ok
approved: APPROVED bob 2026-03-01T08:01:00Z
validate approved → ok
approve again → AML_CONFLICT: status: cannot approve step test st-1: it is APPROVED (must be ISSUED)
revoke → ok
revoked: REVOKED carol 2026-03-01T08:03:00Z drift
validate revoked → ok
revoke again → AML_CONFLICT: status: cannot revoke step test st-1: it is REVOKED (must be ISSUED or APPROVED)
approve revoked → AML_CONFLICT: status: cannot approve step test st-1: it is REVOKED (must be ISSUED)
validate issued with an approval → status: an ISSUED step test has no approval or revocation
validate issued with a revocation → status: an ISSUED step test has no approval or revocation
validate approved without approvedAt → approvedBy: required when APPROVED
validate approved and revoked → revokedBy: only a REVOKED step test has a revocation record
validate revoked without reason → revokedBy: revokedBy, revokedAt and revokeReason are required when REVOKED
validate unknown status → status: a step test is ISSUED, APPROVED or REVOKED, not "EXECUTED"
validate approved by the proposer → approvedBy: the proposer "alice" cannot approve their own step test
validate bad approver id → approvedBy: has leading or trailing white space
validate bad revocation record → revokedBy: has leading or trailing white space; revokeReason: contains a NUL byte
validate bad key id → keyId: must be 16 lower-case hex characters
validate bad hash → certificateHash: required
validate bad signature → signature: must be a base64 Ed25519 signature (64 bytes)`,
	}
	for name, mk := range map[string]func() (lifecycleDoc, lifecycleFields){"envelope": newEnvelope, "step test": newStepTest} {
		got := strings.Join(run(mk), "\n")
		if got != want[name] {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, want[name])
		}
	}
}
