package postgres

import (
	"context"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/store/sqldb"
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
