package records

import (
	"context"

	"github.com/aml-project/aml/internal/store/sqldb"
)

// Conn is a connection or transaction that the statements ingest shares
// with this package run in: a sqldb transaction (Tx), or a back-end's own
// ingest transaction adapted (PostgreSQL's pgx.Tx). Statements are written
// with SQLite's placeholders; a Conn rebinds them for its dialect.
type Conn interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// QueryRow runs a one-row query.
	QueryRow(ctx context.Context, q string, args ...any) sqldb.Row
}

// Tx is the Conn of a sqldb transaction.
func Tx(tx *sqldb.Tx) Conn { return txConn{tx} }

type txConn struct{ tx *sqldb.Tx }

func (c txConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c txConn) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return c.tx.QueryRowContext(ctx, q, args...)
}

// writer is the Conn of single statements on the writer, outside any
// transaction (each statement is atomic by itself).
type writer struct{ db *sqldb.DB }

func (c writer) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return c.db.FastExec(ctx, q, args...)
}

func (c writer) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return c.db.FastWriterRow(ctx, q, args...)
}
