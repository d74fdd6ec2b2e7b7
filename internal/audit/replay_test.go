package audit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
)

// TestTrailPages: Trail returns every entry of its subject in seq order,
// across more than one page of MaxListLimit, and nothing of another
// subject.
func TestTrailPages(t *testing.T) {
	if testing.Short() {
		t.Skip("appends MaxListLimit+3 entries")
	}
	l, s := newLog(t)
	ctx := context.Background()
	tx, err := s.SQL().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := audit.MaxListLimit + 3
	for i := range n {
		if _, err := l.AppendTx(ctx, tx, "alice", "x", "long", "L1", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendTx(ctx, tx, "alice", "x", "other", "L1", nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := l.Trail(ctx, "long")
	if err != nil || len(got) != n {
		t.Fatalf("%d entries, %v; want %d", len(got), err, n)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || e.Subject != "long" {
			t.Fatalf("entry %d: seq %d subject %s", i, e.Seq, e.Subject)
		}
	}
	if got, err := l.Trail(ctx, "none"); err != nil || len(got) != 0 {
		t.Fatalf("no trail: %v %v", got, err)
	}
}

// TestReplay: the subjects of the newest issue entries of a line (every
// line when empty), newest first, at most limit, each replayed; those
// the replay refuses are named apart and never listed.
func TestReplay(t *testing.T) {
	l, _ := newLog(t)
	ctx := context.Background()
	for i, line := range []string{"L1", "L2", "L1", "L1", "L2"} {
		id := fmt.Sprintf("r%d", i)
		if _, err := l.Append(ctx, "alice", "thing.issue", id, line, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, "bob", "thing.approve", id, line, nil); err != nil {
			t.Fatal(err)
		}
	}
	load := func(_ context.Context, id string) (string, error) {
		if id == "r2" {
			return "", core.Errorf(core.CodeCertInvalid, "%s does not verify", id)
		}
		trail, err := l.Trail(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s:%d", id, len(trail)), nil
	}
	cases := []struct {
		line    string
		limit   int
		out     []string
		bad     []string
		comment string
	}{
		{"", 0, []string{"r4:2", "r3:2", "r1:2", "r0:2"}, []string{"r2"}, "every line"},
		{"L1", 0, []string{"r3:2", "r0:2"}, []string{"r2"}, "one line"},
		{"L2", 1, []string{"r4:2"}, nil, "limit"},
		{"L3", 0, nil, nil, "no such line"},
	}
	for _, c := range cases {
		out, bad, err := audit.Replay(ctx, l, "thing.issue", c.line, c.limit, load)
		if err != nil || !slices.Equal(out, c.out) || !slices.Equal(bad, c.bad) {
			t.Errorf("%s: %v %v %v; want %v %v", c.comment, out, bad, err, c.out, c.bad)
		}
	}
}
