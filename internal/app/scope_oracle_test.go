package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// TestSec15_NoExistenceOracle (attack): a caller scoped to line A names
// objects by id to learn what line B holds. For each op the refusal of an
// id of line B is compared with the refusal of an id that does not
// exist: before, the first was AML_FORBIDDEN and the second AML_NOT_FOUND
// (dataset show, snapshot take, model predict, objective show), a run of
// line B given to model.predict was AML_INVALID_ARGUMENT naming its line,
// product and recipe, and objective.put on line B's objective id was a
// conflict naming line B. Now both are the same refusal (code, field and
// message), which names neither line B nor anything of its object.
func TestSec15_NoExistenceOracle(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	const own = "line-a"
	sc := contract.DefaultInjectionScene()
	sc.SceneID, sc.LineID = "scene-a", own
	if err := f.st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if err := f.st.InsertDataset(ctx, core.Dataset{ID: "ds-a", LineID: own, ProductID: "PA", RecipeID: "RA", Purpose: "mpc_surrogate",
		Path: "datasets/ds-a", SHA256: strings.Repeat("d", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, lineage_verified, created_at, stage_changed_at)
		VALUES ('model-a','job-a','ds-a',?, 'PA','RA','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/model-a',?,1,1,1)`, own, strings.Repeat("e", 64)); err != nil {
		t.Fatal(err)
	}
	if err := f.st.CreateRun(ctx, core.Run{ID: "run-b", LineID: secLine, ProductID: "P", RecipeID: "R", StartedMs: 1, Status: core.RunActive}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.DB().Exec(`INSERT INTO jobs(id, dataset_id, dataset_sha256, trainer_ref, status, created_at) VALUES ('job-b', 'ds', ?, 'arx@1', 'queued', 1)`, strings.Repeat("b", 64)); err != nil {
		t.Fatal(err)
	}
	objB := contract.DefaultInjectionObjective()                                                                                                   // weight-quality, of secLine
	issued, err := f.a.CertIssue(ctx, Principal{Name: "bob", Role: auth.RoleEngineer}, CertIssueRequest{Trial: f.trial(t, "oracle", "", secStep)}) // snapshot snap-oracle, of secLine
	if err != nil {
		t.Fatal(err)
	}
	certB := issued.Cert.RecommendationID
	// A snapshot of the caller's own line, for the objective lookup of a trial.
	at := f.now.Add(-5 * time.Second)
	snapA := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: at, CreatedBy: "twin-runtime", SnapshotID: "snap-own",
		SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: own, Phase: "holding", CapturedAt: at,
		DAQWatermark: at.UnixMilli(), ControlValues: secBaseline, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	if err := snapA.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutSnapshot(ctx, snapA, false); err != nil {
		t.Fatal(err)
	}
	mallory := Principal{Name: "mallory", Role: auth.RoleEngineer, Lines: []string{own}}

	cases := []struct {
		name string
		// call names an object of line B (foreign) or one that does not
		// exist (missing).
		call func(foreign bool) error
	}{
		{"dataset.show", func(foreign bool) error {
			_, err := f.a.DatasetShow(ctx, mallory, DatasetRequest{ID: pick(foreign, "ds", "ds-nope")})
			return err
		}},
		{"dataset.report", func(foreign bool) error {
			_, err := f.a.DatasetReport(ctx, mallory, DatasetRequest{ID: pick(foreign, "ds", "ds-nope")})
			return err
		}},
		{"snapshot.take scene", func(foreign bool) error {
			_, err := f.a.SnapshotTake(ctx, mallory, SnapshotTakeRequest{Scene: pick(foreign, f.scene.SceneID, "scene-nope")})
			return err
		}},
		{"snapshot.take model", func(foreign bool) error {
			_, err := f.a.SnapshotTake(ctx, mallory, SnapshotTakeRequest{Scene: "scene-a", Model: pick(foreign, "hybrid-1", "model-nope")})
			return err
		}},
		{"model.predict model", func(foreign bool) error {
			_, err := f.a.ModelPredict(ctx, mallory, ModelPredictRequest{ID: pick(foreign, "hybrid-1", "model-nope"), Run: "run-b"})
			return err
		}},
		{"model.predict run", func(foreign bool) error {
			_, err := f.a.ModelPredict(ctx, mallory, ModelPredictRequest{ID: "model-a", Run: pick(foreign, "run-b", "run-nope"), From: Instant(1000)})
			return err
		}},
		{"run.show", func(foreign bool) error {
			_, err := f.a.RunShow(ctx, mallory, RunShowRequest{ID: pick(foreign, "run-b", "run-nope")})
			return err
		}},
		{"scene.show", func(foreign bool) error {
			_, err := f.a.SceneShow(ctx, mallory, SceneShowRequest{ID: pick(foreign, f.scene.SceneID, "scene-nope")})
			return err
		}},
		{"snapshot.show", func(foreign bool) error {
			_, err := f.a.SnapshotShow(ctx, mallory, SnapshotShowRequest{ID: pick(foreign, "snap-oracle", "snap-nope")})
			return err
		}},
		{"job.show", func(foreign bool) error {
			_, err := f.a.JobShow(ctx, mallory, JobRequest{ID: pick(foreign, "job-b", "job-nope")})
			return err
		}},
		{"cert.show", func(foreign bool) error {
			_, err := f.a.CertShow(ctx, mallory, CertRequest{ID: pick(foreign, certB, "rec-nope")})
			return err
		}},
		{"cert.approve", func(foreign bool) error {
			_, err := f.a.CertApprove(ctx, Principal{Name: "amy", Role: auth.RoleApprover, Lines: []string{own}}, CertRequest{ID: pick(foreign, certB, "rec-nope")})
			return err
		}},
		{"envelope.issue scene", func(foreign bool) error {
			_, err := f.a.EnvelopeIssue(ctx, mallory, EnvelopeIssueRequest{Scene: pick(foreign, f.scene.SceneID, "scene-nope"), Model: "model-a",
				Bounds: map[string]EnvelopeBound{"hold_pressure": {Min: 60, Max: 70}}, MaxMovesPerHour: 4})
			return err
		}},
		{"steptest.plan scene", func(foreign bool) error {
			_, err := f.a.StepTestPlan(ctx, mallory, StepTestPlanRequest{Scene: pick(foreign, f.scene.SceneID, "scene-nope")})
			return err
		}},
		{"scene.freeze", func(foreign bool) error {
			_, err := f.a.SceneFreeze(ctx, Principal{Name: "amy", Role: auth.RoleApprover, Lines: []string{own}},
				SceneFreezeRequest{ID: pick(foreign, f.scene.SceneID, "scene-nope"), Version: f.scene.SceneVersion, ExpectHash: strings.Repeat("0", 64)})
			return err
		}},
		{"gate.evaluate scene", func(foreign bool) error {
			_, err := f.a.GateEvaluate(ctx, mallory, GateEvaluateRequest{Model: "model-a", Scene: pick(foreign, f.scene.SceneID, "scene-nope")})
			return err
		}},
		{"shadow.collect scene", func(foreign bool) error {
			_, err := f.a.ShadowCollect(ctx, mallory, ShadowCollectRequest{Model: "model-a", Scene: pick(foreign, f.scene.SceneID, "scene-nope"), DryRun: true})
			return err
		}},
		{"trial.run snapshot", func(foreign bool) error {
			_, err := f.a.TrialRun(ctx, mallory, TrialRunRequest{Model: "model-a", Snapshot: pick(foreign, "snap-oracle", "snap-nope"), Set: secStep})
			return err
		}},
		{"trial.run objective", func(foreign bool) error {
			_, err := f.a.TrialRun(ctx, mallory, TrialRunRequest{Model: "model-a", Snapshot: "snap-own", Objective: pick(foreign, objB.ObjectiveID, "objective-nope"), Set: secStep})
			return err
		}},
		{"objective.show", func(foreign bool) error {
			_, err := f.a.ObjectiveShow(ctx, mallory, ObjectiveShowRequest{ID: pick(foreign, objB.ObjectiveID, "objective-nope")})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			foreign, missing := c.call(true), c.call(false)
			if foreign == nil || missing == nil {
				t.Fatalf("not refused: foreign %v, missing %v", foreign, missing)
			}
			if core.CodeOf(foreign) != core.CodeOf(missing) || foreign.Error() != missing.Error() || fieldOf(foreign) != fieldOf(missing) {
				t.Errorf("the refusals differ:\n foreign: %s (field %s)\n missing: %s (field %s)", foreign, fieldOf(foreign), missing, fieldOf(missing))
			}
			for _, leak := range []string{secLine, "weight-quality"} {
				if strings.Contains(foreign.Error(), leak) && !strings.Contains(missing.Error(), leak) {
					t.Errorf("the refusal names %s: %v", leak, foreign)
				}
			}
			if strings.Contains(foreign.Error(), secLine) {
				t.Errorf("the refusal names line B: %v", foreign)
			}
		})
	}

	// objective.put on line B's objective id: refused (the id is taken; a
	// new id is stored), naming neither line B nor its objective.
	t.Run("objective.put", func(t *testing.T) {
		o := contract.DefaultInjectionObjective()
		o.LineID = own
		_, err := f.a.ObjectivePut(ctx, mallory, ObjectivePutRequest{Objective: o})
		if core.CodeOf(err) != core.CodeForbidden || strings.Contains(err.Error(), secLine) {
			t.Fatalf("%v, want AML_FORBIDDEN not naming line B", err)
		}
		if got, _, gerr := f.st.GetObjective(ctx, objB.ObjectiveID); gerr != nil || got.LineID != secLine {
			t.Fatalf("line B's objective changed: %+v %v", got, gerr)
		}
		o2 := contract.DefaultInjectionObjective()
		o2.ObjectiveID, o2.LineID = "own-objective", own
		if _, err := f.a.ObjectivePut(ctx, mallory, ObjectivePutRequest{Objective: o2}); err != nil {
			t.Fatalf("own objective: %v", err)
		}
	})

	// A caller who sees every line is told precisely.
	if _, err := f.a.DatasetShow(ctx, admin, DatasetRequest{ID: "ds-nope"}); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("admin, missing dataset: %v, want AML_NOT_FOUND", err)
	}
	o := contract.DefaultInjectionObjective()
	o.LineID = own
	if _, err := f.a.ObjectivePut(ctx, admin, ObjectivePutRequest{Objective: o}); core.CodeOf(err) != core.CodeConflict || !strings.Contains(err.Error(), secLine) {
		t.Errorf("admin, objective of another line: %v, want the conflict naming its line", err)
	}
}

func pick(foreign bool, a, b string) string {
	if foreign {
		return a
	}
	return b
}

func fieldOf(err error) string {
	if e, ok := err.(*core.Error); ok {
		return e.Field
	}
	return fmt.Sprintf("%T", err)
}
