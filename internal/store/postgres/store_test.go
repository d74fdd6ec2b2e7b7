package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/store/storetest"
	"github.com/jackc/pgx/v5"
)

// The tests need a PostgreSQL server: AML_TEST_PG is its URL (.ci/run
// starts a throwaway one with .ci/pg.sh and always sets it). Every test
// gets a schema of its own, dropped at the end, so tests share one
// database without seeing each other's rows (internal/store/postgres/pgtest).

// schemaURL is pgtest's (one mechanism for every package whose tests run
// on PostgreSQL).
func schemaURL(t testing.TB) string { return pgtest.Schema(t) }

func openURL(t testing.TB, u string) *Store {
	t.Helper()
	s, err := Open(context.Background(), u)
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

func openTest(t testing.TB) (*Store, string) {
	u := schemaURL(t)
	return openURL(t, u), u
}

// urls remembers which URL each test store was opened with, for Again.
var urls sync.Map // *Store → string

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) core.Store {
			s, u := openTest(t)
			urls.Store(s, u)
			return s
		},
		Again: func(t *testing.T, s core.Store) core.Store {
			u, _ := urls.Load(s.(*Store))
			return openURL(t, u.(string))
		},
	})
}

func TestMigrationsEmptyExistingAndRefusals(t *testing.T) {
	ctx := context.Background()
	s, u := openTest(t)
	ms, _ := Migrations()
	if v, err := s.SchemaVersion(ctx); err != nil || v != len(ms) {
		t.Fatalf("schema version %d err %v, want %d", v, err, len(ms))
	}
	if err := s.EnsureLine(ctx, core.Line{ID: "L1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Re-open: nothing re-applied, data kept.
	s = openURL(t, u)
	if lines, err := s.ListLines(ctx); err != nil || len(lines) != 1 {
		t.Fatalf("lines %v err %v", lines, err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("%d migration rows, want %d", n, len(ms))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	extra := append(append([]Migration{}, ms...), Migration{Version: len(ms) + 1, Name: "extra", SQL: "CREATE TABLE extra_t(x integer);", Checksum: "abc"})
	s, err := OpenWith(ctx, u, Options{Migrations: extra})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SchemaVersion(ctx); v != len(ms)+1 {
		t.Fatalf("version %d after extra migration", v)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO extra_t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = Open(ctx, u)
	if core.CodeOf(err) != core.CodeSchemaTooNew {
		t.Fatalf("older binary on newer schema: got %v, want %s", err, core.CodeSchemaTooNew)
	}
	changed := append([]Migration{}, extra...)
	changed[0].Checksum = "different"
	_, err = OpenWith(ctx, u, Options{Migrations: changed})
	if core.CodeOf(err) != core.CodeSchemaMismatch {
		t.Fatalf("checksum mismatch: got %v", err)
	}
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	u := schemaURL(t)
	ms, _ := Migrations()
	bad := append(append([]Migration{}, ms...), Migration{Version: len(ms) + 1, Name: "bad", SQL: "CREATE TABLE ok_t(x integer); CREATE TABLE broken(", Checksum: "x"})
	if _, err := OpenWith(ctx, u, Options{Migrations: bad}); err == nil {
		t.Fatal("broken migration applied")
	}
	s := openURL(t, u)
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('ok_t') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("half-applied migration left a table behind")
	}
}

// Several processes opening a fresh database at once: each migration is
// applied exactly once and every opener succeeds.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	u := schemaURL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), u)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := openURL(t, u)
	ms, _ := Migrations()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("%d migration rows, want %d", n, len(ms))
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(context.Background(), "postgres://%zz")
	if core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("bad URL: %v", err)
	}
	// Port 1 on loopback: nothing listens there.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Open(ctx, "postgres://aml@127.0.0.1:1/x?sslmode=disable&connect_timeout=5")
	if core.CodeOf(err) != core.CodeStoreUnavailable {
		t.Fatalf("unreachable server: %v", err)
	}
}

func us(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 12, 0, 0, 0, time.UTC).UnixMicro()
}

func countIn(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// Samples land in monthly partitions made on demand; the default partition
// stays empty; rows parked in the default partition move out when their
// month's partition is made.
func TestMonthlyPartitionsOnDemand(t *testing.T) {
	ctx := context.Background()
	s, u := openTest(t)
	if s.Hypertable() {
		t.Fatal("no TimescaleDB here, samples must be natively partitioned")
	}
	c := core.ContextFilter{Line: "L", Product: "P", Recipe: "R", Run: "r"}
	var b []core.Sample
	for _, ts := range []int64{us(2026, 1, 5), us(2026, 1, 31), us(2026, 2, 1), us(1969, 12, 31), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMicro()} {
		b = append(b, core.Sample{Node: "n", TsUs: ts, Value: 1, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run})
	}
	if _, err := s.WriteSamples(ctx, b); err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int{"samples_202601": 2, "samples_202602": 1, "samples_196912": 1, "samples_202603": 1, "samples_default": 0} {
		if got := countIn(t, s, table); got != want {
			t.Fatalf("%s holds %d rows, want %d", table, got, want)
		}
	}
	// Every partition carries the BRIN index and the (node, ts) key.
	var brin, pk int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE indexdef LIKE '%USING brin (ts)%'), count(*) FILTER (WHERE indexdef LIKE '%UNIQUE%(node, ts)%')
		FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'samples_202601'`).Scan(&brin, &pk)
	if err != nil {
		t.Fatal(err)
	}
	if brin != 1 || pk != 1 {
		t.Fatalf("partition indexes: brin %d pk %d", brin, pk)
	}
	// A row parked in the default partition (a partition that could not be
	// made in time) moves out when its month's partition is made.
	parked := us(2030, 5, 2)
	var ctxPK, nodePK int64
	if err := s.pool.QueryRow(ctx, `SELECT pk FROM sample_ctx`).Scan(&ctxPK); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT pk FROM nodes WHERE id='n'`).Scan(&nodePK); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO samples(node, ts, value, ctx) VALUES ($1,$2,7,$3)`, nodePK, parked, ctxPK); err != nil {
		t.Fatal(err)
	}
	if got := countIn(t, s, "samples_default"); got != 1 {
		t.Fatalf("default holds %d", got)
	}
	// A second store (another process) writes that month: the partition
	// is made, the parked row moves into it, and both rows are readable.
	s2 := openURL(t, u)
	if _, err := s2.WriteSamples(ctx, []core.Sample{{Node: "n", TsUs: parked + 1000, Value: 8, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}}); err != nil {
		t.Fatal(err)
	}
	if d, p := countIn(t, s, "samples_default"), countIn(t, s, "samples_203005"); d != 0 || p != 2 {
		t.Fatalf("after making the partition: default %d, samples_203005 %d", d, p)
	}
	// The first store's partition cache does not know the new month; a
	// write there finds it in the catalog and does not try to make it again.
	if _, err := s.WriteSamples(ctx, []core.Sample{{Node: "n", TsUs: parked + 2000, Value: 9, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}}); err != nil {
		t.Fatal(err)
	}
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: core.ContextFilter{Run: "r"}, Limit: 100})
	if err != nil || len(p.Points) != 8 || p.Points[0].TsUs != us(1969, 12, 31) || p.Points[7].Value != 9 {
		t.Fatalf("read back across partitions: %+v %v", p.Points, err)
	}
}

// The partial unique index itself refuses a second production model, not
// only the store's retire-then-promote logic.
func TestOneProductionModelInSQL(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "p", Path: "d/ds",
		SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := s.pool.Exec(ctx, `INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind,
			artifact_path, artifact_hash, created_at, stage_changed_at) VALUES ($1,'j','ds','L','P','R','p','t','candidate','k','a',$2,0,0)`,
			fmt.Sprintf("m%d", i), strings.Repeat("c", 64)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE models SET stage='production'`); !isUnique(err) {
		t.Fatalf("database accepted two production models: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	_, err := s.pool.Exec(ctx, `INSERT INTO lines(id, created_at) VALUES ('a', 0), ('a', 0)`)
	if got := core.CodeOf(dbErr(err, "x")); got != core.CodeConflict {
		t.Fatalf("unique violation → %s", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.pool.Exec(cctx, `SELECT 1`)
	if got := core.CodeOf(dbErr(err, "x")); got != core.CodeStoreUnavailable {
		t.Fatalf("cancelled → %s (%v)", got, err)
	}
	_, err = s.pool.Exec(ctx, `SELECT * FROM no_such_table`)
	if got := core.CodeOf(dbErr(err, "x")); got != core.CodeInternal {
		t.Fatalf("undefined table → %s", got)
	}
}

// A batch within one month is copied into its partition directly; a
// cached partition that is gone, or that holds another range, makes the
// batch go through samples instead (same rows stored, nothing lost).
func TestCopyIntoPartition(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	c := core.ContextFilter{Line: "L", Product: "P", Recipe: "R", Run: "r"}
	mk := func(day int, v float64) []core.Sample {
		var b []core.Sample
		for i := range 50 {
			b = append(b, core.Sample{Node: "n", TsUs: us(2026, 4, day) + int64(i)*1000, Value: v, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run})
		}
		return b
	}
	if _, err := s.WriteSamples(ctx, mk(1, 1)); err != nil {
		t.Fatal(err)
	}
	lo, _ := monthBounds(us(2026, 4, 1))
	if got := s.partitionOf(lo); got != "samples_202604" {
		t.Fatalf("partition of April 2026: %q", got)
	}
	// The cache names a table that does not exist.
	s.mu.Lock()
	s.parts[lo] = "samples_gone"
	s.mu.Unlock()
	if _, err := s.WriteSamples(ctx, mk(2, 2)); err != nil {
		t.Fatal(err)
	}
	// The cache names a partition of another month: its bound refuses the
	// rows, which then go through samples to their own partition.
	if _, err := s.WriteSamples(ctx, []core.Sample{{Node: "n", TsUs: us(2026, 5, 3), Value: 5, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.parts[lo] = "samples_202605"
	s.mu.Unlock()
	if _, err := s.WriteSamples(ctx, mk(3, 3)); err != nil {
		t.Fatal(err)
	}
	// The wrong entry is dropped; the next write finds the partition in
	// the catalog again.
	if got := s.partitionOf(lo); got != "" {
		t.Fatalf("after the fallback the cache names %q", got)
	}
	if _, err := s.WriteSamples(ctx, mk(4, 4)); err != nil {
		t.Fatal(err)
	}
	if got := s.partitionOf(lo); got != "samples_202604" {
		t.Fatalf("after a reload the cache names %q", got)
	}
	for table, want := range map[string]int{"samples_202604": 200, "samples_202605": 1, "samples_default": 0} {
		if got := countIn(t, s, table); got != want {
			t.Fatalf("%s holds %d rows, want %d", table, got, want)
		}
	}
}

// upToDate, the one-query check every open makes first, is true only when
// schema_migrations holds exactly the binary's steps and checksums.
func TestMigrationsUpToDate(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	ms, _ := Migrations()
	changed := append([]Migration{}, ms...)
	changed[3].Checksum = "different"
	more := append(append([]Migration{}, ms...), Migration{Version: len(ms) + 1, Name: "x", Checksum: "y"})
	for _, c := range []struct {
		name string
		ms   []Migration
		want bool
	}{{"same", ms, true}, {"newer schema", ms[:len(ms)-1], false}, {"checksum", changed, false}, {"pending", more, false}, {"none", nil, false}} {
		if got := upToDate(ctx, s.pool, c.ms); got != c.want {
			t.Errorf("%s: upToDate %v, want %v", c.name, got, c.want)
		}
	}
}
