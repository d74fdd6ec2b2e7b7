package sim

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

func smallConfig() InjectionConfig {
	cfg := DefaultInjectionConfig()
	cfg.Runs = 3
	cfg.RunDuration = time.Hour // 3600 steps, ~35k samples: several write batches per run
	return cfg
}

func TestWriteToStore(t *testing.T) {
	ctx := context.Background()
	o := mustGenerate(t, smallConfig())
	st := newFakeStore()

	// Another version of the recipe exists already, so the runs must carry
	// the version the store assigns, not the generator's 1.
	if err := st.EnsureLine(ctx, o.Line); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureProduct(ctx, o.Product); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureRecipe(ctx, o.Recipe); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutRecipeVersion(ctx, o.Recipe.ID, map[string]any{"hold_pressure": map[string]any{"nominal": 60.0}}); err != nil {
		t.Fatal(err)
	}

	var progress [][2]int
	sum, err := o.Write(ctx, st, func(done, total int) { progress = append(progress, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	wantHash, err := core.CanonicalHash(o.RecipeParams)
	if err != nil {
		t.Fatal(err)
	}
	want := WriteSummary{Runs: 3, RunsCreated: 3, Samples: o.SampleCount(), Nodes: 10, SegmentsAdded: 3, RecipeVersion: 2, ContentHash: wantHash}
	if sum != want {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	if !slices.Equal(progress, [][2]int{{1, 3}, {2, 3}, {3, 3}}) {
		t.Errorf("progress calls %v", progress)
	}
	if st.ingestCalls != 3 {
		t.Errorf("%d Ingest calls, want one per run", st.ingestCalls)
	}
	if st.maxBatch == 0 || st.maxBatch > WriteBatchSize {
		t.Errorf("largest batch %d, want 1..%d", st.maxBatch, WriteBatchSize)
	}
	if len(st.nodes) != 10 || st.nodes[NodePartWeight].Unit != "g" || st.nodes[NodeHoldTime].Kind != core.NodeDCW {
		t.Errorf("nodes %v", st.nodes)
	}
	for _, rd := range o.Runs {
		run, err := st.GetRun(ctx, rd.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.RecipeVersion == nil || *run.RecipeVersion != 2 || run.Status != core.RunEnded || run.StartedMs != rd.Run.StartedMs || *run.EndedMs != *rd.Run.EndedMs {
			t.Errorf("stored run %+v", run)
		}
		if got := st.runSamples(rd.Run.ID); !slices.Equal(got, rd.Samples) {
			t.Errorf("run %s: stored %d samples differ from the %d generated", rd.Run.ID, len(got), len(rd.Samples))
		}
		segs, _ := st.ListContextSegments(ctx, rd.Run.ID)
		if len(segs) != 1 {
			t.Fatalf("run %s has %d context segments", rd.Run.ID, len(segs))
		}
		s := segs[0]
		if s.RecipeID != o.Recipe.ID || s.RecipeVersion != 2 || s.ContentHash != wantHash || s.FromMs != rd.Run.StartedMs ||
			s.ToMs == nil || *s.ToMs != *rd.Run.EndedMs || s.ConfirmedBy != "sim" {
			t.Errorf("segment %+v", s)
		}
	}
	if *o.Runs[0].Run.RecipeVersion != 1 {
		t.Error("Write changed the output's runs")
	}

	// Writing again is idempotent.
	total := len(st.samples)
	sum2, err := o.Write(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum2.RunsCreated != 0 || sum2.SegmentsAdded != 0 || sum2.Runs != 3 || sum2.RecipeVersion != 2 {
		t.Errorf("second write %+v", sum2)
	}
	if len(st.samples) != total || len(st.segments) != 3 || len(st.versions[o.Recipe.ID]) != 2 {
		t.Errorf("second write: %d samples (was %d), %d segments, %d versions", len(st.samples), total, len(st.segments), len(st.versions[o.Recipe.ID]))
	}
}

func TestWriteConflictsAndFailures(t *testing.T) {
	ctx := context.Background()
	o := mustGenerate(t, smallConfig())

	// A run of the same id but another time span is not overwritten.
	st := newFakeStore()
	other := o.Runs[1].Run
	other.StartedMs -= 1000
	st.runs[other.ID] = other
	sum, err := o.Write(ctx, st, nil)
	if core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("err = %v, want %s", err, core.CodeConflict)
	}
	if sum.Runs != 1 || len(st.runSamples(other.ID)) != 0 {
		t.Errorf("summary %+v; %d samples mixed into the foreign run", sum, len(st.runSamples(other.ID)))
	}

	// A failing write rolls the run back and adds no segment.
	st = newFakeStore()
	st.failWrite = true
	if _, err := o.Write(ctx, st, nil); core.CodeOf(err) != core.CodeIngestInvalid {
		t.Fatalf("err = %v, want the store's %s", err, core.CodeIngestInvalid)
	}
	if len(st.runs) != 0 || len(st.segments) != 0 {
		t.Errorf("after a failed ingest: %d runs, %d segments", len(st.runs), len(st.segments))
	}

	// A cancelled context stops before writing anything.
	st = newFakeStore()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.Write(cctx, st, nil); err == nil || len(st.lines) != 0 {
		t.Errorf("cancelled write: err %v, %d lines", err, len(st.lines))
	}
}

func TestWriteCSV(t *testing.T) {
	cfg := DefaultInjectionConfig()
	cfg.Runs = 2
	o := mustGenerate(t, cfg)
	dir := filepath.Join(t.TempDir(), "out")
	paths, err := o.WriteCSV(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "recipe-injection-a-run-001.csv"),
		filepath.Join(dir, "recipe-injection-a-run-002.csv"),
		filepath.Join(dir, "nodes.csv"),
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %v, want only the three CSVs (no temporary files)", names)
	}
	if fi, err := os.Stat(paths[0]); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode of %s: %v %v", paths[0], fi.Mode(), err)
	}

	for r, rd := range o.Runs {
		f, err := os.Open(paths[r])
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(rows[0], ",") != "time,node,value,state" {
			t.Errorf("header %v", rows[0])
		}
		if len(rows)-1 != len(rd.Samples) {
			t.Fatalf("%s: %d rows for %d samples", paths[r], len(rows)-1, len(rd.Samples))
		}
		for i, row := range rows[1:] {
			s := rd.Samples[i]
			ts, err1 := strconv.ParseInt(row[0], 10, 64)
			v, err2 := strconv.ParseFloat(row[2], 64)
			if err1 != nil || err2 != nil || ts*1000 != s.TsUs || row[1] != s.Node || v != s.Value || row[3] != s.State ||
				row[2] != strconv.FormatFloat(s.Value, 'g', -1, 64) {
				t.Fatalf("row %d %v does not round-trip sample %+v", i+1, row, s)
			}
		}
	}

	f, err := os.Open(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != "id,unit,min,max,kind,meaning" || len(rows) != 11 {
		t.Fatalf("nodes.csv header %v, %d rows", rows[0], len(rows))
	}
	for i, n := range o.Nodes {
		row := rows[i+1]
		if row[0] != n.ID || row[1] != n.Unit || row[2] != strconv.FormatFloat(*n.Min, 'g', -1, 64) ||
			row[3] != strconv.FormatFloat(*n.Max, 'g', -1, 64) || row[4] != n.Kind || row[5] != n.Meaning {
			t.Errorf("nodes.csv row %v for %+v", row, n)
		}
	}

	// Rewriting replaces the files in place.
	if _, err := o.WriteCSV(dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("after rewrite dir holds %d entries", len(entries))
	}
}
