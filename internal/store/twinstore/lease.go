package twinstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Lease is a name held by one holder while the holder renews it
// (table twin_leases): a running step test's executor renews the lease
// of its test every few seconds, so that another process can tell a
// live execution from one whose process was killed. What a lease means
// (its timeout) is its user's.
type Lease struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder"`
	Renewed time.Time `json:"renewed"`
}

// LeaseTx reads lease name inside tx (ok false: none).
func LeaseTx(ctx context.Context, tx *sqldb.Tx, name string) (l Lease, ok bool, err error) {
	return scanLease(name, tx.QueryRowContext(ctx, `SELECT holder, renewed_at FROM twin_leases WHERE name = ?`, name))
}

// TakeLeaseTx gives lease name to holder, renewed at now, inside tx (a
// write transaction whose caller decided the lease may be taken: Begin
// serialises it against every renewal).
func TakeLeaseTx(ctx context.Context, tx *sqldb.Tx, name, holder string, now time.Time) error {
	if err := requireID("name", name); err != nil {
		return err
	}
	if err := requireID("holder", holder); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO twin_leases(name, holder, renewed_at) VALUES (?,?,?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, renewed_at = excluded.renewed_at`, name, holder, now.UnixMilli())
	return sqldb.Err(err, "lease %s: take", name)
}

// Lease reads lease name (ok false: none).
func (s *Store) Lease(ctx context.Context, name string) (l Lease, ok bool, err error) {
	return scanLease(name, s.db.QueryRowContext(ctx, `SELECT holder, renewed_at FROM twin_leases WHERE name = ?`, name))
}

// RenewLease renews lease name at now when holder still holds it, in a
// serialised write transaction (so a renewal and a claim that reads the
// lease never interleave); AML_CONFLICT when another holder took it or
// it does not exist.
func (s *Store) RenewLease(ctx context.Context, name, holder string, now time.Time) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "lease %s: begin", name)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE twin_leases SET renewed_at = ? WHERE name = ? AND holder = ?`, now.UnixMilli(), name, holder)
	if err != nil {
		return sqldb.Err(err, "lease %s: renew", name)
	}
	if n, err := res.RowsAffected(); err != nil {
		return sqldb.Err(err, "lease %s: renew", name)
	} else if n == 0 {
		return core.FieldErrorf(core.CodeConflict, "lease", "lease %s is no longer held by %s", name, holder)
	}
	return sqldb.Err(tx.Commit(), "lease %s: commit", name)
}

func scanLease(name string, row *sql.Row) (Lease, bool, error) {
	var l Lease
	var ms int64
	switch err := row.Scan(&l.Holder, &ms); {
	case errors.Is(err, sql.ErrNoRows):
		return Lease{}, false, nil
	case err != nil:
		return Lease{}, false, sqldb.Err(err, "lease %s: read", name)
	}
	l.Name, l.Renewed = name, time.UnixMilli(ms).UTC()
	return l, true, nil
}
