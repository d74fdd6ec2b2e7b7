package app

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// TestModelReplayScope (attack): model.replay and the validation view of
// model.compare predict a run, and their figures describe it, so a run of
// a line outside the caller's scope is refused (AML_FORBIDDEN on lineId,
// naming no foreign line) even with a model the caller may read; a
// foreign model is refused the same way; a run of the model's own line
// but another recipe is an invalid argument.
func TestModelReplayScope(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	const own = "line-a"
	if err := f.st.InsertDataset(ctx, core.Dataset{ID: "ds-a", LineID: own, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds-a", SHA256: strings.Repeat("d", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, lineage_verified, created_at, stage_changed_at)
		VALUES ('model-a','job-a','ds-a',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/model-a',?,1,1,1)`, own, strings.Repeat("e", 64)); err != nil {
		t.Fatal(err)
	}
	// The foreign run has the model's recipe id but a product of its own
	// line: a product id belongs to one line (the store refuses P on a
	// second line).
	for _, r := range []core.Run{
		{ID: "run-foreign", LineID: secLine, ProductID: "P-sec", RecipeID: "R", StartedMs: 1_000, Status: core.RunActive},
		{ID: "run-other-recipe", LineID: own, ProductID: "P", RecipeID: "R2", StartedMs: 1_000, Status: core.RunActive},
	} {
		if err := f.st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mallory := Principal{Name: "mallory", Role: auth.RoleViewer, Lines: []string{own}}
	forbidden := func(what string, err error) {
		t.Helper()
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != "lineId" {
			t.Fatalf("%s: %v, want AML_FORBIDDEN on lineId", what, err)
		}
		if strings.Contains(err.Error(), secLine) {
			t.Fatalf("%s: the refusal names the foreign line: %v", what, err)
		}
	}
	_, err := f.a.ModelReplay(ctx, mallory, ModelReplayRequest{ID: "model-a", Run: "run-foreign"})
	forbidden("own model, foreign run", err)
	_, err = f.a.ModelReplay(ctx, mallory, ModelReplayRequest{ID: "hybrid-1", Run: "run-foreign"})
	forbidden("foreign model", err)
	_, err = f.a.ModelCompare(ctx, mallory, ModelCompareRequest{Line: own, Run: "run-foreign", Models: []string{"model-a"}})
	forbidden("compare, own model, foreign run", err)
	_, err = f.a.ModelReplay(ctx, mallory, ModelReplayRequest{ID: "model-a", Run: "run-other-recipe"})
	if core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "recipe") {
		t.Fatalf("a run of another recipe: %v", err)
	}
	if _, err := f.a.ModelReplay(ctx, mallory, ModelReplayRequest{}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("no model: %v", err)
	}
}
