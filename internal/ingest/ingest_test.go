package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// fakeTS is an in-memory core.TimeSeries with real transaction semantics:
// an Ingest's writes are buffered and applied only when fn succeeds.
type fakeTS struct {
	core.TimeSeries // methods the tests do not use; calling one panics

	samples map[string]core.Sample // by node@ts
	nodes   map[string]core.Node
	runs    map[string]core.Run

	commits, rollbacks int
	discarded          int   // samples written in rolled-back transactions
	failWrite          error // returned by every Write when set
}

func newFakeTS() *fakeTS {
	return &fakeTS{samples: map[string]core.Sample{}, nodes: map[string]core.Node{}, runs: map[string]core.Run{}}
}

type fakeTx struct {
	f       *fakeTS
	samples []core.Sample
	nodes   map[string]core.Node
	runs    map[string]core.Run
}

func (f *fakeTS) Ingest(ctx context.Context, fn func(core.IngestTx) error) error {
	tx := &fakeTx{f: f, nodes: map[string]core.Node{}, runs: map[string]core.Run{}}
	if err := fn(tx); err != nil {
		f.rollbacks++
		f.discarded += len(tx.samples)
		return err
	}
	for _, s := range tx.samples {
		f.samples[fmt.Sprintf("%s@%d", s.Node, s.TsUs)] = s
	}
	for k, v := range tx.nodes {
		f.nodes[k] = v
	}
	for k, v := range tx.runs {
		f.runs[k] = v
	}
	f.commits++
	return nil
}

func (tx *fakeTx) Write(samples []core.Sample) (core.WriteStats, error) {
	if tx.f.failWrite != nil {
		return core.WriteStats{}, tx.f.failWrite
	}
	for _, s := range samples {
		_, inTx := tx.nodes[s.Node]
		_, inStore := tx.f.nodes[s.Node]
		if !inTx && !inStore {
			return core.WriteStats{}, fmt.Errorf("fake store: node %q written before EnsureNode", s.Node)
		}
	}
	// Copy: the caller reuses the slice.
	tx.samples = append(tx.samples, samples...)
	return core.WriteStats{Samples: len(samples)}, nil
}

func (tx *fakeTx) EnsureNode(n core.Node) (bool, error) {
	if _, ok := tx.f.nodes[n.ID]; ok {
		return false, nil
	}
	if _, ok := tx.nodes[n.ID]; ok {
		return false, nil
	}
	tx.nodes[n.ID] = n
	return true, nil
}

func (tx *fakeTx) EnsureRun(r core.Run) (bool, error) {
	if _, ok := tx.f.runs[r.ID]; ok {
		return false, nil
	}
	if _, ok := tx.runs[r.ID]; ok {
		return false, nil
	}
	tx.runs[r.ID] = r
	return true, nil
}

func (f *fakeTS) nodeIDs() []string {
	var ids []string
	for id := range f.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wideFile makes rows rows of time_ms,cols...; badRow (1-based data row, 0
// for none) gets a non-numeric value in its last column.
func wideFile(cols []string, rows, badRow int) string {
	var b strings.Builder
	b.WriteString("time_ms," + strings.Join(cols, ",") + "\n")
	for r := 1; r <= rows; r++ {
		fmt.Fprintf(&b, "%d", 1_700_000_000_000+int64(r)*100)
		for c := range cols {
			if r == badRow && c == len(cols)-1 {
				b.WriteString(",oops")
				continue
			}
			fmt.Fprintf(&b, ",%d.5", r*10+c)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

var ingestOpts = CSVOptions{Line: "L1", Product: "P1", Recipe: "R1", BatchSize: 16,
	Units: map[string]string{"a": "bar", "c": "degC"}}

func TestIngestFilesAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", wideFile([]string{"a", "b"}, 50, 0))
	// 100 rows × 3 nodes in batches of 16 samples: several batches reach the
	// transaction before row 60 fails.
	bad := writeFile(t, dir, "bad.csv", wideFile([]string{"a", "b", "c"}, 100, 60))
	after := writeFile(t, dir, "after.csv", wideFile([]string{"d"}, 5, 0))

	ts := newFakeTS()
	reps, err := IngestFiles(context.Background(), ts, []string{good, bad, after}, ingestOpts, nil)
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != core.CodeIngestInvalid {
		t.Fatalf("want AML_INGEST_INVALID, got %v", err)
	}
	// Data row 60 is line 61; the bad cell is column 4 ("c").
	if want := bad + ":61:4"; ae.Field != want {
		t.Errorf("field %q, want %q", ae.Field, want)
	}
	if !strings.Contains(ae.Message, bad) || !strings.Contains(ae.Message, `"oops"`) {
		t.Errorf("message %q does not name the file and the text", ae.Message)
	}
	if len(reps) != 1 || reps[0].File != good {
		t.Fatalf("reports %+v, want only the good file", reps)
	}
	if ts.discarded == 0 {
		t.Fatalf("the bad file wrote nothing before failing; the test proves nothing")
	}
	if ts.commits != 1 || ts.rollbacks != 1 {
		t.Errorf("commits %d rollbacks %d", ts.commits, ts.rollbacks)
	}
	if len(ts.samples) != 100 {
		t.Errorf("store has %d samples, want the good file's 100", len(ts.samples))
	}
	for k, s := range ts.samples {
		if s.Run != "good" {
			t.Errorf("sample %s of run %q in the store", k, s.Run)
		}
	}
	if got := ts.nodeIDs(); strings.Join(got, ",") != "a,b" {
		t.Errorf("nodes %v, want a,b (c only in the failed file)", got)
	}
	if _, ok := ts.runs["bad"]; ok || len(ts.runs) != 1 {
		t.Errorf("runs %v, want only good", ts.runs)
	}
}

func TestIngestFilesRunsNodesAndReports(t *testing.T) {
	dir := t.TempDir()
	f1 := writeFile(t, dir, "2024-05-01_batch7.csv", "time,a,c\n2024-05-01T08:00:00Z,1,2\n2024-05-01T09:30:00.5Z,3,\n")
	ts := newFakeTS()
	reps, err := IngestFiles(context.Background(), ts, []string{f1}, ingestOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	first, last := ms(2024, 5, 1, 8, 0, 0, 0), ms(2024, 5, 1, 9, 30, 0, 500)
	if r.Run != "2024-05-01_batch7" || !r.RunCreated || r.NewNodes != 2 || r.Samples != 3 || r.Missing != 1 ||
		r.FirstTs != first || r.LastTs != last || r.Shape != "wide" {
		t.Errorf("report %+v", r)
	}
	run, ok := ts.runs["2024-05-01_batch7"]
	if !ok {
		t.Fatalf("run not created: %v", ts.runs)
	}
	if run.LineID != "L1" || run.ProductID != "P1" || run.RecipeID != "R1" || run.StartedMs != first ||
		run.EndedMs == nil || *run.EndedMs != last || run.Status != core.RunEnded {
		t.Errorf("run %+v", run)
	}
	if n := ts.nodes["a"]; n.Unit != "bar" || n.LineID != "L1" || n.Kind != core.NodeDAQ {
		t.Errorf("node a %+v", n)
	}
	if n := ts.nodes["c"]; n.Unit != "degC" {
		t.Errorf("node c %+v", n)
	}
	for _, s := range ts.samples {
		if s.Line != "L1" || s.Product != "P1" || s.Recipe != "R1" || s.Run != "2024-05-01_batch7" || s.State != core.StateOK {
			t.Errorf("sample %+v", s)
		}
	}

	// Again: idempotent, nothing new created.
	reps, err = IngestFiles(context.Background(), ts, []string{f1}, ingestOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].RunCreated || reps[0].NewNodes != 0 || len(ts.samples) != 3 {
		t.Errorf("re-ingest: report %+v, %d samples", reps[0], len(ts.samples))
	}

	// An explicit run id wins over the file name.
	opts := ingestOpts
	opts.Run = "R-42"
	reps, err = IngestFiles(context.Background(), ts, []string{f1}, opts, nil)
	if err != nil || reps[0].Run != "R-42" || !reps[0].RunCreated {
		t.Fatalf("explicit run: %+v %v", reps, err)
	}
}

func TestRunIDFromFile(t *testing.T) {
	for in, want := range map[string]string{
		"data/2024-05-01_batch7.csv": "2024-05-01_batch7",
		"a.b.csv":                    "a.b",
		"noext":                      "noext",
		"/x/.csv":                    ".csv",
	} {
		if got := RunIDFromFile(in); got != want {
			t.Errorf("RunIDFromFile(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIngestFilesProgress(t *testing.T) {
	dir := t.TempDir()
	content := wideFile([]string{"a"}, 1000, 0)
	f1 := writeFile(t, dir, "p.csv", content)
	var calls [][2]int64
	_, err := IngestFiles(context.Background(), newFakeTS(), []string{f1}, ingestOpts, func(file string, done, total int64) {
		if file != f1 {
			t.Errorf("progress for %q", file)
		}
		calls = append(calls, [2]int64{done, total})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 2 || calls[0][0] != 0 {
		t.Fatalf("progress calls %v", calls)
	}
	lastCall := calls[len(calls)-1]
	if lastCall[0] != int64(len(content)) || lastCall[1] != int64(len(content)) {
		t.Errorf("last progress %v, want %d/%d", lastCall, len(content), len(content))
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] < calls[i-1][0] {
			t.Errorf("progress went backwards: %v", calls)
		}
	}
}

func TestIngestFilesCancelled(t *testing.T) {
	dir := t.TempDir()
	f1 := writeFile(t, dir, "c.csv", wideFile([]string{"a", "b"}, 5000, 0))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ts := newFakeTS()
	_, err := IngestFiles(ctx, ts, []string{f1}, ingestOpts, nil)
	if !errors.Is(err, context.Canceled) || len(ts.samples) != 0 {
		t.Fatalf("pre-cancelled: %v, %d samples", err, len(ts.samples))
	}

	// Cancelled in the middle of the file (from the progress callback,
	// after the first read): the file is rolled back.
	defer func(d time.Duration) { progressInterval = d }(progressInterval)
	progressInterval = 0
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	_, err = IngestFiles(ctx, ts, []string{f1}, ingestOpts, func(_ string, done, _ int64) {
		if done > 0 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if !strings.Contains(err.Error(), f1) {
		t.Errorf("error %q does not name the file", err)
	}
	if len(ts.samples) != 0 || ts.commits != 0 {
		t.Errorf("cancelled ingest wrote %d samples, %d commits", len(ts.samples), ts.commits)
	}
}

func TestIngestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	f1 := writeFile(t, dir, "ok.csv", wideFile([]string{"a"}, 3, 0))

	t.Run("store error keeps its code", func(t *testing.T) {
		ts := newFakeTS()
		ts.failWrite = core.Errorf(core.CodeStoreUnavailable, "disk full")
		_, err := IngestFiles(context.Background(), ts, []string{f1}, ingestOpts, nil)
		if core.CodeOf(err) != core.CodeStoreUnavailable || !strings.Contains(err.Error(), f1) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := IngestFiles(context.Background(), newFakeTS(), []string{filepath.Join(dir, "nope.csv")}, ingestOpts, nil)
		if core.CodeOf(err) != core.CodeNotFound {
			t.Errorf("got %v", err)
		}
	})
	t.Run("context required", func(t *testing.T) {
		for _, o := range []CSVOptions{{Product: "P", Recipe: "R"}, {Line: "L", Recipe: "R"}, {Line: "L", Product: "P"}} {
			_, err := IngestFiles(context.Background(), newFakeTS(), []string{f1}, o, nil)
			if core.CodeOf(err) != core.CodeInvalidArgument {
				t.Errorf("%+v: got %v", o, err)
			}
		}
	})
	t.Run("bad options before any file", func(t *testing.T) {
		o := ingestOpts
		o.TimeUnit = "fortnights"
		ts := newFakeTS()
		_, err := IngestFiles(context.Background(), ts, []string{f1}, o, nil)
		if core.CodeOf(err) != core.CodeInvalidArgument || ts.commits+ts.rollbacks != 0 {
			t.Errorf("got %v", err)
		}
	})
	t.Run("skip bad reports", func(t *testing.T) {
		f2 := writeFile(t, dir, "skip.csv", wideFile([]string{"a", "b"}, 10, 4))
		o := ingestOpts
		o.SkipBad = true
		ts := newFakeTS()
		reps, err := IngestFiles(context.Background(), ts, []string{f2}, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if reps[0].Skipped != 1 || reps[0].SkipReasons[ReasonBadValue] != 1 || reps[0].Rows != 9 || len(ts.samples) != 18 {
			t.Errorf("report %+v, %d samples", reps[0], len(ts.samples))
		}
	})
}
