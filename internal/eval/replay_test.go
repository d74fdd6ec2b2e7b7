package eval

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
)

// ReplayRun: windows of stride F tile the run from step H on, skipping a
// window whose history or future holds a missing value; each step's
// prediction carries the band of its horizon step; the coverage is the
// share of compared steps inside the band (a perfect model: all; a model
// off by more than the widest band: none); missing values are null in
// JSON; a band with fewer horizon steps than the dataset is refused.
func TestReplayRun(t *testing.T) {
	const H, F, steps = 3, 2, 41
	man := &dataset.Manifest{Kind: dataset.KindDynamic, HistorySteps: H, HorizonSteps: F, BeatMs: 1000,
		AllNodes: []string{"u", "y"}, Controls: []string{"u"}, Targets: []string{"y"}}
	g := &dataset.ServeGrid{RunID: "r1", StartUs: 5_000_000, BeatUs: 1_000_000, Steps: steps, Nodes: []string{"u", "y"}, Vals: make([]float32, 2*steps)}
	for s := 0; s < steps; s++ {
		v := float32(math.Sin(float64(s) / 5))
		g.Vals[2*s], g.Vals[2*s+1] = v, v
	}
	g.Vals[2*20+1] = float32(math.NaN()) // step 20 unmeasured
	conf := &Conformal{Coverage: 0.9, Widths: [][]float64{{0.1}, {0.2}}}
	ctx := context.Background()

	r, err := ReplayRun(ctx, echo{H: H, F: F, exact: true}, man, conf, g)
	if err != nil {
		t.Fatal(err)
	}
	// Starts 3, 5, …, 39 (the last covers steps 39 and 40); the windows
	// whose [start−H, start+F) holds step 20 are skipped: 19, 21, 23.
	var want []int
	for k := H; k+F <= steps; k += F {
		if !(k-H <= 20 && 20 < k+F) {
			want = append(want, k)
		}
	}
	if r.Windows != len(want) || r.H != H || r.F != F || r.Level != 0.9 || r.StartUs != g.StartUs {
		t.Fatalf("replay: %d windows (want %d), H %d F %d level %v", r.Windows, len(want), r.H, r.F, r.Level)
	}
	for _, k := range want {
		for f := 0; f < F; f++ {
			st := k + f
			if p := r.Predicted[0][st]; math.Abs(p-float64(g.Vals[2*st])) > 1e-6 {
				t.Fatalf("step %d predicted %v", st, p)
			}
			if w := r.Upper[0][st] - r.Predicted[0][st]; math.Abs(w-conf.Widths[f][0]) > 1e-9 {
				t.Fatalf("step %d (horizon %d): half-width %v", st, f, w)
			}
		}
	}
	for _, st := range []int{0, 1, 2, 19, 20, 21, 22} {
		if !math.IsNaN(r.Predicted[0][st]) {
			t.Fatalf("step %d predicted although no window covers it", st)
		}
	}
	if r.Coverage[0] != 1 {
		t.Fatalf("a perfect model's coverage %v", r.Coverage[0])
	}
	off, err := ReplayRun(ctx, echo{H: H, F: F, c: 5}, man, conf, g)
	if err != nil || off.Coverage[0] != 0 {
		t.Fatalf("a model 4 off: coverage %v, %v", off.Coverage, err)
	}
	noBand, err := ReplayRun(ctx, echo{H: H, F: F, exact: true}, man, nil, g)
	if err != nil || !math.IsNaN(noBand.Level) || !math.IsNaN(noBand.Coverage[0]) {
		t.Fatalf("without a band: level %v coverage %v %v", noBand.Level, noBand.Coverage, err)
	}
	b, err := json.Marshal(noBand)
	if err != nil || !strings.Contains(string(b), `"level":null`) || !strings.Contains(string(b), `"predicted":[[null,null,null,`) {
		t.Fatalf("json: %v %.300s", err, b)
	}
	// The JSON reads back (null as NaN): a client of the API gets the replay.
	var back RunReplay
	if err := json.Unmarshal(b, &back); err != nil || !math.IsNaN(back.Level) || back.Windows != noBand.Windows ||
		len(back.Predicted) != 1 || len(back.Predicted[0]) != steps || !math.IsNaN(back.Predicted[0][0]) || back.Predicted[0][3] != noBand.Predicted[0][3] {
		t.Fatalf("read back: %v %+v", err, back)
	}
	if _, err := ReplayRun(ctx, echo{H: H, F: F}, man, &Conformal{Coverage: 0.9, Widths: [][]float64{{0.1}}}, g); err == nil {
		t.Fatal("a band of one horizon step for a dataset of two was accepted")
	}
	if _, err := ReplayRun(ctx, echo{H: H, F: F}, &dataset.Manifest{Kind: dataset.KindStatic}, nil, g); err == nil {
		t.Fatal("a static manifest was accepted")
	}
}
