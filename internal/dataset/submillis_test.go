package dataset

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// A record sampled every 1638 µs (Silverbox's 610.35 Hz, to the µs) builds
// a dataset on a 1638 µs grid: one grid step per sample, nothing merged or
// dropped, the manifest's beatUs set (beatMs 0), the timestamps exact to
// the µs, and the values in order. A whole-millisecond beat written as a
// duration is the same spec, with the same hash, as beatMs.
func TestSubMillisecondBeat(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	const n, period = 600, int64(1638)
	t0 := int64(1_700_000_000_000) // ms
	for r, run := range []string{"est", "val", "test"} {
		start := t0 + int64(r)*10_000
		var ss []core.Sample
		for k := int64(0); k < n; k++ {
			ts := start*1000 + k*period
			u := math.Sin(float64(k) / 7)
			ss = append(ss, core.Sample{Node: "u", TsUs: ts, Value: u, Line: "L", Product: "P", Recipe: "R", Run: run},
				core.Sample{Node: "y", TsUs: ts, Value: float64(k), Line: "L", Product: "P", Recipe: "R", Run: run})
		}
		end := core.UsToMs(start*1000 + (n-1)*period)
		err := st.Ingest(ctx, func(tx core.IngestTx) error {
			if _, err := tx.Write(ss); err != nil {
				return err
			}
			_, err := tx.EnsureRun(core.Run{ID: run, LineID: "L", ProductID: "P", RecipeID: "R", StartedMs: start, EndedMs: &end, Status: core.RunEnded})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	off, zero := false, int64(0)
	spec := &Spec{LineID: "L", ProductID: "P", RecipeID: "R", Beat: "1638us", HistorySteps: 5, HorizonSteps: 3, Purpose: PurposeMPCSurrogate,
		Nodes: []NodeSpec{{NodeID: "u", Role: RoleControl}, {NodeID: "y", Role: RoleTarget}},
		Split: Split{Mode: SplitModeExplicit, TrainRunIDs: []string{"est"}, ValRunIDs: []string{"val"}, TestRunIDs: []string{"test"}},
		// The grid is aligned to the epoch: a run's first and last sample
		// may fall off it by less than one beat. Interpolation off.
		Cleaning: Cleaning{Range: &off, MaxInterpMs: &zero}}
	res, err := Build(ctx, st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if m.BeatMs != 0 || m.BeatUs != period || m.Period().Microseconds() != period || m.PeriodSeconds() != 0.001638 {
		t.Fatalf("manifest beat %d ms / %d µs", m.BeatMs, m.BeatUs)
	}
	if len(m.Runs) != 3 {
		t.Fatalf("runs %+v", m.Runs)
	}
	for _, r := range m.Runs {
		if r.GridSteps < n-1 || r.GridSteps > n || r.StartUs == 0 || r.Start()%period != 0 || r.StartMs != core.UsToMs(r.StartUs) {
			t.Fatalf("run %s: %d grid steps from %d µs (want %d samples, one per step)", r.RunID, r.GridSteps, r.StartUs, n)
		}
	}
	grid := readF32(t, filepath.Join(dir, res.Dataset.Path, "arrays", "grid.f32"))
	gts := readF64(t, filepath.Join(dir, res.Dataset.Path, "arrays", "grid_timestamps.f64"))
	r0 := m.Runs[0]
	for i := 1; i < r0.GridSteps; i++ {
		// y counts the samples: every step holds exactly the next one.
		if d := grid[2*i+1] - grid[2*(i-1)+1]; d != 1 {
			t.Fatalf("grid step %d: y moved by %v, want 1 (a sample merged or lost)", i, d)
		}
		if dt := (gts[i] - gts[i-1]) * 1000; math.Abs(dt-float64(period)) > 0.5 {
			t.Fatalf("timestamps %d: %v µs apart, want %d", i, dt, period)
		}
	}
	if _, err := Verify(dir, res.Dataset); err != nil {
		t.Fatal(err)
	}

	a := &Spec{LineID: "L", ProductID: "P", RecipeID: "R", Beat: "100ms", HistorySteps: 5, HorizonSteps: 3}
	b := &Spec{LineID: "L", ProductID: "P", RecipeID: "R", BeatMs: 100, HistorySteps: 5, HorizonSteps: 3}
	a.Normalize()
	b.Normalize()
	ca, _ := core.CanonicalJSON(a)
	cb, _ := core.CanonicalJSON(b)
	if string(ca) != string(cb) || a.Beat != "" || a.BeatMs != 100 {
		t.Fatalf("beat 100ms normalised to %s, beatMs 100 is %s", ca, cb)
	}
}
