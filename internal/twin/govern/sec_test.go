package govern_test

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Security issue #16, finding 4: the write guard must not trust the
// certificate row. Each test edits the database behind AML's back, as
// someone with write access to it can, and expects the write denied.

// exec runs SQL on the fixture's database (the attacker's access).
func (f *fixture) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := f.st.DB().Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// forceRow rewrites certificate id's row (status, approver and JSON
// agreeing, so the row passes its own checks) to c.
func (f *fixture) forceRow(t *testing.T, c *contract.RecommendationCertificate) {
	t.Helper()
	js, err := core.CanonicalJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	f.exec(t, `UPDATE twin_certificates SET status=?, approved_by=?, cert_json=? WHERE certificate_id=?`, string(c.Status), c.ApprovedBy, string(js), c.RecommendationID)
}

func (f *fixture) load(t *testing.T, id string) *contract.RecommendationCertificate {
	t.Helper()
	r, err := f.st.LoadCertificate(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Cert
}

func denied(t *testing.T, what string, res govern.Result, err error, w *guard.RecordingWriter, reason string) {
	t.Helper()
	if core.CodeOf(err) != govern.CodeWriteDenied || res.Allowed || res.Executed || res.Reason != reason || len(w.Writes) != 0 {
		t.Fatalf("%s: want denied %s with nothing written, got %v %+v (%d writes)", what, reason, err, res, len(w.Writes))
	}
	t.Logf("%s: %s", what, res.Detail)
}

// TestSec4_ApprovalSetInDatabase: status APPROVED and an approver set
// directly in the row (no approval statement, no audit entry, no such
// person) authorise nothing.
func TestSec4_ApprovalSetInDatabase(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, false)
	c := f.load(t, id)
	c.Status, c.ApprovedBy, c.ApprovedAt = contract.CertApproved, "mallory", t0.Add(-time.Second)
	f.forceRow(t, c)
	w := writer()
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, opts(t0))
	denied(t, "approval set in the row", res, err, w, "APPROVAL_UNSIGNED")

	// Another certificate's signed approval copied over does not fit.
	other := f.certify(t, "b", baseline, step0, true)
	f.exec(t, `INSERT INTO twin_attestations(subject, kind, statement_json, hash, key_id, signature, created_at)
		SELECT ?, kind, statement_json, hash, key_id, signature, created_at FROM twin_attestations WHERE subject=? AND kind='approve'`, id, other)
	oc := f.load(t, other)
	c.ApprovedBy, c.ApprovedAt = oc.ApprovedBy, oc.ApprovedAt
	f.forceRow(t, c)
	w = writer()
	res, err = govern.Execute(ctx, f.st, f.key.Public, id, w, opts(t0))
	denied(t, "another certificate's approval", res, err, w, "APPROVAL_INVALID")
}

// TestSec4_ReplayAfterReset: after an executed certificate's writes are
// deleted and its row reset to APPROVED (the two triggers that forbid it
// dropped), it is not executed a second time: the signed execution
// statement and the audit log remember it.
func TestSec4_ReplayAfterReset(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, true)
	if res, err := govern.Execute(ctx, f.st, f.key.Public, id, writer(), opts(t0)); err != nil || !res.Executed {
		t.Fatalf("first execution: %v %+v", err, res)
	}
	f.exec(t, `DROP TRIGGER twin_certificates_terminal`)
	f.exec(t, `DROP TRIGGER twin_writes_no_delete`)
	f.exec(t, `DELETE FROM twin_writes WHERE certificate_id=?`, id)
	c := f.load(t, id)
	c.Status, c.ExecutedAt = contract.CertApproved, time.Time{}
	f.forceRow(t, c)
	w := writer()
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, opts(t0.Add(10*time.Second)))
	denied(t, "replay after reset", res, err, w, guard.ReasonCertAlreadyUsed)

	// Without the signed execution statement the audit log still has it.
	f.exec(t, `DELETE FROM twin_attestations WHERE subject=? AND kind='execute'`, id)
	w = writer()
	res, err = govern.Execute(ctx, f.st, f.key.Public, id, w, opts(t0.Add(20*time.Second)))
	denied(t, "replay without the execution statement", res, err, w, guard.ReasonCertAlreadyUsed)
}

// TestSec4_IntervalFromAudit: deleting the write history does not reopen
// the node interval for another certificate: the guard also reads the
// writes the audit log recorded.
func TestSec4_IntervalFromAudit(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	a := f.certify(t, "a", baseline, step0, true)
	b := f.certify(t, "b", baseline, step0, true)
	if res, err := govern.Execute(ctx, f.st, f.key.Public, a, writer(), opts(t0)); err != nil || !res.Executed {
		t.Fatalf("first execution: %v %+v", err, res)
	}
	f.exec(t, `DROP TRIGGER twin_writes_no_delete`)
	f.exec(t, `DELETE FROM twin_writes`)
	w := writer()
	res, err := govern.Execute(ctx, f.st, f.key.Public, b, w, opts(t0.Add(10*time.Second)))
	denied(t, "second certificate inside the node interval", res, err, w, guard.ReasonNodeInterval)
}

// TestSec4_ApproverNamedLikeAnAgent: an approval in the name an agent's
// API token carries (however spelt) is not a person's.
func TestSec4_ApproverNamedLikeAnAgent(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, true) // approved by bob
	if _, _, err := auth.NewTokens(f.st.SQL()).Create(ctx, "admin", auth.NewToken{Name: "BOB", Role: auth.RoleAgent}); err != nil {
		t.Fatal(err)
	}
	w := writer()
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, opts(t0))
	denied(t, "approval by an agent's name", res, err, w, "APPROVAL_INVALID")
}
