package twinstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
)

// TestTrailApproval: the signed approval an audit entry holds is
// verified with the keyring and decoded; an entry without one, a
// statement signed by an unknown key or edited after signing, and a
// statement that does not decode are AML_CERT_INVALID naming the record.
func TestTrailApproval(t *testing.T) {
	ctx := context.Background()
	s, k := twFixture(t, sqliteBackend)
	ring, err := s.Keyring(ctx, k.Public)
	if err != nil {
		t.Fatal(err)
	}
	type stmt struct {
		Kind   string `json:"kind"`
		TestID string `json:"testId"`
	}
	signed := func(t *testing.T, key *cert.KeyPair) *twinstore.Attestation {
		t.Helper()
		a, err := twinstore.SignStatement(key, "st-1", twinstore.AttestApprove, stmt{Kind: "k", TestID: "st-1"}, twT0)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	entry := func(payload any) audit.Entry {
		b, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		return audit.Entry{Seq: 7, Payload: b}
	}
	good := signed(t, k)
	var got stmt
	a, err := twinstore.TrailApproval(entry(map[string]any{"approval": good}), ring, "step test", "st-1", &got)
	if err != nil || a.Hash != good.Hash || got != (stmt{Kind: "k", TestID: "st-1"}) {
		t.Fatalf("good approval: %+v %+v %v", a, got, err)
	}
	other, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	edited := *good
	edited.Statement = json.RawMessage(`{"kind":"k","testId":"st-2"}`)
	var n int
	for _, c := range []struct {
		name, says string
		en         audit.Entry
		into       any
	}{
		{"no approval", "approval entry 7 of step test st-1 holds no signed statement", entry(map[string]any{"statementHash": "x"}), &got},
		{"not an object", "approval entry 7 of step test st-1 holds no signed statement", entry([]int{1}), &got},
		{"unknown key", "neither the deployment key nor a key it retired", entry(map[string]any{"approval": signed(t, other)}), &got},
		{"edited statement", "does not hash to its recorded hash", entry(map[string]any{"approval": &edited}), &got},
		{"does not decode", "the approval of step test st-1 does not decode", entry(map[string]any{"approval": good}), &n},
	} {
		_, err := twinstore.TrailApproval(c.en, ring, "step test", "st-1", c.into)
		if core.CodeOf(err) != core.CodeCertInvalid || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %s saying %q", c.name, err, core.CodeCertInvalid, c.says)
		}
	}
}
