package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestAuditLogNoTruncate: TRUNCATE skips row triggers, so the audit log
// refuses it with a statement trigger; the chain is intact afterwards.
func TestAuditLogNoTruncate(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	l := audit.New(s.SQL())
	for i := range 3 {
		if _, err := l.Append(ctx, "alice", "test", "s", "", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.SQL().ExecContext(ctx, `TRUNCATE audit_log`)
	if !sqldb.IsConstraint(err) {
		t.Fatalf("TRUNCATE audit_log: want a constraint refusal, got %v", err)
	}
	res, err := l.Verify(ctx)
	if err != nil || !res.OK || res.Entries != 3 {
		t.Fatalf("after refused TRUNCATE: %+v %v", res, err)
	}
}

// TestLocationRedacted: Location names the database and its schema, never
// the password.
func TestLocationRedacted(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://alice:s3cret@db.example:6543/plant?sslmode=disable&search_path=line7")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := redact(cfg), "postgres://alice@db.example:6543/plant?search_path=line7"; got != want {
		t.Fatalf("redact = %q, want %q", got, want)
	}
	s, u := openTest(t)
	if strings.Contains(s.Location(), "password") || !strings.Contains(s.Location(), "search_path=") || !strings.Contains(u, "search_path=") {
		t.Fatalf("Location %q for %q", s.Location(), u)
	}
}
