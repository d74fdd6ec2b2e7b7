package forest

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Tasks.
const (
	Classification = "classification"
	Regression     = "regression"
)

// Version is the model-file version Fit writes and Parse reads.
const Version = 1

// Classification split criteria (Options.Criterion).
const (
	CriterionGini      = "gini"
	CriterionEntropy   = "entropy"
	CriterionGainRatio = "gain_ratio"
)

// Options controls Fit. Zero numeric fields take their defaults; Bootstrap
// is used as given (DefaultOptions sets it).
type Options struct {
	// Task is Classification or Regression.
	Task string `json:"task"`
	// Trees in the forest. Default 500.
	Trees int `json:"trees"`
	// MaxDepth limits a tree's depth (root = depth 0); 0 = unlimited.
	MaxDepth int `json:"max_depth,omitempty"`
	// MinLeaf is the least number of distinct rows in a leaf. Default 1.
	MinLeaf int `json:"min_leaf"`
	// MinSplit is the least number of distinct rows a node needs to be
	// split. Default 2.
	MinSplit int `json:"min_split"`
	// MaxFeatures (mtry) features are tried at each node. Default
	// ⌊√d⌋ for classification, max(1, ⌊d/3⌋) for regression; capped at d.
	MaxFeatures int `json:"max_features"`
	// Bootstrap draws each tree's rows with replacement.
	Bootstrap bool `json:"bootstrap"`
	// SampleFraction · n rows are drawn per tree. Default 1.
	SampleFraction float64 `json:"sample_fraction"`
	// RandomSplits grows extremely randomised trees (Geurts et al. 2006):
	// each drawn feature gets one threshold drawn uniformly between its
	// least and greatest value on the node, and the best of those is taken.
	RandomSplits bool `json:"random_splits,omitempty"`
	// Criterion of a classification split: CriterionGini (empty, the
	// default), CriterionEntropy (information gain) or CriterionGainRatio
	// (information gain over the split's own entropy, C4.5's, what the
	// published iGuzzini forest used). Regression always uses squared error.
	Criterion string `json:"criterion,omitempty"`
	// Seed fixes every random draw.
	Seed uint64 `json:"seed"`
	// Workers grow trees in parallel; 0 = runtime.GOMAXPROCS(0). The
	// forest does not depend on it.
	Workers int `json:"-"`
}

// DefaultOptions returns 500 bootstrapped trees grown to purity (MinLeaf
// 1) with the task's default MaxFeatures.
func DefaultOptions(task string) Options {
	return Options{Task: task, Trees: 500, MinLeaf: 1, MinSplit: 2, Bootstrap: true, SampleFraction: 1}
}

func (o Options) withDefaults(d int) Options {
	if o.Trees == 0 {
		o.Trees = 500
	}
	if o.MinLeaf == 0 {
		o.MinLeaf = 1
	}
	if o.MinSplit == 0 {
		o.MinSplit = 2
	}
	if o.MaxFeatures == 0 {
		if o.Task == Classification {
			o.MaxFeatures = int(math.Sqrt(float64(d)))
		} else {
			o.MaxFeatures = d / 3
		}
		o.MaxFeatures = max(1, o.MaxFeatures)
	}
	o.MaxFeatures = min(o.MaxFeatures, d)
	if o.SampleFraction == 0 {
		o.SampleFraction = 1
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o
}

func (o Options) validate() error {
	if o.Task != Classification && o.Task != Regression {
		return fmt.Errorf("forest: task %q, want %q or %q", o.Task, Classification, Regression)
	}
	switch o.Criterion {
	case "", CriterionGini:
	case CriterionEntropy, CriterionGainRatio:
		if o.Task != Classification {
			return fmt.Errorf("forest: criterion %q is for classification", o.Criterion)
		}
	default:
		return fmt.Errorf("forest: criterion %q, want %q, %q or %q", o.Criterion, CriterionGini, CriterionEntropy, CriterionGainRatio)
	}
	if o.Trees < 1 || o.Trees > 100000 {
		return fmt.Errorf("forest: %d trees outside 1..100000", o.Trees)
	}
	if o.MaxDepth < 0 || o.MinLeaf < 1 || o.MinSplit < 2 || o.MaxFeatures < 1 {
		return fmt.Errorf("forest: max depth %d, min leaf %d, min split %d, max features %d: want ≥ 0, ≥ 1, ≥ 2, ≥ 1", o.MaxDepth, o.MinLeaf, o.MinSplit, o.MaxFeatures)
	}
	if !(o.SampleFraction > 0 && o.SampleFraction <= 1) && !(o.Bootstrap && o.SampleFraction > 0 && o.SampleFraction <= 10) {
		return fmt.Errorf("forest: sample fraction %v outside (0, 1] (up to 10 with bootstrap)", o.SampleFraction)
	}
	return nil
}

// Tree is one CART tree as parallel node arrays; node 0 is the root.
// Feature[n] < 0 marks a leaf; otherwise rows with x[Feature[n]] ≤
// Threshold[n] go to Left[n], the others to Right[n]. Value holds K values
// per node (class probabilities; K = 1 for regression, the mean); only the
// leaves' are used.
type Tree struct {
	Feature   []int32   `json:"feature"`
	Threshold []float64 `json:"threshold"`
	Left      []int32   `json:"left"`
	Right     []int32   `json:"right"`
	Value     []float64 `json:"value"`
}

// Len is the number of nodes.
func (t *Tree) Len() int { return len(t.Feature) }

// leaf returns the index of the leaf x falls in.
func (t *Tree) leaf(x []float64) int {
	n := int32(0)
	for t.Feature[n] >= 0 {
		if x[t.Feature[n]] <= t.Threshold[n] {
			n = t.Left[n]
		} else {
			n = t.Right[n]
		}
	}
	return int(n)
}

// OOBScore is the out-of-bag estimate.
type OOBScore struct {
	// Rows is how many training rows were left out by at least one tree
	// (the rows scored).
	Rows int `json:"rows"`
	// Accuracy (classification) or R², RMSE (regression) on those rows.
	Accuracy *float64 `json:"accuracy,omitempty"`
	R2       *float64 `json:"r2,omitempty"`
	RMSE     *float64 `json:"rmse,omitempty"`
}

// Forest is a fitted random forest.
type Forest struct {
	Version   int    `json:"version"`
	Task      string `json:"task"`
	NFeatures int    `json:"n_features"`
	// Classes are the sorted distinct training labels (classification);
	// leaf probabilities are in this order.
	Classes []float64 `json:"classes,omitempty"`
	Options Options   `json:"options"`
	// Method is MethodForest (empty), MethodBoost, MethodBlend or
	// MethodOrdinal; a boosted model predicts Init + LearningRate·Σ_t
	// tree_t(x).
	Method       string  `json:"method,omitempty"`
	Init         float64 `json:"init,omitempty"`
	LearningRate float64 `json:"learning_rate,omitempty"`
	Trees        []Tree  `json:"trees"`
	// Parts and Weights make a blend (Method MethodBlend, regression):
	// the prediction is Σ_i Weights[i]·Parts[i].Predict(x); Trees is empty.
	// An ordinal forest (MethodOrdinal, classification) has one part per
	// class but the last, part k estimating P(y > Classes[k]), and no
	// weights.
	Parts   []Forest  `json:"parts,omitempty"`
	Weights []float64 `json:"weights,omitempty"`
	// Cuts (increasing) turn a regression of an ordinal class into a class
	// label: Predict returns CutLabels[j], j the number of cut points below
	// the regression value (len(CutLabels) = len(Cuts)+1; CutLabels[j] <
	// Cuts[j] < CutLabels[j+1]). TuneCV fits them with cuts on.
	Cuts      []float64 `json:"cuts,omitempty"`
	CutLabels []float64 `json:"cut_labels,omitempty"`
	// Importances are the normalised mean decreases in impurity per feature.
	Importances []float64 `json:"importances"`
	OOB         OOBScore  `json:"oob"`

	oobPred []float64 // per training row; NaN when in every tree's sample
}

// K is the number of values per leaf.
func (f *Forest) K() int {
	if f.Task == Classification {
		return len(f.Classes)
	}
	return 1
}

// OOBPredictions returns each training row's out-of-bag prediction (a
// class label or a mean; NaN for a row in every tree's sample). Only a
// forest from Fit has them.
func (f *Forest) OOBPredictions() []float64 { return f.oobPred }

// Proba writes to out (len ≥ K) the mean over the trees of
// x's leaf values: class probabilities, or the regression mean (an
// ordinal forest: the class probabilities its parts imply).
func (f *Forest) Proba(x []float64, out []float64) {
	k := f.K()
	clear(out[:k])
	if f.Method == MethodBlend {
		for i := range f.Parts {
			out[0] += f.Weights[i] * f.Parts[i].Predict(x)
		}
		return
	}
	if f.Method == MethodOrdinal {
		var buf [16]float64
		q := buf[:0]
		if len(f.Parts) > len(buf) {
			q = make([]float64, 0, len(f.Parts))
		}
		for i := range f.Parts {
			q = append(q, f.Parts[i].Predict(x))
		}
		ordinalProba(q, out[:k])
		return
	}
	for ti := range f.Trees {
		t := &f.Trees[ti]
		v := t.Value[t.leaf(x)*k:]
		for c := 0; c < k; c++ {
			out[c] += v[c]
		}
	}
	if f.Method == MethodBoost {
		out[0] = f.Init + f.LearningRate*out[0]
		return
	}
	inv := 1 / float64(len(f.Trees))
	for c := 0; c < k; c++ {
		out[c] *= inv
	}
}

// Predict returns the predicted class label (the class of highest mean
// probability, the lower label on a tie) or the regression mean for x.
func (f *Forest) Predict(x []float64) float64 {
	k := f.K()
	var buf [16]float64
	var p []float64
	if k <= len(buf) {
		p = buf[:k]
	} else {
		p = make([]float64, k)
	}
	f.Proba(x, p)
	if len(f.Cuts) > 0 {
		return f.cutLabel(p[0])
	}
	return f.decide(p)
}

// cutLabel maps a regression value v to CutLabels[j], j the number of cut
// points below v.
func (f *Forest) cutLabel(v float64) float64 {
	j := 0
	for j < len(f.Cuts) && v > f.Cuts[j] {
		j++
	}
	return f.CutLabels[j]
}

func (f *Forest) decide(p []float64) float64 {
	if f.Task != Classification {
		return p[0]
	}
	best := 0
	for c := 1; c < len(p); c++ {
		if p[c] > p[best] {
			best = c
		}
	}
	return f.Classes[best]
}

// PredictAll predicts every row of X.
func (f *Forest) PredictAll(X [][]float64) []float64 {
	out := make([]float64, len(X))
	for i, x := range X {
		out[i] = f.Predict(x)
	}
	return out
}

// data is the training set, column-major, with the per-feature row order.
type data struct {
	n, d  int
	xc    [][]float64 // [feature][row]
	order [][]int32   // [feature] rows sorted by value (ties by row)
	y     []float64   // regression target
	cls   []int32     // class index
	k     int
}

// Fit grows a random forest on X (n rows × d features) and y (class labels
// for classification, any finite values for regression).
func Fit(X [][]float64, y []float64, opt Options) (*Forest, error) {
	n := len(X)
	if n == 0 {
		return nil, errors.New("forest: no rows")
	}
	if len(y) != n {
		return nil, fmt.Errorf("forest: %d input rows but %d targets", n, len(y))
	}
	d := len(X[0])
	if d == 0 {
		return nil, errors.New("forest: no input columns")
	}
	if n > math.MaxInt32 {
		return nil, errors.New("forest: too many rows")
	}
	opt = opt.withDefaults(d)
	if err := opt.validate(); err != nil {
		return nil, err
	}
	dt := &data{n: n, d: d, xc: make([][]float64, d), order: make([][]int32, d)}
	for f := range dt.xc {
		dt.xc[f] = make([]float64, n)
	}
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
	}
	fr := &Forest{Version: Version, Task: opt.Task, NFeatures: d, Options: opt}
	if opt.Task == Classification {
		fr.Classes = distinct(y)
		if len(fr.Classes) > 1000 {
			return nil, fmt.Errorf("forest: %d distinct labels: not a classification target", len(fr.Classes))
		}
		dt.k = len(fr.Classes)
		dt.cls = make([]int32, n)
		for i, v := range y {
			dt.cls[i] = int32(sort.SearchFloat64s(fr.Classes, v))
		}
	} else {
		dt.k = 1
		dt.y = append([]float64(nil), y...)
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

	fr.Trees = make([]Tree, opt.Trees)
	inbag := make([][]uint16, opt.Trees)
	imps := make([][]float64, opt.Trees)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(opt.Workers, opt.Trees); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := newBuilder(dt, opt)
			for {
				t := int(next.Add(1) - 1)
				if t >= opt.Trees {
					return
				}
				fr.Trees[t], inbag[t], imps[t] = b.grow(t)
			}
		}()
	}
	wg.Wait()

	fr.Importances = make([]float64, d)
	total := 0.0
	for _, im := range imps {
		for f, v := range im {
			fr.Importances[f] += v
			total += v
		}
	}
	if total > 0 {
		for f := range fr.Importances {
			fr.Importances[f] /= total
		}
	}
	fr.oob(X, y, inbag)
	return fr, nil
}

func distinct(y []float64) []float64 {
	s := append([]float64(nil), y...)
	sort.Float64s(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// oob computes the out-of-bag predictions and score, rows in parallel,
// trees in order within a row.
func (f *Forest) oob(X [][]float64, y []float64, inbag [][]uint16) {
	n, k := len(X), f.K()
	f.oobPred = make([]float64, n)
	var wg sync.WaitGroup
	workers := min(f.Options.Workers, n)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]float64, k)
			for i := w; i < n; i += workers {
				clear(p)
				cnt := 0
				for ti := range f.Trees {
					if inbag[ti][i] != 0 {
						continue
					}
					t := &f.Trees[ti]
					v := t.Value[t.leaf(X[i])*k:]
					for c := range p {
						p[c] += v[c]
					}
					cnt++
				}
				if cnt == 0 {
					f.oobPred[i] = math.NaN()
					continue
				}
				for c := range p {
					p[c] /= float64(cnt)
				}
				f.oobPred[i] = f.decide(p)
			}
		}()
	}
	wg.Wait()
	rows, ok := 0, 0
	var mu, sse, sst float64
	for i, p := range f.oobPred {
		if math.IsNaN(p) {
			continue
		}
		rows++
		mu += y[i]
		if p == y[i] {
			ok++
		}
	}
	f.OOB = OOBScore{Rows: rows}
	if rows == 0 {
		return
	}
	if f.Task == Classification {
		a := float64(ok) / float64(rows)
		f.OOB.Accuracy = &a
		return
	}
	mu /= float64(rows)
	for i, p := range f.oobPred {
		if math.IsNaN(p) {
			continue
		}
		sse += (p - y[i]) * (p - y[i])
		sst += (y[i] - mu) * (y[i] - mu)
	}
	rmse := math.Sqrt(sse / float64(rows))
	f.OOB.RMSE = &rmse
	if sst > 0 {
		r2 := 1 - sse/sst
		f.OOB.R2 = &r2
	}
}
