package twinstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
)

// TestSigningKeyRegistry: the first key registers (with an audit entry),
// the same key again is a no-op from any handle, another key is refused
// with AML_CERT_KEY_MISMATCH (409) naming both ids; nothing changes.
func TestSigningKeyRegistry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		other := b.again(t, st)
		k1, err := cert.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		k2, _ := cert.GenerateKey()
		if err := st.RegisterSigningKey(ctx, nil, "x"); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("nil key: %v", err)
		}
		if err := st.RegisterSigningKey(ctx, k1, "serve-a"); err != nil {
			t.Fatal(err)
		}
		if err := other.RegisterSigningKey(ctx, k1, "serve-b"); err != nil {
			t.Fatalf("same key from another process: %v", err)
		}
		err = other.RegisterSigningKey(ctx, k2, "serve-c")
		var ce *core.Error
		if core.CodeOf(err) != twinstore.CodeKeyMismatch || !errors.As(err, &ce) || ce.Kind() != core.KindConflict {
			t.Fatalf("other key: %v", err)
		}
		for _, id := range []string{k1.ID, k2.ID} {
			if !strings.Contains(err.Error(), id) {
				t.Errorf("refusal does not name key %s: %v", id, err)
			}
		}
		es, err := audit.New(st.SQL()).List(ctx, 0, 0, k1.ID)
		if err != nil || len(es) != 1 || es[0].Action != twinstore.AuditKeyRegister || es[0].Actor != "serve-a" {
			t.Fatalf("audit %+v %v", es, err)
		}
		if es, _ := audit.New(st.SQL()).List(ctx, 0, 0, k2.ID); len(es) != 0 {
			t.Fatalf("refused key audited as registered: %+v", es)
		}
		var n int
		if err := st.SQL().QueryRowContext(ctx, `SELECT count(*) FROM twin_signing_keys`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d keys, %v", n, err)
		}
	})
}
