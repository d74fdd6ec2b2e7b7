package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/events/pgrelay"
	"github.com/aml-project/aml/internal/store/keycache"
	"github.com/aml-project/aml/internal/store/records"
	"github.com/aml-project/aml/internal/store/samples"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Store is the PostgreSQL back-end. It is safe for concurrent use, and any
// number of Stores (in any number of processes) may share one database.
type Store struct {
	// Core keeps the metadata, datasets, jobs and models, and Store the
	// twin records (scenes, snapshots, trials, certificates …), in the
	// same database; their methods are the store's.
	*records.Core
	*twinstore.Store
	// Reader is the read path both back-ends share (internal/store/samples).
	*samples.Reader

	pool     *pgxpool.Pool
	location string

	artsMu sync.Mutex
	arts   map[string]*artifact.Postgres // root → shared artifact store
	// sql is a database/sql view of pool for the record stores shared
	// with SQLite (core records, audit log, tokens, connector status,
	// twin records).
	sql *sqldb.DB
	// partitioned is true when samples is a declaratively partitioned
	// table (false for a TimescaleDB hypertable).
	partitioned bool

	mu    sync.RWMutex                        // guards parts
	nodes *keycache.Cache[string]             // node id → pk
	ctxs  *keycache.Cache[core.ContextFilter] // interned sample context → pk
	parts map[int64]string                    // month start (µs) → its partition's name

	// appendLimit, when > 0, replaces ingestBuffer as the number of rows
	// Append gathers before writing them (tests).
	appendLimit int
}

var _ core.Store = (*Store)(nil)

// Options tune OpenWith; the zero value is the default.
type Options struct {
	// Migrations replaces the embedded migrations (tests only).
	Migrations []Migration
	// MaxConns caps the pool (default: pgxpool's, max(4, CPUs)).
	MaxConns int32
}

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN) and applies pending migrations.
func Open(ctx context.Context, url string) (*Store, error) { return OpenWith(ctx, url, Options{}) }

// OpenWith is Open with options.
func OpenWith(ctx context.Context, url string, opt Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, core.Wrap(core.CodeInvalidArgument, err, "parse database URL")
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "connect to %s", redact(cfg))
	}
	if cfg.MaxConns >= 2 {
		// An ingest holds one connection for its transaction and needs a
		// second one at once (the month's partition is made on another
		// connection): dial it now, beside the first one (a backend's
		// start costs the server ≈ 10–20 ms, more on a loaded machine),
		// rather than after it or when the first batch waits for it.
		// Best effort: an error here is the next user's to see.
		go func() {
			if c, err := pool.Acquire(context.WithoutCancel(ctx)); err == nil {
				c.Release()
			}
		}()
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "connect to %s", redact(cfg))
	}
	ms := opt.Migrations
	if ms == nil {
		if ms, err = Migrations(); err != nil {
			pool.Close()
			return nil, core.Wrap(core.CodeInternal, err, "load migrations")
		}
	}
	if err := migrate(ctx, pool, ms); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{location: redact(cfg), pool: pool, nodes: keycache.New[string](), ctxs: keycache.New[core.ContextFilter](), parts: map[int64]string{}}
	db := stdlib.OpenDBFromPool(pool)
	s.sql = sqldb.New(db, db, &Dialect).WithDirect(poolDirect{pool})
	s.Reader = &samples.Reader{DB: readDB{pool}, Nodes: s.nodes, ArrayIn: true}
	s.Core = records.New(s.sql)
	s.Store = twinstore.New(s.sql)
	var kind string
	err = pool.QueryRow(ctx, `SELECT c.relkind::text FROM pg_class c WHERE c.oid = to_regclass('samples')`).Scan(&kind)
	if err != nil {
		pool.Close()
		return nil, dbErr(err, "inspect samples table")
	}
	s.partitioned = kind == "p"
	return s, nil
}

// redact names the database without its password; a schema chosen with
// search_path is kept (it says which plant's tables these are).
func redact(cfg *pgxpool.Config) string {
	u := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if sp := cfg.ConnConfig.RuntimeParams["search_path"]; sp != "" {
		u += "?search_path=" + url.QueryEscape(sp)
	}
	return u
}

// Close closes the pool.
func (s *Store) Close() error {
	err := s.sql.Writer().Close()
	s.pool.Close()
	return err
}

// Artifacts is the artifact capability (artifact.Provider): the artifact
// store in this database, materialising under root. A worker on another
// machine reads datasets and writes models through it. One per root and
// process.
func (s *Store) Artifacts(ctx context.Context, root string) (artifact.Store, error) {
	s.artsMu.Lock()
	defer s.artsMu.Unlock()
	if a, ok := s.arts[root]; ok {
		return a, nil
	}
	a, err := artifact.NewPostgres(ctx, s.pool, root)
	if err != nil {
		return nil, err
	}
	if s.arts == nil {
		s.arts = map[string]*artifact.Postgres{}
	}
	s.arts[root] = a
	return a, nil
}

// QueueDB is the job-queue capability (jobs.QueueHost): River runs on this
// pool, shared by every worker process on the database. There is no SQLite
// writer (the first result is always nil).
func (s *Store) QueueDB() (*sql.DB, *pgxpool.Pool) { return nil, s.pool }

// RelayEvents is the event capability (events.Relayer): the process's
// relayed events go to and come from every other process on this database
// (and schema) with LISTEN/NOTIFY, until ctx ends (internal/events/pgrelay).
func (s *Store) RelayEvents(ctx context.Context, bus *events.Bus, log *slog.Logger) error {
	_, err := pgrelay.Start(ctx, s.pool, bus, log)
	return err
}

// Location is the database URL without its password (internal/store.Store).
func (s *Store) Location() string { return s.location }

// SQL is the handle of the record stores shared with SQLite (core records,
// audit log, tokens, connector status, twin records).
func (s *Store) SQL() *sqldb.DB { return s.sql }

// writeLockKey is the advisory lock every sqldb write transaction takes
// (an arbitrary constant: "AML" in ASCII, then 1).
const writeLockKey = 0x414d4c01

// Dialect is PostgreSQL's for internal/store/sqldb: "$N" placeholders; one
// transaction-scoped advisory lock serialising the twin, audit, token and
// connector stores' write transactions across processes (as SQLite's
// single writer does); for the core records' concurrent transactions, row
// locks (FOR UPDATE) and named advisory locks — the name with the schema,
// so plants in schemas of their own do not wait on each other; snapshot
// reads at repeatable read; and no statement cache of sqldb's own (pgx
// prepares and caches statements per connection).
var Dialect = sqldb.Dialect{
	Name:          "postgres",
	Numbered:      true,
	LockSQL:       fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", writeLockKey),
	RowLock:       " FOR UPDATE",
	NamedLockSQL:  `SELECT pg_advisory_xact_lock(hashtext(?1::text || current_schema()))`,
	Classify:      classify,
	ReadIsolation: sql.LevelRepeatableRead,
}

// Registered at init, so that errors are classified before any store is
// open (migrations).
func init() { sqldb.Register(&Dialect) }

func classify(err error) sqldb.Class {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) || (!errors.Is(err, context.Canceled) && (pgconn.SafeToRetry(err) || pgconn.Timeout(err))) {
			return sqldb.ClassUnavailable
		}
		return sqldb.ClassOther
	}
	c := pe.Code
	switch {
	case c == sqlUniqueViolation:
		return sqldb.ClassUnique
	case c == sqlForeignKeyViolation:
		return sqldb.ClassForeignKey
	case len(c) == 5 && c[:2] == sqlIntegrityClass:
		return sqldb.ClassConstraint
	case c == sqlSerialization || c == sqlDeadlock || c == sqlLockNotAvailable || c == sqlQueryCanceled,
		len(c) == 5 && (c[:2] == "08" || c[:2] == "53" || c[:2] == "57" || c[:2] == "58"):
		return sqldb.ClassUnavailable
	}
	return sqldb.ClassOther
}

// Pool exposes the connection pool for packages that keep their own tables
// in the same database (a job queue, an artifact store).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Hypertable reports whether samples is a TimescaleDB hypertable rather
// than a natively partitioned table.
func (s *Store) Hypertable() bool { return !s.partitioned }

// SQLSTATE classes and codes used in the mapping below.
const (
	sqlUniqueViolation     = "23505"
	sqlForeignKeyViolation = "23503"
	sqlIntegrityClass      = "23"
	sqlSerialization       = "40001"
	sqlDeadlock            = "40P01"
	sqlLockNotAvailable    = "55P03"
	sqlUndefinedTable      = "42P01"
	sqlCheckViolation      = "23514"
	sqlQueryCanceled       = "57014"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func isUnique(err error) bool { return pgCode(err) == sqlUniqueViolation }

// dbErr maps a driver error to a typed error with sqldb.Err and this
// package's classify: integrity violations are AML_CONFLICT; cancellation,
// lost connections, lock timeouts, deadlocks and serialization failures
// are AML_STORE_UNAVAILABLE (worth a retry); anything else AML_INTERNAL —
// the same mapping as SQLite's.
func dbErr(err error, format string, args ...any) error { return sqldb.Err(err, format, args...) }

func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// poolDirect runs sqldb's Fast* statements (claims, heartbeats, progress,
// single-row reads of the shared records) on the pool with pgx itself:
// database/sql over the pool would acquire and wrap a connection for each
// statement (OpenDBFromPool keeps none idle, so that it never holds the
// pool's connections), which costs these hot paths more than the query.
type poolDirect struct{ pool *pgxpool.Pool }

func (d poolDirect) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (d poolDirect) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return d.pool.QueryRow(ctx, q, args...)
}

// pgxConn runs the shared statements of internal/store/records inside an
// ingest's pgx transaction (records.EnsureNode, records.EnsureRun, the
// sample contexts of samples.Keys), with their placeholders rebound.
// They run in pgx's exec mode (parse, bind and execute in one round trip,
// parameter types from the Go values) rather than the pool's default
// (prepare, then execute: two round trips the first time a connection
// sees a statement): an ingest runs each of them once or twice, mostly
// on a fresh connection (a CLI process), so preparing them only doubles
// their round trips.
type pgxConn struct {
	tx pgx.Tx
	db *sqldb.DB
}

func (c pgxConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.tx.Exec(ctx, c.db.Rebind(q), execMode(args)...)
	return tag.RowsAffected(), err
}

func (c pgxConn) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return c.tx.QueryRow(ctx, c.db.Rebind(q), execMode(args)...)
}

// execMode puts pgx.QueryExecModeExec before args (pgx takes a mode as
// the first argument).
func execMode(args []any) []any {
	return append([]any{pgx.QueryExecModeExec}, args...)
}
