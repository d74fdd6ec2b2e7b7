package twinstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Security issue #16 at the store, on both back-ends: approvals are
// signed by approvers who may approve, an execution claim is signed once
// per certificate, and the audit log's signed checkpoints expose a
// rewritten chain.

// TestSec4_StoreSignsApprovalAndClaim: ApproveCertificateAs refuses roles
// that do not approve and signs the approval of one that does; a
// certificate is claimed for execution once, even with its row reset.
func TestSec4_StoreSignsApprovalAndClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		id := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		at := twT0.Add(time.Minute)
		for _, role := range []string{"agent", "engineer", "viewer", ""} {
			_, err := s.ApproveCertificateAs(ctx, id, twinstore.Approver{Name: "bob", Role: role}, k, at)
			wantCode(t, err, core.CodeForbidden)
		}
		_, err := s.ApproveCertificateAs(ctx, id, twinstore.Approver{Name: "bob\u200b", Role: "approver"}, k, at)
		wantCode(t, err, core.CodeInvalidArgument)
		r, err := s.ApproveCertificateAs(ctx, id, twinstore.Approver{Name: "bob", Role: "approver"}, k, at)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.GetAttestation(ctx, id, twinstore.AttestApprove)
		if err != nil {
			t.Fatal(err)
		}
		if err := twinstore.CheckApproval(r.Cert, a, k.Public); err != nil {
			t.Fatal(err)
		}
		// The statement is what the row records: another approver or time
		// does not match it.
		forged := *r.Cert
		forged.ApprovedBy = "mallory"
		wantCode(t, twinstore.CheckApproval(&forged, a, k.Public), core.CodeCertInvalid)

		claim := contract.WriteClaimRequest{LineID: twLine, CertificateID: id, RunID: "run-1", Actor: "carol", At: at.Add(time.Second)}
		if _, err := s.ClaimCertificateWrite(ctx, claim, k.Public); err != nil {
			t.Fatal(err)
		}
		last, err := s.LastWriteID(ctx, twLine)
		if err != nil {
			t.Fatal(err)
		}
		claim.ExpectLastWriteID = last
		_, err = s.ClaimCertificateWrite(ctx, claim, k.Public)
		wantCode(t, err, core.CodeConflict)
		if !strings.Contains(err.Error(), "execute") {
			t.Fatalf("second claim: %v", err)
		}
		if _, err := s.GetAttestation(ctx, id, twinstore.AttestExecute); err != nil {
			t.Fatal(err)
		}
		// The audit log verifies with its signed checkpoints, one at each
		// step.
		res, err := s.AuditLog().WithKeys(twinstore.KeysOf(k.Public)).Verify(ctx)
		if err != nil || res.Checkpoints < 3 || res.SignedSeq != res.HeadSeq {
			t.Fatalf("%v %+v", err, res)
		}
	})
}

// TestSec11_CheckpointsExposeRewrite: rewriting an entry and recomputing
// every hash after it passes the bare chain check but not the signed
// checkpoints; a forged checkpoint does not verify either.
func TestSec11_CheckpointsExposeRewrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		id := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		if _, err := s.ApproveCertificate(ctx, id, "bob", k.Public, twT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		log := s.AuditLog()
		keyed := log.WithKeys(twinstore.KeysOf(k.Public))
		if _, err := keyed.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		es, err := log.List(ctx, 0, audit.MaxListLimit, "")
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, s, b.dropTrigger("audit_log_no_update", "audit_log"))
		prev := audit.GenesisHash
		for i, e := range es {
			if i == 0 {
				e.Actor = "someone-else"
			}
			e.PrevHash = prev
			if e.Hash, err = audit.ComputeHash(e); err != nil {
				t.Fatal(err)
			}
			mustExec(t, s, `UPDATE audit_log SET actor=?, prev_hash=?, hash=? WHERE seq=?`, e.Actor, e.PrevHash, e.Hash, e.Seq)
			prev = e.Hash
		}
		if _, err := log.Verify(ctx); err != nil {
			t.Fatalf("the recomputed chain should pass the bare check: %v", err)
		}
		res, err := keyed.Verify(ctx)
		wantCode(t, err, audit.CodeAuditTampered)
		if !strings.Contains(res.Problem, "signed checkpoint") {
			t.Fatalf("%+v", res)
		}
		// Checkpoints re-signed by another key are not trusted.
		mustExec(t, s, b.dropTrigger("audit_checkpoints_no_update", "audit_checkpoints"))
		mustExec(t, s, `UPDATE audit_checkpoints SET hash=(SELECT hash FROM audit_log WHERE audit_log.seq=audit_checkpoints.seq)`)
		res, err = keyed.Verify(ctx)
		wantCode(t, err, audit.CodeAuditTampered)
		if !strings.Contains(res.Problem, "forged checkpoint") {
			t.Fatalf("%+v", res)
		}
	})
}

// TestSec11_RemovedCheckpoints: rewriting a later certificate's entries
// and deleting the checkpoints from there on is detected while an earlier
// checkpoint remains: every issue and approval after it is signed.
func TestSec11_RemovedCheckpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		a := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		if _, err := s.ApproveCertificate(ctx, a, "bob", k.Public, twT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		rb := twIssue(t, s, k, "trial-2")
		if _, err := s.ApproveCertificate(ctx, rb.Cert.RecommendationID, "bob", k.Public, twT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		log := s.AuditLog()
		keyed := twinstore.KeyedLog(log, k.Public)
		if _, err := keyed.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		es, err := log.List(ctx, 0, audit.MaxListLimit, "")
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, s, b.dropTrigger("audit_log_no_update", "audit_log"))
		prev := audit.GenesisHash
		for _, e := range es {
			if e.Seq < rb.AuditSeq {
				prev = e.Hash
				continue
			}
			if e.Seq == rb.AuditSeq {
				e.Actor = "mallory"
			}
			e.PrevHash = prev
			if e.Hash, err = audit.ComputeHash(e); err != nil {
				t.Fatal(err)
			}
			mustExec(t, s, `UPDATE audit_log SET actor=?, prev_hash=?, hash=? WHERE seq=?`, e.Actor, e.PrevHash, e.Hash, e.Seq)
			prev = e.Hash
		}
		mustExec(t, s, `DELETE FROM audit_checkpoints WHERE seq >= ?`, rb.AuditSeq)
		if _, err := log.WithKeys(twinstore.KeysOf(k.Public)).Verify(ctx); err != nil {
			t.Fatalf("without the rule the remaining checkpoints pass: %v", err)
		}
		res, err := keyed.Verify(ctx)
		wantCode(t, err, audit.CodeAuditTampered)
		if !strings.Contains(res.Problem, "checkpoints were removed") || res.FirstBad != rb.AuditSeq {
			t.Fatalf("%+v", res)
		}
	})
}
