package gate

import (
	"math"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/twin/shadow"
)

// plan: only test runs (val when there are none), round-robin, inside each
// run's usable stretch, evenly spread, at most n points, deterministic.
func TestPlan(t *testing.T) {
	man := &dataset.Manifest{BeatMs: 1000, Runs: []dataset.ManifestRun{
		{RunID: "a", Split: dataset.SplitTrain, GridSteps: 1800, StartMs: 0},
		{RunID: "c", Split: dataset.SplitTest, GridSteps: 1800, StartMs: 20_000_000},
		{RunID: "b", Split: dataset.SplitTest, GridSteps: 1800, StartMs: 10_000_000},
		{RunID: "v", Split: dataset.SplitVal, GridSteps: 1800, StartMs: 5_000_000},
		{RunID: "short", Split: dataset.SplitTest, GridSteps: 80, StartMs: 30_000_000},
	}}
	pts := plan(man, 30, 60, 5)
	if len(pts) != 5 {
		t.Fatalf("%d points: %v", len(pts), pts)
	}
	// b before c (start order); "short" has no usable stretch.
	wantRuns := []string{"b", "c", "b", "c", "b"}
	for i, p := range pts {
		if p.run != wantRuns[i] {
			t.Fatalf("point %d on run %s, want %s (%v)", i, p.run, wantRuns[i], pts)
		}
		var start int64
		for _, r := range man.Runs {
			if r.RunID == p.run {
				start = r.StartMs
			}
		}
		step := (p.atMs - start) / 1000
		if step <= 30 || step >= 1800-60 {
			t.Fatalf("point %d at step %d is outside the usable stretch", i, step)
		}
	}
	if pts[0].atMs >= pts[2].atMs {
		t.Fatalf("points on one run must move forward: %v", pts)
	}
	// No test runs: val runs.
	man.Runs = man.Runs[:1:1]
	man.Runs = append(man.Runs, dataset.ManifestRun{RunID: "v", Split: dataset.SplitVal, GridSteps: 1800})
	if pts := plan(man, 30, 60, 3); len(pts) != 3 || pts[0].run != "v" {
		t.Fatalf("val fallback: %v", pts)
	}
	man.Runs = man.Runs[:1]
	if pts := plan(man, 30, 60, 3); len(pts) != 0 {
		t.Fatalf("train runs only: %v", pts)
	}
}

// plan on a static dataset (rows split, runs carry no split): the runs
// its test rows come from, val's when it has no test rows.
func TestPlanStatic(t *testing.T) {
	man := &dataset.Manifest{Kind: dataset.KindStatic, BeatMs: 5000, Runs: []dataset.ManifestRun{
		{RunID: "a", GridSteps: 360, StartMs: 0},
		{RunID: "b", GridSteps: 360, StartMs: 10_000_000},
		{RunID: "c", GridSteps: 360, StartMs: 20_000_000},
	}}
	man.Split.Test.RunIDs = []string{"a", "c"}
	man.Split.Val.RunIDs = []string{"b"}
	pts := plan(man, 1, 60, 4)
	if len(pts) != 4 || pts[0].run != "a" || pts[1].run != "c" || pts[2].run != "a" {
		t.Fatalf("static plan %v", pts)
	}
	for _, p := range pts {
		if step := (p.atMs - map[string]int64{"a": 0, "c": 20_000_000}[p.run]) / 5000; step <= 1 || step >= 360-60 {
			t.Fatalf("point at step %d is outside the usable stretch", step)
		}
	}
	man.Split.Test.RunIDs = nil
	if pts := plan(man, 1, 60, 2); len(pts) != 2 || pts[0].run != "b" {
		t.Fatalf("static val fallback: %v", pts)
	}
}

func TestErrorRatio(t *testing.T) {
	tm := []eval.TargetMetrics{{RMSE: 0.1}, {RMSE: 0.2}}
	if r := errorRatio([]shadow.Num{0.12, 0.2}, tm); math.Abs(r-1.1) > 1e-12 {
		t.Fatalf("ratio %v", r)
	}
	for _, c := range []struct {
		s  []shadow.Num
		tm []eval.TargetMetrics
	}{{nil, tm}, {[]shadow.Num{0.1}, tm}, {[]shadow.Num{0.1, 0.1}, []eval.TargetMetrics{{RMSE: 0.1}, {RMSE: 0}}}} {
		if r := errorRatio(c.s, c.tm); !math.IsNaN(r) {
			t.Errorf("%v %v: %v, want NaN", c.s, c.tm, r)
		}
	}
}
