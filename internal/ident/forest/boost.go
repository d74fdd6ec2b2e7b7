package forest

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Methods.
const (
	MethodForest = ""      // random forest: the mean of the trees
	MethodBoost  = "boost" // gradient boosting: Init + LearningRate·Σ trees
	MethodBlend  = "blend" // Σ Weights[i]·Parts[i] (TuneCV's forest + boosted trees)
)

// BoostOptions controls Boost: gradient-boosted regression trees on the
// squared error (each tree is fitted to the current residuals, its leaf
// values the residual means).
type BoostOptions struct {
	// Rounds (trees). Default 300.
	Rounds int `json:"rounds"`
	// LearningRate (shrinkage) of every tree. Default 0.05.
	LearningRate float64 `json:"learning_rate"`
	// MaxDepth of every tree. Default 4.
	MaxDepth int `json:"max_depth"`
	// MinLeaf distinct rows per leaf. Default 3.
	MinLeaf int `json:"min_leaf"`
	// MaxFeatures tried per split; 0 = all.
	MaxFeatures int `json:"max_features"`
	// Subsample fraction of rows per tree, drawn without replacement
	// (stochastic gradient boosting). Default 0.8.
	Subsample float64 `json:"subsample"`
	// Seed fixes the subsamples and feature draws.
	Seed uint64 `json:"seed"`
}

func (o BoostOptions) withDefaults(d int) BoostOptions {
	if o.Rounds == 0 {
		o.Rounds = 300
	}
	if o.LearningRate == 0 {
		o.LearningRate = 0.05
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = 4
	}
	if o.MinLeaf == 0 {
		o.MinLeaf = 3
	}
	if o.MaxFeatures == 0 || o.MaxFeatures > d {
		o.MaxFeatures = d
	}
	if o.Subsample == 0 {
		o.Subsample = 0.8
	}
	return o
}

// Boost fits gradient-boosted regression trees to y (squared error). The
// result is a Forest with Method MethodBoost: Predict returns Init +
// LearningRate·Σ_t tree_t(x). Trees are sequential, so one core grows
// them; the model is deterministic for the seed. It has no out-of-bag
// estimate.
func Boost(X [][]float64, y []float64, bo BoostOptions) (*Forest, error) {
	n := len(X)
	if n == 0 || len(y) != n || len(X[0]) == 0 {
		return nil, errors.New("forest: boost needs rows, as many targets, and at least one input")
	}
	d := len(X[0])
	bo = bo.withDefaults(d)
	if bo.Rounds < 1 || bo.Rounds > 100000 || !(bo.LearningRate > 0 && bo.LearningRate <= 1) || bo.MaxDepth < 1 || bo.MinLeaf < 1 || !(bo.Subsample > 0 && bo.Subsample <= 1) {
		return nil, fmt.Errorf("forest: boost options %+v out of range", bo)
	}
	dt := &data{n: n, d: d, xc: make([][]float64, d), order: make([][]int32, d), k: 1, y: make([]float64, n)}
	for f := range dt.xc {
		dt.xc[f] = make([]float64, n)
	}
	init := 0.0
	for i, x := range X {
		if len(x) != d {
			return nil, fmt.Errorf("forest: row %d has %d inputs, want %d", i, len(x), d)
		}
		for f, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("forest: row %d: non-finite input", i)
			}
			dt.xc[f][i] = v
		}
		if math.IsNaN(y[i]) || math.IsInf(y[i], 0) {
			return nil, fmt.Errorf("forest: row %d: non-finite target", i)
		}
		init += y[i] / float64(n)
	}
	for f := 0; f < d; f++ {
		o := make([]int32, n)
		for i := range o {
			o[i] = int32(i)
		}
		col := dt.xc[f]
		sort.SliceStable(o, func(a, b int) bool { return col[o[a]] < col[o[b]] })
		dt.order[f] = o
	}
	opt := Options{Task: Regression, Trees: bo.Rounds, MaxDepth: bo.MaxDepth, MinLeaf: bo.MinLeaf, MinSplit: 2 * bo.MinLeaf,
		MaxFeatures: bo.MaxFeatures, SampleFraction: bo.Subsample, Seed: bo.Seed, Workers: 1}
	fr := &Forest{Version: Version, Task: Regression, NFeatures: d, Options: opt, Method: MethodBoost, Init: init, LearningRate: bo.LearningRate,
		Trees: make([]Tree, bo.Rounds), Importances: make([]float64, d)}
	F := make([]float64, n)
	for i := range F {
		F[i] = init
	}
	b := newBuilder(dt, opt)
	total := 0.0
	for t := 0; t < bo.Rounds; t++ {
		for i := range F {
			dt.y[i] = y[i] - F[i]
		}
		tr, _, imp := b.grow(t)
		fr.Trees[t] = tr
		for f, v := range imp {
			fr.Importances[f] += v
			total += v
		}
		for i, x := range X {
			F[i] += bo.LearningRate * tr.Value[tr.leaf(x)]
		}
	}
	if total > 0 {
		for f := range fr.Importances {
			fr.Importances[f] /= total
		}
	}
	return fr, nil
}
