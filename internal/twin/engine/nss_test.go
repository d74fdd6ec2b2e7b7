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

// A neural_state_space@1 twin of the fixture's dataset: a small network,
// a few epochs (the twin's plumbing is under test, not the fit).
var (
	nssOnce  sync.Once
	nssTw    *Twin
	nssModel string
	nssErr   error
)

const nssTestParams = `{"order":2,"na":3,"nb":3,"hidden":[8],"epochs":3,"seqLen":10,"batch":8}`

func nssTwin(t *testing.T) (*fixture, *Twin) {
	t.Helper()
	f := getFixture(t)
	nssOnce.Do(func() {
		ctx := context.Background()
		r := jobs.NewRunner(f.st, jobs.Options{DataDir: f.dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New()})
		j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: f.dsID, TrainerRef: "neural_state_space@1", Seed: 1, Params: json.RawMessage(nssTestParams)})
		if err == nil {
			err = r.Run(ctx, j.ID, 0)
		}
		if err == nil {
			j, err = f.st.GetJob(ctx, j.ID)
		}
		if err == nil && (j.Status != core.JobDone || j.ModelID == "") {
			err = fmt.Errorf("neural_state_space@1: job %s: %s", j.Status, j.Error)
		}
		if err != nil {
			nssErr = err
			return
		}
		nssModel = j.ModelID
		nssTw, nssErr = Load(ctx, f.st, f.dir, j.ModelID)
	})
	if nssErr != nil {
		t.Fatal(nssErr)
	}
	return f, nssTw
}

// A neural_state_space@1 twin continues a window exactly as the model's
// PredictBatch predicts the dataset window (the path its conformal widths
// were measured on): the encoder's state from the window's rows, then the
// same free run — the same float32 predictions, no spread (one member).
func TestNSSTwinMatchesPredictBatch(t *testing.T) {
	f, tw := nssTwin(t)
	if _, ok := tw.dyn.(neuralDyn); !ok {
		t.Fatalf("a neural_state_space@1 model runs as %T", tw.dyn)
	}
	if ht, _ := trainers.AsHistoryTwin(tw.pred); ht == nil || ht.Members() != 1 || ht.WindowEstimator() != "nss-encoder/1" {
		t.Fatalf("history twin %v", ht)
	}
	matchesPredictBatch(t, f, tw, true)
}

// Trials and the optimiser run a neural_state_space@1 twin like the other
// column models: the state is the encoder's over the window
// (nss-encoder/1, no scene state), the tube is the conformal width, the
// best move lowers the cost.
func TestNSSTwinTrialAndOptimize(t *testing.T) {
	f, tw := nssTwin(t)
	columnTwinTrialAndOptimize(t, f, tw, "nss-encoder/1:", 0)
}

// The history-started neural classes do not predict their window's own
// rows, so a declared unmeasured disturbance cannot be estimated: the
// plan refuses it with AML_TWIN_SCENE_MISMATCH naming why, for NARX and
// neural state-space models alike.
func TestNeuralTwinRefusesDisturbances(t *testing.T) {
	for name, get := range map[string]func(*testing.T) (*fixture, *Twin){"narx_mlp@1": narxTwin, "neural_state_space@1": nssTwin} {
		f, tw := get(t)
		steps, _, _ := tw.Window()
		w, _ := f.window(t, 1, 200, steps)
		s, err := tw.start(w)
		if err != nil {
			t.Fatal(err)
		}
		sc := driftScene(contract.DisturbanceOutputBias, 0)
		sc.UnmeasuredDisturbances[0].Target = tw.outs[0].name
		if _, _, err := tw.disturbances(sc, s, 1.6448536269514722); core.CodeOf(err) != CodeSceneMismatch || !strings.Contains(err.Error(), "does not predict its window's rows") {
			t.Fatalf("%s: a declared disturbance: %v, want %s", name, err, CodeSceneMismatch)
		}
	}
}
