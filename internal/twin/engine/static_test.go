package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/contract"
)

// staticFix is a static dataset of simulated injection runs (its own
// store: 12 runs of seed 11, no hybrid to train) and a twin of each static
// class trained on it.
type staticFix struct {
	dir    string
	st     *sqlite.Store
	bundle *dataset.Bundle
	twins  map[string]*Twin // by trainer
	models map[string]string
}

var (
	staticOnce sync.Once
	staticF    staticFix
	staticErr  error
)

// staticParams keep the fits fast: a polynomial surface without the
// Gaussian process, a forest of 60 trees.
var staticParams = map[string]string{
	"static_response@1": `{"degrees":[1,2],"gp":false}`,
	"static_forest@1":   `{"trees":60,"minLeaf":5}`,
}

func staticTwins(t *testing.T) *staticFix {
	t.Helper()
	staticOnce.Do(func() { staticErr = buildStatic(&staticF) })
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	return &staticF
}

func buildStatic(f *staticFix) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "aml-twin-static-")
	if err != nil {
		return err
	}
	f.dir, f.twins, f.models = dir, map[string]*Twin{}, map[string]string{}
	if f.st, err = sqlite.Open(dir); err != nil {
		return err
	}
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 12, 11
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		return err
	}
	if _, err := out.Write(ctx, f.st, nil); err != nil {
		return err
	}
	// one row every 5 s of the three controls and the two disturbances →
	// the part weight
	raw, err := os.ReadFile("../../../examples/specs/injection_quality.json")
	if err != nil {
		return err
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		return err
	}
	ds, err := dataset.Build(ctx, f.st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		return err
	}
	if f.bundle, err = dataset.OpenBundle(filepath.Join(dir, ds.Dataset.Path)); err != nil {
		return err
	}
	r := jobs.NewRunner(f.st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New()})
	for _, ref := range []string{"static_response@1", "static_forest@1"} {
		j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: ref, Seed: 1, Params: json.RawMessage(staticParams[ref])})
		if err == nil {
			err = r.Run(ctx, j.ID, 0)
		}
		if err == nil {
			j, err = f.st.GetJob(ctx, j.ID)
		}
		if err == nil && (j.Status != core.JobDone || j.ModelID == "") {
			err = fmt.Errorf("%s: job %s: %s", ref, j.Status, j.Error)
		}
		if err == nil {
			f.models[ref] = j.ModelID
			f.twins[ref], err = Load(ctx, f.st, dir, j.ModelID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// staticWindow is the one-row window of the static dataset's grid at row
// end of the run of test row n, and that row's timestamp.
func (f *staticFix) window(tb testing.TB, n int) (*contract.SnapshotWindow, map[string]float64) {
	tb.Helper()
	b := f.bundle
	ts := b.WindowTS(n)[0]
	for _, run := range b.Manifest.Runs {
		gts, vals, ok := b.RunGrid(run.RunID)
		if !ok {
			continue
		}
		for i, g := range gts {
			if g != ts {
				continue
			}
			nAll := len(b.Manifest.AllNodes)
			w := &contract.SnapshotWindow{BeatMs: b.Manifest.BeatMs, EndMs: int64(g), Steps: 1, Values: map[string][]*float64{}, RunID: run.RunID}
			last := map[string]float64{}
			for j, node := range b.Manifest.AllNodes {
				v := float64(vals[i*nAll+j])
				if !math.IsNaN(v) {
					w.Values[node] = []*float64{&v}
					last[node] = v
				} else {
					w.Values[node] = []*float64{nil}
				}
			}
			return w, last
		}
	}
	tb.Fatalf("no grid row at %v", ts)
	return nil, nil
}

// staticSnapshot is a sealed snapshot of the linear scene at test row n.
func (f *staticFix) snapshot(tb testing.TB, tw *Twin, n int, edit func(w *contract.SnapshotWindow)) *contract.TwinSnapshot {
	tb.Helper()
	sc, _ := linearScene()
	w, last := f.window(tb, n)
	if edit != nil {
		edit(w)
	}
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: testNow, CreatedBy: "test",
		SnapshotID: fmt.Sprintf("snap-static-%d", n), SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: sc.LineID,
		Phase: "holding", CapturedAt: testNow, DAQWatermark: w.EndMs, ControlValues: map[string]float64{},
		DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, Window: w}
	for _, c := range sc.Controls {
		s.ControlValues[c.ID] = last[c.ID]
	}
	est, ver, err := tw.EstimateState(context.Background(), w)
	if err != nil {
		tb.Fatal(err)
	}
	s.StateEstimate, s.EstimatorVersion = est, ver
	if err := s.Seal(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// A static twin predicts every step from that step's inputs exactly as
// the model's PredictBatch predicts the dataset's row (the path its
// conformal width was measured on): holding a test row's settings, every
// step's mean is the row's float32 prediction; the tube is the one
// calibrated half-width at every step; the state is the row itself.
func TestStaticTwinMatchesPredictBatch(t *testing.T) {
	f := staticTwins(t)
	b := f.bundle
	lo, hi := b.Split(dataset.SplitTest)
	for ref, tw := range f.twins {
		if _, ok := tw.dyn.(staticDyn); !ok || tw.H != 1 || tw.F != 1 || !tw.static {
			t.Fatalf("%s runs as %T (H %d, F %d)", ref, tw.dyn, tw.H, tw.F)
		}
		if tw.ood == nil || tw.widths == nil || !(tw.widths[0][0] > 0) {
			t.Fatalf("%s: calibration %v, OOD %v", ref, tw.widths, tw.ood != nil)
		}
		sc, obj := linearScene()
		obj.HorizonSteps = 5
		for _, n := range []int{lo, (lo + hi) / 2, hi - 1} {
			s := f.snapshot(t, tw, n, nil)
			_, d := trialOf(t, tw, sc, s, obj, hold(s, 5, nil), "hold")
			x, _, _ := b.Window(n)
			want, err := tw.pred.PredictBatch(context.Background(), x, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			tc := traceOf(d, "part_weight")
			if tc == nil || !tc.Calibrated || d.TubeMethod != TubeMethodStatic {
				t.Fatalf("%s: trace %+v, tube %q", ref, tc, d.TubeMethod)
			}
			for k := range tc.Mean {
				if tc.Mean[k] != float64(want[0]) {
					t.Fatalf("%s row %d step %d: twin %v, PredictBatch %v", ref, n, k, tc.Mean[k], want[0])
				}
				if w := tw.widths[0][0]; math.Abs(tc.Upper[k]-tc.Mean[k]-w) > 1e-9 || math.Abs(tc.Mean[k]-tc.Lower[k]-w) > 1e-9 {
					t.Fatalf("%s step %d: tube %v %v %v, want ± %v", ref, k, tc.Lower[k], tc.Mean[k], tc.Upper[k], w)
				}
			}
		}
	}
}

// Trials and the optimiser run a static twin like the column models: no
// state (static-row/1), a calibrated part-weight tube, the physics scene
// refused, and a passing move that lowers the cost; a move of hold
// pressure moves the predicted weight at the step it is made.
func TestStaticTwinTrialAndOptimize(t *testing.T) {
	f := staticTwins(t)
	n := f.nominalRow(t)
	for ref, tw := range f.twins {
		t.Run(ref, func(t *testing.T) {
			ctx := context.Background()
			sc, obj := linearScene()
			s := f.snapshot(t, tw, n, nil)
			if len(s.StateEstimate) != 0 || !strings.HasPrefix(s.EstimatorVersion, StaticEstimator+":") {
				t.Fatalf("state %v, estimator %q", s.StateEstimate, s.EstimatorVersion)
			}
			tr, d := trialOf(t, tw, sc, s, obj, hold(s, 60, nil), "hold")
			if len(d.InitialState) != 0 || tr.Uncertainty.EnsembleSize != 1 {
				t.Fatalf("initial state %v, ensemble %d", d.InitialState, tr.Uncertainty.EnsembleSize)
			}
			if !tr.OutOfDistribution.Accepted {
				t.Fatalf("holding a test row's settings is out of distribution: %+v", d.OOD)
			}
			// a move from step 12 on (the write policy's minute at 5 s)
			cand := hold(s, 60, nil)
			for k := 12; k < 60; k++ {
				cand[k]["hold_pressure"] -= 2
			}
			trm, dm := trialOf(t, tw, sc, s, obj, cand, "move")
			base, moved := traceOf(d, "part_weight"), traceOf(dm, "part_weight")
			if moved == nil {
				t.Fatalf("the move was not rolled out: %s %+v", trm.RejectCode, trm.Rejections)
			}
			// (a forest's prediction is piecewise constant: a small move
			// may stay on its leaves; the polynomial surface's moves)
			if base.Mean[11] != moved.Mean[11] || (ref == "static_response@1" && !(moved.Mean[12] < base.Mean[12])) {
				t.Fatalf("the weight before/at the move: %v/%v held, %v/%v moved", base.Mean[11], base.Mean[12], moved.Mean[11], moved.Mean[12])
			}
			if _, _, err := tw.Trial(ctx, TrialInput{Scene: contract.DefaultInjectionScene(), Snapshot: s, Objective: contract.DefaultInjectionObjective(),
				Candidate: hold(s, 60, nil), TrialID: "x", CreatedBy: "test", Now: testNow}); err == nil {
				t.Fatal("the physics scene was accepted")
			}
			res, err := tw.Optimize(ctx, OptimizeInput{Scene: sc, Snapshot: s, Objective: obj, Mode: ModePreciseSearch, Seed: 3, TrialID: "opt", CreatedBy: "test", Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			if res.Best == nil {
				t.Fatalf("no passing candidate: %s", res.NoPass)
			}
			if !res.Best.Passed() || !(res.Best.BaselineComparison.Improvement > 0) {
				t.Fatalf("best %+v", res.Best.BaselineComparison)
			}
		})
	}
}

// nominalRow is the first test row at the line's nominal settings
// (65 bar, 8 s, 245 degC) whose part weight is above the 32 g target but
// inside the scene's range: the optimiser has something to lower.
func (f *staticFix) nominalRow(t *testing.T) int {
	t.Helper()
	lo, hi := f.bundle.Split(dataset.SplitTest)
	for n := lo; n < hi; n++ {
		x, _, y := f.bundle.Window(n)
		if x[0] == 65 && x[1] == 8 && x[2] == 245 && y[0] > 32.2 && y[0] < 33.5 {
			return n
		}
	}
	t.Fatal("no test row at the nominal settings")
	return 0
}

// A static twin's OOD envelope is its input row: settings the model never
// saw (an ambient temperature 40 K above anything in training) make the
// trial OUT_OF_DISTRIBUTION, and a window without a held input's value is
// refused before any prediction.
func TestStaticTwinOODAndWindow(t *testing.T) {
	f := staticTwins(t)
	lo, _ := f.bundle.Split(dataset.SplitTest)
	tw := f.twins["static_response@1"]
	sc, obj := linearScene()
	s := f.snapshot(t, tw, lo, func(w *contract.SnapshotWindow) {
		v := *w.Values["ambient_temperature"][0] + 40
		w.Values["ambient_temperature"][0] = &v
	})
	tr, d := trialOf(t, tw, sc, s, obj, hold(s, 60, nil), "hot")
	if tr.OutOfDistribution.Accepted || tr.RejectCode != contract.RejectOOD || d.OOD.Code != "OOD_DISTANCE" || !(d.OOD.MaxDistance > d.OOD.Threshold) {
		t.Fatalf("an unseen ambient temperature: reject %q, OOD %+v", tr.RejectCode, d.OOD)
	}
	w, _ := f.window(t, lo)
	w.Values["material_batch_factor"][0] = nil
	if _, _, err := tw.EstimateState(context.Background(), w); core.CodeOf(err) != CodeWindowInvalid || !strings.Contains(err.Error(), "material_batch_factor") {
		t.Fatalf("a window without a held input: %v, want %s", err, CodeWindowInvalid)
	}
}

// What stays refused on a static dataset: a predictor of a format that is
// no static class, and a static model without a control among its inputs
// (nothing to move), both AML_TWIN_MODEL_UNSUPPORTED.
func TestStaticTwinRefuses(t *testing.T) {
	f := staticTwins(t)
	man := f.bundle.Manifest
	if _, err := New("m", man, fakePredictor{}, nil); core.CodeOf(err) != CodeModelUnsupported || !strings.Contains(err.Error(), "static") {
		t.Fatalf("another format on a static dataset: %v, want %s", err, CodeModelUnsupported)
	}
	noCtrl := *man
	noCtrl.Controls = nil
	if _, err := New("m", &noCtrl, f.twins["static_response@1"].pred, nil); core.CodeOf(err) != CodeModelUnsupported || !strings.Contains(err.Error(), "no control") {
		t.Fatalf("a static model without a control: %v, want %s", err, CodeModelUnsupported)
	}
	// the same model on its own manifest loads
	if _, err := New("m", man, f.twins["static_response@1"].pred, nil); err != nil {
		t.Fatal(err)
	}
}
