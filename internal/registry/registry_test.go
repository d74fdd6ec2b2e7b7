package registry

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// registered creates a done job with a real (aml.mean/1) artifact.
func registered(t *testing.T, st *sqlite.Store, dir, id string, gate, twin bool) core.Model {
	t.Helper()
	ctx := context.Background()
	if _, err := st.GetDataset(ctx, "ds"); err != nil {
		if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate", Path: "datasets/ds", SHA256: strings.Repeat("a", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	art := filepath.Join("jobs", id, "artifacts")
	if err := model.WriteMean(filepath.Join(dir, art), []float64{1, 2}, 3); err != nil {
		t.Fatal(err)
	}
	h, err := model.ArtifactHash(filepath.Join(dir, art))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateJob(ctx, core.Job{ID: id, DatasetID: "ds", DatasetSHA256: strings.Repeat("a", 64), TrainerRef: "x", MaxRetries: 2, TimeoutSec: 1, StallSec: 1}, core.JobLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimJob(ctx, id, "w"); err != nil {
		t.Fatal(err)
	}
	m := &core.Model{ID: "m-" + id, JobID: id, DatasetID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate", TrainerRef: "x",
		ArtifactKind: model.FormatMean, ArtifactPath: art, ArtifactHash: h, GatePassed: gate, Twin: twin, LineageVerified: twin}
	if err := st.FinishJob(ctx, id, "w", core.JobProvisioning, nil, nil, gate, art, m); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetModel(ctx, m.ID)
	return got
}

func TestPromotionRules(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	reg := New(st, dir, nil)

	failing := registered(t, st, dir, "j1", false, false)
	if _, err := reg.Move(ctx, failing.ID, core.StageProduction, "ann", "", ""); core.CodeOf(err) != core.CodeGateFailed {
		t.Fatalf("failing gates to production: %v", err)
	}
	a := registered(t, st, dir, "j2", true, false)
	b := registered(t, st, dir, "j3", true, false)
	if _, err := reg.Move(ctx, a.ID, core.StageProduction, "ann", "ok", core.StageCandidate); err != nil {
		t.Fatal(err)
	}
	// b replaces a in one transaction; a is retired.
	if _, err := reg.Move(ctx, b.ID, core.StageProduction, "bob", "better", ""); err != nil {
		t.Fatal(err)
	}
	if m, _ := st.GetModel(ctx, a.ID); m.Stage != core.StageRetired {
		t.Fatalf("previous production model is %s", m.Stage)
	}
	// A stale expectation loses the compare-and-set.
	if _, err := reg.Move(ctx, b.ID, core.StageRetired, "ann", "", core.StageShadow); core.CodeOf(err) != core.CodeStageRace {
		t.Fatalf("stale expectation: %v", err)
	}
	// Twin models must go through shadow.
	tw := registered(t, st, dir, "j4", true, true)
	if _, err := reg.Move(ctx, tw.ID, core.StageProduction, "ann", "", ""); core.CodeOf(err) != core.CodeGateFailed {
		t.Fatalf("twin straight to production: %v", err)
	}
	if _, err := reg.Move(ctx, tw.ID, core.StageShadow, "ann", "", ""); err != nil {
		t.Fatal(err)
	}
	// Edited artifact: promotion refused.
	if err := os.WriteFile(filepath.Join(reg.ArtifactDir(tw), model.FileName), []byte(`{"format":"aml.mean/1","horizon":3,"yCols":2,"mean":[9,9]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Move(ctx, tw.ID, core.StageProduction, "ann", "", ""); core.CodeOf(err) != core.CodeModelTampered {
		t.Fatalf("tampered: %v", err)
	}
	if _, err := reg.Move(ctx, tw.ID, "gold", "ann", "", ""); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("unknown stage: %v", err)
	}
	h, _ := st.ModelHistory(ctx, a.ID)
	if len(h) != 2 || h[1].To != core.StageRetired || !strings.Contains(h[1].Reason, b.ID) {
		t.Fatalf("history %+v", h)
	}
}
