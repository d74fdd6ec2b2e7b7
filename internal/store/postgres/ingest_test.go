package postgres

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func run(r string) core.ContextFilter {
	return core.ContextFilter{Line: "L1", Product: "P1", Recipe: "R1", Run: r}
}

func smp(node string, ts int64, v float64, state string, c core.ContextFilter) core.Sample {
	return core.Sample{Node: node, TsUs: ts, Value: v, State: state, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}
}

// writeStaged writes one batch in its own transaction and reports whether
// it went through the staging table (the upsert path) rather than the
// append-only COPY.
func writeStaged(t *testing.T, s *Store, batch []core.Sample) (bool, error) {
	t.Helper()
	var staged bool
	err := s.Ingest(context.Background(), func(tx core.IngestTx) error {
		_, err := tx.Write(batch)
		staged = tx.(*ingestTx).staged
		return err
	})
	return staged, err
}

// points returns node's stored samples as "ts=value/state/run" strings,
// the value with its sign bit (so -0 and 0 differ).
func points(t *testing.T, s *Store, node string) []string {
	t.Helper()
	res, err := s.QueryMulti(context.Background(), core.MultiQuery{Nodes: []string{node}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sm := range res.Samples {
		out = append(out, fmt.Sprintf("%d=%s/%s/%s", sm.TsUs, fmtValue(sm.Value), sm.State, sm.Run))
	}
	return out
}

func fmtValue(v float64) string {
	if v == 0 && math.Signbit(v) {
		return "-0"
	}
	return fmt.Sprint(v)
}

func series(node string, from, to int64, v float64, c core.ContextFilter) []core.Sample {
	var out []core.Sample
	for ts := from; ts <= to; ts++ {
		out = append(out, smp(node, ts, v, "", c))
	}
	return out
}

// TestWritePaths: which batches take the append-only COPY and which the
// upsert, and that both store the same thing.
func TestWritePaths(t *testing.T) {
	s, _ := openTest(t)
	r1, r2 := run("r1"), run("r2")
	steps := []struct {
		name       string
		batch      []core.Sample
		wantStaged bool
		wantErr    string
	}{
		{"new data", append(series("a", 0, 9, 1, r1), series("a", 20, 29, 1, r1)...), false, ""},
		{"gap between stored instants", series("a", 10, 19, 2, r1), false, ""},
		{"later data", series("a", 30, 39, 3, r1), false, ""},
		{"same instants again", series("a", 35, 44, 4, r1), true, ""},
		{"one node new, one overlapping", append(series("b", 0, 5, 5, r1), smp("a", 44, 6, "bad", r1)), true, ""},
		{"unordered with repeats, new range", []core.Sample{smp("c", 5, 1, "", r1), smp("c", 3, 2, "", r1), smp("c", 5, 3, "bad", r1), smp("d", 1, 4, "", r2), smp("c", 4, 5, "", r1)}, false, ""},
		{"another run at a stored instant", []core.Sample{smp("c", 6, 1, "", r2), smp("c", 3, 9, "", r2)}, true, core.CodeConflict},
		{"another run in the gap of a node", []core.Sample{smp("c", 4, 7, "", r1), smp("d", 2, 7, "", r2)}, true, ""},
	}
	for _, st := range steps {
		staged, err := writeStaged(t, s, st.batch)
		if core.CodeOf(err) != st.wantErr {
			t.Fatalf("%s: err %v, want %q", st.name, err, st.wantErr)
		}
		if staged != st.wantStaged {
			t.Fatalf("%s: staged %v, want %v", st.name, staged, st.wantStaged)
		}
	}
	want := map[string][]string{
		"c": {"3=2/ok/r1", "4=7/ok/r1", "5=3/bad/r1"},
		"d": {"1=4/ok/r2", "2=7/ok/r2"},
		"b": {"0=5/ok/r1", "1=5/ok/r1", "2=5/ok/r1", "3=5/ok/r1", "4=5/ok/r1", "5=5/ok/r1"},
	}
	for node, w := range want {
		if got := points(t, s, node); !slices.Equal(got, w) {
			t.Fatalf("node %s: %v, want %v", node, got, w)
		}
	}
	a := points(t, s, "a")
	if len(a) != 45 || a[15] != "15=2/ok/r1" || a[34] != "34=3/ok/r1" || a[35] != "35=4/ok/r1" || a[44] != "44=6/bad/r1" {
		t.Fatalf("node a: %v", a)
	}
	// The context spans cover both paths' samples: a filter by run finds
	// them all.
	counts, err := s.CountRunSamples(context.Background(), "r1")
	if err != nil || counts["a"] != 45 || counts["c"] != 3 {
		t.Fatalf("counts %v %v", counts, err)
	}
}

// TestWriteInBatchConflict: two contexts at one instant in one batch are
// refused before anything is written, reported at the instant whose first
// sample comes first in the batch, whatever the node order.
func TestWriteInBatchConflict(t *testing.T) {
	s, _ := openTest(t)
	r1, r2 := run("r1"), run("r2")
	batch := []core.Sample{smp("z", 9, 1, "", r1), smp("y", 5, 1, "", r1), smp("z", 9, 2, "", r2), smp("y", 5, 2, "", r2), smp("x", 1, 1, "", r1)}
	_, err := s.WriteSamples(context.Background(), batch)
	if core.CodeOf(err) != core.CodeConflict || !strings.Contains(err.Error(), "node z has two samples at 9") {
		t.Fatalf("err %v", err)
	}
	if _, err := s.GetNode(context.Background(), "x"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("refused batch left node x: %v", err)
	}
	// The same repeated instants within one context: the last one wins.
	batch[2].Run, batch[3].Run = "r1", "r1"
	if _, err := s.WriteSamples(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if got := points(t, s, "z"); !slices.Equal(got, []string{"9=2/ok/r1"}) {
		t.Fatalf("z: %v", got)
	}
}

// TestWriteRewriteRules: rows that would not change are skipped by the
// upsert, which must neither hide a conflict among them nor lose the sign
// of a zero.
func TestWriteRewriteRules(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	r1, r2 := run("r1"), run("r2")
	base := []core.Sample{smp("a", 1, 1, "", r1), smp("a", 2, 0, "", r1), smp("a", 3, 3, "bad", r1), smp("b", 2, 5, "", r2)}
	if _, err := s.WriteSamples(ctx, base); err != nil {
		t.Fatal(err)
	}
	// The same batch again: fine, nothing changes.
	if _, err := s.WriteSamples(ctx, base); err != nil {
		t.Fatal(err)
	}
	want := []string{"1=1/ok/r1", "2=0/ok/r1", "3=3/bad/r1"}
	if got := points(t, s, "a"); !slices.Equal(got, want) {
		t.Fatalf("a: %v", got)
	}
	// Identical rows plus one at an instant of another run: AML_CONFLICT,
	// and the identical rows do not make it pass.
	_, err := s.WriteSamples(ctx, []core.Sample{smp("a", 1, 1, "", r1), smp("a", 3, 3, "bad", r1), smp("b", 2, 5, "", r1)})
	if core.CodeOf(err) != core.CodeConflict || !strings.Contains(err.Error(), `from run "r2"`) {
		t.Fatalf("err %v", err)
	}
	// -0 replaces 0 and back; a state change alone is a change.
	for _, v := range []float64{math.Copysign(0, -1), 0, math.Copysign(0, -1)} {
		if _, err := s.WriteSamples(ctx, []core.Sample{smp("a", 2, v, "", r1), smp("a", 3, 3, "ok", r1)}); err != nil {
			t.Fatal(err)
		}
		want := []string{"1=1/ok/r1", "2=" + fmtValue(v) + "/ok/r1", "3=3/ok/r1"}
		if got := points(t, s, "a"); !slices.Equal(got, want) {
			t.Fatalf("after writing %s: %v, want %v", fmtValue(v), got, want)
		}
	}
}

// TestWriteAppendRace: a writer that commits one of the batch's instants
// after the overlap check found none makes the append-only COPY fail on
// the primary key; the batch then goes through the upsert and the
// conflict rule sees the committed row. The other writer's row is held
// uncommitted until the COPY waits on it, so the order is forced, not
// timed. With WriteAhead the COPY waits after WriteAhead has returned,
// and the batch is upserted from its encoded rows.
func TestWriteAppendRace(t *testing.T) {
	for _, tc := range []struct {
		name, holder string
		ahead        bool
		wantErr      string
		want         string
	}{
		{"same run: replaced", "r1", false, "", "5=2/ok/r1"},
		{"other run: conflict", "r2", false, core.CodeConflict, "5=9/ok/r2"},
		{"ahead, same run: replaced", "r1", true, "", "5=2/ok/r1"},
		{"ahead, other run: conflict", "r2", true, core.CodeConflict, "5=9/ok/r2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTest(t)
			ctx := context.Background()
			// Node a and both contexts exist; a has a sample far away.
			if _, err := s.WriteSamples(ctx, []core.Sample{smp("a", 100, 1, "", run("r1")), smp("b", 1, 1, "", run("r2"))}); err != nil {
				t.Fatal(err)
			}
			pk, err := s.Node(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			var holderCtx int64
			if err := s.pool.QueryRow(ctx, `SELECT pk FROM sample_ctx WHERE run=$1`, tc.holder).Scan(&holderCtx); err != nil {
				t.Fatal(err)
			}
			other, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Rollback(ctx)
			var otherPID int
			if err := other.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&otherPID); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Exec(ctx, `INSERT INTO samples(node, ts, value, state, ctx) VALUES ($1, 5, 9, NULL, $2)`, pk, holderCtx); err != nil {
				t.Fatal(err)
			}
			type result struct {
				staged bool
				err    error
			}
			done := make(chan result, 1)
			go func() {
				var r result
				var it *ingestTx
				r.err = s.Ingest(ctx, func(tx core.IngestTx) error {
					it = tx.(*ingestTx)
					batch := []core.Sample{smp("a", 5, 2, "", run("r1"))}
					if tc.ahead {
						_, err := it.WriteAhead(batch)
						batch[0] = smp("a", 5, 777, "", run("r2")) // not read any more
						return err
					}
					_, err := tx.Write(batch)
					return err
				})
				r.staged = it.staged // the COPY has ended with Ingest
				done <- r
			}()
			// Wait until the write is blocked on the uncommitted row.
			for {
				var waiting int
				if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, otherPID).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting > 0 {
					break
				}
				select {
				case r := <-done:
					t.Fatalf("write finished without waiting for the uncommitted row: %+v", r)
				default:
				}
			}
			if err := other.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if core.CodeOf(r.err) != tc.wantErr || !r.staged {
				t.Fatalf("err %v (want %q), staged %v", r.err, tc.wantErr, r.staged)
			}
			if tc.wantErr != "" && !strings.Contains(r.err.Error(), `node a already has a sample at 5 (epoch µs) from run "r2"`) {
				t.Fatalf("err %v", r.err)
			}
			if got := points(t, s, "a"); !slices.Equal(got, []string{tc.want, "100=1/ok/r1"}) {
				t.Fatalf("a: %v", got)
			}
		})
	}
}

// TestWriteModel is a property test of both paths against the rule,
// written out as a map: random batches — in order or shuffled, new
// instants or stored ones, repeats, a second run now and then, -0 — and
// after each batch the store holds exactly what the model holds, and
// refuses exactly the batches the model refuses.
func TestWriteModel(t *testing.T) {
	testWriteModel(t, func(s *Store, batch []core.Sample, _ *rand.Rand) error {
		_, err := s.WriteSamples(context.Background(), batch)
		return err
	})
}

// TestWriteAheadModel is TestWriteModel with each batch written as one
// to four pieces by WriteAhead in one transaction (so pieces overlap
// what the COPY of the one before is writing), each piece from a buffer
// overwritten as soon as WriteAhead returns.
func TestWriteAheadModel(t *testing.T) {
	testWriteModel(t, func(s *Store, batch []core.Sample, rng *rand.Rand) error {
		return s.Ingest(context.Background(), func(tx core.IngestTx) error {
			wa := tx.(interface {
				WriteAhead([]core.Sample) (core.WriteStats, error)
			})
			var buf []core.Sample
			for rest := batch; len(rest) > 0; {
				n := 1 + rng.IntN(len(rest))
				if rng.IntN(4) == 0 {
					n = len(rest)
				}
				buf = append(buf[:0], rest[:n]...)
				rest = rest[n:]
				if _, err := wa.WriteAhead(buf); err != nil {
					return err
				}
				for i := range buf {
					buf[i] = smp("zz", -1, 999, "bad", run("r9"))
				}
			}
			return nil
		})
	})
}

// TestAppendModel is TestWriteModel with each batch written as pieces
// by Append in one transaction — gathered, written when the gathered
// rows reach a small random limit (that COPY running on as WriteAhead's)
// and at the commit — now and then a piece by Write or WriteAhead
// instead (which write the gathered rows first), each piece from a buffer
// overwritten as soon as the call returns.
func TestAppendModel(t *testing.T) {
	testWriteModel(t, func(s *Store, batch []core.Sample, rng *rand.Rand) error {
		s.appendLimit = 1 + rng.IntN(40)
		return s.Ingest(context.Background(), func(tx core.IngestTx) error {
			it := tx.(*ingestTx)
			var buf []core.Sample
			for rest := batch; len(rest) > 0; {
				n := 1 + rng.IntN(len(rest))
				buf = append(buf[:0], rest[:n]...)
				rest = rest[n:]
				var err error
				switch rng.IntN(8) {
				case 0:
					_, err = it.Write(buf)
				case 1:
					_, err = it.WriteAhead(buf)
				default:
					_, err = it.Append(buf)
				}
				if err != nil {
					return err
				}
				for i := range buf {
					buf[i] = smp("zz", -1, 999, "bad", run("r9"))
				}
			}
			return nil
		})
	})
}

func testWriteModel(t *testing.T, write func(s *Store, batch []core.Sample, rng *rand.Rand) error) {
	s, _ := openTest(t)
	rng := rand.New(rand.NewPCG(7, 8))
	type key struct {
		node string
		ts   int64
	}
	type val struct {
		v     float64
		state string
		run   string
	}
	model := map[key]val{}
	nodes := []string{"n1", "n2", "n3"}
	values := []float64{0, math.Copysign(0, -1), 1, -2.5, 1e300}
	states := []string{"", core.StateOK, "bad"}
	for round := 0; round < 80; round++ {
		main, other := "r1", "r2"
		if rng.IntN(2) == 0 {
			main, other = other, main
		}
		base, width := int64(rng.IntN(40)), int64(1+rng.IntN(12))
		if rng.IntN(3) == 0 {
			base = 1000 * int64(round+1) // fresh instants
		}
		var batch []core.Sample
		for k := 0; k < 1+rng.IntN(25); k++ {
			r := main
			if rng.IntN(12) == 0 {
				r = other
			}
			batch = append(batch, smp(nodes[rng.IntN(len(nodes))], base+rng.Int64N(width),
				values[rng.IntN(len(values))], states[rng.IntN(len(states))], run(r)))
		}
		if rng.IntN(2) == 0 {
			slices.SortStableFunc(batch, func(a, b core.Sample) int { return int(a.TsUs - b.TsUs) })
		}
		// The rule.
		last := map[key]val{}
		refused := false
		for _, sm := range batch {
			k := key{sm.Node, sm.TsUs}
			if prev, ok := last[k]; ok && prev.run != sm.Run {
				refused = true
			}
			state := sm.State
			if state == "" {
				state = core.StateOK
			}
			last[k] = val{sm.Value, state, sm.Run}
		}
		for k, v := range last {
			if stored, ok := model[k]; ok && stored.run != v.run {
				refused = true
			}
		}
		err := write(s, batch, rng)
		if refused != (core.CodeOf(err) == core.CodeConflict) || (!refused && err != nil) {
			t.Fatalf("round %d: err %v, model refuses: %v; batch %+v", round, err, refused, batch)
		}
		if !refused {
			for k, v := range last {
				model[k] = v
			}
		}
		for _, n := range nodes {
			var want []string
			for k, v := range model {
				if k.node == n {
					want = append(want, fmt.Sprintf("%d=%s/%s/%s", k.ts, fmtValue(v.v), v.state, v.run))
				}
			}
			if len(want) == 0 {
				continue
			}
			slices.SortFunc(want, func(a, b string) int {
				var x, y int64
				if _, err := fmt.Sscan(strings.Split(a, "=")[0], &x); err != nil {
					t.Fatal(err)
				}
				if _, err := fmt.Sscan(strings.Split(b, "=")[0], &y); err != nil {
					t.Fatal(err)
				}
				return int(x - y)
			})
			if got := points(t, s, n); !slices.Equal(got, want) {
				t.Fatalf("round %d node %s:\n got %v\nwant %v", round, n, got, want)
			}
		}
	}
}

// EnsureNodes does in one statement what EnsureNode does node by node:
// new nodes are created in the order given (their pks increase in that
// order), existing ones keep their fields and are not counted, a node
// named twice is made once, an invalid node fails before anything is
// written, and the pks it interns are those stored. After a rollback
// nothing of it remains.
func TestEnsureNodes(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	if err := s.UpsertNode(ctx, core.Node{ID: "old", LineID: "other", Unit: "bar", Kind: core.NodeDCW}); err != nil {
		t.Fatal(err)
	}
	var created int
	var pks map[string]int64
	err := s.Ingest(ctx, func(tx core.IngestTx) error {
		it := tx.(*ingestTx)
		if _, err := it.EnsureNodes([]core.Node{{ID: "z", Kind: "nope"}}); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Errorf("bad kind: %v", err)
		}
		var err error
		created, err = it.EnsureNodes([]core.Node{
			{ID: "n3", LineID: "L1", Unit: "°C"}, {ID: "old", LineID: "L1"}, {ID: "n1", LineID: "L1", Kind: core.NodeDAQ},
			{ID: "n3", LineID: "L1"}, {ID: "n2", LineID: "L1", Meaning: "m"},
		})
		pks = map[string]int64{}
		for _, id := range []string{"n3", "old", "n1", "n2"} {
			pk, ok := it.Nodes.Get(id)
			if !ok {
				t.Errorf("%s not interned", id)
			}
			pks[id] = pk
		}
		return err
	})
	if err != nil || created != 3 {
		t.Fatalf("created %d, %v", created, err)
	}
	if !(pks["n3"] < pks["n1"] && pks["n1"] < pks["n2"]) {
		t.Fatalf("pks not in the order given: %v", pks)
	}
	for id, pk := range pks {
		var stored int64
		if err := s.pool.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=$1`, id).Scan(&stored); err != nil || stored != pk {
			t.Fatalf("%s: interned pk %d, stored %d (%v)", id, pk, stored, err)
		}
	}
	for _, want := range []core.Node{
		{ID: "old", LineID: "other", Unit: "bar", Kind: core.NodeDCW},
		{ID: "n3", LineID: "L1", Unit: "°C", Kind: core.NodeDAQ},
		{ID: "n2", LineID: "L1", Kind: core.NodeDAQ, Meaning: "m"},
	} {
		n, err := s.GetNode(ctx, want.ID)
		if err != nil || n.LineID != want.LineID || n.Unit != want.Unit || n.Kind != want.Kind || n.Meaning != want.Meaning {
			t.Fatalf("%s: got %+v, %v; want %+v", want.ID, n, err, want)
		}
	}
	// Rolled back: not there, not cached.
	boom := fmt.Errorf("boom")
	err = s.Ingest(ctx, func(tx core.IngestTx) error {
		if _, err := tx.(*ingestTx).EnsureNodes([]core.Node{{ID: "r1"}, {ID: "r2"}}); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatal(err)
	}
	if _, err := s.GetNode(ctx, "r1"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("r1 after rollback: %v", err)
	}
	err = s.Ingest(ctx, func(tx core.IngestTx) error {
		n, err := tx.(*ingestTx).EnsureNodes([]core.Node{{ID: "r1"}, {ID: "n1"}, {ID: "r2"}})
		if n != 2 {
			t.Errorf("after rollback: created %d", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
