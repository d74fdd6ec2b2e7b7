package benefit

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/contract"
)

// The benefit tests' shared fixtures: a fresh store, a governor over the
// study scene, and the snapshot and passing trial a governed move starts
// from.

// studyStore opens a fresh SQLite store in a temporary data directory,
// closed when the test ends.
func studyStore(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, dir
}

// studyGovernor is a governor of model-1 (gate passed) over the study
// scene and the default objective, on a fresh store; o's fields are kept,
// Store and DataDir set, the defaults applied. before runs on the store
// first (nil: nothing).
func studyGovernor(t *testing.T, o Options, before func(st *sqlite.Store, scene *contract.SceneContract)) (*governor, Options, *contract.SceneContract, *contract.ObjectiveProfile) {
	t.Helper()
	st, dir := studyStore(t)
	o.Store, o.DataDir = st, dir
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	scene, obj := StudyScene(), contract.DefaultInjectionObjective()
	if before != nil {
		before(st, scene)
	}
	g, err := newGovernor(context.Background(), o, scene, obj, "model-1", true, "")
	if err != nil {
		t.Fatal(err)
	}
	return g, o, scene, obj
}

// holdingSnapshot is snapshot id of the scene's line in the holding
// phase at at, fresh and complete, with controls u and window w.
func holdingSnapshot(scene *contract.SceneContract, id string, at time.Time, u map[string]float64, w *contract.SnapshotWindow) *contract.TwinSnapshot {
	return &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: at, CreatedBy: Engineer, SnapshotID: id,
		SceneID: scene.SceneID, SceneVersion: scene.SceneVersion, LineID: scene.LineID, Phase: "holding", CapturedAt: at,
		ControlValues: u, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1", Window: w}
}

// passingTrial is trial "t"+snapshot of model-1 moving to step, in
// distribution, passing the constraints results and halving the cost.
func passingTrial(snapshot string, at time.Time, obj *contract.ObjectiveProfile, step map[string]float64, results ...contract.ConstraintResult) *contract.VirtualTrial {
	return &contract.VirtualTrial{SchemaVersion: contract.TrialSchemaVersion, CreatedAt: at, CreatedBy: Engineer, TrialID: "t" + snapshot, SnapshotID: snapshot,
		ModelID: "model-1", ObjectiveID: obj.ObjectiveID, CandidateControlTrajectory: []map[string]float64{step},
		Uncertainty:        contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:  contract.OutOfDistribution{Distance: 0.4, Accepted: true},
		ConstraintResults:  results,
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.5, Improvement: 0.5}}
}
