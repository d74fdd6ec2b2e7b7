package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// Harness tells the suite how to make stores.
type Harness struct {
	// New returns an empty store for one test; it registers the store's
	// Close with t.Cleanup.
	New func(t *testing.T) core.Store
	// Again opens a second handle on s's database (another process in
	// production); it registers its Close with t.Cleanup.
	Again func(t *testing.T, s core.Store) core.Store
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"MetaRunsRecipesSegments", testMeta},
		{"EnsureKeepsExisting", testEnsureKeepsExisting},
		{"ProductOwnedByFirstLine", testProductOwnedByFirstLine},
		{"ProductClaimRace", testProductClaimRace},
		{"PagedQueryEverySampleOnceInOrder", testPaging},
		{"PageContextFilterOverlappingRuns", testPageOverlap},
		{"ReingestIdempotentAndReplaces", testReingest},
		{"ConflictWithAnotherRun", testConflict},
		{"IngestTxRollbackWritesNothing", testRollback},
		{"IngestTxEnsureRunAndNode", testIngestTxEnsure},
		{"MultiLatestBuckets", testMultiLatestBuckets},
		{"MicrosecondSampleTimes", testMicroseconds},
		{"ConcurrentWritersAndReaders", testConcurrent},
		{"DatasetRegistryAndRefs", testDatasets},
		{"JobStateMachineProperty", testJobProperty},
		{"RacingTransitionsOneWinner", testRacingTransitions},
		{"QueueLimitsAndCancel", testQueueLimits},
		{"PromotionRace", testPromotionRace},
		{"StageReportKeepsProgress", testStageReport},
		{"OnlyTheAttemptsWorkerMovesTheJob", testOwnerOnly},
		{"RecipeVersionRace", testRecipeVersionRace},
		{"QueueLimitRace", testQueueLimitRace},
		{"DeleteReferenceRace", testDeleteReferenceRace},
		{"RetentionListings", testRetentionListings},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func i64(v int64) *int64 { return &v }

// testPageOverlap: a page under a run filter returns exactly that run's
// samples whether or not other contexts' samples lie in the same time
// range — interleaved with another run on the same node, inside a gap of
// the run, on another node only, or nowhere near (where the reader may
// skip testing each row's context: samples.Reader.pageWhere).
func testPageOverlap(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	want := map[string][]core.Point{}
	var batch []core.Sample
	add := func(node string, ms int64, run string) {
		v := float64(ms) + 0.25
		batch = append(batch, mk(node, ms, v, core.StateOK, sampleRun(run)))
		if node == "n" {
			want[run] = append(want[run], core.Point{TsUs: ms * 1000, Value: v, State: core.StateOK})
		}
	}
	for ms := int64(0); ms < 100; ms++ { // a and b interleaved on n
		add("n", ms, map[bool]string{true: "a", false: "b"}[ms%2 == 0])
	}
	for ms := int64(200); ms < 300; ms++ { // c alone on n, d overlaps it on m only
		add("n", ms, "c")
		add("m", ms+50, "d")
	}
	for ms := int64(400); ms < 500; ms++ { // e has a gap that f fills on n
		if ms < 430 || ms >= 470 {
			add("n", ms, "e")
		} else if ms >= 440 && ms < 460 {
			add("n", ms, "f")
		}
	}
	for ms := int64(600); ms < 700; ms++ { // g nowhere near any other run
		add("n", ms, "g")
	}
	if _, err := s.WriteSamples(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for run, pts := range want {
		for _, limit := range []int{1, 3, 1000} {
			var got []core.Point
			var after *int64
			for {
				p, err := s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: sampleRun(run), AfterTs: after, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Points...)
				if !p.HasMore {
					break
				}
				after = i64(p.NextAfterTs)
			}
			if fmt.Sprint(got) != fmt.Sprint(pts) {
				t.Fatalf("run %s limit %d: got %d points %v…, want %d", run, limit, len(got), got[:min(4, len(got))], len(pts))
			}
		}
		// A window that cuts the run.
		from, to := pts[2].TsUs/1000, pts[len(pts)-3].TsUs/1000
		p, err := s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: sampleRun(run), FromMs: &from, ToMs: &to, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(p.Points) != fmt.Sprint(pts[2:len(pts)-2]) {
			t.Fatalf("run %s window [%d, %d]: got %d points, want %d", run, from, to, len(p.Points), len(pts)-4)
		}
	}
	// An empty window and a cursor at the end of time return nothing.
	from, to := int64(150), int64(160)
	if p, err := s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: sampleRun("a"), FromMs: &from, ToMs: &to}); err != nil || len(p.Points) != 0 || p.HasMore {
		t.Fatalf("empty window: %v %v", p, err)
	}
	if p, err := s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: sampleRun("g"), AfterTs: i64(math.MaxInt64)}); err != nil || len(p.Points) != 0 || p.HasMore {
		t.Fatalf("cursor at the end: %v %v", p, err)
	}
}

func sampleRun(run string) core.ContextFilter {
	return core.ContextFilter{Line: "L1", Product: "P1", Recipe: "R1", Run: run}
}

func mk(node string, ts int64, v float64, state string, c core.ContextFilter) core.Sample {
	return core.Sample{Node: node, TsUs: ts * 1000, Value: v, State: state, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if core.CodeOf(err) != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testMeta(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	must(t, s.EnsureRecipe(ctx, core.Recipe{ID: "R1", LineID: "L1", ProductID: "P1"}))
	wantCode(t, "recipe moved lines", s.EnsureRecipe(ctx, core.Recipe{ID: "R1", LineID: "L2", ProductID: "P1"}), core.CodeConflict)
	wantCode(t, "recipe without product", s.EnsureRecipe(ctx, core.Recipe{ID: "R2", LineID: "L1"}), core.CodeInvalidArgument)
	v1, err := s.PutRecipeVersion(ctx, "R1", map[string]any{"b": 1.0, "a": map[string]any{"y": 2, "x": "s"}})
	if err != nil || v1.Version != 1 || len(v1.ContentHash) != 64 {
		t.Fatal(v1, err)
	}
	same, err := s.PutRecipeVersion(ctx, "R1", map[string]any{"a": map[string]any{"x": "s", "y": 2.0}, "b": 1})
	if err != nil || same.Version != 1 || same.ContentHash != v1.ContentHash {
		t.Fatalf("same content new version: %+v %v", same, err)
	}
	v2, _ := s.PutRecipeVersion(ctx, "R1", map[string]any{"b": 2})
	if v2.Version != 2 || v2.ContentHash == v1.ContentHash {
		t.Fatalf("v2 %+v", v2)
	}
	_, err = s.PutRecipeVersion(ctx, "R1", map[string]any{"b": math.Inf(1)})
	wantCode(t, "inf param", err, core.CodeNonFinite)
	_, err = s.PutRecipeVersion(ctx, "nope", nil)
	wantCode(t, "unknown recipe", err, core.CodeNotFound)
	vs, err := s.ListRecipeVersions(ctx, "R1")
	if err != nil || len(vs) != 2 || vs[0].Params["b"] != 1.0 || vs[1].Version != 2 {
		t.Fatalf("versions %+v %v", vs, err)
	}
	got, err := s.GetRecipeVersion(ctx, "R1", 1)
	if err != nil || got.ContentHash != v1.ContentHash || got.Params["a"].(map[string]any)["x"] != "s" {
		t.Fatalf("get version %+v %v", got, err)
	}
	_, err = s.GetRecipeVersion(ctx, "R1", 9)
	wantCode(t, "unknown version", err, core.CodeNotFound)

	ver := 1
	r := core.Run{ID: "run1", LineID: "L1", ProductID: "P1", RecipeID: "R1", RecipeVersion: &ver, StartedMs: 100, Status: core.RunActive}
	must(t, s.CreateRun(ctx, r))
	wantCode(t, "duplicate run", s.CreateRun(ctx, r), core.CodeConflict)
	bad := r
	bad.ID, bad.Status = "run-bad", "paused"
	wantCode(t, "bad status", s.CreateRun(ctx, bad), core.CodeInvalidArgument)
	wantCode(t, "end before start", s.EndRun(ctx, "run1", 50), core.CodeInvalidArgument)
	must(t, s.EndRun(ctx, "run1", 500))
	wantCode(t, "end twice", s.EndRun(ctx, "run1", 600), core.CodeConflict)
	wantCode(t, "end unknown", s.EndRun(ctx, "ghost", 600), core.CodeNotFound)
	gr, err := s.GetRun(ctx, "run1")
	if err != nil || gr.Status != core.RunEnded || *gr.EndedMs != 500 || *gr.RecipeVersion != 1 || gr.StartedMs != 100 {
		t.Fatalf("run %+v %v", gr, err)
	}
	_, err = s.GetRun(ctx, "ghost")
	wantCode(t, "unknown run", err, core.CodeNotFound)
	must(t, s.CreateRun(ctx, core.Run{ID: "run0", LineID: "L1", ProductID: "P1", RecipeID: "R1", StartedMs: 10, Status: core.RunActive}))
	runs, _ := s.ListRuns(ctx, core.RunFilter{Recipe: "R1", Status: core.RunEnded})
	if len(runs) != 1 || runs[0].ID != "run1" {
		t.Fatal(runs)
	}
	runs, _ = s.ListRuns(ctx, core.RunFilter{Line: "L1"})
	if len(runs) != 2 || runs[0].ID != "run0" || runs[0].RecipeVersion != nil || runs[0].EndedMs != nil {
		t.Fatalf("runs ordered by start: %+v", runs)
	}
	seg, err := s.AddContextSegment(ctx, core.ContextSegment{RunID: "run1", RecipeID: "R1", RecipeVersion: 1, FromMs: 100, ToMs: i64(500), ConfirmedBy: "alice"})
	if err != nil || seg.ContentHash != v1.ContentHash || seg.ID == 0 {
		t.Fatalf("segment %+v %v", seg, err)
	}
	_, err = s.AddContextSegment(ctx, core.ContextSegment{RunID: "run1", RecipeID: "R1", RecipeVersion: 9, ConfirmedBy: "x"})
	wantCode(t, "segment of unknown version", err, core.CodeNotFound)
	_, err = s.AddContextSegment(ctx, core.ContextSegment{RunID: "run1", RecipeID: "R1", RecipeVersion: 1, FromMs: 5, ToMs: i64(4), ConfirmedBy: "x"})
	wantCode(t, "segment ends before start", err, core.CodeInvalidArgument)
	segs, _ := s.ListContextSegments(ctx, "run1")
	if len(segs) != 1 || segs[0].ConfirmedBy != "alice" || *segs[0].ToMs != 500 || segs[0].ConfirmedAt.IsZero() {
		t.Fatal(segs)
	}
	lo, hi := 0.0, 10.0
	must(t, s.UpsertNode(ctx, core.Node{ID: "n", LineID: "L1", Unit: "bar", Min: &lo, Max: &hi, Kind: core.NodeDCW}))
	wantCode(t, "bad kind", s.UpsertNode(ctx, core.Node{ID: "n", Kind: "weird"}), core.CodeInvalidArgument)
	wantCode(t, "min > max", s.UpsertNode(ctx, core.Node{ID: "n", Kind: core.NodeDAQ, Min: &hi, Max: &lo}), core.CodeInvalidArgument)
	n, err := s.GetNode(ctx, "n")
	if err != nil || n.Unit != "bar" || *n.Max != 10 || *n.Min != 0 || n.Kind != core.NodeDCW || n.LineID != "L1" {
		t.Fatalf("node %+v %v", n, err)
	}
	must(t, s.UpsertNode(ctx, core.Node{ID: "n", LineID: "L1", Unit: "Pa", Kind: core.NodeDAQ, Meaning: "pressure"}))
	n, _ = s.GetNode(ctx, "n")
	if n.Unit != "Pa" || n.Min != nil || n.Kind != core.NodeDAQ || n.Meaning != "pressure" {
		t.Fatalf("upsert did not update: %+v", n)
	}
	// A node stays on its line: an upsert naming another line (a connector
	// or a simulation of line L2 declaring L1's node id) is refused and
	// leaves the node as it was, naming neither line.
	err = s.UpsertNode(ctx, core.Node{ID: "n", LineID: "L2", Unit: "psi", Kind: core.NodeDAQ})
	wantCode(t, "node of another line", err, core.CodeConflict)
	if err != nil && strings.Contains(err.Error(), "L1") {
		t.Errorf("the refusal names the node's line: %v", err)
	}
	if n, _ = s.GetNode(ctx, "n"); n.LineID != "L1" || n.Unit != "Pa" {
		t.Fatalf("node moved or changed: %+v", n)
	}
	_, err = s.GetNode(ctx, "ghost")
	wantCode(t, "unknown node", err, core.CodeNotFound)
	must(t, s.UpsertNode(ctx, core.Node{ID: "m", LineID: "L2", Kind: core.NodeDAQ}))
	if ns, _ := s.ListNodes(ctx, "L1"); len(ns) != 1 || ns[0].ID != "n" {
		t.Fatalf("nodes of L1: %+v", ns)
	}
	if ns, _ := s.ListNodes(ctx, ""); len(ns) != 2 || ns[0].ID != "m" {
		t.Fatalf("all nodes: %+v", ns)
	}
}

func testEnsureKeepsExisting(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	must(t, s.EnsureLine(ctx, core.Line{ID: "L1", Name: "first"}))
	must(t, s.EnsureLine(ctx, core.Line{ID: "L1", Name: "second"}))
	must(t, s.EnsureLine(ctx, core.Line{ID: "L0"}))
	wantCode(t, "empty line id", s.EnsureLine(ctx, core.Line{ID: " "}), core.CodeInvalidArgument)
	must(t, s.EnsureProduct(ctx, core.Product{ID: "P1", LineID: "L9"}))
	lines, err := s.ListLines(ctx)
	if err != nil || len(lines) != 3 || lines[0].ID != "L0" || lines[1].Name != "first" || lines[1].CreatedAt.IsZero() {
		t.Fatalf("lines %+v %v", lines, err)
	}
}

func testPaging(t *testing.T, h Harness) {
	s := h.New(t)
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
		want = append(want, core.Point{TsUs: ts * 1000, Value: v, State: st})
		c := sampleRun("r1")
		if i > 12000 {
			c = sampleRun("r2")
		}
		batch = append(batch, mk("n1", ts, v, st, c), mk("n2", ts, v*2, st, c))
	}
	rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	for i := 0; i < len(batch); i += 7777 {
		if _, err := s.WriteSamples(ctx, batch[i:min(i+7777, len(batch))]); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 7, 1000, 25_013, 100_000} {
		if limit == 1 && testing.Short() {
			continue
		}
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
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "n1", Filter: core.ContextFilter{Run: "r2"}, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Points) != 25_013-12_001 || p.Points[0] != want[12001] {
		t.Fatalf("run filter: %d points", len(p.Points))
	}
	from, to := want[100].TsUs/1000, want[200].TsUs/1000
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "n1", FromMs: &from, ToMs: &to, Limit: 1000})
	if len(p.Points) != 101 || p.HasMore || p.Points[0] != want[100] {
		t.Fatalf("window: %d points hasMore %v", len(p.Points), p.HasMore)
	}
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "n1", Filter: core.ContextFilter{Run: "nope"}})
	if len(p.Points) != 0 || p.HasMore {
		t.Fatal("unknown run matched samples")
	}
	_, err = s.QueryPage(ctx, core.PageQuery{Node: "ghost"})
	wantCode(t, "unknown node", err, core.CodeNotFound)
	_, err = s.QueryPage(ctx, core.PageQuery{Node: "n1", Limit: 1 << 30})
	wantCode(t, "oversized limit", err, core.CodeInvalidArgument)
	_, err = s.QueryPage(ctx, core.PageQuery{Node: "n1", Limit: -1})
	wantCode(t, "negative limit", err, core.CodeInvalidArgument)
}

func testReingest(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	c := sampleRun("r1")
	b := []core.Sample{mk("a", 1, 1, "", c), mk("a", 2, 2, "", c), mk("b", 1, 3, "uncertain", c)}
	for i := 0; i < 3; i++ {
		st, err := s.WriteSamples(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if st.Samples != 3 || (i == 0) != (st.NewNodes == 2) {
			t.Fatalf("write %d stats %+v", i, st)
		}
	}
	counts, err := s.CountRunSamples(ctx, "r1")
	if err != nil || len(counts) != 2 || counts["a"] != 2 || counts["b"] != 1 {
		t.Fatalf("counts %v err %v", counts, err)
	}
	if counts, _ := s.CountRunSamples(ctx, "ghost"); len(counts) != 0 {
		t.Fatalf("unknown run counts %v", counts)
	}
	// Same node+ts with a new value replaces it; "ok" is stored as ok.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("a", 2, 20, "ok", c)}); err != nil {
		t.Fatal(err)
	}
	p, _ := s.QueryPage(ctx, core.PageQuery{Node: "a"})
	if len(p.Points) != 2 || p.Points[1] != (core.Point{TsUs: 2000, Value: 20, State: core.StateOK}) {
		t.Fatalf("replace: %+v", p.Points)
	}
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "b"})
	if len(p.Points) != 1 || p.Points[0].State != "uncertain" {
		t.Fatalf("state kept: %+v", p.Points)
	}
	// A batch that repeats an instant: the last value wins.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("a", 3, 1, "", c), mk("a", 3, 2, "", c), mk("a", 3, 3, "bad", c)}); err != nil {
		t.Fatal(err)
	}
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "a"})
	if len(p.Points) != 3 || p.Points[2] != (core.Point{TsUs: 3000, Value: 3, State: "bad"}) {
		t.Fatalf("repeated instant in one batch: %+v", p.Points)
	}
	// Unknown nodes are created as daq on the sample's line.
	n, err := s.GetNode(ctx, "a")
	if err != nil || n.Kind != core.NodeDAQ || n.LineID != "L1" {
		t.Fatalf("auto node %+v %v", n, err)
	}
	// An empty batch is a no-op.
	if st, err := s.WriteSamples(ctx, nil); err != nil || st.Samples != 0 {
		t.Fatalf("empty batch %+v %v", st, err)
	}
	_, err = s.WriteSamples(ctx, []core.Sample{{TsUs: 1, Value: 1}})
	wantCode(t, "sample without node", err, core.CodeInvalidArgument)
}

func testConflict(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("a", 10, 1, "", sampleRun("r1")), mk("a", 20, 2, "", sampleRun("r1"))}); err != nil {
		t.Fatal(err)
	}
	// Another run at an occupied instant: refused, and the whole batch
	// (including its free instants) is not written.
	_, err := s.WriteSamples(ctx, []core.Sample{mk("a", 30, 9, "", sampleRun("r2")), mk("a", 20, 9, "", sampleRun("r2"))})
	wantCode(t, "other run at occupied instant", err, core.CodeConflict)
	if !strings.Contains(err.Error(), "r1") {
		t.Fatalf("conflict message does not name the holder run: %v", err)
	}
	p, _ := s.QueryPage(ctx, core.PageQuery{Node: "a"})
	if len(p.Points) != 2 || p.Points[1].Value != 2 {
		t.Fatalf("conflicting batch changed data: %+v", p.Points)
	}
	if c, _ := s.CountRunSamples(ctx, "r2"); c["a"] != 0 {
		t.Fatalf("r2 got samples: %v", c)
	}
	// Inside one batch: two contexts at the same instant.
	_, err = s.WriteSamples(ctx, []core.Sample{mk("b", 5, 1, "", sampleRun("r1")), mk("b", 5, 2, "", sampleRun("r2"))})
	wantCode(t, "two runs at one instant in one batch", err, core.CodeConflict)
	if _, err := s.GetNode(ctx, "b"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("failed batch left its node: %v", err)
	}
	// The same run again still replaces.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("a", 20, 7, "", sampleRun("r1"))}); err != nil {
		t.Fatal(err)
	}
	// Other node, same instant, other run: fine (one value per node and instant).
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("c", 20, 7, "", sampleRun("r2"))}); err != nil {
		t.Fatal(err)
	}
}

func testRollback(t *testing.T, h Harness) {
	s := h.New(t)
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
	lines, _ := s.ListLines(ctx)
	if len(nodes) != 0 || len(runs) != 0 || len(lines) != 0 {
		t.Fatalf("rolled back ingest left nodes %v runs %v lines %v", nodes, runs, lines)
	}
	// The caches must not remember the rolled-back keys.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("y", 5, 1, "", c)}); err != nil {
		t.Fatal(err)
	}
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "y", Filter: core.ContextFilter{Run: "r1"}})
	if err != nil || len(p.Points) != 1 {
		t.Fatalf("after rollback: %+v %v", p, err)
	}
	// Non-finite values are refused, and the whole batch with them.
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err = s.WriteSamples(ctx, []core.Sample{mk("y", 6, 1, "", c), mk("y", 7, bad, "", c)})
		wantCode(t, "non-finite", err, core.CodeNonFinite)
	}
	p, _ = s.QueryPage(ctx, core.PageQuery{Node: "y"})
	if len(p.Points) != 1 {
		t.Fatal("half batch written")
	}
	// A cancelled context fails the write and leaves nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.WriteSamples(cctx, []core.Sample{mk("z", 1, 1, "", c)})
	if err == nil {
		t.Fatal("write with a cancelled context succeeded")
	}
	if _, err := s.GetNode(ctx, "z"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("cancelled write left a node: %v", err)
	}
}

func testIngestTxEnsure(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	run := core.Run{ID: "r1", LineID: "L1", ProductID: "P1", RecipeID: "R1", StartedMs: 1, Status: core.RunActive}
	err := s.Ingest(ctx, func(tx core.IngestTx) error {
		created, err := tx.EnsureRun(run)
		if err != nil || !created {
			return fmt.Errorf("first EnsureRun: %v %v", created, err)
		}
		created, err = tx.EnsureRun(run)
		if err != nil || created {
			return fmt.Errorf("second EnsureRun: %v %v", created, err)
		}
		created, err = tx.EnsureNode(core.Node{ID: "sp", LineID: "L1", Kind: core.NodeDCW, Unit: "bar"})
		if err != nil || !created {
			return fmt.Errorf("first EnsureNode: %v %v", created, err)
		}
		created, err = tx.EnsureNode(core.Node{ID: "sp", LineID: "L1", Kind: core.NodeDAQ, Unit: "Pa"})
		if err != nil || created {
			return fmt.Errorf("second EnsureNode: %v %v", created, err)
		}
		if _, err := tx.EnsureNode(core.Node{ID: "bad", Kind: "x"}); core.CodeOf(err) != core.CodeInvalidArgument {
			return fmt.Errorf("bad kind: %v", err)
		}
		st, err := tx.Write([]core.Sample{mk("sp", 1, 1, "", sampleRun("r1")), mk("pv", 1, 2, "", sampleRun("r1"))})
		if err != nil || st.NewNodes != 1 || st.Samples != 2 {
			return fmt.Errorf("write %+v %v", st, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := s.GetNode(ctx, "sp")
	if n.Kind != core.NodeDCW || n.Unit != "bar" {
		t.Fatalf("EnsureNode changed an existing node: %+v", n)
	}
	// EnsureRun of an existing run inside a later transaction.
	err = s.Ingest(ctx, func(tx core.IngestTx) error {
		created, err := tx.EnsureRun(run)
		if err != nil || created {
			return fmt.Errorf("EnsureRun existing: %v %v", created, err)
		}
		_, err = tx.EnsureRun(core.Run{ID: "r2", LineID: "L1", ProductID: "P1", RecipeID: "R1", StartedMs: 5, Status: "weird"})
		if core.CodeOf(err) != core.CodeInvalidArgument {
			return fmt.Errorf("invalid run: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := s.CountRunSamples(ctx, "r1"); c["sp"] != 1 || c["pv"] != 1 {
		t.Fatalf("counts %v", c)
	}
}

func testMultiLatestBuckets(t *testing.T, h Harness) {
	s := h.New(t)
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
	if res.Samples[0].Node != "a" || res.Samples[0].TsUs != 5_000_000 || res.Samples[0].Run != "r2" || res.Samples[0].Line != "L1" ||
		res.Samples[9].State != "bad" || res.Samples[8].State != "ok" || res.Samples[50].Node != "b" {
		t.Fatalf("multi first: %+v / %+v", res.Samples[0], res.Samples[9])
	}
	res, _ = s.QueryMulti(ctx, core.MultiQuery{Nodes: []string{"a", "b"}, Filter: core.ContextFilter{Line: "L1"}, Limit: 150})
	if len(res.Samples) != 150 || !res.Truncated {
		t.Fatalf("truncation not reported: %d %v", len(res.Samples), res.Truncated)
	}
	from, to := int64(1000), int64(1900)
	res, _ = s.QueryMulti(ctx, core.MultiQuery{Nodes: []string{"b"}, FromMs: &from, ToMs: &to})
	if len(res.Samples) != 10 || res.Samples[0].Value != -10 {
		t.Fatalf("multi window: %+v", res.Samples)
	}
	_, err = s.QueryMulti(ctx, core.MultiQuery{})
	wantCode(t, "multi without nodes", err, core.CodeInvalidArgument)
	_, err = s.QueryMulti(ctx, core.MultiQuery{Nodes: []string{"ghost"}})
	wantCode(t, "multi unknown node", err, core.CodeNotFound)
	lat, err := s.Latest(ctx, []string{"a", "b"}, core.ContextFilter{})
	if err != nil || len(lat) != 2 || lat[0].TsUs != 1_000_000_000 || lat[0].Line != "L2" || lat[1].TsUs != 9_900_000 {
		t.Fatalf("latest %+v %v", lat, err)
	}
	lat, _ = s.Latest(ctx, []string{"a"}, core.ContextFilter{Recipe: "R1"})
	if len(lat) != 1 || lat[0].TsUs != 9_900_000 || lat[0].State != "bad" {
		t.Fatalf("latest in recipe %+v", lat)
	}
	lat, _ = s.Latest(ctx, []string{"a"}, core.ContextFilter{Recipe: "none"})
	if len(lat) != 0 {
		t.Fatalf("latest in unknown recipe %+v", lat)
	}
	bk, err := s.Buckets(ctx, core.BucketQuery{Node: "a", Filter: core.ContextFilter{Line: "L1"}, BucketMs: 1000})
	if err != nil || len(bk) != 10 {
		t.Fatalf("buckets %v %v", bk, err)
	}
	// bucket 0: values 0..8 ok (9 is bad)
	if bk[0] != (core.Bucket{StartMs: 0, Avg: 4, Min: 0, Max: 8, Count: 9, Bad: 1}) {
		t.Fatalf("bucket0 %+v", bk[0])
	}
	_, err = s.Buckets(ctx, core.BucketQuery{Node: "a", BucketMs: 0})
	wantCode(t, "zero bucket", err, core.CodeInvalidArgument)
	// Negative timestamps floor into the right bucket; an all-bad bucket
	// has zero aggregates and its bad count.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("neg", -1, 1, "", other), mk("neg", -1000, 3, "", other), mk("neg", -1001, 7, "bad", other)}); err != nil {
		t.Fatalf("write negative samples: %v", err)
	}
	bk, _ = s.Buckets(ctx, core.BucketQuery{Node: "neg", BucketMs: 1000})
	if len(bk) != 2 || bk[0] != (core.Bucket{StartMs: -2000, Bad: 1}) || bk[1].StartMs != -1000 || bk[1].Count != 2 || bk[1].Avg != 2 {
		t.Fatalf("negative buckets %+v", bk)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	errc := make(chan error, 4)
	for w := 0; w < 4; w++ {
		st := s
		if w%2 == 1 {
			st = s2
		}
		go func(w int, st core.Store) {
			for i := 0; i < 20; i++ {
				var b []core.Sample
				for k := 0; k < 500; k++ {
					// All writers share node "shared" at disjoint instants
					// plus one node of their own.
					b = append(b, mk(fmt.Sprintf("w%d", w), int64(i*500+k), 1, "", sampleRun("r")),
						mk("shared", int64((i*500+k)*4+w), 1, "", sampleRun("r")))
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
	if counts["shared"] != 40_000 {
		t.Fatalf("shared counts %v", counts)
	}
}

func testDatasets(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	d := core.Dataset{ID: "ds-1", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate", Path: "datasets/ds-1",
		SHA256: strings.Repeat("a", 64), SpecJSON: "{}", TrainWindows: 10, Runs: 3, Bytes: 1 << 40, CreatedBy: "t", LineageVerified: true}
	must(t, s.InsertDataset(ctx, d))
	wantCode(t, "duplicate", s.InsertDataset(ctx, d), core.CodeConflict)
	bad := d
	bad.ID, bad.Path, bad.SHA256 = "ds-2", "datasets/ds-2", "short"
	if err := s.InsertDataset(ctx, bad); err == nil {
		t.Fatal("short hash accepted")
	}
	got, err := s.GetDataset(ctx, "ds-1")
	if err != nil || !got.LineageVerified || got.TrainWindows != 10 || got.Bytes != 1<<40 || got.CreatedAt.IsZero() {
		t.Fatalf("%+v %v", got, err)
	}
	if l, _ := s.ListDatasets(ctx, core.DatasetFilter{Recipe: "R"}); len(l) != 1 {
		t.Fatal(l)
	}
	if l, err := s.ListDatasets(ctx, core.DatasetFilter{Recipe: "X"}); len(l) != 0 || l == nil || err != nil {
		t.Fatal(l, err)
	}
	ref := core.DatasetRef{DatasetID: "ds-1", Kind: "job", RefID: "job-7"}
	must(t, s.AddDatasetRef(ctx, ref))
	must(t, s.AddDatasetRef(ctx, ref)) // idempotent
	wantCode(t, "ref to unknown dataset", s.AddDatasetRef(ctx, core.DatasetRef{DatasetID: "nope", Kind: "job", RefID: "x"}), core.CodeNotFound)
	if refs, _ := s.ListDatasetRefs(ctx, "ds-1"); len(refs) != 1 || refs[0] != ref {
		t.Fatal(refs)
	}
	err = s.DeleteDataset(ctx, "ds-1")
	if core.CodeOf(err) != core.CodeInUse || !strings.Contains(err.Error(), "job job-7") {
		t.Fatalf("delete while referenced: %v", err)
	}
	must(t, s.RemoveDatasetRef(ctx, ref))
	must(t, s.DeleteDataset(ctx, "ds-1"))
	_, err = s.GetDataset(ctx, "ds-1")
	wantCode(t, "deleted dataset", err, core.CodeNotFound)
	wantCode(t, "delete twice", s.DeleteDataset(ctx, "ds-1"), core.CodeNotFound)
}

func seedDataset(t testing.TB, s core.Store, id string) {
	t.Helper()
	must(t, s.InsertDataset(context.Background(), core.Dataset{ID: id, LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/" + id, SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}))
}

func newJob(id string) core.Job {
	return core.Job{ID: id, DatasetID: "ds", DatasetSHA256: strings.Repeat("b", 64), TrainerRef: "test_mean@1", MaxRetries: 2, TimeoutSec: 60, StallSec: 60}
}

func testModel(id, job string) *core.Model {
	return &core.Model{ID: id, JobID: job, DatasetID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		TrainerRef: "test_mean@1", ArtifactKind: "aml.mean/1", ArtifactPath: "models/" + id, ArtifactHash: strings.Repeat("c", 64), GatePassed: true}
}

// testJobProperty drives jobs through random operation sequences and checks
// the invariants after every step: a terminal status is never left, every
// change is in the table (or a requeue), done always has its model, and a
// model exists only for a done job.
func testJobProperty(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	rng := rand.New(rand.NewPCG(42, 7))
	all := core.AllJobStatuses
	jobs := 40
	if testing.Short() {
		jobs = 10
	}
	for k := 0; k < jobs; k++ {
		id := fmt.Sprintf("job-%d", k)
		must(t, s.CreateJob(ctx, newJob(id), core.JobLimits{}))
		prev := core.JobQueued
		for step := 0; step < 25; step++ {
			cur, _ := s.GetJob(ctx, id)
			var err error
			op := rng.IntN(7)
			switch op {
			case 0:
				_, err = s.ClaimJob(ctx, id, "w1")
			case 1:
				err = s.TransitionJob(ctx, id, "w1", cur.Status, all[rng.IntN(len(all))], "x")
			case 2:
				err = s.TransitionJob(ctx, id, "w1", all[rng.IntN(len(all))], all[rng.IntN(len(all))], "x")
			case 3:
				err = s.EndJob(ctx, id, cur.Status, all[rng.IntN(len(all))], "E", "e")
			case 4:
				err = s.RequeueJob(ctx, id, cur.Status, "AML_WORKER_LOST", "lost")
			case 5:
				_, err = s.RequestCancel(ctx, id)
			case 6:
				err = s.FinishJob(ctx, id, "w1", cur.Status, rawJSON(`{"rmse":1}`), nil, true, "p", testModel(fmt.Sprintf("m-%d-%d", k, step), id))
			}
			if err != nil && core.CodeOf(err) == core.CodeInternal {
				t.Fatalf("op %d: untyped error %v", op, err)
			}
			after, gerr := s.GetJob(ctx, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if prev.Terminal() && after.Status != prev {
				t.Fatalf("job %s left terminal %s for %s (op %d)", id, prev, after.Status, op)
			}
			if after.Status != prev {
				ok := core.CanTransition(prev, after.Status) || (after.Status == core.JobQueued && core.CanRequeue(prev))
				if !ok {
					t.Fatalf("illegal %s → %s (op %d)", prev, after.Status, op)
				}
				if err != nil {
					t.Fatalf("status changed but op %d returned %v", op, err)
				}
			}
			if after.Status == core.JobDone {
				if after.ModelID == "" || string(after.Metrics) != `{"rmse":1}` || after.Progress != 1 {
					t.Fatalf("done job %+v", after)
				}
				if _, err := s.GetModel(ctx, after.ModelID); err != nil {
					t.Fatalf("done job's model missing: %v", err)
				}
			}
			if after.Status.Terminal() && after.EndedAt == nil {
				t.Fatal("terminal without end time")
			}
			if after.RetryCount > after.MaxRetries {
				t.Fatalf("retries %d > max %d", after.RetryCount, after.MaxRetries)
			}
			prev = after.Status
		}
	}
	models, _ := s.ListModels(ctx, core.ModelFilter{})
	all2, _ := s.ListJobs(ctx, core.JobFilter{})
	if len(all2) != jobs {
		t.Fatalf("%d jobs listed", len(all2))
	}
	done := map[string]bool{}
	for _, j := range all2 {
		if j.Status == core.JobDone {
			done[j.ModelID] = true
		}
	}
	for _, m := range models {
		if !done[m.ID] {
			t.Fatalf("model %s registered without its job being done", m.ID)
		}
	}
	refs, _ := s.ListDatasetRefs(ctx, "ds")
	if len(refs) != jobs+len(models) {
		t.Fatalf("%d dataset refs for %d jobs and %d models", len(refs), jobs, len(models))
	}
}

func rawJSON(s string) []byte { return []byte(s) }

func testRacingTransitions(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	for k := 0; k < 20; k++ {
		id := fmt.Sprintf("race-%d", k)
		must(t, s.CreateJob(ctx, newJob(id), core.JobLimits{}))
		var wg sync.WaitGroup
		wins := make(chan string, 4)
		for w, st := range []core.Store{s, s2, s, s2} {
			wg.Add(1)
			go func(w int, st core.Store) {
				defer wg.Done()
				if _, err := st.ClaimJob(ctx, id, fmt.Sprintf("w%d", w)); err == nil {
					wins <- fmt.Sprintf("w%d", w)
				} else if core.CodeOf(err) != core.CodeJobConflict {
					t.Errorf("claim: %v", err)
				}
			}(w, st)
		}
		wg.Wait()
		close(wins)
		if n := len(wins); n != 1 {
			t.Fatalf("%d workers claimed the same job", n)
		}
		winner := <-wins
		j, _ := s.GetJob(ctx, id)
		if j.Worker != winner || j.Attempt != 1 || j.Status != core.JobProvisioning {
			t.Fatalf("claimed job %+v, winner %s", j, winner)
		}
		var ok int
		var mu sync.Mutex
		for i, to := range []core.JobStatus{core.JobCancelled, core.JobTimeout} {
			wg.Add(1)
			st := []core.Store{s, s2}[i]
			go func(to core.JobStatus) {
				defer wg.Done()
				if err := st.EndJob(ctx, id, core.JobProvisioning, to, "", ""); err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}(to)
		}
		wg.Wait()
		if ok != 1 {
			t.Fatalf("%d terminal transitions won", ok)
		}
	}
}

func testQueueLimits(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	lim := core.JobLimits{MaxQueued: 2, MaxPerDataset: 3}
	must(t, s.CreateJob(ctx, newJob("a"), lim))
	must(t, s.CreateJob(ctx, newJob("b"), lim))
	wantCode(t, "queue cap", s.CreateJob(ctx, newJob("c"), lim), core.CodeQueueFull)
	wantCode(t, "duplicate job", s.CreateJob(ctx, newJob("a"), core.JobLimits{}), core.CodeConflict)
	ghost := newJob("g")
	ghost.DatasetID = "nope"
	wantCode(t, "job on unknown dataset", s.CreateJob(ctx, ghost, core.JobLimits{}), core.CodeNotFound)
	j, err := s.RequestCancel(ctx, "a")
	if err != nil || j.Status != core.JobCancelled || j.EndedAt == nil {
		t.Fatalf("cancel queued: %+v %v", j, err)
	}
	must(t, s.CreateJob(ctx, newJob("c"), lim))
	wantCode(t, "per-dataset cap", s.CreateJob(ctx, newJob("d"), core.JobLimits{MaxPerDataset: 3}), core.CodeQuotaExceeded)
	if _, err := s.ClaimJob(ctx, "b", "w"); err != nil {
		t.Fatal(err)
	}
	j, _ = s.RequestCancel(ctx, "b")
	if j.Status != core.JobProvisioning || !j.CancelRequest {
		t.Fatalf("cancel running: %+v", j)
	}
	_, err = s.RequestCancel(ctx, "a")
	wantCode(t, "cancel terminal", err, core.CodeJobConflict)
	wantCode(t, "progress from another worker", s.ReportProgress(ctx, "b", "intruder", 0.5, ""), core.CodeJobConflict)
	must(t, s.ReportProgress(ctx, "b", "w", 0.5, "fitting"))
	must(t, s.Heartbeat(ctx, "b", "w"))
	wantCode(t, "delete referenced dataset", s.DeleteDataset(ctx, "ds"), core.CodeInUse)
	for i := 0; i < 2; i++ {
		must(t, s.RequeueJob(ctx, "b", core.JobProvisioning, core.CodeWorkerLost, "lost"))
		j, _ := s.GetJob(ctx, "b")
		if j.Status != core.JobQueued || j.Worker != "" || j.RetryCount != i+1 || j.ErrorCode != core.CodeWorkerLost {
			t.Fatalf("requeued %+v", j)
		}
		if j, err := s.ClaimJob(ctx, "b", "w"); err != nil || j.Attempt != i+2 {
			t.Fatalf("reclaim %+v %v", j, err)
		}
	}
	wantCode(t, "third requeue", s.RequeueJob(ctx, "b", core.JobProvisioning, core.CodeWorkerLost, "lost"), core.CodeJobConflict)
	_, err = s.ClaimJob(ctx, "ghost", "w")
	wantCode(t, "claim unknown", err, core.CodeNotFound)
	if l, _ := s.ListJobs(ctx, core.JobFilter{Status: core.JobCancelled}); len(l) != 1 || l[0].ID != "a" {
		t.Fatalf("list cancelled %+v", l)
	}
	if l, _ := s.ListJobs(ctx, core.JobFilter{DatasetID: "ds", Limit: 2}); len(l) != 2 {
		t.Fatalf("list limit %+v", l)
	}
}

// testPromotionRace: goroutines on two handles promote different
// candidates of the same key; the store never holds two production models.
func testPromotionRace(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("j%d", i)
		must(t, s.CreateJob(ctx, newJob(id), core.JobLimits{}))
		if _, err := s.ClaimJob(ctx, id, "w"); err != nil {
			t.Fatal(err)
		}
		must(t, s.TransitionJob(ctx, id, "w", core.JobProvisioning, core.JobTraining, ""))
		must(t, s.TransitionJob(ctx, id, "w", core.JobTraining, core.JobEvaluating, ""))
		must(t, s.FinishJob(ctx, id, "w", core.JobEvaluating, nil, nil, true, "p", testModel(fmt.Sprintf("m%d", i), id)))
	}
	wantCode(t, "finish twice", s.FinishJob(ctx, "j0", "w", core.JobEvaluating, nil, nil, true, "p", testModel("mx", "j0")), core.CodeJobConflict)
	if _, err := s.GetModel(ctx, "mx"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("failed finish registered its model: %v", err)
	}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				st := s
				if i%2 == 1 {
					st = s2
				}
				m, err := st.GetModel(ctx, fmt.Sprintf("m%d", i))
				if err != nil || m.Stage == core.StageProduction || m.Stage == core.StageRetired {
					return
				}
				err = st.MoveModelStage(ctx, m.ID, m.Stage, core.StageProduction, "tester", "race")
				if err != nil && core.CodeOf(err) != core.CodeStageRace {
					t.Errorf("promote: %v", err)
				}
			}(i)
		}
		wg.Wait()
		prod, _ := s.ListModels(ctx, core.ModelFilter{Stage: core.StageProduction})
		if len(prod) != 1 {
			t.Fatalf("round %d: %d production models", round, len(prod))
		}
	}
	wantCode(t, "bad stage move", s.MoveModelStage(ctx, "m0", core.StageRetired, core.StageProduction, "x", ""), core.CodeInvalidArgument)
	wantCode(t, "no actor", s.MoveModelStage(ctx, "m0", core.StageCandidate, core.StageShadow, " ", ""), core.CodeInvalidArgument)
	wantCode(t, "unknown model", s.MoveModelStage(ctx, "ghost", core.StageCandidate, core.StageShadow, "x", ""), core.CodeNotFound)
	prod, _ := s.ListModels(ctx, core.ModelFilter{Stage: core.StageProduction})
	wantCode(t, "stale CAS", s.MoveModelStage(ctx, prod[0].ID, core.StageCandidate, core.StageShadow, "x", ""), core.CodeStageRace)
	hist, err := s.ModelHistory(ctx, prod[0].ID)
	if err != nil || len(hist) == 0 || hist[len(hist)-1].To != core.StageProduction || hist[len(hist)-1].By != "tester" {
		t.Fatalf("history %+v %v", hist, err)
	}
	must(t, s.MarkModelPruned(ctx, "m0"))
	if m, _ := s.GetModel(ctx, "m0"); !m.ArtifactsPruned {
		t.Fatal("prune flag not kept")
	}
}

func testStageReport(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	must(t, s.CreateJob(ctx, newJob("j"), core.JobLimits{}))
	if _, err := s.ClaimJob(ctx, "j", "w"); err != nil {
		t.Fatal(err)
	}
	must(t, s.ReportProgress(ctx, "j", "w", 0.6, ""))
	must(t, s.ReportProgress(ctx, "j", "w", -1, "fitting"))
	j, _ := s.GetJob(ctx, "j")
	if j.Progress != 0.6 || j.Stage != "fitting" || j.LastProgressAt == nil || j.HeartbeatAt == nil {
		t.Fatalf("progress %v stage %q", j.Progress, j.Stage)
	}
	must(t, s.ReportProgress(ctx, "j", "w", 7, ""))
	if j, _ := s.GetJob(ctx, "j"); j.Progress != 1 || j.Stage != "fitting" {
		t.Fatalf("clamped progress %v stage %q", j.Progress, j.Stage)
	}
}

// testOwnerOnly: after a job was taken over (requeued as a lost worker's
// and claimed by another worker), the old worker can neither move nor
// finish it; the new one can. No model of the old attempt is registered.
func testOwnerOnly(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	must(t, s.CreateJob(ctx, newJob("j"), core.JobLimits{}))
	if _, err := s.ClaimJob(ctx, "j", "old"); err != nil {
		t.Fatal(err)
	}
	must(t, s.TransitionJob(ctx, "j", "old", core.JobProvisioning, core.JobTraining, ""))
	must(t, s.RequeueJob(ctx, "j", core.JobTraining, core.CodeWorkerLost, "judged lost"))
	if _, err := s.ClaimJob(ctx, "j", "new"); err != nil {
		t.Fatal(err)
	}
	must(t, s.TransitionJob(ctx, "j", "new", core.JobProvisioning, core.JobTraining, ""))
	wantCode(t, "old worker transition", s.TransitionJob(ctx, "j", "old", core.JobTraining, core.JobEvaluating, ""), core.CodeJobConflict)
	must(t, s.TransitionJob(ctx, "j", "new", core.JobTraining, core.JobEvaluating, ""))
	wantCode(t, "old worker finish", s.FinishJob(ctx, "j", "old", core.JobEvaluating, nil, nil, true, "p", testModel("m-old", "j")), core.CodeJobConflict)
	if _, err := s.GetModel(ctx, "m-old"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("the old attempt's model was registered: %v", err)
	}
	must(t, s.FinishJob(ctx, "j", "new", core.JobEvaluating, nil, nil, true, "p", testModel("m-new", "j")))
	j, _ := s.GetJob(ctx, "j")
	if j.Status != core.JobDone || j.ModelID != "m-new" || j.Worker != "new" || j.Attempt != 2 {
		t.Fatalf("job %s model %s worker %s attempt %d", j.Status, j.ModelID, j.Worker, j.Attempt)
	}
}

// testMicroseconds: samples 1638 µs apart (a 610.35 Hz record) and 19.5 µs
// apart (51.2 kHz) are each kept, returned in order with their exact
// times, paged by the µs cursor, bounded by millisecond ranges that include
// every sample within the bounding milliseconds, and bucketed by ms.
func testMicroseconds(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	c := sampleRun("r1")
	var b []core.Sample
	var want []int64
	for i := int64(0); i < 2000; i++ {
		ts := 1_700_000_000_000_000 + (i*16384369+5000)/10000 // 1638.4369 µs apart, rounded
		want = append(want, ts)
		b = append(b, core.Sample{Node: "sb", TsUs: ts, Value: float64(i), Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run})
		b = append(b, core.Sample{Node: "fast", TsUs: -1_000_000 + i*39/2, Value: float64(i), Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run})
	}
	if st, err := s.WriteSamples(ctx, b); err != nil || st.Samples != len(b) {
		t.Fatalf("write %+v %v", st, err)
	}
	var got []core.Point
	var after *int64
	for {
		p, err := s.QueryPage(ctx, core.PageQuery{Node: "sb", AfterTs: after, Limit: 333})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Points...)
		if !p.HasMore {
			break
		}
		after = i64(p.NextAfterTs)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d points, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].TsUs != want[i] || got[i].Value != float64(i) {
			t.Fatalf("point %d = %+v, want ts %d value %d", i, got[i], want[i], i)
		}
	}
	fast, err := s.CountRunSamples(ctx, "r1")
	if err != nil || fast["fast"] != 2000 || fast["sb"] != 2000 {
		t.Fatalf("counts %v %v", fast, err)
	}
	// [from, to] in ms holds every sample whose µs time lies in those ms.
	from, to := core.UsToMs(want[10]), core.UsToMs(want[20])
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "sb", FromMs: &from, ToMs: &to, Limit: 1000})
	if err != nil || len(p.Points) != 11 || p.Points[0].TsUs != want[10] || p.Points[10].TsUs != want[20] {
		t.Fatalf("ms range: %+v %v", p.Points, err)
	}
	res, err := s.QueryMulti(ctx, core.MultiQuery{Nodes: []string{"fast"}, FromMs: i64(-1000), ToMs: i64(-999)})
	if err != nil || len(res.Samples) != 103 || res.Samples[0].TsUs != -1_000_000 {
		t.Fatalf("multi before 1970 in µs: %d samples %v", len(res.Samples), err)
	}
	bk, err := s.Buckets(ctx, core.BucketQuery{Node: "fast", BucketMs: 10})
	if err != nil || len(bk) != 4 || bk[0].StartMs != -1000 || bk[0].Count != 513 || bk[3].StartMs != -970 {
		t.Fatalf("buckets %+v %v", bk, err)
	}
	lat, err := s.Latest(ctx, []string{"sb"}, core.ContextFilter{})
	if err != nil || len(lat) != 1 || lat[0].TsUs != want[len(want)-1] {
		t.Fatalf("latest %+v %v", lat, err)
	}
}
