package sim

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// TestWriteToSQLite writes a small data set into the real embedded store,
// reads every sample back and writes it again.
func TestWriteToSQLite(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()

	cfg := smallConfig()
	cfg.Runs = 2
	o := mustGenerate(t, cfg)
	sum, err := o.Write(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Runs != 2 || sum.RunsCreated != 2 || sum.SegmentsAdded != 2 || sum.Samples != o.SampleCount() || sum.RecipeVersion != 1 {
		t.Errorf("summary %+v", sum)
	}
	wantHash, _ := core.CanonicalHash(o.RecipeParams)
	if sum.ContentHash != wantHash {
		t.Errorf("content hash %s, want %s", sum.ContentHash, wantHash)
	}
	nodes, err := st.ListNodes(ctx, cfg.LineID)
	if err != nil || len(nodes) != 10 {
		t.Fatalf("ListNodes: %d nodes, %v", len(nodes), err)
	}

	ids := make([]string, len(o.Nodes))
	for i, n := range o.Nodes {
		ids[i] = n.ID
	}
	for _, rd := range o.Runs {
		run, err := st.GetRun(ctx, rd.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != core.RunEnded || run.RecipeVersion == nil || *run.RecipeVersion != 1 || run.StartedMs != rd.Run.StartedMs || *run.EndedMs != *rd.Run.EndedMs {
			t.Errorf("stored run %+v", run)
		}
		res, err := st.QueryMulti(ctx, core.MultiQuery{Nodes: ids, Filter: core.ContextFilter{Run: rd.Run.ID}, Limit: 10 * sqlite.MaxPageLimit})
		if err != nil {
			t.Fatal(err)
		}
		if res.Truncated {
			t.Fatal("query truncated; raise the limit")
		}
		got := res.Samples
		sort.Slice(got, func(i, j int) bool {
			if got[i].TsUs != got[j].TsUs {
				return got[i].TsUs < got[j].TsUs
			}
			return got[i].Node < got[j].Node
		})
		if !slices.Equal(got, rd.Samples) {
			t.Errorf("run %s: read back %d samples, wrote %d (or they differ)", rd.Run.ID, len(got), len(rd.Samples))
		}
		segs, err := st.ListContextSegments(ctx, rd.Run.ID)
		if err != nil || len(segs) != 1 || segs[0].ContentHash != wantHash || segs[0].ConfirmedBy != ConfirmedBy {
			t.Errorf("segments %+v, %v", segs, err)
		}
	}

	// Idempotent re-write.
	sum2, err := o.Write(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum2.RunsCreated != 0 || sum2.SegmentsAdded != 0 || sum2.RecipeVersion != 1 {
		t.Errorf("second write %+v", sum2)
	}
	for _, rd := range o.Runs {
		counts, err := st.CountRunSamples(ctx, rd.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, c := range counts {
			n += c
		}
		if n != int64(len(rd.Samples)) {
			t.Errorf("run %s: %d samples after re-write, want %d", rd.Run.ID, n, len(rd.Samples))
		}
		if segs, _ := st.ListContextSegments(ctx, rd.Run.ID); len(segs) != 1 {
			t.Errorf("run %s: %d segments after re-write", rd.Run.ID, len(segs))
		}
	}
}

// TestStreamToSQLite streams a data set into the real embedded store and
// reads back exactly the samples GenerateInjection gives.
func TestStreamToSQLite(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	cfg := smallConfig()
	cfg.Runs, cfg.Seed = 2, 5
	o := mustGenerate(t, cfg)
	sum, _, err := mustStream(t, cfg).Write(ctx, st, StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Runs != 2 || sum.RunsCreated != 2 || sum.SegmentsAdded != 2 || sum.Samples != o.SampleCount() {
		t.Errorf("summary %+v", sum)
	}
	ids := make([]string, len(o.Nodes))
	for i, n := range o.Nodes {
		ids[i] = n.ID
	}
	for _, rd := range o.Runs {
		res, err := st.QueryMulti(ctx, core.MultiQuery{Nodes: ids, Filter: core.ContextFilter{Run: rd.Run.ID}, Limit: 10 * sqlite.MaxPageLimit})
		if err != nil || res.Truncated {
			t.Fatalf("query: %v, truncated %v", err, res.Truncated)
		}
		got := res.Samples
		sort.Slice(got, func(i, j int) bool {
			if got[i].TsUs != got[j].TsUs {
				return got[i].TsUs < got[j].TsUs
			}
			return got[i].Node < got[j].Node
		})
		if !slices.Equal(got, rd.Samples) {
			t.Errorf("run %s: read back %d samples, generated %d (or they differ)", rd.Run.ID, len(got), len(rd.Samples))
		}
	}
}
