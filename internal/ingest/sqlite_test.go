package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// TestIngestFilesSQLite runs the all-or-nothing scenario against the real
// SQLite store.
func TestIngestFilesSQLite(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", wideFile([]string{"a", "b"}, 50, 0))
	bad := writeFile(t, dir, "bad.csv", wideFile([]string{"a", "b", "c"}, 100, 60))
	ctx := context.Background()

	reps, err := IngestFiles(ctx, st, []string{good}, ingestOpts, nil)
	if err != nil || len(reps) != 1 {
		t.Fatalf("good: %v", err)
	}
	// The bad file is placed later (its times would otherwise collide with
	// the good run's, which the store refuses).
	shifted := ingestOpts
	shifted.TimeOffsetMs = 10_000_000
	if _, err := IngestFiles(ctx, st, []string{bad}, shifted, nil); core.CodeOf(err) != core.CodeIngestInvalid {
		t.Fatalf("bad: %v", err)
	}
	// Without the shift the second run's samples would overwrite the first
	// run's at the same instants: refused with AML_CONFLICT, nothing written.
	if _, err := IngestFiles(ctx, st, []string{writeFile(t, dir, "clash.csv", wideFile([]string{"a", "b"}, 50, 0))}, ingestOpts, nil); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("clash: %v", err)
	}
	if _, err := st.GetRun(ctx, "clash"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("clash run created: %v", err)
	}
	if !reps[0].RunCreated || reps[0].NewNodes != 2 {
		t.Errorf("report %+v", reps[0])
	}
	counts, err := st.CountRunSamples(ctx, "good")
	if err != nil || counts["a"] != 50 || counts["b"] != 50 {
		t.Errorf("good run counts %v %v", counts, err)
	}
	if counts, err := st.CountRunSamples(ctx, "bad"); err == nil && len(counts) != 0 {
		t.Errorf("bad run has samples: %v", counts)
	}
	if _, err := st.GetRun(ctx, "bad"); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("bad run exists: %v", err)
	}
	run, err := st.GetRun(ctx, "good")
	if err != nil || run.Status != core.RunEnded || run.StartedMs != 1_700_000_000_100 || run.EndedMs == nil || *run.EndedMs != 1_700_000_005_000 {
		t.Errorf("good run %+v %v", run, err)
	}
	nodes, err := st.ListNodes(ctx, "L1")
	if err != nil || len(nodes) != 2 {
		t.Fatalf("nodes %+v %v", nodes, err)
	}
	if nodes[0].ID != "a" || nodes[0].Unit != "bar" {
		t.Errorf("node a %+v", nodes[0])
	}

	// Re-ingesting the good file changes nothing.
	reps, err = IngestFiles(ctx, st, []string{good}, ingestOpts, nil)
	if err != nil || reps[0].RunCreated || reps[0].NewNodes != 0 {
		t.Fatalf("re-ingest %+v %v", reps, err)
	}
	if counts, _ := st.CountRunSamples(ctx, "good"); counts["a"] != 50 {
		t.Errorf("re-ingest counts %v", counts)
	}
}

// BenchmarkIngestSQLite measures the whole path, CSV file to committed
// SQLite rows: 20k rows × 10 nodes per file (after the first iteration the
// rows already exist and are replaced, as in a re-ingest).
func BenchmarkIngestSQLite(b *testing.B) {
	// 20 000 rows × 10 nodes = 200k samples into a fresh store each
	// iteration: the same rows and settings as the store package's
	// BenchmarkRawInsert, which bench/ingest.sh prints beside this one.
	dir := b.TempDir()
	file := filepath.Join(dir, "bench.csv")
	if err := os.WriteFile(file, wideCSV(20_000, 10), 0o644); err != nil {
		b.Fatal(err)
	}
	opts := CSVOptions{Line: "L", Product: "P", Recipe: "R"}
	samples := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := sqlite.Open(filepath.Join(dir, fmt.Sprintf("db%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		reps, err := IngestFiles(context.Background(), st, []string{file}, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		samples += reps[0].Samples
		b.StopTimer()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}
