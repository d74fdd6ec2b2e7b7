package twinstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// The twin record store is one Go implementation over two databases, so
// every test here runs on both: SQLite always (a real file in t.TempDir()),
// PostgreSQL when AML_TEST_PG names a server (a fresh schema per test, see
// pgtest.Schema; without it the PostgreSQL subtests skip, in CI
// they fail). What differs between the back-ends is in backend.
//
// Statements run behind the store's back (tampering, dropping a trigger)
// go through st.SQL(), written with SQLite placeholders like the store's
// own. A trigger or CHECK refusal is asserted with sqldb.IsConstraint, not
// just err != nil: it must be a constraint error on both back-ends, so that
// sqldb.Err maps it to AML_CONFLICT alike.

// backend is one database engine as the tests need it.
type backend struct {
	name string
	// open returns a store on a new, empty, migrated database.
	open func(t *testing.T) store.Store
	// again opens a second handle on st's database: what another process
	// sharing the database would have.
	again func(t *testing.T, st store.Store) store.Store
	// dropTrigger is the statement that drops trigger name of table (what
	// someone with direct database access does before editing a row):
	// SQLite names triggers per schema, PostgreSQL per table.
	dropTrigger func(name, table string) string
}

var sqliteBackend = backend{
	name: "sqlite",
	open: func(t *testing.T) store.Store {
		s, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	},
	again: func(t *testing.T, st store.Store) store.Store {
		s, err := sqlite.Open(filepath.Dir(st.(*sqlite.Store).Path()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	},
	dropTrigger: func(name, _ string) string { return `DROP TRIGGER ` + name },
}

// pgURLs remembers the schema URL each PostgreSQL test store was opened
// with, for again.
var pgURLs sync.Map // *postgres.Store → string

func openPG(t *testing.T, u string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

var postgresBackend = backend{
	name: "postgres",
	open: func(t *testing.T) store.Store {
		u := pgtest.Schema(t)
		s := openPG(t, u)
		pgURLs.Store(s, u)
		t.Cleanup(func() { pgURLs.Delete(s) })
		return s
	},
	again: func(t *testing.T, st store.Store) store.Store {
		u, ok := pgURLs.Load(st.(*postgres.Store))
		if !ok {
			t.Fatal("again: not a store made by postgresBackend.open")
		}
		return openPG(t, u.(string))
	},
	dropTrigger: func(name, table string) string { return `DROP TRIGGER ` + name + ` ON ` + table },
}

// forEachBackend runs fn as one subtest per back-end. The PostgreSQL
// subtest skips up front without AML_TEST_PG (fails in CI), so a skip is
// one line per test, not one per nested case.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	t.Run(sqliteBackend.name, func(t *testing.T) { fn(t, sqliteBackend) })
	t.Run(postgresBackend.name, func(t *testing.T) {
		pgtest.Server(t)
		fn(t, postgresBackend)
	})
}

// mustExec runs raw SQL (SQLite placeholders; rebound on PostgreSQL)
// through st's shared handle and fails the test on error.
func mustExec(t *testing.T, st store.Store, q string, args ...any) {
	t.Helper()
	if _, err := st.SQL().ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
