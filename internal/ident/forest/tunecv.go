package forest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
)

// Inner cross-validation of TuneCV: CVRepeats repetitions of a stratified
// CVFolds-fold split of the rows it is given; forests are grown with
// CVInnerTrees trees inside it; boosted candidates are scored at every
// CVBoostStep rounds up to CVBoostMaxRounds (the rounds are chosen by the
// inner score: early stopping on the inner folds).
const (
	CVFolds          = 5
	CVRepeats        = 2
	CVInnerTrees     = 500
	CVBoostMaxRounds = 1000
	CVBoostStep      = 25
)

// CVBlendWeights are the forest weights w of the blend w·forest +
// (1−w)·boost tried by TuneCV, in order (ties go to the earlier weight):
// 1 (the forest alone), 0.9, …, 0.1, 0 (the boosted trees alone).
func CVBlendWeights() []float64 {
	w := make([]float64, 11)
	for i := range w {
		w[i] = float64(10-i) / 10
	}
	return w
}

// CVCandidate is one point of CVGrid and its inner cross-validation score.
type CVCandidate struct {
	// Method is MethodForest, MethodBoost or MethodOrdinal (CVGrid2).
	Method string `json:"method"`
	// Forest knobs (an ordinal forest's: of each of its parts).
	// RandomSplits makes a forest extremely randomised trees (CVGrid2).
	RandomSplits   bool    `json:"random_splits,omitempty"`
	MaxFeatures    int     `json:"max_features,omitempty"`
	MinLeaf        int     `json:"min_leaf"`
	Bootstrap      bool    `json:"bootstrap,omitempty"`
	SampleFraction float64 `json:"sample_fraction"`
	// Boost knobs; Rounds is chosen by the inner score.
	LearningRate float64 `json:"learning_rate,omitempty"`
	MaxDepth     int     `json:"max_depth,omitempty"`
	Rounds       int     `json:"rounds,omitempty"`
	// Accuracy of the rounded inner out-of-fold predictions and their mean
	// squared error, over all repeats.
	Accuracy float64 `json:"accuracy"`
	MSE      float64 `json:"mse"`
}

// CVGrid is the declared candidate set of [TuneCV] for d features, in its
// order (ties go to the earlier point):
//
//   - regression forests (CVInnerTrees trees inside the inner CV, the
//     caller's Trees for the final fit): mtry ⌊√d⌋, ⌊d/3⌋ (each at least 1,
//     duplicates dropped) × min leaf 1, 2 × sampling (bootstrap of n rows;
//     subsample of 0.632·n rows without replacement);
//   - gradient-boosted trees (Boost, min leaf 3, subsample 0.8, every
//     feature): learning rate 0.05, 0.1 × depth 3, 5, rounds chosen among
//     25, 50, …, 1000 by the inner score.
//
// 12 points for d = 13. It was committed before any outer fold of the
// iGuzzini benchmark was scored with it; do not widen it by looking at
// test-fold results.
func CVGrid(d int) []CVCandidate {
	var g []CVCandidate
	for _, m := range mtryChoices(d, int(math.Sqrt(float64(d))), d/3) {
		for _, l := range []int{1, 2} {
			g = append(g, CVCandidate{Method: MethodForest, MaxFeatures: m, MinLeaf: l, Bootstrap: true, SampleFraction: 1})
			g = append(g, CVCandidate{Method: MethodForest, MaxFeatures: m, MinLeaf: l, Bootstrap: false, SampleFraction: 0.632})
		}
	}
	for _, lr := range []float64{0.05, 0.1} {
		for _, depth := range []int{3, 5} {
			g = append(g, CVCandidate{Method: MethodBoost, LearningRate: lr, MaxDepth: depth, MinLeaf: 3, SampleFraction: 0.8})
		}
	}
	return g
}

// CVOrdinalInnerTrees is the trees per part of an ordinal forest inside
// the inner cross-validation of CVGrid2 (each of its K−1 parts).
const CVOrdinalInnerTrees = 500

// CVGrid2 is the second declared candidate set of TuneCVGrid (GridCV2) for
// d features, in its order (ties go to the earlier point): CVGrid's
// regression forests; extremely randomised regression trees (all rows, no
// bootstrap, one random threshold per tried feature; CVInnerTrees trees)
// with mtry ⌊√d⌋ and d × min leaf 1, 3; ordinal forests (FitOrdinal:
// K−1 bootstrapped regression forests of P(y > c_k), CVOrdinalInnerTrees
// trees each) with mtry ⌊√d⌋, ⌊d/3⌋ × min leaf 1, 5; then CVGrid's
// boosted trees. mtry values are at least 1, duplicates dropped: 20 points
// for d = 13. Like CVGrid it was committed before any outer fold of the
// iGuzzini benchmark was scored with it (examples/bench/iguzzini_cv2.json).
func CVGrid2(d int) []CVCandidate {
	g1 := CVGrid(d)
	var g []CVCandidate
	for _, c := range g1 {
		if c.Method == MethodForest {
			g = append(g, c)
		}
	}
	for _, m := range mtryChoices(d, int(math.Sqrt(float64(d))), d) {
		for _, l := range []int{1, 3} {
			g = append(g, CVCandidate{Method: MethodForest, RandomSplits: true, MaxFeatures: m, MinLeaf: l, Bootstrap: false, SampleFraction: 1})
		}
	}
	for _, m := range mtryChoices(d, int(math.Sqrt(float64(d))), d/3) {
		for _, l := range []int{1, 5} {
			g = append(g, CVCandidate{Method: MethodOrdinal, MaxFeatures: m, MinLeaf: l, Bootstrap: true, SampleFraction: 1})
		}
	}
	for _, c := range g1 {
		if c.Method == MethodBoost {
			g = append(g, c)
		}
	}
	return g
}

// CVResult is what TuneCV chose: every candidate's inner score, the best
// forest and the best boosted candidate (indices into Grid), and the
// blend weight with the blend's inner score; with ordinal forests in the
// grid (CVGrid2) the best one (BestOrdinal, −1 without) and whether it beat
// the blend and is the model (Ordinal).
type CVResult struct {
	Grid        []CVCandidate `json:"grid"`
	BestForest  int           `json:"best_forest"`
	BestBoost   int           `json:"best_boost"`
	BestOrdinal int           `json:"best_ordinal"`
	Weight      float64       `json:"weight"`
	Ordinal     bool          `json:"ordinal,omitempty"`
	Accuracy    float64       `json:"accuracy"`
	MSE         float64       `json:"mse"`
	InnerSplits int           `json:"inner_splits"`
	// With cuts: the cut points fitted on the blend's inner out-of-fold
	// predictions, the labels between them, and the inner accuracy of the
	// cut predictions.
	Cuts        []float64 `json:"cuts,omitempty"`
	CutLabels   []float64 `json:"cut_labels,omitempty"`
	CutAccuracy float64   `json:"cut_accuracy,omitempty"`
}

// better reports whether (acc, mse) beats (acc0, mse0): higher accuracy,
// then lower squared error.
func better(acc, mse, acc0, mse0 float64) bool {
	return acc > acc0 || (acc == acc0 && mse < mse0)
}

// cvScore is the accuracy of math.Round(p) against y and the mean squared
// error, over all repeats' predictions.
func cvScore(pred [][]float64, y []float64) (acc, mse float64) {
	ok, n := 0, 0
	for _, p := range pred {
		for i, v := range p {
			n++
			if math.Round(v) == y[i] {
				ok++
			}
			mse += (v - y[i]) * (v - y[i])
		}
	}
	return float64(ok) / float64(n), mse / float64(n)
}

// cvFolds returns, per repeat, each row's inner fold: the rows are
// shuffled with a stream seeded by (seed, repeat), stably sorted by target
// (so every fold holds every class in proportion), and dealt out in turn.
func cvFolds(y []float64, seed uint64) [][]int {
	n := len(y)
	out := make([][]int, CVRepeats)
	for r := range out {
		rng := rand.New(rand.NewPCG(seed, 0x7e57c0de+uint64(r)))
		idx := rng.Perm(n)
		sort.SliceStable(idx, func(a, b int) bool { return y[idx[a]] < y[idx[b]] })
		out[r] = make([]int, n)
		for j, i := range idx {
			out[r][i] = j % CVFolds
		}
	}
	return out
}

// TuneCV picks, by repeated inner cross-validation on X, y only, the best
// regression forest and the best boosted model of CVGrid and the weight
// of their blend (CVBlendWeights), scored by the accuracy of the rounded
// out-of-fold predictions (ties: lower squared error, then the earlier
// point), then fits the chosen model on all of X, y: the forest with
// opt.Trees trees, the boosted trees with the chosen rounds, both seeded
// by opt.Seed. With weight 1 or 0 the result is that forest or boosted
// model alone, otherwise a Forest of Method MethodBlend. The task must be
// regression (an ordinal class predicted as a number and rounded). It
// reads only X and y: in a cross-validation the caller passes the
// training folds, so the held-out fold cannot influence the choice.
//
// With cuts, the class cut points are fitted too (FitCuts on the chosen
// blend's inner out-of-fold predictions, labels the distinct targets, 2..100
// of them) and the model predicts the label between its cut points instead
// of a number.
func TuneCV(X [][]float64, y []float64, opt Options, cuts bool) (*Forest, *CVResult, error) {
	return TuneCVGrid(X, y, opt, GridCV1, cuts)
}

// Named grids of TuneCVGrid.
const (
	GridCV1 = "cv1" // CVGrid: regression forests and boosted trees
	GridCV2 = "cv2" // CVGrid2: CVGrid + extremely randomised trees + ordinal forests
)

// CVGridNamed returns the declared grid called name (GridCV1, the default
// for "", or GridCV2) for d features.
func CVGridNamed(name string, d int) ([]CVCandidate, error) {
	switch name {
	case "", GridCV1:
		return CVGrid(d), nil
	case GridCV2:
		return CVGrid2(d), nil
	}
	return nil, fmt.Errorf("forest: tune cv grid %q, want %q or %q", name, GridCV1, GridCV2)
}

// TuneCVGrid is TuneCV over the declared grid called grid (CVGridNamed).
// Over CVGrid2 the forests blended with the best boosted model are the
// random forests and the extremely randomised trees together (the best of
// them by inner accuracy), and the best ordinal forest (its inner
// predictions are class labels) replaces the blend when its inner accuracy
// is strictly higher; it is then refitted alone (FitOrdinal with opt.Trees
// trees per part). Cut points cannot be fitted over a grid with ordinal
// forests.
func TuneCVGrid(X [][]float64, y []float64, opt Options, grid string, cuts bool) (*Forest, *CVResult, error) {
	n := len(X)
	if n == 0 || len(y) != n {
		return nil, nil, errors.New("forest: tune cv needs rows and as many targets")
	}
	if opt.Task != Regression {
		return nil, nil, fmt.Errorf("forest: tune cv fits regression forests and boosted trees; the task is %q", opt.Task)
	}
	if n < 2*CVFolds {
		return nil, nil, fmt.Errorf("forest: tune cv needs at least %d rows, got %d", 2*CVFolds, n)
	}
	d := len(X[0])
	o := opt.withDefaults(max(d, 1))
	if err := o.validate(); err != nil {
		return nil, nil, err
	}
	g, err := CVGridNamed(grid, d)
	if err != nil {
		return nil, nil, err
	}
	hasOrdinal := false
	for _, c := range g {
		hasOrdinal = hasOrdinal || c.Method == MethodOrdinal
	}
	if cuts && hasOrdinal {
		return nil, nil, fmt.Errorf("forest: tune cv cuts need a grid without ordinal forests (grid %q has them)", grid)
	}
	return tuneCV(X, y, opt, o.Workers, g, cuts)
}

func tuneCV(X [][]float64, y []float64, opt Options, workers int, grid []CVCandidate, cuts bool) (*Forest, *CVResult, error) {
	n, d := len(X), len(X[0])
	folds := cvFolds(y, opt.Seed)
	steps := CVBoostMaxRounds / CVBoostStep
	// pred[c][r][i]: candidate c's out-of-fold prediction of row i in
	// repeat r; boosted candidates: stage[c][s][r][i] after (s+1)·step
	// rounds.
	pred := make([][][]float64, len(grid))
	stage := make([][][][]float64, len(grid))
	for c := range grid {
		pred[c] = make([][]float64, CVRepeats)
		for r := range pred[c] {
			pred[c][r] = make([]float64, n)
		}
		if grid[c].Method == MethodBoost {
			stage[c] = make([][][]float64, steps)
			for s := range stage[c] {
				stage[c][s] = make([][]float64, CVRepeats)
				for r := range stage[c][s] {
					stage[c][s][r] = make([]float64, n)
				}
			}
		}
	}
	type job struct{ r, k, c int }
	var jobs []job
	for r := 0; r < CVRepeats; r++ {
		for k := 0; k < CVFolds; k++ {
			for c := range grid {
				jobs = append(jobs, job{r, k, c})
			}
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(workers, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				errs[j] = cvJob(X, y, opt, grid[jobs[j].c], folds[jobs[j].r], jobs[j].k,
					opt.Seed+uint64(1+jobs[j].r*CVFolds+jobs[j].k)*0x9e3779b9, pred[jobs[j].c][jobs[j].r], stageAt(stage[jobs[j].c], jobs[j].r))
			}
		}()
	}
	for j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	res := &CVResult{Grid: grid, BestForest: -1, BestBoost: -1, BestOrdinal: -1, InnerSplits: CVRepeats * CVFolds}
	for c := range grid {
		if grid[c].Method == MethodBoost {
			bs := -1
			var ba, bm float64
			for s := 0; s < steps; s++ {
				a, m := cvScore(stage[c][s], y)
				if bs < 0 || better(a, m, ba, bm) {
					bs, ba, bm = s, a, m
				}
			}
			grid[c].Rounds = (bs + 1) * CVBoostStep
			for r := range pred[c] {
				copy(pred[c][r], stage[c][bs][r])
			}
		}
		grid[c].Accuracy, grid[c].MSE = cvScore(pred[c], y)
		best := &res.BestForest
		switch grid[c].Method {
		case MethodBoost:
			best = &res.BestBoost
		case MethodOrdinal:
			best = &res.BestOrdinal
		}
		if *best < 0 || better(grid[c].Accuracy, grid[c].MSE, grid[*best].Accuracy, grid[*best].MSE) {
			*best = c
		}
	}
	pf, pb := pred[res.BestForest], pred[res.BestBoost]
	blend := make([][]float64, CVRepeats)
	for r := range blend {
		blend[r] = make([]float64, n)
	}
	first := true
	for _, w := range CVBlendWeights() {
		for r := range blend {
			for i := range blend[r] {
				blend[r][i] = w*pf[r][i] + (1-w)*pb[r][i]
			}
		}
		a, m := cvScore(blend, y)
		if first || better(a, m, res.Accuracy, res.MSE) {
			res.Weight, res.Accuracy, res.MSE, first = w, a, m, false
		}
	}
	if res.BestOrdinal >= 0 {
		res.Ordinal = grid[res.BestOrdinal].Accuracy > res.Accuracy
	}
	if cuts {
		labels := distinct(y)
		if len(labels) < 2 || len(labels) > 100 {
			return nil, nil, fmt.Errorf("forest: tune cv cuts need 2..100 distinct target values, got %d", len(labels))
		}
		for r := range blend {
			for i := range blend[r] {
				blend[r][i] = res.Weight*pf[r][i] + (1-res.Weight)*pb[r][i]
			}
		}
		res.CutLabels = labels
		res.Cuts, res.CutAccuracy = FitCuts(blend, y, labels)
	}
	if res.Ordinal {
		out, err := FitOrdinal(X, y, forestOpts(opt, grid[res.BestOrdinal], opt.Trees))
		if err != nil {
			return nil, nil, err
		}
		return out, res, nil
	}
	var ff, fb *Forest
	var err error
	if res.Weight > 0 {
		if ff, err = Fit(X, y, forestOpts(opt, grid[res.BestForest], opt.Trees)); err != nil {
			return nil, nil, err
		}
	}
	if res.Weight < 1 {
		if fb, err = Boost(X, y, boostOpts(grid[res.BestBoost], grid[res.BestBoost].Rounds, opt.Seed)); err != nil {
			return nil, nil, err
		}
	}
	var out *Forest
	switch res.Weight {
	case 1:
		out = ff
	case 0:
		out = fb
	default:
		imp := make([]float64, d)
		for f := range imp {
			imp[f] = res.Weight*ff.Importances[f] + (1-res.Weight)*fb.Importances[f]
		}
		out = &Forest{Version: Version, Task: Regression, NFeatures: d, Method: MethodBlend, Options: ff.Options,
			Parts: []Forest{*ff, *fb}, Weights: []float64{res.Weight, 1 - res.Weight}, Trees: []Tree{}, Importances: imp}
	}
	if cuts {
		out.Cuts, out.CutLabels = append([]float64(nil), res.Cuts...), append([]float64(nil), res.CutLabels...)
	}
	return out, res, nil
}

// FitCuts fits the cut points between consecutive labels (sorted,
// distinct) that maximise the accuracy of the cut predictions pred
// (per repeat, per row) against y: starting from the midpoints, three
// passes of a coordinate search, each cut over 61 points from 20 % to 80 %
// of the way between its two labels; on a tie the point nearer the
// midpoint (then the lower) is kept. Returns the cuts and their accuracy.
func FitCuts(pred [][]float64, y, labels []float64) ([]float64, float64) {
	c := make([]float64, len(labels)-1)
	for j := range c {
		c[j] = (labels[j] + labels[j+1]) / 2
	}
	acc := func() float64 {
		ok, n := 0, 0
		for _, p := range pred {
			for i, v := range p {
				n++
				j := 0
				for j < len(c) && v > c[j] {
					j++
				}
				if labels[j] == y[i] {
					ok++
				}
			}
		}
		return float64(ok) / float64(n)
	}
	best := acc()
	for pass := 0; pass < 3; pass++ {
		for j := range c {
			lo, hi := labels[j], labels[j+1]
			bv, bd := c[j], math.Abs(c[j]-(lo+hi)/2)
			for s := 20; s <= 80; s++ {
				v := lo + (hi-lo)*float64(s)/100
				c[j] = v
				a := acc()
				dist := math.Abs(v - (lo+hi)/2)
				if a > best || (a == best && dist < bd-1e-12) {
					best, bv, bd = a, v, dist
				}
			}
			c[j] = bv
		}
	}
	return c, best
}

func stageAt(s [][][]float64, r int) [][]float64 {
	if s == nil {
		return nil
	}
	out := make([][]float64, len(s))
	for i := range s {
		out[i] = s[i][r]
	}
	return out
}

func forestOpts(opt Options, c CVCandidate, trees int) Options {
	o := opt
	o.Trees, o.MaxFeatures, o.MinLeaf, o.Bootstrap, o.SampleFraction = trees, c.MaxFeatures, c.MinLeaf, c.Bootstrap, c.SampleFraction
	o.RandomSplits = c.RandomSplits
	return o
}

func boostOpts(c CVCandidate, rounds int, seed uint64) BoostOptions {
	return BoostOptions{Rounds: rounds, LearningRate: c.LearningRate, MaxDepth: c.MaxDepth, MinLeaf: c.MinLeaf, Subsample: c.SampleFraction, Seed: seed}
}

// cvJob fits candidate c on the rows outside inner fold k and writes its
// predictions of the rows inside it to pred (a boosted candidate: to every
// stage of stages, pred is filled from the chosen stage later).
func cvJob(X [][]float64, y []float64, opt Options, c CVCandidate, fold []int, k int, seed uint64, pred []float64, stages [][]float64) error {
	var xt [][]float64
	var yt []float64
	for i := range X {
		if fold[i] != k {
			xt, yt = append(xt, X[i]), append(yt, y[i])
		}
	}
	if c.Method == MethodForest || c.Method == MethodOrdinal {
		o := forestOpts(opt, c, CVInnerTrees)
		o.Seed, o.Workers = seed, 1
		fit := Fit
		if c.Method == MethodOrdinal {
			o.Trees = CVOrdinalInnerTrees
			fit = FitOrdinal
		}
		f, err := fit(xt, yt, o)
		if err != nil {
			return err
		}
		for i := range X {
			if fold[i] == k {
				pred[i] = f.Predict(X[i])
			}
		}
		return nil
	}
	b, err := Boost(xt, yt, boostOpts(c, CVBoostMaxRounds, seed))
	if err != nil {
		return err
	}
	for i := range X {
		if fold[i] != k {
			continue
		}
		sum := 0.0
		for t := range b.Trees {
			tr := &b.Trees[t]
			sum += tr.Value[tr.leaf(X[i])]
			if (t+1)%CVBoostStep == 0 {
				stages[(t+1)/CVBoostStep-1][i] = b.Init + b.LearningRate*sum
			}
		}
	}
	return nil
}

// Knobs describes the fitted model's method and knobs in one line.
func (f *Forest) Knobs() string {
	if len(f.Cuts) > 0 {
		g := *f
		g.Cuts = nil
		return fmt.Sprintf("%s, cuts %v", g.Knobs(), f.Cuts)
	}
	switch f.Method {
	case MethodOrdinal:
		if len(f.Parts) == 0 {
			return "ordinal"
		}
		o := f.Parts[0].Options
		return fmt.Sprintf("ordinal forest (%d parts) mtry %d minLeaf %d bootstrap %v fraction %g", len(f.Parts), o.MaxFeatures, o.MinLeaf, o.Bootstrap, o.SampleFraction)
	case MethodBoost:
		o := f.Options
		return fmt.Sprintf("boost lr %g depth %d rounds %d", f.LearningRate, o.MaxDepth, len(f.Trees))
	case MethodBlend:
		if len(f.Parts) == 2 && len(f.Weights) == 2 {
			return fmt.Sprintf("%.3g·(%s) + %.3g·(%s)", f.Weights[0], f.Parts[0].Knobs(), f.Weights[1], f.Parts[1].Knobs())
		}
		return "blend"
	}
	o := f.Options
	if o.RandomSplits {
		return fmt.Sprintf("extra trees mtry %d minLeaf %d bootstrap %v fraction %g", o.MaxFeatures, o.MinLeaf, o.Bootstrap, o.SampleFraction)
	}
	return fmt.Sprintf("forest mtry %d minLeaf %d bootstrap %v fraction %g", o.MaxFeatures, o.MinLeaf, o.Bootstrap, o.SampleFraction)
}
