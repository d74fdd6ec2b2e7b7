// Package pgtest gives tests in other packages a PostgreSQL schema of their
// own (internal/store/twinstore runs its suite on both back-ends). It is a
// package of its own so that the testing package is never linked into the
// aml binary through internal/store/postgres.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Test support for other packages' tests that run against PostgreSQL too
// (internal/store/twinstore runs its suite on both back-ends). It is the
// mechanism this package's own tests use: AML_TEST_PG is a server URL
// (.ci/run starts a throwaway server with .ci/pg.sh and always sets it), and
// every test gets a schema of its own, dropped when the test ends, so tests
// share one database without seeing each other's rows.

// Server returns the URL in AML_TEST_PG. Without it the test is
// skipped with a message saying how to get a server — except in CI (CI set),
// where a missing server is a failure: the suites must run on both
// back-ends there, not skip silently.
func Server(t testing.TB) string {
	t.Helper()
	u := os.Getenv("AML_TEST_PG")
	if u == "" && os.Getenv("CI") != "" {
		t.Fatal("AML_TEST_PG is not set in CI: .ci/run must start PostgreSQL (.ci/pg.sh) so the store suites run on both back-ends")
	}
	if u == "" {
		t.Skip("AML_TEST_PG is not set: PostgreSQL store tests need a server URL (start one with .ci/pg.sh start DIR; .ci/run does)")
	}
	return u
}

// Schema creates an empty schema in the AML_TEST_PG database (see
// Server for when it skips) and returns a URL whose connections use
// it (search_path). The schema is dropped with everything in it when t
// ends. Open the URL as often as needed: every Store opened on it shares
// the schema, as processes sharing one database do.
func Schema(t testing.TB) string {
	t.Helper()
	base := Server(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to AML_TEST_PG: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }() // the schema is created or t has failed
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		// A schema left behind is only clutter in the throwaway database:
		// say so, but it is no reason to fail the test.
		if _, err := conn.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Logf("drop test schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	qv := u.Query()
	qv.Set("search_path", schema)
	u.RawQuery = qv.Encode()
	return u.String()
}
