package forest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// ordinalData returns n rows of d features whose class 1..4 is a noisy
// threshold of a latent score 1.5·x0 + x1 (an ordered target).
func ordinalData(n, d int, seed uint64) ([][]float64, []float64) {
	r := rand.New(rand.NewPCG(seed, 9))
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		x := make([]float64, d)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		s := 1.5*x[0] + x[1] + 0.3*r.NormFloat64()
		y[i] = 1
		for _, c := range []float64{-1.2, 0, 1.2} {
			if s > c {
				y[i]++
			}
		}
		X[i] = x
	}
	return X, y
}

func TestOrdinalProba(t *testing.T) {
	out := make([]float64, 3)
	ordinalProba([]float64{0.8, 0.3}, out)
	if want := []float64{0.2, 0.5, 0.3}; math.Abs(out[0]-want[0])+math.Abs(out[1]-want[1])+math.Abs(out[2]-want[2]) > 1e-12 {
		t.Errorf("implied probabilities %v, want %v", out, want)
	}
	// a non-monotone estimate: P(y > c1) > P(y > c0) makes class 1 negative;
	// estimates are clipped to [0, 1] first
	ordinalProba([]float64{0.4, 1.3}, out)
	if want := []float64{0.6, -0.6, 1}; math.Abs(out[0]-want[0])+math.Abs(out[1]-want[1])+math.Abs(out[2]-want[2]) > 1e-12 {
		t.Errorf("implied probabilities %v, want %v", out, want)
	}
}

// TestFitOrdinal: the parts are the regression forests of 1{y > c_k}
// (seed + k), Proba sums to 1, Predict is its argmax, held-out accuracy is
// high on an ordinal target, the out-of-bag accuracy is near it, and the
// model round-trips through Parse.
func TestFitOrdinal(t *testing.T) {
	X, y := ordinalData(600, 5, 1)
	Xt, yt := ordinalData(400, 5, 2)
	o := DefaultOptions(Regression)
	o.Trees, o.Seed, o.MaxFeatures = 100, 7, 2
	f, err := FitOrdinal(X, y, o)
	if err != nil {
		t.Fatal(err)
	}
	if f.Method != MethodOrdinal || f.Task != Classification || !reflect.DeepEqual(f.Classes, []float64{1, 2, 3, 4}) || len(f.Parts) != 3 {
		t.Fatalf("method %q task %q classes %v parts %d", f.Method, f.Task, f.Classes, len(f.Parts))
	}
	for k := range f.Parts {
		z := make([]float64, len(y))
		for i, v := range y {
			if v > f.Classes[k] {
				z[i] = 1
			}
		}
		ok := o
		ok.Seed = o.Seed + uint64(k)
		want, err := Fit(X, z, ok)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range Xt[:50] {
			if a, b := f.Parts[k].Predict(x), want.Predict(x); a != b {
				t.Fatalf("part %d predicts %v, the forest of 1{y > %v} %v", k, a, f.Classes[k], b)
			}
		}
	}
	ok := 0
	p := make([]float64, 4)
	for i, x := range Xt {
		f.Proba(x, p)
		s, best := 0.0, 0
		for c, v := range p {
			s += v
			if v > p[best] {
				best = c
			}
		}
		if math.Abs(s-1) > 1e-9 {
			t.Fatalf("row %d: class probabilities %v sum to %v", i, p, s)
		}
		if got := f.Predict(x); got != f.Classes[best] {
			t.Fatalf("row %d: predicts %v, argmax of %v is %v", i, got, p, f.Classes[best])
		}
		if f.Predict(x) == yt[i] {
			ok++
		}
	}
	acc := float64(ok) / float64(len(Xt))
	if acc < 0.8 {
		t.Errorf("held-out accuracy %.3f < 0.8", acc)
	}
	if f.OOB.Accuracy == nil || math.Abs(*f.OOB.Accuracy-acc) > 0.06 || f.OOB.Rows < 590 {
		t.Errorf("out-of-bag accuracy %v over %d rows, held-out %.3f", f.OOB.Accuracy, f.OOB.Rows, acc)
	}
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range Xt[:100] {
		if g.Predict(x) != f.Predict(x) {
			t.Fatal("parsed ordinal forest predicts differently")
		}
	}
	for name, mut := range map[string]func(m map[string]any){
		"regression":     func(m map[string]any) { m["task"] = Regression },
		"missing part":   func(m map[string]any) { m["parts"] = m["parts"].([]any)[:2] },
		"one class":      func(m map[string]any) { m["classes"] = []any{1.0} },
		"classes order":  func(m map[string]any) { m["classes"] = []any{1.0, 3.0, 2.0, 4.0} },
		"weights":        func(m map[string]any) { m["weights"] = []any{0.2, 0.3, 0.5} },
		"own trees":      func(m map[string]any) { m["trees"] = m["parts"].([]any)[0].(map[string]any)["trees"] },
		"boosted part":   func(m map[string]any) { m["parts"].([]any)[1].(map[string]any)["method"] = MethodBoost },
		"part features":  func(m map[string]any) { m["parts"].([]any)[0].(map[string]any)["n_features"] = 6 },
		"broken part":    func(m map[string]any) { m["parts"].([]any)[2].(map[string]any)["trees"] = []any{} },
		"cut points":     func(m map[string]any) { m["cuts"] = []any{1.5}; m["cut_labels"] = []any{1.0, 2.0} },
		"importance len": func(m map[string]any) { m["importances"] = []any{1.0} },
	} {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		mut(m)
		bad, _ := json.Marshal(m)
		if _, err := Parse(bad); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := FitOrdinal(X, make([]float64, len(X)), o); err == nil {
		t.Error("one label: no error")
	}
	if _, err := FitOrdinal(X, y[:5], o); err == nil {
		t.Error("fewer targets: no error")
	}
	bad := append([]float64(nil), y...)
	bad[3] = math.Inf(1)
	if _, err := FitOrdinal(X, bad, o); err == nil {
		t.Error("infinite target: no error")
	}
}

// TestExtraTrees: ExtraOptions grows every tree on all rows (no
// out-of-bag rows), draws thresholds at random inside the node's range
// (the root thresholds of one feature differ between trees and are not
// all midpoints of consecutive values, as CART's are), and predicts a
// held-out set well in both tasks.
func TestExtraTrees(t *testing.T) {
	for _, task := range []string{Classification, Regression} {
		X, y := synth(500, 4, task, 1)
		Xt, yt := synth(300, 4, task, 2)
		o := ExtraOptions(task, 4)
		if o.Bootstrap || o.SampleFraction != 1 || !o.RandomSplits || o.MaxFeatures != map[string]int{Classification: 2, Regression: 4}[task] {
			t.Fatalf("%s: options %+v", task, o)
		}
		o.Trees, o.Seed = 200, 3
		f, err := Fit(X, y, o)
		if err != nil {
			t.Fatal(err)
		}
		if f.OOB.Rows != 0 || f.OOB.Accuracy != nil || f.OOB.R2 != nil {
			t.Errorf("%s: out-of-bag %+v, want none (every tree has every row)", task, f.OOB)
		}
		mid := map[float64]bool{}
		for f := 0; f < 4; f++ {
			col := make([]float64, len(X))
			for i := range X {
				col[i] = X[i][f]
			}
			s := distinct(col)
			for i := 1; i < len(s); i++ {
				mid[s[i-1]+(s[i]-s[i-1])/2] = true
			}
		}
		roots, midRoots := map[float64]bool{}, 0
		for _, tr := range f.Trees {
			if tr.Feature[0] < 0 {
				continue
			}
			roots[tr.Threshold[0]] = true
			if mid[tr.Threshold[0]] {
				midRoots++
			}
		}
		if len(roots) < 100 || midRoots > 10 {
			t.Errorf("%s: %d distinct root thresholds over 200 trees, %d at midpoints: not random", task, len(roots), midRoots)
		}
		pred := f.PredictAll(Xt)
		if task == Classification {
			ro := DefaultOptions(task)
			ro.Trees, ro.Seed = 200, 3
			rf, err := Fit(X, y, ro)
			if err != nil {
				t.Fatal(err)
			}
			rp := rf.PredictAll(Xt)
			ok, rok := 0, 0
			for i := range yt {
				if pred[i] == yt[i] {
					ok++
				}
				if rp[i] == yt[i] {
					rok++
				}
			}
			acc, racc := float64(ok)/float64(len(yt)), float64(rok)/float64(len(yt))
			t.Logf("held-out accuracy: extra trees %.3f, random forest %.3f", acc, racc)
			if acc < 0.8 || acc < racc-0.03 {
				t.Errorf("extra trees held-out accuracy %.3f (random forest %.3f)", acc, racc)
			}
			continue
		}
		mu, sse, sst := 0.0, 0.0, 0.0
		for _, v := range yt {
			mu += v / float64(len(yt))
		}
		for i, v := range yt {
			sse += (pred[i] - v) * (pred[i] - v)
			sst += (v - mu) * (v - mu)
		}
		if r2 := 1 - sse/sst; r2 < 0.7 {
			t.Errorf("extra trees held-out R² %.3f < 0.7", r2)
		}
	}
}
