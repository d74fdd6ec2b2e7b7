package twinstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
)

// TestLease: a lease is taken inside a serialised write transaction,
// renewed only by its holder (another handle on the database sees the
// renewal), and a holder whose lease was taken over cannot renew it.
func TestLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		other := b.again(t, st)
		t0 := time.Date(2026, 1, 5, 6, 0, 0, 0, time.UTC)
		if _, ok, err := st.Lease(ctx, "steptest/x"); err != nil || ok {
			t.Fatalf("no lease yet: %v %v", ok, err)
		}
		if err := st.RenewLease(ctx, "steptest/x", "start/1", t0); core.CodeOf(err) != core.CodeConflict {
			t.Fatalf("renewing a lease nobody took: %v", err)
		}
		take := func(holder string, at time.Time) {
			t.Helper()
			tx, err := st.SQL().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := twinstore.TakeLeaseTx(ctx, tx, "steptest/x", holder, at); err != nil {
				_ = tx.Rollback()
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		take("start/1", t0)
		if err := other.RenewLease(ctx, "steptest/x", "start/1", t0.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if l, ok, err := st.Lease(ctx, "steptest/x"); err != nil || !ok || l.Holder != "start/1" || !l.Renewed.Equal(t0.Add(5*time.Second)) {
			t.Fatalf("renewed lease: %+v %v %v", l, ok, err)
		}
		take("start/2", t0.Add(40*time.Second))
		if err := st.RenewLease(ctx, "steptest/x", "start/1", t0.Add(45*time.Second)); core.CodeOf(err) != core.CodeConflict {
			t.Fatalf("the old holder renewed a lease taken over: %v", err)
		}
		if l, _, err := other.Lease(ctx, "steptest/x"); err != nil || l.Holder != "start/2" || !l.Renewed.Equal(t0.Add(40*time.Second)) {
			t.Fatalf("lease taken over: %+v %v", l, err)
		}
	})
}
