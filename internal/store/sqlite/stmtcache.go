package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements of hot queries. The pure-Go driver
// prepares a statement on every unprepared call; preparing dominated the
// job system's per-job cost (BenchmarkJobsEndToEnd), so queries on the
// job path are prepared once per pool.
type stmtCache struct {
	m sync.Map // key{db, query} → *sql.Stmt
}

type stmtKey struct {
	db *sql.DB
	q  string
}

func (c *stmtCache) get(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	k := stmtKey{db, q}
	if s, ok := c.m.Load(k); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := c.m.LoadOrStore(k, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

func (c *stmtCache) close() {
	c.m.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
}

// queryRow runs a cached statement on db.
func (s *Store) queryRow(ctx context.Context, db *sql.DB, q string, args ...any) *rowScanner {
	st, err := s.stmts.get(ctx, db, q)
	if err != nil {
		return &rowScanner{err: err}
	}
	return &rowScanner{row: st.QueryRowContext(ctx, args...)}
}

// exec runs a cached statement on db.
func (s *Store) exec(ctx context.Context, db *sql.DB, q string, args ...any) (sql.Result, error) {
	st, err := s.stmts.get(ctx, db, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// rowScanner is a *sql.Row that may carry a prepare error.
type rowScanner struct {
	row *sql.Row
	err error
}

func (r *rowScanner) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}
