package forest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestCVGrid(t *testing.T) {
	g := CVGrid(13)
	if len(g) != 12 {
		t.Fatalf("%d points for d=13, want 12", len(g))
	}
	for i, c := range g[:8] {
		if c.Method != MethodForest || c.MaxFeatures != []int{3, 4}[i/4] || c.MinLeaf != []int{1, 2}[(i/2)%2] || c.Bootstrap != (i%2 == 0) {
			t.Errorf("point %d = %+v", i, c)
		}
	}
	for i, c := range g[8:] {
		if c.Method != MethodBoost || c.LearningRate != []float64{0.05, 0.1}[i/2] || c.MaxDepth != []int{3, 5}[i%2] {
			t.Errorf("point %d = %+v", 8+i, c)
		}
	}
	if g := CVGrid(2); len(g) != 8 { // mtry 1 only
		t.Errorf("%d points for d=2, want 8", len(g))
	}
	if w := CVBlendWeights(); len(w) != 11 || w[0] != 1 || w[10] != 0 {
		t.Errorf("blend weights %v", w)
	}
}

// ordinal returns rows whose target is a class 1..3 to be predicted as a
// number and rounded.
func ordinal(n int, seed uint64) ([][]float64, []float64) {
	return synth(n, 4, Classification, seed)
}

// TestTuneCVNeverReadsHeldOutRows: a 5-fold split whose held-out fold has
// poisoned inputs and labels: tuning on the training folds gives the same
// inner scores, choices and model. The choice is the best-scoring point,
// and the returned model is the one Fit/Boost grow with the chosen knobs.
// The two data seeds make TuneCV choose a blend (seed 3, w 0.5) and the
// forest alone (seed 1, w 1, with cut points), so both paths and the cut
// points are checked.
func TestTuneCVNeverReadsHeldOutRows(t *testing.T) {
	var weights []float64
	for _, seed := range []uint64{3, 1} {
		weights = append(weights, tuneCVPoisoned(t, seed, seed == 1))
	}
	if !(weights[0] > 0 && weights[0] < 1) || weights[1] != 1 {
		t.Errorf("blend weights %v: want one in (0, 1) and one 1 (the data no longer exercise both paths)", weights)
	}
}

func tuneCVPoisoned(t *testing.T, seed uint64, cuts bool) float64 {
	X, y := ordinal(150, seed)
	xa, ya, xb, yb := heldOutFold(X, y, func(y float64) float64 { return 4 - y })
	opt := DefaultOptions(Regression)
	opt.Trees, opt.Seed = 60, 3
	fa, ra, err := TuneCV(xa, ya, opt, cuts)
	if err != nil {
		t.Fatal(err)
	}
	opt.Workers = 1 // the result must not depend on it either
	fb, rb, err := TuneCV(xb, yb, opt, cuts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("poisoned held-out fold changed the inner scores or the choice:\n%+v\n%+v", ra, rb)
	}
	ja, _ := json.Marshal(fa)
	jb, _ := json.Marshal(fb)
	if string(ja) != string(jb) {
		t.Error("poisoned held-out fold changed the chosen model")
	}
	// The choices are the best inner scores.
	for c, p := range ra.Grid {
		best := ra.BestForest
		if p.Method == MethodBoost {
			best = ra.BestBoost
		}
		b := ra.Grid[best]
		if better(p.Accuracy, p.MSE, b.Accuracy, b.MSE) {
			t.Errorf("point %d %+v scores better than the chosen %d %+v", c, p, best, b)
		}
		if p.Method == MethodBoost && (p.Rounds < CVBoostStep || p.Rounds > CVBoostMaxRounds || p.Rounds%CVBoostStep != 0) {
			t.Errorf("point %d: rounds %d", c, p.Rounds)
		}
		if !(p.Accuracy > 0.3 && p.Accuracy <= 1) {
			t.Errorf("point %d: inner accuracy %v", c, p.Accuracy)
		}
	}
	if ra.Grid[ra.BestForest].Method != MethodForest || ra.Grid[ra.BestBoost].Method != MethodBoost {
		t.Fatalf("best forest %d, best boost %d", ra.BestForest, ra.BestBoost)
	}
	same := true
	for _, g := range ra.Grid {
		same = same && g.MSE == ra.Grid[0].MSE
	}
	if same {
		t.Errorf("every grid point scored %v", ra.Grid[0].MSE)
	}
	// The blend's inner score is at least either part's (w = 1 and 0 are
	// among the weights).
	for _, c := range []int{ra.BestForest, ra.BestBoost} {
		if better(ra.Grid[c].Accuracy, ra.Grid[c].MSE, ra.Accuracy, ra.MSE) {
			t.Errorf("blend (w %v) %v/%v below point %d %+v", ra.Weight, ra.Accuracy, ra.MSE, c, ra.Grid[c])
		}
	}
	// The model is the refit of the chosen knobs on all the rows given.
	o := opt
	o.Workers = 0
	ff, err := Fit(xa, ya, forestOpts(o, ra.Grid[ra.BestForest], opt.Trees))
	if err != nil {
		t.Fatal(err)
	}
	c := ra.Grid[ra.BestBoost]
	fbst, err := Boost(xa, ya, boostOpts(c, c.Rounds, opt.Seed))
	if err != nil {
		t.Fatal(err)
	}
	if cuts {
		if len(ra.Cuts) != 2 || !reflect.DeepEqual(ra.CutLabels, []float64{1, 2, 3}) || !reflect.DeepEqual(fa.Cuts, ra.Cuts) || !(ra.CutAccuracy > 0.3) {
			t.Fatalf("cuts %v labels %v (model %v) accuracy %v", ra.Cuts, ra.CutLabels, fa.Cuts, ra.CutAccuracy)
		}
		raw, _ := json.Marshal(fa)
		if _, err := Parse(raw); err != nil {
			t.Fatalf("the model with cut points does not parse: %v", err)
		}
	} else if len(fa.Cuts) != 0 || len(ra.Cuts) != 0 {
		t.Fatalf("cuts off, got %v", ra.Cuts)
	}
	for i, x := range X {
		want := ra.Weight*ff.Predict(x) + (1-ra.Weight)*fbst.Predict(x)
		if cuts {
			want = (&Forest{Cuts: ra.Cuts, CutLabels: ra.CutLabels}).cutLabel(want)
		}
		if got := fa.Predict(x); math.Abs(got-want) > 1e-12 {
			t.Fatalf("row %d: model %v, refit of the chosen knobs %v (%s)", i, got, want, fa.Knobs())
		}
	}
	t.Logf("chosen: %s (inner accuracy %.3f)", fa.Knobs(), ra.Accuracy)
	return ra.Weight
}

func TestTuneCVErrors(t *testing.T) {
	X, y := ordinal(40, 1)
	if _, _, err := TuneCV(X, y, DefaultOptions(Classification), false); err == nil {
		t.Error("classification: no error")
	}
	if _, _, err := TuneCV(X[:5], y[:5], DefaultOptions(Regression), false); err == nil {
		t.Error("5 rows: no error")
	}
	if _, _, err := TuneCV(nil, nil, DefaultOptions(Regression), true); err == nil {
		t.Error("no rows: no error")
	}
	if _, _, err := TuneCV(X, y[:3], DefaultOptions(Regression), false); err == nil {
		t.Error("fewer targets: no error")
	}
	bad := append([][]float64(nil), X...)
	bad[7] = []float64{math.NaN(), 0, 0, 0}
	if _, _, err := TuneCV(bad, y, DefaultOptions(Regression), false); err == nil {
		t.Error("NaN input: no error")
	}
	one := make([]float64, len(y))
	for i := range one {
		one[i] = 2
	}
	if _, _, err := TuneCV(X, one, DefaultOptions(Regression), true); err == nil {
		t.Error("cuts with one label: no error")
	}
}

// TestFitCuts: class 1 predicted in [1, 1.6], class 2 in [1.7, 2.2],
// class 3 in [2.3, 3]: the best cuts are 1.6..1.69 and 2.2..2.29; the
// ones nearest the midpoints are 1.6 and 2.29 (from 2.2, 2.21, …).
func TestFitCuts(t *testing.T) {
	var p, y []float64
	for i := 0; i <= 60; i++ {
		p, y = append(p, 1+float64(i)/100), append(y, 1)
	}
	for i := 0; i <= 50; i++ {
		p, y = append(p, 1.7+float64(i)/100), append(y, 2)
	}
	for i := 0; i <= 70; i++ {
		p, y = append(p, 2.3+float64(i)/100), append(y, 3)
	}
	c, acc := FitCuts([][]float64{p}, y, []float64{1, 2, 3})
	if acc != 1 || len(c) != 2 || math.Abs(c[0]-1.6) > 1e-9 || math.Abs(c[1]-2.29) > 1e-9 {
		t.Errorf("cuts %v accuracy %v, want [1.6 2.29] and 1", c, acc)
	}
	// Midpoints already best: kept.
	c, acc = FitCuts([][]float64{{1, 1.2, 1.9, 2.1}}, []float64{1, 1, 2, 2}, []float64{1, 2})
	if acc != 1 || c[0] != 1.5 {
		t.Errorf("cuts %v accuracy %v, want [1.5] and 1", c, acc)
	}
}

// TestBlendRoundTrip: a blend marshals, parses back and predicts the
// weighted sum of its parts; malformed blends are refused.
func TestBlendRoundTrip(t *testing.T) {
	X, y := synth(120, 3, Regression, 2)
	o := DefaultOptions(Regression)
	o.Trees, o.Seed = 20, 1
	f, err := Fit(X, y, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Boost(X, y, BoostOptions{Rounds: 30, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	bl := Forest{Version: Version, Task: Regression, NFeatures: 3, Method: MethodBlend, Parts: []Forest{*f, *b}, Weights: []float64{0.3, 0.7}, Trees: []Tree{}}
	raw, err := json.Marshal(&bl)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range X[:20] {
		want := 0.3*f.Predict(x) + 0.7*b.Predict(x)
		if got := p.Predict(x); math.Abs(got-want) > 1e-12 {
			t.Fatalf("blend %v, want %v", got, want)
		}
	}
	if k := p.Knobs(); !strings.Contains(k, "0.3·(forest") || !strings.Contains(k, "0.7·(boost") {
		t.Errorf("knobs %q", k)
	}
	cb := bl
	cb.Cuts, cb.CutLabels = []float64{0.25, 0.5}, []float64{0, 0.3, 1}
	rc, _ := json.Marshal(&cb)
	pc, err := Parse(rc)
	if err != nil {
		t.Fatalf("blend with cut points: %v", err)
	}
	for _, x := range X[:20] {
		v, want := p.Predict(x), 1.0
		if v <= 0.25 {
			want = 0
		} else if v <= 0.5 {
			want = 0.3
		}
		if got := pc.Predict(x); got != want {
			t.Fatalf("value %v cut to %v, want %v", v, got, want)
		}
	}
	if k := pc.Knobs(); !strings.Contains(k, "cuts [0.25 0.5]") {
		t.Errorf("knobs %q", k)
	}
	for name, mut := range map[string]func(m map[string]any){
		"weights sum 0.9":  func(m map[string]any) { m["weights"] = []any{0.3, 0.6} },
		"negative weight":  func(m map[string]any) { m["weights"] = []any{1.5, -0.5} },
		"one weight":       func(m map[string]any) { m["weights"] = []any{1.0} },
		"own trees":        func(m map[string]any) { m["trees"] = m["parts"].([]any)[0].(map[string]any)["trees"] },
		"classification":   func(m map[string]any) { m["task"] = Classification },
		"nested blend":     func(m map[string]any) { m["parts"].([]any)[1].(map[string]any)["method"] = MethodBlend },
		"part features":    func(m map[string]any) { m["parts"].([]any)[0].(map[string]any)["n_features"] = 5 },
		"broken part":      func(m map[string]any) { m["parts"].([]any)[0].(map[string]any)["trees"] = []any{} },
		"parts on forest":  func(m map[string]any) { m["method"] = MethodForest },
		"one part":         func(m map[string]any) { m["parts"] = m["parts"].([]any)[:1]; m["weights"] = []any{1.0} },
		"importances size": func(m map[string]any) { m["importances"] = []any{1.0} },
		"cuts no labels":   func(m map[string]any) { m["cuts"] = []any{1.5} },
		"cut off labels":   func(m map[string]any) { m["cuts"] = []any{2.5}; m["cut_labels"] = []any{1.0, 2.0} },
		"cuts on a part": func(m map[string]any) {
			p := m["parts"].([]any)[0].(map[string]any)
			p["cuts"], p["cut_labels"] = []any{1.5}, []any{1.0, 2.0}
		},
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
}

func TestCVGrid2(t *testing.T) {
	g := CVGrid2(13)
	if len(g) != 20 {
		t.Fatalf("%d points for d=13, want 20", len(g))
	}
	g1 := CVGrid(13)
	if !reflect.DeepEqual(g[:8], g1[:8]) || !reflect.DeepEqual(g[16:], g1[8:]) {
		t.Errorf("CVGrid2 does not hold CVGrid's forests first and its boosted trees last")
	}
	for i, c := range g[8:12] {
		if c.Method != MethodForest || !c.RandomSplits || c.Bootstrap || c.SampleFraction != 1 || c.MaxFeatures != []int{3, 13}[i/2] || c.MinLeaf != []int{1, 3}[i%2] {
			t.Errorf("point %d = %+v", 8+i, c)
		}
	}
	for i, c := range g[12:16] {
		if c.Method != MethodOrdinal || c.RandomSplits || !c.Bootstrap || c.SampleFraction != 1 || c.MaxFeatures != []int{3, 4}[i/2] || c.MinLeaf != []int{1, 5}[i%2] {
			t.Errorf("point %d = %+v", 12+i, c)
		}
	}
	for _, c := range g[:8] {
		if c.RandomSplits {
			t.Errorf("random forest point %+v has random splits", c)
		}
	}
	if g := CVGrid2(2); len(g) != 14 { // 4 forests, mtry 1, 2 extra × 2, mtry 1 ordinal × 2, 4 boosts
		t.Errorf("%d points for d=2, want 14", len(g))
	}
	if _, err := CVGridNamed("cv3", 13); err == nil {
		t.Error("grid cv3: no error")
	}
	if g, err := CVGridNamed("", 13); err != nil || !reflect.DeepEqual(g, g1) {
		t.Errorf("the default grid is not CVGrid (%v)", err)
	}
}

// TestTuneCVGrid2NeverReadsHeldOutRows: as TestTuneCVNeverReadsHeldOutRows
// over CVGrid2: a poisoned held-out fold changes neither the inner scores,
// the choices nor the model; the best random/extra forest, boosted model
// and ordinal forest are the best-scoring points of their families; the
// ordinal forest is the model exactly when it scores above the blend, and
// the model is the refit of the choice. On bimodal data (where x0 < 0
// the class is 1 or 4, so a regression of the label predicts about 2.4, a
// wrong class) an ordinal forest must win; on ordinalData seed 2 the blend
// does: both paths are checked.
func TestTuneCVGrid2NeverReadsHeldOutRows(t *testing.T) {
	var chose []bool
	for _, bimodal := range []bool{true, false} {
		chose = append(chose, tuneCV2Poisoned(t, bimodal))
	}
	if !chose[0] || chose[1] {
		t.Errorf("ordinal chosen %v: want true then false (the data no longer exercise both paths)", chose)
	}
}

// bimodalData: x0 < 0: class 1 (55 %) or 4; x0 ≥ 0: class 2 or 3 by the
// sign of x1.
func bimodalData(n int, seed uint64) ([][]float64, []float64) {
	r := rand.New(rand.NewPCG(seed, 11))
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		X[i] = []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		switch {
		case X[i][0] < 0 && r.Float64() < 0.55:
			y[i] = 1
		case X[i][0] < 0:
			y[i] = 4
		case X[i][1] < 0:
			y[i] = 2
		default:
			y[i] = 3
		}
	}
	return X, y
}

func tuneCV2Poisoned(t *testing.T, bimodal bool) bool {
	X, y := ordinalData(120, 4, 2)
	if bimodal {
		X, y = bimodalData(120, 1)
	}
	Xp := make([][]float64, len(X))
	yp := append([]float64(nil), y...)
	for i := range X {
		Xp[i] = append([]float64(nil), X[i]...)
		if i%5 == 2 {
			Xp[i][0] = -Xp[i][0]*3 + 1
			yp[i] = 5 - y[i]
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
	opt := DefaultOptions(Regression)
	opt.Trees, opt.Seed = 60, 3
	xa, ya := train(X, y)
	xb, yb := train(Xp, yp)
	fa, ra, err := TuneCVGrid(xa, ya, opt, GridCV2, false)
	if err != nil {
		t.Fatal(err)
	}
	opt.Workers = 1
	fb, rb, err := TuneCVGrid(xb, yb, opt, GridCV2, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("poisoned held-out fold changed the inner scores or the choice:\n%+v\n%+v", ra, rb)
	}
	ja, _ := json.Marshal(fa)
	jb, _ := json.Marshal(fb)
	if string(ja) != string(jb) {
		t.Error("poisoned held-out fold changed the chosen model")
	}
	for c, p := range ra.Grid {
		best := ra.BestForest
		switch p.Method {
		case MethodBoost:
			best = ra.BestBoost
		case MethodOrdinal:
			best = ra.BestOrdinal
		}
		if b := ra.Grid[best]; better(p.Accuracy, p.MSE, b.Accuracy, b.MSE) {
			t.Errorf("point %d %+v scores better than the chosen %d %+v", c, p, best, b)
		}
		if !(p.Accuracy > 0.3 && p.Accuracy <= 1) {
			t.Errorf("point %d: inner accuracy %v", c, p.Accuracy)
		}
	}
	if ra.Grid[ra.BestForest].Method != MethodForest || ra.Grid[ra.BestBoost].Method != MethodBoost || ra.Grid[ra.BestOrdinal].Method != MethodOrdinal {
		t.Fatalf("best forest %d, boost %d, ordinal %d", ra.BestForest, ra.BestBoost, ra.BestOrdinal)
	}
	if ra.Ordinal != (ra.Grid[ra.BestOrdinal].Accuracy > ra.Accuracy) {
		t.Errorf("ordinal chosen %v: its inner accuracy %v, the blend's %v", ra.Ordinal, ra.Grid[ra.BestOrdinal].Accuracy, ra.Accuracy)
	}
	o := opt
	o.Workers = 0
	if ra.Ordinal {
		want, err := FitOrdinal(xa, ya, forestOpts(o, ra.Grid[ra.BestOrdinal], opt.Trees))
		if err != nil {
			t.Fatal(err)
		}
		if fa.Method != MethodOrdinal {
			t.Fatalf("ordinal chosen, model %s", fa.Knobs())
		}
		for i, x := range X {
			if got, w := fa.Predict(x), want.Predict(x); got != w {
				t.Fatalf("row %d: model %v, refit of the chosen ordinal forest %v", i, got, w)
			}
		}
	} else {
		ff, err := Fit(xa, ya, forestOpts(o, ra.Grid[ra.BestForest], opt.Trees))
		if err != nil {
			t.Fatal(err)
		}
		c := ra.Grid[ra.BestBoost]
		fbst, err := Boost(xa, ya, boostOpts(c, c.Rounds, opt.Seed))
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range X {
			want := ra.Weight*ff.Predict(x) + (1-ra.Weight)*fbst.Predict(x)
			if got := fa.Predict(x); math.Abs(got-want) > 1e-12 {
				t.Fatalf("row %d: model %v, refit of the chosen knobs %v (%s)", i, got, want, fa.Knobs())
			}
		}
	}
	t.Logf("bimodal %v: chosen %s (blend inner accuracy %.3f, best ordinal %.3f)", bimodal, fa.Knobs(), ra.Accuracy, ra.Grid[ra.BestOrdinal].Accuracy)
	return ra.Ordinal
}

// TestTuneCVGridCV1IsTuneCV: grid cv1 is TuneCV, and cuts are refused with
// a grid of ordinal forests.
func TestTuneCVGridCV1IsTuneCV(t *testing.T) {
	X, y := ordinal(60, 4)
	opt := DefaultOptions(Regression)
	opt.Trees, opt.Seed = 20, 2
	fa, ra, err := TuneCV(X, y, opt, false)
	if err != nil {
		t.Fatal(err)
	}
	fb, rb, err := TuneCVGrid(X, y, opt, GridCV1, false)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(fa)
	jb, _ := json.Marshal(fb)
	if !reflect.DeepEqual(ra, rb) || string(ja) != string(jb) || ra.BestOrdinal != -1 || ra.Ordinal {
		t.Error("grid cv1 differs from TuneCV")
	}
	if _, _, err := TuneCVGrid(X, y, opt, GridCV2, true); err == nil {
		t.Error("cuts with grid cv2: no error")
	}
	if _, _, err := TuneCVGrid(X, y, opt, "cv9", false); err == nil {
		t.Error("grid cv9: no error")
	}
}
