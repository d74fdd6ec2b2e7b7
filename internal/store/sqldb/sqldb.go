// Package sqldb is the SQL handle shared by the stores that run the same
// statements on both back-ends: the core records (internal/store/records:
// metadata, datasets, jobs, models), the audit log (internal/audit), API
// tokens (internal/auth), connector status (internal/connect) and the twin
// records (internal/store/twinstore).
//
// Why one handle instead of two copies of each store: keeping one
// implementation means one set of invariants (compare-and-set status
// changes, hash checks, audit entries in the same transaction) to review
// and test. The back-ends differ in a few places only, and a Dialect covers
// them:
//
//   - placeholders: statements are written with SQLite's "?" and "?N";
//     on PostgreSQL they are rewritten once to "$N" (and cached);
//   - serialised write transactions (Begin): SQLite has one writer
//     connection and BEGIN IMMEDIATE, so a read-then-write transaction
//     never interleaves with another writer. On PostgreSQL every such
//     transaction first takes one transaction-scoped advisory lock
//     (Dialect.LockSQL), which gives the same guarantee across every
//     process sharing the database — the audit chain, write-interval
//     checks and certificate claims rely on it. Those stores write a few
//     rows per operator action, so one lock costs nothing that matters;
//   - concurrent write transactions (BeginConcurrent): the core records
//     are written by many workers at once on PostgreSQL (claims,
//     heartbeats, finishes), so their transactions take no store-wide
//     lock: each statement is a compare-and-set, and where a transaction
//     reads before it writes it locks what it read — a row
//     (Dialect.RowLock, "FOR UPDATE") or a name (Tx.LockName, an advisory
//     lock). On SQLite both are empty: the single writer already holds
//     every write transaction apart;
//   - the hot single statements (Fast*: claims, heartbeats, progress,
//     reads of one row) take each back-end's fastest path. SQLite's
//     pure-Go driver prepares a statement on every unprepared call, so
//     they are prepared once per pool (Dialect.Prepare). On PostgreSQL
//     they run on pgx's pool directly (a Direct, set by the back-end):
//     database/sql over pgxpool acquires and wraps a connection for every
//     statement, since it may keep none idle, and pgx caches prepared
//     statements per connection by itself;
//   - error classes: unique, foreign-key and other constraint violations
//     and "store unavailable" are recognised by each driver's own codes
//     (Dialect.Classify).
//
// The back-ends construct their DB (sqlite.Store.SQL, postgres.Store.SQL);
// this package imports no driver.
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aml-project/aml/internal/core"
)

// Class is the kind of a driver error.
type Class int

// Error classes.
const (
	ClassOther       Class = iota
	ClassUnique            // unique or primary-key violation
	ClassConstraint        // any other constraint (check, trigger refusal)
	ClassUnavailable       // busy, locked, I/O, connection lost
	ClassForeignKey        // foreign-key violation
)

// Dialect describes one back-end.
type Dialect struct {
	// Name is "sqlite" or "postgres".
	Name string
	// Numbered rewrites "?" and "?N" placeholders to "$N".
	Numbered bool
	// LockSQL, if set, runs first in every serialised write transaction
	// (Begin).
	LockSQL string
	// RowLock is appended to a SELECT in a concurrent write transaction
	// (BeginConcurrent) that must lock the rows it reads until commit:
	// " FOR UPDATE" on PostgreSQL, empty where write transactions are
	// serialised anyway (SQLite).
	RowLock string
	// NamedLockSQL, if set, takes a transaction-scoped lock named by its one
	// argument (?1), for Tx.LockName; empty where write transactions are
	// serialised anyway.
	NamedLockSQL string
	// Prepare makes the Fast* methods prepare their statements once per
	// pool (drivers that would prepare on every call otherwise).
	Prepare bool
	// Classify returns the class of a driver error, ClassOther for errors
	// that are not its driver's.
	Classify func(error) Class
	// ReadIsolation is the isolation of BeginRead's transactions: the
	// default for SQLite (a deferred transaction reads one snapshot),
	// repeatable read for PostgreSQL (read committed would not).
	ReadIsolation sql.IsolationLevel
}

// classifiers are the Classify functions of every dialect a DB was made
// with. The drivers' error types are disjoint, so Err can classify an error
// without knowing which database it came from — code that scans rows
// outside a method of its store (row decoders) needs that.
var classifiers sync.Map // dialect name → func(error) Class

// Register makes d's error classification known to Err, IsUnique and
// IsConstraint (the back-ends register at init; New registers too).
func Register(d *Dialect) {
	if d.Classify != nil {
		classifiers.LoadOrStore(d.Name, d.Classify)
	}
}

func classify(err error) Class {
	c := ClassOther
	classifiers.Range(func(_, f any) bool {
		c = f.(func(error) Class)(err)
		return c == ClassOther
	})
	return c
}

// DB is a writer handle and a reader pool of one database. It is safe for
// concurrent use.
type DB struct {
	w, r   *sql.DB
	d      *Dialect
	q      sync.Map // statement → rewritten statement
	stmts  sync.Map // stmtKey → *sql.Stmt (Dialect.Prepare)
	direct Direct   // the Fast* path, if the back-end has one
}

// Direct runs single statements, already rebound, outside any transaction
// by a back-end's own fastest path (PostgreSQL: pgx's pool, without
// database/sql in between).
type Direct interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// QueryRow runs a one-row statement.
	QueryRow(ctx context.Context, q string, args ...any) Row
}

// New returns the handle over the writer w and the reader pool r (nil: read
// through w).
func New(w, r *sql.DB, d *Dialect) *DB {
	if r == nil {
		r = w
	}
	Register(d)
	return &DB{w: w, r: r, d: d}
}

// WithDirect makes x the path of the Fast* methods (set once, right after
// New) and returns db.
func (db *DB) WithDirect(x Direct) *DB {
	db.direct = x
	return db
}

// Dialect is the back-end's dialect.
func (db *DB) Dialect() *Dialect { return db.d }

// Writer and Reader are the underlying pools (tests tamper through them).
func (db *DB) Writer() *sql.DB { return db.w }

// Reader is the reader pool.
func (db *DB) Reader() *sql.DB { return db.r }

// Rebind rewrites q for the dialect.
func (db *DB) Rebind(q string) string {
	if !db.d.Numbered {
		return q
	}
	if v, ok := db.q.Load(q); ok {
		return v.(string)
	}
	out := Rebind(q)
	db.q.Store(q, out)
	return out
}

// Rebind rewrites SQLite placeholders to PostgreSQL's: "?N" becomes "$N",
// and a bare "?" becomes "$N" with N one above the largest number assigned
// so far — SQLite's numbering, so "?2, ?" binds the second and third
// arguments on both back-ends. Text inside single quotes, double quotes,
// "--" and "/* */" comments is left alone, as SQLite does not read
// placeholders there.
func Rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			end := min(j+1, len(q))
			b.WriteString(q[i:end])
			i = end - 1
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end := len(q) // unterminated: a comment to the end, as in SQLite
			if j := strings.Index(q[i+2:], "*/"); j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(q[i:end])
			i = end - 1
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j - 1
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j > i+1 {
				if v, err := strconv.Atoi(q[i+1 : j]); err == nil && v > n {
					n = v
				}
				b.WriteByte('$')
				b.WriteString(q[i+1 : j])
				i = j - 1
			} else {
				n++
				fmt.Fprintf(&b, "$%d", n)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Querier is what DB (reading) and Tx offer.
type Querier interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// ExecContext runs a statement on the writer, outside any transaction (one
// statement is atomic on both back-ends).
func (db *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return db.w.ExecContext(ctx, db.Rebind(q), args...)
}

// QueryContext reads through the reader pool.
func (db *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return db.r.QueryContext(ctx, db.Rebind(q), args...)
}

// QueryRowContext reads one row through the reader pool.
func (db *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return db.r.QueryRowContext(ctx, db.Rebind(q), args...)
}

// Tx is a write transaction.
type Tx struct {
	tx *sql.Tx
	db *DB
}

// Begin starts a serialised write transaction: on SQLite BEGIN IMMEDIATE
// on the single writer, on PostgreSQL BEGIN followed by the dialect's lock.
func (db *DB) Begin(ctx context.Context) (*Tx, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if db.d.LockSQL != "" {
		if _, err := tx.ExecContext(ctx, db.d.LockSQL); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	return &Tx{tx: tx, db: db}, nil
}

// BeginConcurrent starts a write transaction that takes no store-wide lock:
// on SQLite the same as Begin (the single writer serialises it), on
// PostgreSQL a plain read-committed transaction running beside other
// writers. Its statements must be safe under that: compare-and-set
// updates, or reads that lock what they read (Dialect.RowLock,
// Tx.LockName).
func (db *DB) BeginConcurrent(ctx context.Context) (*Tx, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &Tx{tx: tx, db: db}, nil
}

// BeginRead starts a read-only transaction on the reader pool that sees one
// snapshot of the database for all its statements.
func (db *DB) BeginRead(ctx context.Context) (*Tx, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: db.d.ReadIsolation})
	if err != nil {
		return nil, err
	}
	return &Tx{tx: tx, db: db}, nil
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.db.Rebind(q), args...)
}

// QueryContext queries in the transaction.
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.db.Rebind(q), args...)
}

// QueryRowContext queries one row in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.db.Rebind(q), args...)
}

// Commit commits the transaction.
func (t *Tx) Commit() error { return t.tx.Commit() }

// Rollback aborts the transaction; after Commit it is a no-op.
func (t *Tx) Rollback() error { return t.tx.Rollback() }

// DB is the handle the transaction belongs to.
func (t *Tx) DB() *DB { return t.db }

// Raw is the underlying database/sql transaction, for what a back-end does
// beyond the shared statements (SQLite's prepared multi-row sample
// inserts). Statements run on it are not rebound.
func (t *Tx) Raw() *sql.Tx { return t.tx }

// LockName takes the dialect's transaction-scoped lock named name
// (Dialect.NamedLockSQL), held until the transaction ends; a no-op where
// write transactions are serialised anyway.
func (t *Tx) LockName(ctx context.Context, name string) error {
	if t.db.d.NamedLockSQL == "" {
		return nil
	}
	_, err := t.ExecContext(ctx, t.db.d.NamedLockSQL, name)
	return err
}

// Row is what a one-row query returns: *sql.Row, a Direct's row, or a
// cached statement's row that may carry its prepare error.
type Row interface {
	Scan(dest ...any) error
}

type stmtKey struct {
	pool *sql.DB
	q    string
}

// stmt returns q prepared on pool, preparing it once (Dialect.Prepare).
func (db *DB) stmt(ctx context.Context, pool *sql.DB, q string) (*sql.Stmt, error) {
	k := stmtKey{pool, q}
	if s, ok := db.stmts.Load(k); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := pool.PrepareContext(ctx, db.Rebind(q))
	if err != nil {
		return nil, err
	}
	if prev, loaded := db.stmts.LoadOrStore(k, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// FastExec runs a single statement of a hot path on the writer, outside
// any transaction, and returns the number of rows it affected: through the
// back-end's Direct if it has one, else through a statement prepared once
// per pool where the dialect asks for it (Dialect.Prepare), else plainly.
func (db *DB) FastExec(ctx context.Context, q string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	switch {
	case db.direct != nil:
		return db.direct.Exec(ctx, db.Rebind(q), args...)
	case db.d.Prepare:
		var st *sql.Stmt
		if st, err = db.stmt(ctx, db.w, q); err != nil {
			return 0, err
		}
		res, err = st.ExecContext(ctx, args...)
	default:
		res, err = db.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// FastRow is a one-row read of a hot path through the reader pool (see
// FastExec for the path it takes).
func (db *DB) FastRow(ctx context.Context, q string, args ...any) Row {
	return db.fastRow(ctx, db.r, q, args)
}

// FastWriterRow is FastRow on the writer: an UPDATE … RETURNING, or a read
// that must see the caller's own writes at once.
func (db *DB) FastWriterRow(ctx context.Context, q string, args ...any) Row {
	return db.fastRow(ctx, db.w, q, args)
}

func (db *DB) fastRow(ctx context.Context, pool *sql.DB, q string, args []any) Row {
	switch {
	case db.direct != nil:
		return db.direct.QueryRow(ctx, db.Rebind(q), args...)
	case db.d.Prepare:
		st, err := db.stmt(ctx, pool, q)
		if err != nil {
			return errRow{err}
		}
		return st.QueryRowContext(ctx, args...)
	}
	return pool.QueryRowContext(ctx, db.Rebind(q), args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// CloseStatements closes the cached statements (before the back-end closes
// its pools).
func (db *DB) CloseStatements() {
	db.stmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		db.stmts.Delete(k)
		return true
	})
}

// ClassOf returns the class of err (any registered dialect).
func ClassOf(err error) Class {
	if err == nil {
		return ClassOther
	}
	return classify(err)
}

// IsUnique reports a unique or primary-key violation.
func IsUnique(err error) bool { return ClassOf(err) == ClassUnique }

// IsForeignKey reports a foreign-key violation.
func IsForeignKey(err error) bool { return ClassOf(err) == ClassForeignKey }

// IsConstraint reports any constraint violation (unique and foreign key
// included).
func IsConstraint(err error) bool {
	c := ClassOf(err)
	return c == ClassUnique || c == ClassConstraint || c == ClassForeignKey
}

// Err maps a driver error to a typed error: typed errors pass through,
// cancellation and unavailability are AML_STORE_UNAVAILABLE, constraint
// violations AML_CONFLICT, anything else AML_INTERNAL. nil stays nil.
func Err(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var ae *core.Error
	if errors.As(err, &ae) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return core.Wrap(core.CodeStoreUnavailable, err, format, args...)
	}
	switch ClassOf(err) {
	case ClassUnique, ClassConstraint, ClassForeignKey:
		e := core.Errorf(core.CodeConflict, "%s: %v", fmt.Sprintf(format, args...), err)
		e.Err = err
		return e
	case ClassUnavailable:
		return core.Wrap(core.CodeStoreUnavailable, err, format, args...)
	}
	return core.Wrap(core.CodeInternal, err, format, args...)
}
