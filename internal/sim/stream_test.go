package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// goldenConfigs cover default runs, a short step with a later first run and
// a worn line, a period that does not divide the second with an odd
// duration, gap, start and recipe, and one long run.
func goldenConfigs() []InjectionConfig {
	a := DefaultInjectionConfig()
	b := DefaultInjectionConfig()
	b.Runs, b.Seed, b.StepMs, b.RunDuration, b.FirstRun, b.AgeRuns = 3, 7, 100, 10*time.Minute, 5, 5
	c := InjectionConfig{Runs: 2, Seed: 0, StepMs: 250, RunDuration: 47 * time.Minute, GapBetweenRuns: time.Hour, StartMs: 1_700_000_123_000, RecipeID: "r-x"}
	d := DefaultInjectionConfig()
	d.Runs, d.Seed, d.RunDuration = 1, 42, 26*time.Hour
	return []InjectionConfig{a, b, c, d}
}

// goldenDigests are digest() and the sample count of goldenConfigs as the
// in-memory generator of a3c406f (before streaming) produced them.
var goldenDigests = []struct {
	digest  string
	samples int
}{
	{"4efbb3c41e26431046dc1038247c4141993e3b9b3b52c650f382b51bff609f38", 214563},
	{"056c5b670da99a674267f7f34bac41d60ca6cb471e2e948fa51a5a9065bbf234", 174804},
	{"2108292455ea888908d5072ac509ea1ce30aec35eddd50618525a0dafc7f0c7d", 224795},
	{"cec543f3fb93e26082b87969d1438d8a9944f29445b71ad912366d765fe530e3", 932838},
}

// The step-by-step generator gives the bytes the array-based one gave.
func TestGoldenDigests(t *testing.T) {
	for i, cfg := range goldenConfigs() {
		o := mustGenerate(t, cfg)
		if got := fmt.Sprintf("%x", digest(o)); got != goldenDigests[i].digest || o.SampleCount() != goldenDigests[i].samples {
			t.Errorf("config %d: digest %s, %d samples; want %s, %d", i, got, o.SampleCount(), goldenDigests[i].digest, goldenDigests[i].samples)
		}
	}
}

func mustStream(t testing.TB, cfg InjectionConfig) *Stream {
	t.Helper()
	s, err := NewStream(cfg)
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	return s
}

// A stream gives the same header, run records and samples as the in-memory
// output, in batches of whole steps of at most WriteBatchSize samples.
func TestStreamMatchesGenerate(t *testing.T) {
	for i, cfg := range goldenConfigs() {
		o := mustGenerate(t, cfg)
		s := mustStream(t, cfg)
		if !reflect.DeepEqual(s.Header, o.Header) {
			t.Fatalf("config %d: headers differ", i)
		}
		if len(s.Runs()) != len(o.Runs) {
			t.Fatalf("config %d: %d runs, want %d", i, len(s.Runs()), len(o.Runs))
		}
		for r, rd := range o.Runs {
			if !reflect.DeepEqual(s.Runs()[r], rd.Run) {
				t.Fatalf("config %d run %d: record %+v, want %+v", i, r, s.Runs()[r], rd.Run)
			}
			var got []core.Sample
			err := s.Samples(r, func(b []core.Sample) error {
				if len(b) == 0 || len(b) > WriteBatchSize {
					t.Fatalf("batch of %d samples", len(b))
				}
				if len(got) > 0 && got[len(got)-1].TsUs == b[0].TsUs {
					t.Fatalf("a batch splits the step at %d", b[0].TsUs)
				}
				got = append(got, b...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, rd.Samples) {
				t.Fatalf("config %d run %d: %d streamed samples differ from the %d generated", i, r, len(got), len(rd.Samples))
			}
			if r == 0 && !reflect.DeepEqual(s.Run(r), rd) {
				t.Fatalf("config %d: Run(0) differs", i)
			}
		}
	}
}

// Stream.Write stores exactly what Output.Write stores, and writes the same
// CSV files as Output.WriteCSV.
func TestStreamWriteMatchesWrite(t *testing.T) {
	ctx := context.Background()
	for i, cfg := range goldenConfigs()[1:3] {
		o := mustGenerate(t, cfg)
		want, got := newFakeStore(), newFakeStore()
		wsum, err := o.Write(ctx, want, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantDir, gotDir := t.TempDir(), filepath.Join(t.TempDir(), "csv")
		wantPaths, err := o.WriteCSV(wantDir)
		if err != nil {
			t.Fatal(err)
		}
		var progress [][2]int
		gsum, gotPaths, err := mustStream(t, cfg).Write(ctx, got, StreamOptions{
			CSVDir: gotDir, Progress: func(d, n int) { progress = append(progress, [2]int{d, n}) }})
		if err != nil {
			t.Fatal(err)
		}
		if gsum != wsum || gsum.Samples != o.SampleCount() {
			t.Errorf("config %d: summary %+v, want %+v", i, gsum, wsum)
		}
		if len(progress) != cfg.Runs || progress[len(progress)-1] != [2]int{cfg.Runs, cfg.Runs} {
			t.Errorf("config %d: progress %v", i, progress)
		}
		if !reflect.DeepEqual(got.runs, want.runs) || !reflect.DeepEqual(got.segments, want.segments) ||
			!reflect.DeepEqual(got.nodes, want.nodes) || !reflect.DeepEqual(got.versions, want.versions) ||
			!reflect.DeepEqual(got.lines, want.lines) || !reflect.DeepEqual(got.recipes, want.recipes) {
			t.Errorf("config %d: stored records differ", i)
		}
		if !slices.Equal(got.log, want.log) || !maps(got.samples, want.samples) || got.ingestCalls != cfg.Runs || got.maxBatch > WriteBatchSize {
			t.Errorf("config %d: stored samples differ (%d vs %d), %d ingest calls, largest batch %d", i, len(got.samples), len(want.samples), got.ingestCalls, got.maxBatch)
		}
		if len(gotPaths) != len(wantPaths) {
			t.Fatalf("config %d: CSV paths %v, want %v", i, gotPaths, wantPaths)
		}
		for j := range wantPaths {
			if filepath.Base(gotPaths[j]) != filepath.Base(wantPaths[j]) || filepath.Dir(gotPaths[j]) != gotDir {
				t.Fatalf("config %d: CSV path %s, want %s in %s", i, gotPaths[j], filepath.Base(wantPaths[j]), gotDir)
			}
			a, err1 := os.ReadFile(gotPaths[j])
			b, err2 := os.ReadFile(wantPaths[j])
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Errorf("config %d: %s differs from WriteCSV's (%v, %v)", i, gotPaths[j], err1, err2)
			}
		}
		if entries, _ := os.ReadDir(gotDir); len(entries) != len(wantPaths) {
			t.Errorf("config %d: CSV dir holds %d entries, want %d (no temporary files)", i, len(entries), len(wantPaths))
		}

		// Writing again is idempotent, as with Output.Write.
		sum2, _, err := mustStream(t, cfg).Write(ctx, got, StreamOptions{})
		if err != nil || sum2.RunsCreated != 0 || sum2.SegmentsAdded != 0 || !maps(got.samples, want.samples) {
			t.Errorf("config %d: second write %+v, %v", i, sum2, err)
		}
	}
}

func maps(a, b map[sampleKey]core.Sample) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestStreamWriteFailures(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig()
	s := mustStream(t, cfg)

	// A conflicting run stops the stream there; earlier runs are written,
	// and no CSV of the failed run is left behind.
	st := newFakeStore()
	other := s.Runs()[1]
	other.StartedMs -= 1000
	st.runs[other.ID] = other
	dir := t.TempDir()
	sum, paths, err := s.Write(ctx, st, StreamOptions{CSVDir: dir})
	if core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("err = %v, want %s", err, core.CodeConflict)
	}
	if sum.Runs != 1 || len(st.runSamples(other.ID)) != 0 || len(paths) != 1 {
		t.Errorf("summary %+v, paths %v; %d samples mixed into the foreign run", sum, paths, len(st.runSamples(other.ID)))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("CSV dir holds %d entries, want the first run's only", len(entries))
	}

	// A failing write rolls the run back and adds no segment.
	st = newFakeStore()
	st.failWrite = true
	if _, _, err := s.Write(ctx, st, StreamOptions{}); core.CodeOf(err) != core.CodeIngestInvalid {
		t.Fatalf("err = %v, want the store's %s", err, core.CodeIngestInvalid)
	}
	if len(st.runs) != 0 || len(st.segments) != 0 {
		t.Errorf("after a failed ingest: %d runs, %d segments", len(st.runs), len(st.segments))
	}

	// A cancelled context stops before writing anything.
	st = newFakeStore()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Write(cctx, st, StreamOptions{}); err == nil || len(st.lines) != 0 {
		t.Errorf("cancelled write: err %v, %d lines", err, len(st.lines))
	}

	// A stream can be written again after a failure: it holds no state.
	st = newFakeStore()
	if sum, _, err := s.Write(ctx, st, StreamOptions{}); err != nil || sum.Runs != cfg.Runs {
		t.Errorf("write after failures: %+v, %v", sum, err)
	}
}

// The limits: a stream takes up to MaxTotalSamples, checked before anything
// is simulated; the in-memory generator stops at MaxInMemorySamples.
func TestSampleLimits(t *testing.T) {
	big := DefaultInjectionConfig()
	big.Runs, big.RunDuration = 1000, 5*time.Hour // 180 M samples
	if _, err := NewStream(big); err != nil {
		t.Fatalf("NewStream of %d samples: %v", big.Runs*18000*10, err)
	}
	_, err := GenerateInjection(big)
	if ae, ok := err.(*core.Error); !ok || ae.Code != core.CodeInvalidArgument || ae.Field != FieldRuns {
		t.Fatalf("GenerateInjection of 180 M samples: err = %v, want %s on %s", err, core.CodeInvalidArgument, FieldRuns)
	}
	huge := big
	huge.Runs, huge.RunDuration = 200, 7*24*time.Hour // 1.2 G samples
	_, err = NewStream(huge)
	if ae, ok := err.(*core.Error); !ok || ae.Code != core.CodeInvalidArgument || ae.Field != FieldRuns {
		t.Fatalf("NewStream of 1.2 G samples: err = %v, want %s on %s", err, core.CodeInvalidArgument, FieldRuns)
	}
}
