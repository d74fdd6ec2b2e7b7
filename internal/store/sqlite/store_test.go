package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/core"
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

func i64(v int64) *int64 { return &v }

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
	return core.Sample{Node: node, TsMs: ts, Value: v, State: state, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}
}

func TestPagedQueryEverySampleOnceInOrder(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var want []core.Point
	var batch []core.Sample
	ts := int64(-5000) // negative timestamps are valid too
	for i := 0; i < 25_013; i++ {
		ts += 1 + rng.Int64N(50)
		st := core.StateOK
		if rng.IntN(10) == 0 {
			st = "bad"
		}
		v := rng.NormFloat64()
		want = append(want, core.Point{TsMs: ts, Value: v, State: st})
		c := sampleRun("r1")
		if i > 12000 {
			c = sampleRun("r2")
		}
		batch = append(batch, mk("n1", ts, v, st, c))
		batch = append(batch, mk("n2", ts, v*2, st, c))
	}
	// Write in shuffled order across several batches.
	rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	for i := 0; i < len(batch); i += 7777 {
		if _, err := s.WriteSamples(ctx, batch[i:min(i+7777, len(batch))]); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 7, 1000, 25_013, 100_000} {
		var got []core.Point
		var after *int64
		pages := 0
		for {
			p, err := s.QueryPage(ctx, core.PageQuery{Node: "n1", AfterTs: after, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			got = append(got, p.Points...)
			if !p.HasMore {
				break
			}
			if len(p.Points) != limit {
				t.Fatalf("page with more has %d points, limit %d", len(p.Points), limit)
			}
			after = i64(p.NextAfterTs)
		}
		if len(got) != len(want) {
			t.Fatalf("limit %d: got %d points want %d", limit, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("limit %d: point %d = %+v want %+v", limit, i, got[i], want[i])
			}
		}
		if limit == 1000 && pages != 26 {
			t.Fatalf("pages %d", pages)
		}
	}
	// Run filter and time window.
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "n1", Filter: core.ContextFilter{Run: "r2"}, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Points) != 25_013-12_001 || p.Points[0] != want[12001] {
		t.Fatalf("run filter: %d points", len(p.Points))
	}
	from, to := want[100].TsMs, want[200].TsMs
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "n1", FromMs: &from, ToMs: &to, Limit: 1000})
	if len(p.Points) != 101 || p.HasMore {
		t.Fatalf("window: %d points hasMore %v", len(p.Points), p.HasMore)
	}
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "n1", Filter: core.ContextFilter{Run: "nope"}})
	if len(p.Points) != 0 {
		t.Fatal("unknown run matched samples")
	}
	if _, err := s.QueryPage(ctx, core.PageQuery{Node: "ghost"}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unknown node: %v", err)
	}
	if _, err := s.QueryPage(ctx, core.PageQuery{Node: "n1", Limit: MaxPageLimit + 1}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("oversized limit: %v", err)
	}
}

func TestReingestIdempotentAndReplaces(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	c := sampleRun("r1")
	b := []core.Sample{mk("a", 1, 1, "", c), mk("a", 2, 2, "", c), mk("b", 1, 3, "uncertain", c)}
	for i := 0; i < 3; i++ {
		if _, err := s.WriteSamples(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := s.CountRunSamples(ctx, "r1")
	if err != nil || counts["a"] != 2 || counts["b"] != 1 {
		t.Fatalf("counts %v err %v", counts, err)
	}
	// Same node+ts with a new value replaces it.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("a", 2, 20, "ok", c)}); err != nil {
		t.Fatal(err)
	}
	p, _ := s.QueryPage(ctx, core.PageQuery{Node: "a"})
	if len(p.Points) != 2 || p.Points[1].Value != 20 {
		t.Fatalf("replace: %+v", p.Points)
	}
}

func TestIngestRollbackWritesNothing(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	c := sampleRun("r1")
	boom := errors.New("boom")
	err := s.Ingest(ctx, func(tx core.IngestTx) error {
		if _, err := tx.Write([]core.Sample{mk("x", 1, 1, "", c), mk("y", 1, 1, "", c)}); err != nil {
			return err
		}
		if _, err := tx.EnsureRun(core.Run{ID: "r1", LineID: "L1", ProductID: "P1", RecipeID: "R1", StartedMs: 1, EndedMs: i64(1), Status: core.RunEnded}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	nodes, _ := s.ListNodes(ctx, "")
	runs, _ := s.ListRuns(ctx, core.RunFilter{})
	if len(nodes) != 0 || len(runs) != 0 {
		t.Fatalf("rolled back ingest left nodes %v runs %v", nodes, runs)
	}
	// The caches must not remember the rolled-back node keys.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("y", 5, 1, "", c)}); err != nil {
		t.Fatal(err)
	}
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "y"})
	if err != nil || len(p.Points) != 1 {
		t.Fatalf("after rollback: %+v %v", p, err)
	}
	// Non-finite values are refused, and the whole batch with them.
	_, err = s.WriteSamples(ctx, []core.Sample{mk("y", 6, 1, "", c), mk("y", 7, math.NaN(), "", c)})
	if core.CodeOf(err) != core.CodeNonFinite {
		t.Fatalf("NaN: %v", err)
	}
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "y"})
	if len(p.Points) != 1 {
		t.Fatal("half batch written")
	}
}

func TestMultiLatestBuckets(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	var b []core.Sample
	for i := int64(0); i < 100; i++ {
		run := "r1"
		if i >= 50 {
			run = "r2"
		}
		st := ""
		if i%10 == 9 {
			st = "bad"
		}
		b = append(b, mk("a", i*100, float64(i), st, sampleRun(run)), mk("b", i*100, -float64(i), "", sampleRun(run)))
	}
	other := core.ContextFilter{Line: "L2", Product: "P9", Recipe: "R9", Run: "z"}
	b = append(b, mk("a", 1_000_000, 5, "", other))
	if _, err := s.WriteSamples(ctx, b); err != nil {
		t.Fatal(err)
	}
	res, err := s.QueryMulti(ctx, core.MultiQuery{Nodes: []string{"a", "b"}, Filter: core.ContextFilter{Run: "r2"}})
	if err != nil || len(res.Samples) != 100 || res.Truncated {
		t.Fatalf("multi: %d %v %v", len(res.Samples), res.Truncated, err)
	}
	if res.Samples[0].Node != "a" || res.Samples[0].TsMs != 5000 || res.Samples[0].Run != "r2" || res.Samples[9].State != "bad" || res.Samples[8].State != "ok" {
		t.Fatalf("multi first: %+v / %+v", res.Samples[0], res.Samples[9])
	}
	res, _ = s.QueryMulti(ctx, core.MultiQuery{Nodes: []string{"a", "b"}, Filter: core.ContextFilter{Line: "L1"}, Limit: 150})
	if len(res.Samples) != 150 || !res.Truncated {
		t.Fatalf("truncation not reported: %d %v", len(res.Samples), res.Truncated)
	}
	lat, err := s.Latest(ctx, []string{"a", "b"}, core.ContextFilter{})
	if err != nil || len(lat) != 2 || lat[0].TsMs != 1_000_000 || lat[0].Line != "L2" || lat[1].TsMs != 9900 {
		t.Fatalf("latest %+v %v", lat, err)
	}
	lat, _ = s.Latest(ctx, []string{"a"}, core.ContextFilter{Recipe: "R1"})
	if lat[0].TsMs != 9900 || lat[0].State != "bad" {
		t.Fatalf("latest in recipe %+v", lat)
	}
	bk, err := s.Buckets(ctx, core.BucketQuery{Node: "a", Filter: core.ContextFilter{Line: "L1"}, BucketMs: 1000})
	if err != nil || len(bk) != 10 {
		t.Fatalf("buckets %v %v", bk, err)
	}
	// bucket 0: values 0..8 ok (9 is bad)
	if bk[0].StartMs != 0 || bk[0].Count != 9 || bk[0].Bad != 1 || bk[0].Min != 0 || bk[0].Max != 8 || bk[0].Avg != 4 {
		t.Fatalf("bucket0 %+v", bk[0])
	}
	if _, err := s.Buckets(ctx, core.BucketQuery{Node: "a", BucketMs: 0}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatal("zero bucket accepted")
	}
	// Negative timestamps floor into the right bucket.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("neg", -1, 1, "", other), mk("neg", -1000, 3, "", other), mk("neg", -1001, 7, "", other)}); err != nil {
		t.Fatal(err)
	}
	bk, _ = s.Buckets(ctx, core.BucketQuery{Node: "neg", BucketMs: 1000})
	if len(bk) != 2 || bk[0].StartMs != -2000 || bk[1].StartMs != -1000 || bk[1].Count != 2 {
		t.Fatalf("negative buckets %+v", bk)
	}
}

func TestMetaRunsRecipesSegments(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	if err := s.EnsureRecipe(ctx, core.Recipe{ID: "R1", LineID: "L1", ProductID: "P1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureRecipe(ctx, core.Recipe{ID: "R1", LineID: "L2", ProductID: "P1"}); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("recipe moved lines: %v", err)
	}
	v1, err := s.PutRecipeVersion(ctx, "R1", map[string]any{"b": 1.0, "a": map[string]any{"y": 2, "x": "s"}})
	if err != nil || v1.Version != 1 {
		t.Fatal(v1, err)
	}
	same, _ := s.PutRecipeVersion(ctx, "R1", map[string]any{"a": map[string]any{"x": "s", "y": 2.0}, "b": 1})
	if same.Version != 1 || same.ContentHash != v1.ContentHash {
		t.Fatalf("same content new version: %+v", same)
	}
	v2, _ := s.PutRecipeVersion(ctx, "R1", map[string]any{"b": 2})
	if v2.Version != 2 || v2.ContentHash == v1.ContentHash {
		t.Fatalf("v2 %+v", v2)
	}
	if _, err := s.PutRecipeVersion(ctx, "R1", map[string]any{"b": math.Inf(1)}); core.CodeOf(err) != core.CodeNonFinite {
		t.Fatalf("inf accepted: %v", err)
	}
	if _, err := s.PutRecipeVersion(ctx, "nope", nil); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unknown recipe: %v", err)
	}
	ver := 1
	r := core.Run{ID: "run1", LineID: "L1", ProductID: "P1", RecipeID: "R1", RecipeVersion: &ver, StartedMs: 100, Status: core.RunActive}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRun(ctx, r); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("duplicate run: %v", err)
	}
	if err := s.EndRun(ctx, "run1", 50); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("end before start: %v", err)
	}
	if err := s.EndRun(ctx, "run1", 500); err != nil {
		t.Fatal(err)
	}
	if err := s.EndRun(ctx, "run1", 600); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("end twice: %v", err)
	}
	got, _ := s.GetRun(ctx, "run1")
	if got.Status != core.RunEnded || *got.EndedMs != 500 || *got.RecipeVersion != 1 {
		t.Fatalf("run %+v", got)
	}
	runs, _ := s.ListRuns(ctx, core.RunFilter{Recipe: "R1", Status: core.RunEnded})
	if len(runs) != 1 {
		t.Fatal(runs)
	}
	seg, err := s.AddContextSegment(ctx, core.ContextSegment{RunID: "run1", RecipeID: "R1", RecipeVersion: 1, FromMs: 100, ToMs: i64(500), ConfirmedBy: "alice"})
	if err != nil || seg.ContentHash != v1.ContentHash {
		t.Fatalf("segment %+v %v", seg, err)
	}
	if _, err := s.AddContextSegment(ctx, core.ContextSegment{RunID: "run1", RecipeID: "R1", RecipeVersion: 9, ConfirmedBy: "x"}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("segment of unknown version: %v", err)
	}
	segs, _ := s.ListContextSegments(ctx, "run1")
	if len(segs) != 1 || segs[0].ConfirmedBy != "alice" {
		t.Fatal(segs)
	}
	lo, hi := 0.0, 10.0
	if err := s.UpsertNode(ctx, core.Node{ID: "n", LineID: "L1", Unit: "bar", Min: &lo, Max: &hi, Kind: core.NodeDCW}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertNode(ctx, core.Node{ID: "n", Kind: "weird"}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("bad kind: %v", err)
	}
	n, _ := s.GetNode(ctx, "n")
	if n.Unit != "bar" || *n.Max != 10 || n.Kind != core.NodeDCW {
		t.Fatalf("node %+v", n)
	}
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	s, dir := openTest(t)
	ctx := context.Background()
	s2, err := Open(dir) // a second process-like handle on the same file
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s2.Close(); err != nil {
			t.Error(err)
		}
	}()
	errc := make(chan error, 4)
	for w := 0; w < 4; w++ {
		st := s
		if w%2 == 1 {
			st = s2
		}
		go func(w int, st *Store) {
			for i := 0; i < 20; i++ {
				var b []core.Sample
				for k := 0; k < 500; k++ {
					b = append(b, mk(fmt.Sprintf("w%d", w), int64(i*500+k), 1, "", sampleRun("r")))
				}
				if _, err := st.WriteSamples(ctx, b); err != nil {
					errc <- err
					return
				}
				if _, err := st.QueryPage(ctx, core.PageQuery{Node: fmt.Sprintf("w%d", w)}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}(w, st)
	}
	for i := 0; i < 4; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	counts, _ := s.CountRunSamples(ctx, "r")
	for w := 0; w < 4; w++ {
		if counts[fmt.Sprintf("w%d", w)] != 10_000 {
			t.Fatalf("counts %v", counts)
		}
	}
}
