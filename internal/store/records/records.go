package records

import (
	"context"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Core is the record store over one database handle. It is safe for
// concurrent use, and on PostgreSQL any number of Cores (in any number of
// processes) may share one database.
type Core struct {
	db *sqldb.DB
	w  writer
}

var (
	_ core.Meta     = (*Core)(nil)
	_ core.Datasets = (*Core)(nil)
	_ core.Jobs     = (*Core)(nil)
)

// New returns the record store in the database behind db.
func New(db *sqldb.DB) *Core { return &Core{db: db, w: writer{db}} }

func nowMs() int64 { return time.Now().UnixMilli() }

// ValidateNode is the check EnsureNode makes of a node before writing it,
// for a back-end that writes several nodes in one statement.
func ValidateNode(n core.Node) error { return validateNode(n) }

func requireID(field, id string) error {
	if strings.TrimSpace(id) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, field, "%s is required", field)
	}
	return nil
}

func notFound(kind, id string) error {
	return core.FieldErrorf(core.CodeNotFound, kind, "%s %q not found", kind, id)
}

// dbErr maps a driver error to a typed error (sqldb.Err: constraint →
// AML_CONFLICT; busy, locked, lost connection, cancelled →
// AML_STORE_UNAVAILABLE; else AML_INTERNAL).
func dbErr(err error, format string, args ...any) error { return sqldb.Err(err, format, args...) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scanner is a row or a row set positioned on a row.
type scanner interface{ Scan(dest ...any) error }

func isUnique(err error) bool     { return sqldb.IsUnique(err) }
func isForeignKey(err error) bool { return sqldb.IsForeignKey(err) }

// queryList runs q and scans every row with scan; what names the query in
// errors. An empty result is an empty slice, never nil.
func queryList[T any](ctx context.Context, db *sqldb.DB, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbErr(err, "%s", what)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, dbErr(err, "%s", what)
		}
		out = append(out, v)
	}
	return out, dbErr(rows.Err(), "%s", what)
}
