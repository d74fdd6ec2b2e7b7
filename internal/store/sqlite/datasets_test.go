package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func TestDatasetRegistryAndRefs(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	d := core.Dataset{ID: "ds-1", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate", Path: "datasets/ds-1",
		SHA256: strings.Repeat("a", 64), SpecJSON: "{}", TrainWindows: 10, Runs: 3, CreatedBy: "t", LineageVerified: true}
	if err := s.InsertDataset(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertDataset(ctx, d); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("duplicate: %v", err)
	}
	bad := d
	bad.ID, bad.Path, bad.SHA256 = "ds-2", "datasets/ds-2", "short"
	if err := s.InsertDataset(ctx, bad); err == nil {
		t.Fatal("short hash accepted")
	}
	got, err := s.GetDataset(ctx, "ds-1")
	if err != nil || !got.LineageVerified || got.TrainWindows != 10 || got.CreatedAt.IsZero() {
		t.Fatalf("%+v %v", got, err)
	}
	if l, _ := s.ListDatasets(ctx, core.DatasetFilter{Recipe: "R"}); len(l) != 1 {
		t.Fatal(l)
	}
	if l, _ := s.ListDatasets(ctx, core.DatasetFilter{Recipe: "X"}); len(l) != 0 {
		t.Fatal(l)
	}
	ref := core.DatasetRef{DatasetID: "ds-1", Kind: "job", RefID: "job-7"}
	if err := s.AddDatasetRef(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDatasetRef(ctx, core.DatasetRef{DatasetID: "nope", Kind: "job", RefID: "x"}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("ref to unknown dataset: %v", err)
	}
	if err := s.DeleteDataset(ctx, "ds-1"); core.CodeOf(err) != core.CodeInUse || !strings.Contains(err.Error(), "job job-7") {
		t.Fatalf("delete while referenced: %v", err)
	}
	if err := s.RemoveDatasetRef(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDataset(ctx, "ds-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetDataset(ctx, "ds-1"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatal(err)
	}
	if err := s.DeleteDataset(ctx, "ds-1"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatal(err)
	}
}
