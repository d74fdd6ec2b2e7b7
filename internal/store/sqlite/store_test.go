package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

func openTest(t testing.TB) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, dir
}

func TestMigrationsEmptyAndExisting(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := Migrations()
	v, err := s.SchemaVersion(context.Background())
	if err != nil || v != len(ms) {
		t.Fatalf("schema version %d err %v, want %d", v, err, len(ms))
	}
	if err := s.EnsureLine(context.Background(), core.Line{ID: "L1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Re-open: nothing re-applied, data kept.
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := s.ListLines(context.Background())
	if err != nil || len(lines) != 1 {
		t.Fatalf("lines %v err %v", lines, err)
	}
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("%d migration rows, want %d", n, len(ms))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// An existing database gets a new migration applied at open.
	extra := append(append([]Migration{}, ms...), Migration{Version: len(ms) + 1, Name: "extra", SQL: "CREATE TABLE extra_t(x INTEGER);", Checksum: "abc"})
	s, err = OpenWith(dir, Options{Migrations: extra})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SchemaVersion(context.Background()); v != len(ms)+1 {
		t.Fatalf("version %d after extra migration", v)
	}
	if _, err := s.w.Exec(`INSERT INTO extra_t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The older binary (without the extra migration) refuses the newer schema.
	_, err = Open(dir)
	if core.CodeOf(err) != core.CodeSchemaTooNew {
		t.Fatalf("older binary on newer schema: got %v, want %s", err, core.CodeSchemaTooNew)
	}

	// A changed migration body is detected.
	changed := append([]Migration{}, extra...)
	changed[0].Checksum = "different"
	_, err = OpenWith(dir, Options{Migrations: changed})
	if core.CodeOf(err) != core.CodeSchemaMismatch {
		t.Fatalf("checksum mismatch: got %v", err)
	}
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	ms, _ := Migrations()
	bad := append(append([]Migration{}, ms...), Migration{Version: len(ms) + 1, Name: "bad", SQL: "CREATE TABLE ok_t(x); CREATE TABLE broken(", Checksum: "x"})
	if _, err := OpenWith(dir, Options{Migrations: bad}); err == nil {
		t.Fatal("broken migration applied")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name='ok_t'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("half-applied migration left a table behind")
	}
}

func sampleRun(run string) core.ContextFilter {
	return core.ContextFilter{Line: "L1", Product: "P1", Recipe: "R1", Run: run}
}

func mk(node string, ts int64, v float64, state string, c core.ContextFilter) core.Sample {
	return core.Sample{Node: node, TsUs: ts, Value: v, State: state, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}
}

// TestOneProductionModelInSQL: the partial unique index itself refuses a
// second production model of one key, whatever the code does (the
// promotion race of the conformance suite relies on it).
func TestOneProductionModelInSQL(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	if err := s.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m1", "m2"} {
		if _, err := s.w.Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind,
			artifact_path, artifact_hash, created_at, stage_changed_at) VALUES (?, 'j', 'ds', 'L', 'P', 'R', 'mpc_surrogate', 't', 'candidate', 'k', 'p', ?, 0, 0)`,
			id, strings.Repeat("c", 64)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.w.Exec(`UPDATE models SET stage='production'`); core.CodeOf(sqldb.Err(err, "promote")) != core.CodeConflict {
		t.Fatalf("database accepted two production models: %v", err)
	}
}
