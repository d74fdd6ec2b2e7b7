package recal

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aml-project/aml/examples"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// baseSpec is the injection example's spec (by_run 0.25/0.25, seed 7)
// with the given split mode and runIds.
func baseSpec(t *testing.T, mode string, runIDs []string) dataset.Spec {
	t.Helper()
	raw, err := fs.ReadFile(examples.FS, "specs/injection_weight.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		t.Fatal(err)
	}
	spec.RunIDs = runIDs
	switch mode {
	case dataset.SplitModeTimeBlocks:
		spec.Split.Mode, spec.Split.Blocks = mode, 4
	case dataset.SplitModeExplicit:
		spec.Split = dataset.Split{Mode: mode, Seed: 7, TrainRunIDs: []string{"r01", "r02"}, ValRunIDs: []string{"r03"}, TestRunIDs: []string{"r04"}}
	}
	return *spec
}

func dsOf(t *testing.T, spec dataset.Spec) core.Dataset {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return core.Dataset{ID: "ds-old", SpecJSON: string(b)}
}

// manifestOf is a dynamic manifest recording split rs (each run's split
// on its run entry and in the split parts, as dataset.Build writes it).
func manifestOf(rs dataset.RunSplit) *dataset.Manifest {
	m := &dataset.Manifest{Kind: dataset.KindDynamic}
	m.Split.Mode = dataset.SplitModeByRun
	m.Split.Train.RunIDs, m.Split.Val.RunIDs, m.Split.Test.RunIDs = rs.Train, rs.Val, rs.Test
	for _, p := range []struct {
		name string
		ids  []string
	}{{dataset.SplitTrain, rs.Train}, {dataset.SplitVal, rs.Val}, {dataset.SplitTest, rs.Test}} {
		for _, id := range p.ids {
			m.Runs = append(m.Runs, dataset.ManifestRun{RunID: id, Split: p.name})
		}
	}
	return m
}

func runsNamed(ids ...string) []core.Run {
	out := make([]core.Run, len(ids))
	for i, id := range ids {
		end := int64(1000 * (i + 1))
		out[i] = core.Run{ID: id, EndedMs: &end}
	}
	return out
}

// TestRebuildSpecKeepsSplit: a recalibration's rebuild keeps every old
// run in the split it had and trains on the new runs; re-drawing the
// by_run split over old and new runs (what the rebuild did before) would
// move old runs between splits.
func TestRebuildSpecKeepsSplit(t *testing.T) {
	old := []string{"r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08"}
	rs, err := dataset.SplitRuns(old, 0.25, 0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	man := manifestOf(rs)
	fresh := runsNamed("r09", "r10", "r11")
	// the failure this guards against: the by_run draw over all 11 runs
	// does not keep the 8 old runs where they were
	redraw, err := dataset.SplitRuns(append(append([]string{}, old...), "r09", "r10", "r11"), 0.25, 0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, id := range old {
		if splitOf(redraw, id) != splitOf(rs, id) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("the by_run re-draw keeps every old run in place; this test no longer shows the reshuffle")
	}
	for _, tc := range []struct {
		name                        string
		spec                        dataset.Spec
		man                         *dataset.Manifest
		wantMode                    string
		wantTrain, wantVal          []string
		wantTest, wantRunIDs        []string
		wantValRatio, wantTestRatio float64
		wantErr                     string
	}{
		{name: "by_run, every ended run", spec: baseSpec(t, dataset.SplitModeByRun, nil), man: man, wantMode: dataset.SplitModeExplicit,
			wantTrain: append(append([]string{}, rs.Train...), "r09", "r10", "r11"), wantVal: rs.Val, wantTest: rs.Test},
		{name: "by_run, listed runs", spec: baseSpec(t, dataset.SplitModeByRun, old), man: man, wantMode: dataset.SplitModeExplicit,
			wantTrain: append(append([]string{}, rs.Train...), "r09", "r10", "r11"), wantVal: rs.Val, wantTest: rs.Test,
			wantRunIDs: append(append([]string{}, old...), "r09", "r10", "r11")},
		{name: "by_run without a manifest", spec: baseSpec(t, dataset.SplitModeByRun, nil), man: nil, wantErr: core.CodeInternal},
		{name: "explicit", spec: baseSpec(t, dataset.SplitModeExplicit, nil), man: man, wantMode: dataset.SplitModeExplicit,
			wantTrain: []string{"r01", "r02", "r09", "r10", "r11"}, wantVal: []string{"r03"}, wantTest: []string{"r04"}},
		{name: "time_blocks unchanged", spec: baseSpec(t, dataset.SplitModeTimeBlocks, nil), man: man, wantMode: dataset.SplitModeTimeBlocks,
			wantValRatio: 0.25, wantTestRatio: 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RebuildSpec(dsOf(t, tc.spec), tc.man, fresh)
			if tc.wantErr != "" {
				if core.CodeOf(err) != tc.wantErr {
					t.Fatalf("err %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sp := got.Split
			if sp.Mode != tc.wantMode || sp.Seed != 7 || sp.ValRatio != tc.wantValRatio || sp.TestRatio != tc.wantTestRatio {
				t.Fatalf("split %+v", sp)
			}
			if !slices.Equal(sp.TrainRunIDs, tc.wantTrain) || !slices.Equal(sp.ValRunIDs, tc.wantVal) || !slices.Equal(sp.TestRunIDs, tc.wantTest) {
				t.Fatalf("train %v val %v test %v; want %v %v %v", sp.TrainRunIDs, sp.ValRunIDs, sp.TestRunIDs, tc.wantTrain, tc.wantVal, tc.wantTest)
			}
			if !slices.Equal(got.RunIDs, tc.wantRunIDs) {
				t.Fatalf("runIds %v, want %v", got.RunIDs, tc.wantRunIDs)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("the rebuilt spec does not validate: %v", err)
			}
		})
	}
}

func splitOf(rs dataset.RunSplit, id string) string {
	switch {
	case slices.Contains(rs.Train, id):
		return dataset.SplitTrain
	case slices.Contains(rs.Val, id):
		return dataset.SplitVal
	case slices.Contains(rs.Test, id):
		return dataset.SplitTest
	}
	return ""
}

// TestRebuildSpecProperty: for random old by_run splits and new runs, the
// rebuilt spec assigns every old run to the split it had, every new run to
// train, and nothing twice; rebuilding again with more runs keeps that.
func TestRebuildSpecProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 5))
	for it := 0; it < 200; it++ {
		nOld, nNew := 3+rng.IntN(30), 1+rng.IntN(10)
		var old []string
		for i := 0; i < nOld; i++ {
			old = append(old, fmt.Sprintf("run-%03d", i))
		}
		seed := rng.Uint64()
		rs, err := dataset.SplitRuns(old, 0.25, 0.25, seed)
		if err != nil {
			t.Fatal(err)
		}
		spec := baseSpec(t, dataset.SplitModeByRun, nil)
		spec.Split.Seed = seed
		var ids []string
		for i := 0; i < nNew; i++ {
			ids = append(ids, fmt.Sprintf("run-%03d", nOld+i))
		}
		got, err := RebuildSpec(dsOf(t, spec), manifestOf(rs), runsNamed(ids...))
		if err != nil {
			t.Fatal(err)
		}
		after := dataset.RunSplit{Train: got.Split.TrainRunIDs, Val: got.Split.ValRunIDs, Test: got.Split.TestRunIDs}
		for _, id := range old {
			if splitOf(after, id) != splitOf(rs, id) {
				t.Fatalf("iteration %d: old run %s moved from %s to %s", it, id, splitOf(rs, id), splitOf(after, id))
			}
		}
		for _, id := range ids {
			if splitOf(after, id) != dataset.SplitTrain {
				t.Fatalf("iteration %d: new run %s in %s", it, id, splitOf(after, id))
			}
		}
		if n := len(after.Train) + len(after.Val) + len(after.Test); n != nOld+nNew {
			t.Fatalf("iteration %d: %d assignments for %d runs", it, n, nOld+nNew)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		// a second recalibration of the rebuilt (explicit) dataset
		again, err := RebuildSpec(dsOf(t, *got), nil, runsNamed("run-999"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.Split.ValRunIDs, rs.Val) || !slices.Equal(again.Split.TestRunIDs, rs.Test) || again.Split.TrainRunIDs[len(again.Split.TrainRunIDs)-1] != "run-999" {
			t.Fatalf("iteration %d: second rebuild %+v", it, again.Split)
		}
	}
}
