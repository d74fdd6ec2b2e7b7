package dataset

import (
	"context"
	"testing"
)

// TestDatasetHashGolden pins the hash of a dataset built from the simulated
// injection line with examples/specs/injection.json: a change to how samples
// are stored, cleaned, aligned or written (the move to microsecond sample
// times, for one) must leave every existing whole-millisecond spec's dataset
// byte-identical, so models keep their lineage.
func TestDatasetHashGolden(t *testing.T) {
	st, dir := simulated(t)
	res, err := Build(context.Background(), st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dataset.SHA256 != goldenHash {
		t.Fatalf("dataset sha256 %s, want %s (spec hash %s)", res.Dataset.SHA256, goldenHash, res.Manifest.SpecHash)
	}
}

const goldenHash = "dc8099badc9e69cf9f9dd2108314f3ea2582fec4840cb0f8fece59a653f173a1"
