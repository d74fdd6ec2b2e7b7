package forest

import (
	"errors"
	"fmt"
	"math"
)

// MethodOrdinal is an ordinal forest: K−1 regression (probability) forests,
// part k estimating P(y > Classes[k]) from the 0/1 target 1{y > Classes[k]};
// the class probabilities they imply (P(y = Classes[0]) = 1 − P(y > Classes[0]),
// P(y = Classes[k]) = P(y > Classes[k−1]) − P(y > Classes[k]),
// P(y = Classes[K−1]) = P(y > Classes[K−2])) are argmaxed.
const MethodOrdinal = "ordinal"

// Ordinal is the task name of an ordinal forest (FitOrdinal): ordered class
// labels predicted by cumulative binary forests.
const Ordinal = "ordinal"

// ExtraOptions are extremely randomised trees (Geurts, Ernst and Wehenkel
// 2006) for task and d features: every tree grown on all rows (no
// bootstrap, so no out-of-bag estimate: estimate by cross-validation), one
// random threshold per tried feature (RandomSplits), mtry ⌊√d⌋ for
// classification and d for regression (the paper's defaults), 500 trees,
// min leaf 1.
func ExtraOptions(task string, d int) Options {
	o := DefaultOptions(task)
	o.RandomSplits, o.Bootstrap, o.SampleFraction = true, false, 1
	if task == Regression {
		o.MaxFeatures = max(1, d)
	} else {
		o.MaxFeatures = max(1, int(math.Sqrt(float64(d))))
	}
	return o
}

// FitOrdinal fits an ordinal forest to ordered class labels y (2..100
// distinct finite values): for each of the K−1 lower labels c_k a
// regression forest with opt's knobs (opt.Task is ignored) on the target
// 1{y > c_k}, part k seeded opt.Seed + k. The result has Method
// MethodOrdinal, Task Classification and Classes the labels; Proba gives
// the implied class probabilities (a non-monotone estimate can make one
// negative; the argmax is still taken), Predict their argmax (the lower
// label on a tie). Its out-of-bag prediction of a row is the argmax of the
// parts' out-of-bag estimates (when every part has one).
func FitOrdinal(X [][]float64, y []float64, opt Options) (*Forest, error) {
	if len(X) == 0 || len(y) != len(X) {
		return nil, errors.New("forest: ordinal forest needs rows and as many targets")
	}
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("forest: row %d: non-finite target", i)
		}
	}
	labels := distinct(y)
	if len(labels) < 2 || len(labels) > 100 {
		return nil, fmt.Errorf("forest: an ordinal forest needs 2..100 distinct labels, got %d", len(labels))
	}
	opt.Task = Regression
	d := len(X[0])
	out := &Forest{Version: Version, Task: Classification, NFeatures: d, Method: MethodOrdinal, Classes: labels,
		Trees: []Tree{}, Importances: make([]float64, d)}
	z := make([]float64, len(y))
	for k := 0; k < len(labels)-1; k++ {
		for i, v := range y {
			z[i] = 0
			if v > labels[k] {
				z[i] = 1
			}
		}
		o := opt
		o.Seed = opt.Seed + uint64(k)
		f, err := Fit(X, z, o)
		if err != nil {
			return nil, err
		}
		out.Parts = append(out.Parts, *f)
		for j, v := range f.Importances {
			out.Importances[j] += v / float64(len(labels)-1)
		}
	}
	out.Options = out.Parts[0].Options
	out.Options.Task = Ordinal
	out.ordinalOOB(y)
	return out, nil
}

// ordinalProba writes the class probabilities implied by the cumulative
// estimates q[k] = P(y > Classes[k]) (each clipped to [0, 1]) to out.
func ordinalProba(q, out []float64) {
	k := len(q) + 1
	prev := 1.0
	for j := 0; j < k; j++ {
		next := 0.0
		if j < len(q) {
			next = min(1, max(0, q[j]))
		}
		out[j] = prev - next
		prev = next
	}
}

// ordinalOOB combines the parts' out-of-bag estimates.
func (f *Forest) ordinalOOB(y []float64) {
	n := len(y)
	f.oobPred = make([]float64, n)
	q := make([]float64, len(f.Parts))
	p := make([]float64, len(f.Classes))
	rows, ok := 0, 0
	for i := 0; i < n; i++ {
		f.oobPred[i] = math.NaN()
		have := true
		for k := range f.Parts {
			q[k] = f.Parts[k].oobPred[i]
			have = have && !math.IsNaN(q[k])
		}
		if !have {
			continue
		}
		ordinalProba(q, p)
		f.oobPred[i] = f.decide(p)
		rows++
		if f.oobPred[i] == y[i] {
			ok++
		}
	}
	f.OOB = OOBScore{Rows: rows}
	if rows > 0 {
		a := float64(ok) / float64(rows)
		f.OOB.Accuracy = &a
	}
}

// validateOrdinal checks an ordinal forest: a classifier of 2..100
// increasing finite classes with no trees, weights or cut points of its
// own and one part per class but the last, each a valid regression forest
// (not boosted, blended or ordinal) over its features.
func (f *Forest) validateOrdinal() error {
	if f.Task != Classification || f.NFeatures < 1 || len(f.Trees) != 0 || len(f.Weights) != 0 || len(f.Cuts) != 0 || len(f.CutLabels) != 0 {
		return fmt.Errorf("forest: an ordinal forest must be a classifier over at least one feature with no trees, weights or cut points of its own")
	}
	if len(f.Classes) < 2 || len(f.Classes) > 100 || len(f.Parts) != len(f.Classes)-1 {
		return fmt.Errorf("forest: an ordinal forest needs 2..100 classes and one part fewer (%d classes, %d parts)", len(f.Classes), len(f.Parts))
	}
	for i, c := range f.Classes {
		if math.IsNaN(c) || math.IsInf(c, 0) || (i > 0 && c <= f.Classes[i-1]) {
			return fmt.Errorf("forest: classes must be finite and increasing")
		}
	}
	if f.Importances != nil && len(f.Importances) != f.NFeatures {
		return fmt.Errorf("forest: %d importances for %d features", len(f.Importances), f.NFeatures)
	}
	for i := range f.Parts {
		p := &f.Parts[i]
		if p.Method != MethodForest || p.Task != Regression || p.NFeatures != f.NFeatures {
			return fmt.Errorf("forest: ordinal part %d must be a regression forest over %d features", i, f.NFeatures)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("forest: ordinal part %d: %w", i, err)
		}
	}
	return nil
}
