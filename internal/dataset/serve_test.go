package dataset

import (
	"context"
	"path/filepath"
	"testing"
)

// TestServeWindowEqualsTrainingWindow: a window rebuilt for serving from the
// store is bit-identical to the training window at the same instant (no
// train/serve skew), including cleaned and interpolated values.
func TestServeWindowEqualsTrainingWindow(t *testing.T) {
	st, dir := simulated(t)
	ctx := context.Background()
	res, err := Build(ctx, st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenBundle(filepath.Join(dir, res.Dataset.Path))
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	H, F := m.HistorySteps, m.HorizonSteps
	checked := 0
	for _, blk := range m.Split.Blocks {
		for _, n := range []int{blk.WindowOffset, blk.WindowOffset + blk.WindowCount/2, blk.WindowOffset + blk.WindowCount - 1} {
			if blk.WindowCount == 0 {
				continue
			}
			x, u, y := b.Window(n)
			at := int64(b.TS[n*(H+F)+H])
			w, err := BuildServeWindow(ctx, st, res.Dataset, blk.RunID, at)
			if err != nil {
				t.Fatalf("window %d of %s: %v", n, blk.RunID, err)
			}
			if w.Missing != 0 || len(w.X) != len(x) || len(w.U) != len(u) || len(w.Y) != len(y) {
				t.Fatalf("window %d: shapes %d/%d/%d missing %d", n, len(w.X), len(w.U), len(w.Y), w.Missing)
			}
			for i := range x {
				if x[i] != w.X[i] {
					t.Fatalf("window %d of %s at %d: x[%d] training %v serving %v", n, blk.RunID, at, i, x[i], w.X[i])
				}
			}
			for i := range u {
				if u[i] != w.U[i] {
					t.Fatalf("window %d: u[%d] %v vs %v", n, i, u[i], w.U[i])
				}
			}
			for i := range y {
				if y[i] != w.Y[i] {
					t.Fatalf("window %d: y[%d] %v vs %v", n, i, y[i], w.Y[i])
				}
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d windows checked", checked)
	}
}
