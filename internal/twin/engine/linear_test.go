package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/twin/contract"
)

// linear twins of the fixture's dataset, one per linear trainer.
var (
	linOnce  sync.Once
	linTwins map[string]*Twin
	linErr   error
)

func linearTwins(t *testing.T) (*fixture, map[string]*Twin) {
	t.Helper()
	f := getFixture(t)
	linOnce.Do(func() {
		ctx := context.Background()
		linTwins = map[string]*Twin{}
		r := jobs.NewRunner(f.st, jobs.Options{DataDir: f.dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New()})
		for ref, params := range map[string]string{"linear_state_space@1": `{"order":3}`, "one_step@1": `{"select":false,"na":2,"nb":2,"nk":1}`} {
			j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: f.dsID, TrainerRef: ref, Seed: 1, Params: json.RawMessage(params)})
			if err == nil {
				err = r.Run(ctx, j.ID, 0)
			}
			if err == nil {
				j, err = f.st.GetJob(ctx, j.ID)
			}
			if err == nil && (j.Status != core.JobDone || j.ModelID == "") {
				err = fmt.Errorf("%s: job %s: %s", ref, j.Status, j.Error)
			}
			if err != nil {
				linErr = err
				return
			}
			if linTwins[ref], err = Load(ctx, f.st, f.dir, j.ModelID); err != nil {
				linErr = err
				return
			}
		}
	})
	if linErr != nil {
		t.Fatal(linErr)
	}
	return f, linTwins
}

// A linear twin continues a window exactly as its predictor predicts the
// dataset window (the path its conformal widths were measured on): the
// rollout over a test run's measured future controls equals PredictBatch
// of the same window.
func TestLinearTwinMatchesPredictBatch(t *testing.T) {
	f, tws := linearTwins(t)
	for ref, tw := range tws {
		t.Run(ref, func(t *testing.T) { matchesPredictBatch(t, f, tw, false) })
	}
}

// matchesPredictBatch checks that tw's rollout over a test run's measured
// future controls equals its PredictBatch of the same window (at a few
// windows): within 1e-4 relative, or to the last float32 bit when exact;
// without spread.
func matchesPredictBatch(t *testing.T, f *fixture, tw *Twin, exact bool) {
	t.Helper()
	b := f.bundle
	man := b.Manifest
	nAll, H, F := len(man.AllNodes), man.HistorySteps, man.HorizonSteps
	var run dataset.ManifestRun
	for _, r := range man.Runs {
		if r.Split == dataset.SplitTest {
			run = r
			break
		}
	}
	_, vals, ok := b.RunGrid(run.RunID)
	if !ok {
		t.Fatal("no grid")
	}
	col := map[string]int{}
	for j, n := range man.AllNodes {
		col[n] = j
	}
	if !tw.Calibrated() {
		t.Fatalf("%s has no conformal calibration or OOD envelope", tw.ModelID())
	}
	for _, end := range []int{H + 20, 400, 900} {
		w, _ := f.window(t, 0, end, H)
		s, err := tw.start(w)
		if err != nil {
			t.Fatal(err)
		}
		U := make([][]float64, F)
		u32 := make([]float32, 0, F*len(man.Controls))
		for k := range U {
			row := (end + 1 + k) * nAll
			for _, c := range tw.ctrl {
				U[k] = append(U[k], float64(vals[row+c.col]))
			}
			for _, c := range man.Controls {
				u32 = append(u32, vals[row+col[c]])
			}
		}
		r, err := tw.dyn.newRoller().roll(s.start, U, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Fail != F {
			t.Fatalf("end %d: the rollout fails at step %d", end, r.Fail)
		}
		x32 := append([]float32(nil), vals[(end-H+1)*nAll:(end+1)*nAll]...)
		want, err := tw.pred.PredictBatch(context.Background(), x32, u32, 1)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < F; k++ {
			for o := range tw.outs {
				got, w := r.Y[k*len(tw.outs)+o], float64(want[k*len(tw.outs)+o])
				bad := math.Abs(got-w) > 1e-4*math.Max(1, math.Abs(w))
				if exact {
					bad = float32(got) != want[k*len(tw.outs)+o]
				}
				if bad || r.Spread[k*len(tw.outs)+o] != 0 {
					t.Fatalf("end %d step %d: twin %v, PredictBatch %v (spread %v)", end, k, got, w, r.Spread[k*len(tw.outs)+o])
				}
			}
		}
	}
}

// linearScene is the default injection scene for a linear model: its
// variables are the dataset's node ids (a linear model's quantities), the
// part weight is the target, with no physics guards.
func linearScene() (*contract.SceneContract, *contract.ObjectiveProfile) {
	sc := contract.DefaultInjectionScene()
	f := func(x float64) *float64 { return &x }
	sc.SceneID, sc.PhysicsProfileID = "injection-linear", ""
	sc.States, sc.Guards, sc.Disturbances = nil, nil, nil
	sc.Observations = []contract.SceneVariable{{ID: "part_weight", Role: contract.RoleTarget, PhysicalMeaning: "part weight", Unit: "g", Min: f(31), Max: f(34)}}
	sc.Constraints = []contract.Constraint{{ID: "weight", Kind: contract.KindHardRange, Variable: "part_weight", Min: f(31), Max: f(34)}}
	obj := contract.DefaultInjectionObjective()
	obj.Targets = map[string]float64{"part_weight": 32}
	obj.Weights = map[string]float64{"part_weight": 1}
	return sc, obj
}

// Trials and the optimiser run a linear twin like a hybrid one: the tube is
// the conformal width (no ensemble), the state estimate is the model's
// own, and the best move lowers the predicted target error.
func TestLinearTwinTrialAndOptimize(t *testing.T) {
	f, tws := linearTwins(t)
	for ref, tw := range tws {
		t.Run(ref, func(t *testing.T) {
			wantVer := map[string]string{"linear_state_space@1": "statespace-", "one_step@1": "arx-history/1:"}[ref]
			nStates := map[string]int{"linear_state_space@1": 3}[ref]
			columnTwinTrialAndOptimize(t, f, tw, wantVer, nStates)
		})
	}
}

// columnTwinTrialAndOptimize runs a twin whose quantities are dataset
// columns on the linear scene: the state estimate is the model's own (its
// estimator's name starts with wantVer, nStates abstract states in the
// trial's detail, none in the estimate), a trial holding the controls has
// a calibrated part-weight tube, the physics scene does not fit, and the
// optimiser finds a passing move that lowers the cost.
func columnTwinTrialAndOptimize(t *testing.T, f *fixture, tw *Twin, wantVer string, nStates int) {
	t.Helper()
	sc, obj := linearScene()
	ctx := context.Background()
	steps, _, _ := tw.Window()
	w, last := f.window(t, 1, 200, steps)
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: testNow, CreatedBy: "test",
		SnapshotID: "snap-lin", SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: sc.LineID,
		Phase: "holding", CapturedAt: testNow, DAQWatermark: w.EndMs, ControlValues: map[string]float64{},
		DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, Window: w}
	for _, c := range sc.Controls {
		s.ControlValues[c.ID] = last[c.ID]
	}
	est, ver, err := tw.EstimateState(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(ver) < len(wantVer) || ver[:len(wantVer)] != wantVer {
		t.Fatalf("estimator %q", ver)
	}
	if len(est) != 0 {
		t.Fatalf("state estimate %v: the model's states are no scene quantities", est)
	}
	s.StateEstimate, s.EstimatorVersion = est, ver
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	tr, d := trialOf(t, tw, sc, s, obj, hold(s, 60, nil), "hold")
	if n := len(d.InitialState); n != nStates {
		t.Fatalf("initial state %v, want %d states", d.InitialState, nStates)
	}
	tc := traceOf(d, "part_weight")
	if tc == nil || !tc.Calibrated {
		t.Fatalf("no calibrated part_weight trace: %+v", d.Traces)
	}
	for k := range tc.Mean {
		if !(tc.Lower[k] < tc.Mean[k] && tc.Mean[k] < tc.Upper[k]) {
			t.Fatalf("step %d: tube %v %v %v", k, tc.Lower[k], tc.Mean[k], tc.Upper[k])
		}
	}
	if tr.Uncertainty.EnsembleSize != 1 {
		t.Fatalf("ensemble size %d", tr.Uncertainty.EnsembleSize)
	}
	// a scene naming the hybrid's physics quantities does not fit
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
}

// The registry's list of twin formats (it does not import the engine) is
// the engine's.
func TestRegistryKnowsTwinFormats(t *testing.T) {
	if !slices.Equal(registry.TwinFormats, TwinFormats) {
		t.Fatalf("registry %v, engine %v", registry.TwinFormats, TwinFormats)
	}
}
