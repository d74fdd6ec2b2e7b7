package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/keycache"
	"github.com/aml-project/aml/internal/store/records"
	"github.com/aml-project/aml/internal/store/samples"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// FileName is the database file inside the data directory.
const FileName = "aml.db"

// Store is the embedded back-end. It is safe for concurrent use.
type Store struct {
	// Core keeps the metadata, datasets, jobs and models, and Store the
	// twin records (scenes, snapshots, trials, certificates …), in the
	// same file; their methods are the store's.
	*records.Core
	*twinstore.Store
	// Reader is the read path both back-ends share (internal/store/samples).
	*samples.Reader

	path string
	w    *sql.DB // single writer connection, BEGIN IMMEDIATE
	r    *sql.DB // readers

	sql *sqldb.DB // w and r for the stores shared with PostgreSQL

	nodes *keycache.Cache[string]             // node id → pk
	ctxs  *keycache.Cache[core.ContextFilter] // interned sample context → pk
}

var _ core.Store = (*Store)(nil)

// Options tune Open; the zero value is the default.
type Options struct {
	// Migrations replaces the embedded migrations (tests only).
	Migrations []Migration
	// Synchronous is the SQLite synchronous pragma, default NORMAL (safe
	// in WAL mode: a power loss may lose the last transactions, never
	// corrupt the file).
	Synchronous string
}

// Open opens (creating if needed) the store in data directory dir and
// applies pending migrations.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, opt Options) (*Store, error) {
	if err := privateDataDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	syncMode := opt.Synchronous
	if syncMode == "" {
		syncMode = "NORMAL"
	}
	dsn := func(txlock string) string {
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "busy_timeout(15000)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous("+syncMode+")")
		q.Add("_txlock", txlock)
		return "file:" + path + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "open %s", path)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	ms := opt.Migrations
	if ms == nil {
		if ms, err = Migrations(); err != nil {
			_ = w.Close() // nothing was written; the error below is the one that matters
			return nil, core.Wrap(core.CodeInternal, err, "load migrations")
		}
	}
	if err := migrate(context.Background(), w, ms); err != nil {
		_ = w.Close() // the migration error is the one that matters
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn("deferred"))
	if err != nil {
		_ = w.Close() // the open error is the one that matters
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "open %s", path)
	}
	r.SetMaxOpenConns(4)
	st := &Store{path: path, w: w, r: r, nodes: keycache.New[string](), ctxs: keycache.New[core.ContextFilter]()}
	st.sql = sqldb.New(w, r, &Dialect)
	st.Reader = &samples.Reader{DB: readDB{r}, Nodes: st.nodes}
	st.Core = records.New(st.sql)
	st.Store = twinstore.New(st.sql)
	return st, nil
}

// privateDataDir creates the data directory (mode 0700) or tightens an
// existing one to 0700, and creates the database file, or tightens an
// existing one and its WAL and shared-memory files, to 0600: the data
// directory holds the signing key, token hashes and every job's files,
// readable by the owner only. SQLite creates its -wal and -shm files with
// the database file's permissions.
func privateDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "create data dir %s", dir)
	}
	if err := tighten(dir, 0o700); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "data dir %s", dir)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "open %s", path)
	}
	if err := f.Close(); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "open %s", path)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := tighten(p, 0o600); err != nil && !os.IsNotExist(err) {
			return core.Wrap(core.CodeStoreUnavailable, err, "database file %s", p)
		}
	}
	return nil
}

// tighten removes permission bits beyond want (group and other access).
func tighten(path string, want os.FileMode) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&^want == 0 {
		return nil
	}
	return os.Chmod(path, st.Mode().Perm()&want)
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Location is the database file (internal/store.Store).
func (s *Store) Location() string { return s.path }

// Close closes both pools.
func (s *Store) Close() error {
	s.sql.CloseStatements()
	return errors.Join(s.r.Close(), s.w.Close())
}

// DB exposes the writer handle for packages that keep their own tables in
// the same file (datasets, jobs, registry) so they can join transactions.
func (s *Store) DB() *sql.DB { return s.w }

// ReadDB exposes the reader pool.
func (s *Store) ReadDB() *sql.DB { return s.r }

// SQL is the handle of the record stores shared with PostgreSQL (core
// records, audit log, tokens, connector status, twin records).
func (s *Store) SQL() *sqldb.DB { return s.sql }

// Dialect is SQLite's for internal/store/sqldb: "?" placeholders as
// written; write transactions are BEGIN IMMEDIATE on the single writer
// connection, so they need no lock of their own (no LockSQL, RowLock or
// NamedLockSQL); and hot statements are prepared once per pool, as the
// pure-Go driver prepares on every unprepared call — preparing dominated
// the job system's per-job cost (BenchmarkJobsEndToEnd).
var Dialect = sqldb.Dialect{Name: "sqlite", Classify: classify, Prepare: true}

// Registered at init, so that errors are classified before any store is
// open (migrations).
func init() { sqldb.Register(&Dialect) }

func classify(err error) sqldb.Class {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return sqldb.ClassOther
	}
	c := se.Code()
	switch {
	case c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return sqldb.ClassUnique
	case c == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return sqldb.ClassForeignKey
	case c&0xff == sqlite3.SQLITE_CONSTRAINT:
		return sqldb.ClassConstraint
	}
	switch c & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
		return sqldb.ClassUnavailable
	}
	return sqldb.ClassOther
}

// dbErr maps a driver error to a typed error (sqldb.Err: constraint →
// AML_CONFLICT, busy/locked/I/O/cancelled → AML_STORE_UNAVAILABLE, else
// AML_INTERNAL), the same mapping as the shared stores'.
func dbErr(err error, format string, args ...any) error { return sqldb.Err(err, format, args...) }
