package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/twin/contract"
)

// A narx_mlp@1 twin of the fixture's dataset: a small network, a few
// epochs (the twin's plumbing is under test, not the fit).
var (
	narxOnce  sync.Once
	narxTw    *Twin
	narxModel string
	narxErr   error
)

const narxTestParams = `{"na":3,"nb":3,"nk":1,"hidden":[8],"epochs":4,"fineTuneEpochs":2,"seqLen":10,"seqBatch":8}`

func narxTwin(t *testing.T) (*fixture, *Twin) {
	t.Helper()
	f := getFixture(t)
	narxOnce.Do(func() {
		ctx := context.Background()
		r := jobs.NewRunner(f.st, jobs.Options{DataDir: f.dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New()})
		j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: f.dsID, TrainerRef: "narx_mlp@1", Seed: 1, Params: json.RawMessage(narxTestParams)})
		if err == nil {
			err = r.Run(ctx, j.ID, 0)
		}
		if err == nil {
			j, err = f.st.GetJob(ctx, j.ID)
		}
		if err == nil && (j.Status != core.JobDone || j.ModelID == "") {
			err = fmt.Errorf("narx_mlp@1: job %s: %s", j.Status, j.Error)
		}
		if err != nil {
			narxErr = err
			return
		}
		narxModel = j.ModelID
		narxTw, narxErr = Load(ctx, f.st, f.dir, j.ModelID)
	})
	if narxErr != nil {
		t.Fatal(narxErr)
	}
	return f, narxTw
}

// A narx_mlp@1 twin continues a window exactly as the model's PredictBatch
// predicts the dataset window (the path its conformal widths were measured
// on): the same float32 predictions, no spread.
func TestNARXTwinMatchesPredictBatch(t *testing.T) {
	f, tw := narxTwin(t)
	if _, ok := tw.dyn.(neuralDyn); !ok {
		t.Fatalf("a narx_mlp@1 model runs as %T", tw.dyn)
	}
	matchesPredictBatch(t, f, tw, true)
}

// Trials and the optimiser run a narx_mlp@1 twin like a linear one: the
// state is the window's history (narx-history/1, no abstract state), the
// tube is the conformal width, the best move lowers the cost.
func TestNARXTwinTrialAndOptimize(t *testing.T) {
	f, tw := narxTwin(t)
	columnTwinTrialAndOptimize(t, f, tw, "narx-history/1:", 0)
}

// failingHistory is a history-started model whose rollouts stop being
// finite at step failAt whenever the first input (hold_pressure) goes
// above above.
type failingHistory struct {
	trainers.HistoryTwin
	failAt int
	above  float64
}

func (f failingHistory) NewHistoryRoller() trainers.HistoryRoller {
	return failingRoller{f.HistoryTwin.NewHistoryRoller(), f}
}

type failingRoller struct {
	trainers.HistoryRoller
	f failingHistory
}

func (r failingRoller) Roll(s *trainers.HistoryStart, u [][]float64, y, spread []float64) (int, error) {
	fail, err := r.HistoryRoller.Roll(s, u, y, spread)
	for _, row := range u {
		if row[0] > r.f.above {
			fail = min(fail, r.f.failAt)
		}
	}
	return fail, err
}

// A history-started model whose prediction stops being finite fails the
// candidate's trial with MODEL_FAILURE (its constraints not evaluated,
// naming the step), the optimiser never recommends such a candidate, and a
// window without any value of the target cannot start the model
// (AML_TWIN_WINDOW_INVALID).
func TestNeuralTwinRefuses(t *testing.T) {
	f, tw := narxTwin(t)
	ctx := context.Background()
	m, err := f.st.GetModel(ctx, narxModel)
	if err != nil {
		t.Fatal(err)
	}
	ht, ok := trainers.AsHistoryTwin(tw.pred)
	if !ok {
		t.Fatal("not a history twin")
	}
	sc, obj := linearScene()
	steps, _, _ := tw.Window()
	w, last := f.window(t, 1, 200, steps)
	bad, err := New(narxModel, tw.man, failingHistory{ht, 5, last["hold_pressure"] + 1}, m.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: testNow, CreatedBy: "test",
		SnapshotID: "snap-nn", SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: sc.LineID,
		Phase: "holding", CapturedAt: testNow, DAQWatermark: w.EndMs, ControlValues: map[string]float64{},
		DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, Window: w}
	for _, c := range sc.Controls {
		s.ControlValues[c.ID] = last[c.ID]
	}
	if s.StateEstimate, s.EstimatorVersion, err = bad.EstimateState(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	tr, _ := trialOf(t, bad, sc, s, obj, hold(s, 60, map[string]float64{"hold_pressure": 2}), "fails")
	if tr.Passed() || tr.RejectCode != contract.RejectModelFailure || len(tr.ConstraintResults) == 0 ||
		!tr.ConstraintResults[0].NotEvaluated || !strings.Contains(tr.ConstraintResults[0].Detail, "model's prediction fails at horizon step 5") {
		t.Fatalf("a failing rollout: passed %v, %s %+v", tr.Passed(), tr.RejectCode, tr.ConstraintResults)
	}
	res, err := bad.Optimize(ctx, OptimizeInput{Scene: sc, Snapshot: s, Objective: obj, Mode: ModePreciseSearch, Seed: 3, TrialID: "opt", CreatedBy: "test", Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, c := range res.Ranked {
		if c.RejectCode == contract.RejectModelFailure {
			failed++
			if c.Passed {
				t.Fatalf("a failing candidate passed: %+v", c)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no candidate moved hold_pressure up far enough to fail: the test checks nothing")
	}
	if b := res.Best; b != nil && b.CandidateControlTrajectory[0]["hold_pressure"] > last["hold_pressure"]+1 {
		t.Fatalf("the failing move was recommended: %+v", b.CandidateControlTrajectory[0])
	}

	w2, _ := f.window(t, 1, 260, steps)
	for i := range w2.Values["part_weight"] {
		w2.Values["part_weight"][i] = nil
	}
	if _, _, err := tw.EstimateState(ctx, w2); core.CodeOf(err) != CodeWindowInvalid {
		t.Fatalf("a window without the target: %v", err)
	}
}
