package forest

import (
	"errors"
	"math"
)

// Candidate is one point of the tuning grid and its out-of-bag score.
type Candidate struct {
	MaxFeatures    int     `json:"max_features"`
	MinLeaf        int     `json:"min_leaf"`
	Bootstrap      bool    `json:"bootstrap"`
	SampleFraction float64 `json:"sample_fraction"`
	// Score is the out-of-bag accuracy (classification) or −MSE
	// (regression) on the training rows; higher is better.
	Score float64 `json:"score"`
}

// TuneGrid is the declared grid of [Tune] for d features, in its order
// (ties go to the earlier point): max features (mtry) ⌊√d⌋, ⌊d/3⌋, ⌈d/2⌉
// (each at least 1, duplicates dropped) × min leaf 1, 2, 4 × sampling
// (bootstrap of n rows; subsample of 0.632·n rows without replacement).
// It was fixed before any outer fold of a benchmark was scored; do not
// widen it by looking at test-fold results.
func TuneGrid(d int) []Candidate {
	var g []Candidate
	for _, m := range mtryChoices(d, int(math.Sqrt(float64(d))), d/3, (d+1)/2) {
		for _, l := range []int{1, 2, 4} {
			g = append(g, Candidate{MaxFeatures: m, MinLeaf: l, Bootstrap: true, SampleFraction: 1})
			g = append(g, Candidate{MaxFeatures: m, MinLeaf: l, Bootstrap: false, SampleFraction: 0.632})
		}
	}
	return g
}

// mtryChoices is the max-features (mtry) values of a declared grid for d
// features: each of ms clamped to [1, d], in the order given, repeats
// dropped. The grids declare which ms they use.
func mtryChoices(d int, ms ...int) []int {
	var out []int
	for _, m := range ms {
		m = min(max(1, m), d)
		dup := false
		for _, x := range out {
			dup = dup || x == m
		}
		if !dup {
			out = append(out, m)
		}
	}
	return out
}

// Tune picks the point of TuneGrid(d) whose forest (opt with that point's
// knobs, same trees, criterion and seed) has the best out-of-bag score on
// X, y, then returns that forest (grown on all of X, y: the out-of-bag
// forest is the final one) and every point's score. It reads only X and
// y: in a cross-validation the caller passes the training folds, so the
// held-out fold cannot influence the choice.
func Tune(X [][]float64, y []float64, opt Options) (*Forest, []Candidate, error) {
	if len(X) == 0 {
		return nil, nil, errors.New("forest: no rows")
	}
	grid := TuneGrid(len(X[0]))
	var best *Forest
	bi := -1
	for i := range grid {
		o := opt
		o.MaxFeatures, o.MinLeaf, o.Bootstrap, o.SampleFraction = grid[i].MaxFeatures, grid[i].MinLeaf, grid[i].Bootstrap, grid[i].SampleFraction
		f, err := Fit(X, y, o)
		if err != nil {
			return nil, nil, err
		}
		grid[i].Score = oobSelectScore(f, y)
		if bi < 0 || grid[i].Score > grid[bi].Score {
			bi, best = i, f
		}
	}
	if math.IsInf(grid[bi].Score, -1) {
		return nil, grid, errors.New("forest: tuning: no out-of-bag rows")
	}
	return best, grid, nil
}

// oobSelectScore is the out-of-bag accuracy of a classifier or −MSE of a
// regression forest; −Inf when no row is out of bag.
func oobSelectScore(f *Forest, y []float64) float64 {
	ok, n, sse := 0, 0, 0.0
	for i, p := range f.oobPred {
		if math.IsNaN(p) {
			continue
		}
		n++
		if p == y[i] {
			ok++
		}
		sse += (p - y[i]) * (p - y[i])
	}
	if n == 0 {
		return math.Inf(-1)
	}
	if f.Task == Classification {
		return float64(ok) / float64(n)
	}
	return -sse / float64(n)
}
