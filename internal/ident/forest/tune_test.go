package forest

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestTuneGrid(t *testing.T) {
	g := TuneGrid(13)
	if len(g) != 18 {
		t.Fatalf("%d points for d=13, want 18", len(g))
	}
	want := []int{3, 4, 7}
	for i, c := range g {
		if c.MaxFeatures != want[i/6] || c.MinLeaf != []int{1, 2, 4}[(i/2)%3] || c.Bootstrap != (i%2 == 0) {
			t.Errorf("point %d = %+v", i, c)
		}
	}
	// d = 2: ⌊√2⌋ = 1, ⌊2/3⌋ → 1, ⌈2/2⌉ = 1: one mtry.
	if g := TuneGrid(2); len(g) != 6 {
		t.Errorf("%d points for d=2, want 6", len(g))
	}
}

// TestTuneNeverReadsHeldOutRows: a 5-fold split where the held-out fold's
// labels are poisoned (shuffled classes, shifted targets) and its inputs
// replaced: tuning on the training folds chooses the same knobs with the
// same scores and grows the same forest, and the chosen point is the
// best-scoring one, the earliest on a tie; the chosen forest is the one Fit
// grows with those knobs.
func TestTuneNeverReadsHeldOutRows(t *testing.T) {
	for _, task := range []string{Classification, Regression} {
		X, y := synth(250, 5, task, 7)
		xa, ya, xb, yb := heldOutFold(X, y, func(y float64) float64 {
			if task == Classification {
				return float64((int(y) + 1) % 3)
			}
			return y + 10
		})
		opt := DefaultOptions(task)
		opt.Trees, opt.Seed = 40, 3
		fa, ga, err := Tune(xa, ya, opt)
		if err != nil {
			t.Fatal(err)
		}
		opt.Workers = 1 // the forest must not depend on it either
		fb, gb, err := Tune(xb, yb, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ga, gb) {
			t.Errorf("%s: poisoned held-out fold changed the grid scores:\n%+v\n%+v", task, ga, gb)
		}
		ja, _ := json.Marshal(fa.Trees)
		jb, _ := json.Marshal(fb.Trees)
		if string(ja) != string(jb) {
			t.Errorf("%s: poisoned held-out fold changed the chosen forest", task)
		}
		bi := 0
		for i, c := range ga {
			if c.Score > ga[bi].Score {
				bi = i
			}
		}
		c := ga[bi]
		o := fa.Options
		if o.MaxFeatures != c.MaxFeatures || o.MinLeaf != c.MinLeaf || o.Bootstrap != c.Bootstrap || o.SampleFraction != c.SampleFraction {
			t.Errorf("%s: chose %+v, best point %d is %+v", task, o, bi, c)
		}
		o.Workers = 0
		ref, err := Fit(xa, ya, o)
		if err != nil {
			t.Fatal(err)
		}
		if jr, _ := json.Marshal(ref.Trees); string(jr) != string(ja) {
			t.Errorf("%s: the tuned forest differs from Fit with the chosen knobs", task)
		}
		// Scores differ across the grid (the grid is not a no-op).
		same := true
		for _, g := range ga {
			same = same && g.Score == ga[0].Score
		}
		if same {
			t.Errorf("%s: every grid point scored %v", task, ga[0].Score)
		}
	}
}

func TestTuneErrors(t *testing.T) {
	if _, _, err := Tune(nil, nil, DefaultOptions(Classification)); err == nil {
		t.Error("no rows: no error")
	}
	X, y := synth(20, 3, Classification, 1)
	o := DefaultOptions("nonsense")
	if _, _, err := Tune(X, y, o); err == nil {
		t.Error("bad task: no error")
	}
}
