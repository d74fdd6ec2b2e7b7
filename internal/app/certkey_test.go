package app

import (
	"context"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/cert"
)

// TestCertRotateKeyOp: only a local admin rotates (an API admin is
// AML_FORBIDDEN, another role is refused by the role table); after the
// rotation the app issues with the new key and certificates of both keys
// read as verified.
func TestCertRotateKeyOp(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	old := f.certified(t, "t-old", "run-1")
	for _, p := range []Principal{{Name: "root", Role: auth.RoleAdmin}, {Name: "erin", Role: auth.RoleApprover, Local: true}} {
		if _, err := f.a.CertRotateKey(ctx, p, CertRotateKeyRequest{}); core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("%+v: %v", p, err)
		}
	}
	r, err := f.a.CertRotateKey(ctx, Principal{Name: "root", Role: auth.RoleAdmin, Local: true}, CertRotateKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.OldKeyID != f.key.ID || r.KeyID == f.key.ID || !r.At.Equal(f.now) {
		t.Fatalf("%+v", r)
	}
	if k, err := cert.LoadKey(f.a.d.DataDir); err != nil || k.ID != r.KeyID {
		t.Fatalf("data directory key %v %v", k, err)
	}
	n, err := f.a.CertIssue(ctx, Principal{Name: "eve", Role: auth.RoleEngineer}, CertIssueRequest{Trial: f.trial(t, "t-new", "run-1", secStep)})
	if err != nil || n.Cert.KeyID != r.KeyID {
		t.Fatalf("issue after rotation: %v", err)
	}
	l, err := f.a.CertList(ctx, operator, CertListRequest{})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("%v %+v", err, l)
	}
	for _, it := range l.Items {
		if !it.Verified {
			t.Fatalf("%s not verified: %s", it.Cert.RecommendationID, it.Problem)
		}
	}
	if _, err := f.a.CertShow(ctx, operator, CertRequest{ID: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.AuditVerify(ctx, operator, AuditVerifyRequest{}); err != nil {
		t.Fatal(err)
	}
}
