package forest

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// synth returns n rows of d features and a class (two Gaussian blobs in the
// first two features, the rest noise) or a smooth regression target.
func synth(n, d int, task string, seed uint64) ([][]float64, []float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		x := make([]float64, d)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		if task == Classification {
			c := float64(i % 3)
			x[0] += 2 * c
			x[1] -= 1.5 * c
			y[i] = c + 1
		} else {
			y[i] = math.Sin(x[0]) + 0.5*x[1]*x[1] + 0.1*r.NormFloat64()
		}
		X[i] = x
	}
	return X, y
}

// heldOutFold splits X, y as the held-out-fold tests do: a 5-fold split
// whose held-out fold is rows i%5 == 2. It returns the training folds
// twice: as given (xa, ya), and after the held-out rows were poisoned
// (xb, yb): their feature 0 mirrored and shifted, their target replaced by
// poison(y). Tuning on the training folds must not see the difference.
func heldOutFold(X [][]float64, y []float64, poison func(y float64) float64) (xa [][]float64, ya []float64, xb [][]float64, yb []float64) {
	Xp := make([][]float64, len(X))
	yp := append([]float64(nil), y...)
	for i := range X {
		Xp[i] = append([]float64(nil), X[i]...)
		if i%5 == 2 {
			Xp[i][0] = -Xp[i][0]*3 + 1
			yp[i] = poison(y[i])
		}
	}
	train := func(X [][]float64, y []float64) ([][]float64, []float64) {
		var xt [][]float64
		var yt []float64
		for i := range X {
			if i%5 != 2 {
				xt, yt = append(xt, X[i]), append(yt, y[i])
			}
		}
		return xt, yt
	}
	xa, ya = train(X, y)
	xb, yb = train(Xp, yp)
	return xa, ya, xb, yb
}

func TestDeterministicForSeed(t *testing.T) {
	for _, task := range []string{Classification, Regression} {
		X, y := synth(300, 6, task, 1)
		o := DefaultOptions(task)
		o.Trees, o.Seed = 40, 7
		var prev []byte
		for _, workers := range []int{1, 2, 5} {
			o.Workers = workers
			f, err := Fit(X, y, o)
			if err != nil {
				t.Fatal(err)
			}
			f.Options.Workers = 0 // not serialised anyway
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if prev != nil && !bytes.Equal(b, prev) {
				t.Fatalf("%s: the model bytes differ with %d workers", task, workers)
			}
			prev = b
		}
		o.Seed = 8
		f, err := Fit(X, y, o)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(f); bytes.Equal(b, prev) {
			t.Fatalf("%s: another seed gave the same forest", task)
		}
	}
}

// TestOOBCloseToCV: the out-of-bag estimate on all rows is within a few
// points of a 5-fold cross-validation of the same forest.
func TestOOBCloseToCV(t *testing.T) {
	for _, task := range []string{Classification, Regression} {
		X, y := synth(400, 5, task, 2)
		o := DefaultOptions(task)
		o.Trees, o.Seed = 100, 3
		f, err := Fit(X, y, o)
		if err != nil {
			t.Fatal(err)
		}
		if f.OOB.Rows != len(X) {
			t.Fatalf("%s: OOB scored %d of %d rows", task, f.OOB.Rows, len(X))
		}
		pred := make([]float64, len(X))
		for k := 0; k < 5; k++ {
			var xt [][]float64
			var yt []float64
			for i := range X {
				if i%5 != k {
					xt, yt = append(xt, X[i]), append(yt, y[i])
				}
			}
			fk, err := Fit(xt, yt, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range X {
				if i%5 == k {
					pred[i] = fk.Predict(X[i])
				}
			}
		}
		if task == Classification {
			ok := 0
			for i := range y {
				if pred[i] == y[i] {
					ok++
				}
			}
			cv := float64(ok) / float64(len(y))
			t.Logf("classification: OOB accuracy %.4f, 5-fold CV %.4f", *f.OOB.Accuracy, cv)
			if math.Abs(*f.OOB.Accuracy-cv) > 0.04 {
				t.Errorf("OOB accuracy %.4f vs CV %.4f", *f.OOB.Accuracy, cv)
			}
		} else {
			mu, sse, sst := 0.0, 0.0, 0.0
			for _, v := range y {
				mu += v / float64(len(y))
			}
			for i, v := range y {
				sse += (pred[i] - v) * (pred[i] - v)
				sst += (v - mu) * (v - mu)
			}
			cv := 1 - sse/sst
			t.Logf("regression: OOB R² %.4f, 5-fold CV %.4f", *f.OOB.R2, cv)
			if math.Abs(*f.OOB.R2-cv) > 0.05 {
				t.Errorf("OOB R² %.4f vs CV %.4f", *f.OOB.R2, cv)
			}
		}
	}
}

// TestSeparablePerfect: a single tree on all rows (no bootstrap, every
// feature tried) grown to purity classifies separable training data
// perfectly, for many random data sets; regression predictions stay
// within the training target range.
func TestSeparablePerfect(t *testing.T) {
	for s := uint64(0); s < 30; s++ {
		r := rand.New(rand.NewPCG(s, 9))
		n, d := 20+r.IntN(80), 1+r.IntN(4)
		// distinct rows (feature 0 a permutation, the others rounded noise
		// with ties) with any labels are separable by axis splits
		perm := r.Perm(n)
		X := make([][]float64, n)
		y := make([]float64, n)
		for i := range X {
			X[i] = make([]float64, d)
			X[i][0] = float64(perm[i]) / 7
			for j := 1; j < d; j++ {
				X[i][j] = math.Round(r.NormFloat64() * 3)
			}
			y[i] = float64(r.IntN(3))
		}
		o := DefaultOptions(Classification)
		o.Trees, o.Bootstrap, o.MaxFeatures, o.Seed = 1, false, d, s
		f, err := Fit(X, y, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range X {
			if p := f.Predict(X[i]); p != y[i] {
				t.Fatalf("seed %d: row %d predicted %v, labelled %v", s, i, p, y[i])
			}
		}
		yr := make([]float64, n)
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range yr {
			yr[i] = r.NormFloat64() * 5
			lo, hi = min(lo, yr[i]), max(hi, yr[i])
		}
		or := DefaultOptions(Regression)
		or.Trees, or.MinLeaf, or.Seed = 20, 1+r.IntN(4), s
		fr, err := Fit(X, yr, or)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 50; k++ {
			x := make([]float64, d)
			for j := range x {
				x[j] = r.NormFloat64() * 20
			}
			if p := fr.Predict(x); p < lo || p > hi {
				t.Fatalf("seed %d: prediction %v outside the training range [%v, %v]", s, p, lo, hi)
			}
		}
	}
}

func TestImportancesFindTheSignal(t *testing.T) {
	X, y := synth(300, 6, Classification, 4)
	o := DefaultOptions(Classification)
	o.Trees = 50
	f, err := Fit(X, y, o)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, v := range f.Importances {
		sum += v
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("importances sum to %v", sum)
	}
	for j := 2; j < 6; j++ {
		if f.Importances[j] >= f.Importances[0] || f.Importances[j] >= f.Importances[1] {
			t.Fatalf("noise feature %d as important as the signal: %v", j, f.Importances)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	X, y := synth(200, 4, Classification, 5)
	o := DefaultOptions(Classification)
	o.Trees, o.MaxDepth, o.RandomSplits = 20, 6, true
	f, err := Fit(X, y, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range X {
		if f.Predict(X[i]) != g.Predict(X[i]) {
			t.Fatalf("row %d: parsed forest predicts differently", i)
		}
	}
	for _, bad := range []string{`{}`, `{"version":1,"task":"classification","n_features":4,"classes":[1],"trees":[{"feature":[0],"threshold":[0],"left":[0],"right":[0],"value":[1]}]}`, `{"version":2}`, `[`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}

func TestFitErrors(t *testing.T) {
	if _, err := Fit(nil, nil, DefaultOptions(Regression)); err == nil {
		t.Error("no rows accepted")
	}
	if _, err := Fit([][]float64{{1}, {math.NaN()}}, []float64{1, 2}, DefaultOptions(Regression)); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := Fit([][]float64{{1}, {2}}, []float64{1, 2}, Options{Task: "x"}); err == nil {
		t.Error("bad task accepted")
	}
}

// FuzzParse: Parse never panics, and a forest it accepts predicts without
// panicking (every path reaches a leaf).
func FuzzParse(f *testing.F) {
	X, y := synth(60, 3, Classification, 6)
	o := DefaultOptions(Classification)
	o.Trees, o.MaxDepth = 2, 3
	fr, err := Fit(X, y, o)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := json.Marshal(fr)
	f.Add(b)
	Xr, yr := synth(60, 3, Regression, 6)
	or := DefaultOptions(Regression)
	or.Trees, or.MaxDepth = 2, 3
	fr, err = Fit(Xr, yr, or)
	if err != nil {
		f.Fatal(err)
	}
	b, _ = json.Marshal(fr)
	f.Add(b)
	f.Add([]byte(`{"version":1,"task":"regression","n_features":1,"trees":[{"feature":[0,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,1,2]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			return
		}
		x := make([]float64, g.NFeatures%64)
		if len(x) != g.NFeatures {
			return
		}
		for _, v := range []float64{-1e9, 0, 0.5, 1e9} {
			for j := range x {
				x[j] = v
			}
			g.Predict(x)
		}
	})
}

func BenchmarkFit(b *testing.B) {
	X, y := synth(1500, 13, Classification, 7)
	o := DefaultOptions(Classification)
	o.Trees = 100
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(X, y, o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFitRegression(b *testing.B) {
	X, y := synth(1500, 13, Regression, 7)
	o := DefaultOptions(Regression)
	o.Trees = 100
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(X, y, o); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBoost(t *testing.T) {
	X, y := synth(300, 4, Regression, 11)
	bo := BoostOptions{Rounds: 200, Seed: 2}
	f, err := Boost(X, y, bo)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Boost(X, y, bo)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(f)
	b2, _ := json.Marshal(g)
	if !bytes.Equal(b1, b2) {
		t.Fatal("boost not deterministic for a seed")
	}
	p, err := Parse(b1)
	if err != nil {
		t.Fatal(err)
	}
	mu, sse, sst := 0.0, 0.0, 0.0
	for _, v := range y {
		mu += v / float64(len(y))
	}
	for i, v := range y {
		if p.Predict(X[i]) != f.Predict(X[i]) {
			t.Fatal("parsed boosted model predicts differently")
		}
		e := f.Predict(X[i]) - v
		sse += e * e
		sst += (v - mu) * (v - mu)
	}
	if r2 := 1 - sse/sst; r2 < 0.8 {
		t.Fatalf("boosted training R² %.3f", r2)
	}
	if _, err := Boost(X, y, BoostOptions{LearningRate: 2}); err == nil {
		t.Fatal("learning rate 2 accepted")
	}
}

// A stump (one tree, all rows, every feature tried, depth 1) takes the
// split a brute-force search finds best under each criterion: Gini
// decrease, information gain, gain ratio. Over the random draws the
// criteria do not always agree, so a criterion that were ignored fails.
func TestCriteriaStump(t *testing.T) {
	ent := func(c []float64) float64 {
		w, h := 0.0, 0.0
		for _, v := range c {
			w += v
		}
		for _, v := range c {
			if v > 0 {
				h -= v / w * math.Log(v/w)
			}
		}
		return h
	}
	gini := func(c []float64) float64 {
		w, s := 0.0, 0.0
		for _, v := range c {
			w += v
		}
		for _, v := range c {
			s += (v / w) * (v / w)
		}
		return 1 - s
	}
	score := func(crit string, l, r []float64) float64 {
		wl, wr := 0.0, 0.0
		for c := range l {
			wl += l[c]
			wr += r[c]
		}
		w := wl + wr
		p := make([]float64, len(l))
		for c := range p {
			p[c] = l[c] + r[c]
		}
		switch crit {
		case CriterionGini:
			return gini(p) - wl/w*gini(l) - wr/w*gini(r)
		case CriterionEntropy:
			return ent(p) - wl/w*ent(l) - wr/w*ent(r)
		}
		return (ent(p) - wl/w*ent(l) - wr/w*ent(r)) / ent([]float64{wl, wr})
	}
	differ := 0
	for trial := uint64(0); trial < 30; trial++ {
		r := rand.New(rand.NewPCG(trial, 3))
		n, d := 30, 3
		X, y := make([][]float64, n), make([]float64, n)
		for i := range X {
			y[i] = float64(1 + r.IntN(3))
			X[i] = []float64{r.Float64() + 0.3*y[i], r.Float64() - 0.2*y[i], r.Float64()}
		}
		chosen := map[string][2]float64{}
		for _, crit := range []string{CriterionGini, CriterionEntropy, CriterionGainRatio} {
			o := Options{Task: Classification, Trees: 1, MaxDepth: 1, MaxFeatures: d, Criterion: crit, Seed: trial, Workers: 1}
			f, err := Fit(X, y, o)
			if err != nil {
				t.Fatal(err)
			}
			tr := f.Trees[0]
			if tr.Feature[0] < 0 {
				t.Fatalf("trial %d %s: no split", trial, crit)
			}
			split := func(fe int, thr float64) ([]float64, []float64) {
				l, rr := make([]float64, 3), make([]float64, 3)
				for i, x := range X {
					if x[fe] <= thr {
						l[int(y[i])-1]++
					} else {
						rr[int(y[i])-1]++
					}
				}
				return l, rr
			}
			gl, gr := split(int(tr.Feature[0]), tr.Threshold[0])
			got := score(crit, gl, gr)
			best := math.Inf(-1)
			for fe := 0; fe < d; fe++ {
				for _, x := range X {
					l, rr := split(fe, x[fe])
					if l[0]+l[1]+l[2] == 0 || rr[0]+rr[1]+rr[2] == 0 {
						continue
					}
					best = max(best, score(crit, l, rr))
				}
			}
			if math.Abs(got-best) > 1e-9 {
				t.Fatalf("trial %d %s: split x%d ≤ %g scores %g, the best %g", trial, crit, tr.Feature[0], tr.Threshold[0], got, best)
			}
			chosen[crit] = [2]float64{float64(tr.Feature[0]), tr.Threshold[0]}
		}
		if chosen[CriterionGini] != chosen[CriterionGainRatio] || chosen[CriterionGini] != chosen[CriterionEntropy] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the three criteria chose the same split in every trial")
	}
	if _, err := Fit([][]float64{{1}, {2}}, []float64{1, 2}, Options{Task: Regression, Trees: 1, Criterion: CriterionEntropy}); err == nil {
		t.Fatal("an entropy criterion for regression was accepted")
	}
	if _, err := Fit([][]float64{{1}, {2}}, []float64{1, 2}, Options{Task: Classification, Trees: 1, Criterion: "twoing"}); err == nil {
		t.Fatal("an unknown criterion was accepted")
	}
}
