package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/contract"

	"github.com/aml-project/aml/internal/ident/trainers"
)

// fixture is one trained hybrid model of the simulated injection line,
// shared by every test and benchmark of the binary: 24 runs of 30 min
// (seed 7), examples/specs/injection_weight.json, hybrid_residual@1 with
// examples/physics/injection.aml (as TestHybridInjectionPassesGates).
type fixture struct {
	dir     string
	st      *sqlite.Store
	modelID string
	dsID    string
	twin    *Twin
	bundle  *dataset.Bundle
	err     error
}

var (
	fixOnce sync.Once
	fix     fixture
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fix.st != nil {
		if err := fix.st.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close the fixture store:", err)
			code = 1
		}
	}
	if staticF.st != nil {
		if err := staticF.st.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close the static fixture store:", err)
			code = 1
		}
	}
	if staticF.dir != "" {
		if err := os.RemoveAll(staticF.dir); err != nil {
			fmt.Fprintln(os.Stderr, "remove the static fixture directory:", err)
		}
	}
	if fix.dir != "" {
		if err := os.RemoveAll(fix.dir); err != nil {
			fmt.Fprintln(os.Stderr, "remove the fixture directory:", err)
		}
	}
	os.Exit(code)
}

func getFixture(tb testing.TB) *fixture {
	tb.Helper()
	if testing.Short() {
		tb.Skip("the fixture trains the hybrid twin end to end; runs without -short")
	}
	fixOnce.Do(func() { fix.err = buildFixture(&fix) })
	if fix.err != nil {
		tb.Fatal(fix.err)
	}
	return &fix
}

func buildFixture(f *fixture) error {
	dir, err := os.MkdirTemp("", "aml-twin-engine-")
	if err != nil {
		return err
	}
	f.dir = dir
	st, err := sqlite.Open(dir)
	if err != nil {
		return err
	}
	f.st = st
	ctx := context.Background()
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 24, 7
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		return err
	}
	if _, err := out.Write(ctx, st, nil); err != nil {
		return err
	}
	raw, err := os.ReadFile("../../../examples/specs/injection_weight.json")
	if err != nil {
		return err
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		return err
	}
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		return err
	}
	f.dsID = ds.Dataset.ID
	if f.bundle, err = dataset.OpenBundle(filepath.Join(dir, ds.Dataset.Path)); err != nil {
		return err
	}
	physics, _ := filepath.Abs("../../../examples/physics/injection.aml")
	r := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New()})
	j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: "hybrid_residual@1", Seed: 1,
		Params: json.RawMessage(`{"physics":"` + physics + `","mapping":{"outputs":{"weight":"part_weight"}}}`)})
	if err != nil {
		return err
	}
	if err := r.Run(ctx, j.ID, 0); err != nil {
		return err
	}
	if j, err = st.GetJob(ctx, j.ID); err != nil {
		return err
	}
	if j.Status != core.JobDone || j.ModelID == "" {
		return fmt.Errorf("training job %s: %s", j.Status, j.Error)
	}
	f.modelID = j.ModelID
	f.twin, err = Load(ctx, st, dir, j.ModelID)
	return err
}

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// window cuts the snapshot window ending at grid row end of a test run
// (steps rows; values as the dataset's cleaned grid, NaN as null).
func (f *fixture) window(tb testing.TB, runIdx, end, steps int) (*contract.SnapshotWindow, map[string]float64) {
	tb.Helper()
	b := f.bundle
	var runs []dataset.ManifestRun
	for _, r := range b.Manifest.Runs {
		if r.Split == dataset.SplitTest {
			runs = append(runs, r)
		}
	}
	run := runs[runIdx%len(runs)]
	ts, vals, ok := b.RunGrid(run.RunID)
	if !ok {
		tb.Fatalf("no grid for %s", run.RunID)
	}
	nAll := len(b.Manifest.AllNodes)
	if end >= len(ts) {
		end = len(ts) - 1
	}
	w := &contract.SnapshotWindow{BeatMs: b.Manifest.BeatMs, EndMs: int64(ts[end]), Steps: steps, Values: map[string][]*float64{}, RunID: run.RunID}
	last := map[string]float64{}
	for j, n := range b.Manifest.AllNodes {
		vs := make([]*float64, steps)
		for i := 0; i < steps; i++ {
			v := float64(vals[(end-steps+1+i)*nAll+j])
			if !math.IsNaN(v) {
				vs[i] = &v
				last[n] = v
			}
		}
		w.Values[n] = vs
	}
	return w, last
}

// snapshot is a sealed snapshot of the default injection scene at grid
// row end of test run runIdx, with the twin's own state estimate.
func (f *fixture) snapshot(tb testing.TB, runIdx, end int) *contract.TwinSnapshot {
	tb.Helper()
	return f.snapshotEdit(tb, runIdx, end, nil)
}

// snapshotEdit is snapshot with the window's values edited by edit (nil:
// none) before the state is estimated and the snapshot sealed.
func (f *fixture) snapshotEdit(tb testing.TB, runIdx, end int, edit func(w *contract.SnapshotWindow)) *contract.TwinSnapshot {
	tb.Helper()
	steps, _, _ := f.twin.Window()
	w, last := f.window(tb, runIdx, end, steps)
	if edit != nil {
		edit(w)
		for n, vs := range w.Values {
			for _, v := range vs {
				if v != nil {
					last[n] = *v
				}
			}
		}
	}
	sc := contract.DefaultInjectionScene()
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: testNow, CreatedBy: "test",
		SnapshotID: fmt.Sprintf("snap-%d-%d", runIdx, end), SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: sc.LineID,
		Phase: "holding", CapturedAt: testNow, DAQWatermark: w.EndMs, ControlValues: map[string]float64{},
		DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, Window: w}
	for _, c := range sc.Controls {
		s.ControlValues[c.ID] = last[c.ID]
	}
	est, ver, err := f.twin.EstimateState(context.Background(), w)
	if err != nil {
		tb.Fatal(err)
	}
	s.StateEstimate, s.EstimatorVersion = est, ver
	if err := s.Seal(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// hold is the candidate holding the snapshot's controls, with the moves
// of delta applied from step 0 on.
func hold(s *contract.TwinSnapshot, T int, delta map[string]float64) []map[string]float64 {
	out := make([]map[string]float64, T)
	for k := range out {
		out[k] = map[string]float64{}
		for id, v := range s.ControlValues {
			out[k][id] = v + delta[id]
		}
	}
	return out
}
