package app

import (
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// TestReproduces: a recomputed trial reproduces its stored record when
// only the optimiser's provenance notes are missing, and not when any
// other field differs; the recomputed trial is left as it was.
func TestReproduces(t *testing.T) {
	stored := &contract.VirtualTrial{SchemaVersion: 1, CreatedAt: time.UnixMilli(1_700_000_000_000).UTC(), CreatedBy: "ana", TrialID: "trial-1",
		SnapshotID: "snap-1", ModelID: "m-1", ObjectiveID: "obj-1",
		CandidateControlTrajectory: []map[string]float64{{"hold_pressure": 610}},
		Provenance:                 map[string]string{"objectiveHash": "h1", "optimizer": "safe_small_step", "candidatesEvaluated": "40"}}
	h, err := stored.Hash()
	if err != nil {
		t.Fatal(err)
	}
	rec := contract.TrialRecord{Trial: stored, Hash: h}
	re := *stored
	re.Provenance = map[string]string{"objectiveHash": "h1"}
	if !reproduces(&re, rec) {
		t.Fatal("a re-run lacking only the optimiser's notes should reproduce the record")
	}
	if len(re.Provenance) != 1 {
		t.Fatalf("the recomputed trial's provenance was changed: %v", re.Provenance)
	}
	moved := re
	moved.CandidateControlTrajectory = []map[string]float64{{"hold_pressure": 611}}
	if reproduces(&moved, rec) {
		t.Fatal("a different candidate must not reproduce the record")
	}
	other := re
	other.Provenance = map[string]string{"objectiveHash": "h2"}
	if reproduces(&other, rec) {
		t.Fatal("a different objective hash must not reproduce the record (the re-run's own notes win)")
	}
	if reproduces(nil, rec) || reproduces(&re, contract.TrialRecord{Hash: h}) {
		t.Fatal("a missing trial reproduces nothing")
	}
}
