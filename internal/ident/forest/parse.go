package forest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Parse reads a forest written by json.Marshal(*Forest) and validates it:
// version, task, classes, and for every tree equal-length node arrays,
// features in range, finite thresholds and values, and children that come
// after their parent (so prediction always reaches a leaf). The parsed
// forest has no out-of-bag predictions.
func Parse(b []byte) (*Forest, error) {
	var f Forest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("forest: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Validate checks a forest's structure (see Parse).
func (f *Forest) Validate() error {
	if f.Version != Version {
		return fmt.Errorf("forest: version %d, want %d", f.Version, Version)
	}
	if f.Task != Classification && f.Task != Regression {
		return fmt.Errorf("forest: task %q", f.Task)
	}
	switch f.Method {
	case MethodForest:
	case MethodBoost:
		if f.Task != Regression || math.IsNaN(f.Init) || math.IsInf(f.Init, 0) || !(f.LearningRate > 0 && f.LearningRate <= 1) {
			return fmt.Errorf("forest: a boosted model must be a regression with a finite init and a learning rate in (0, 1]")
		}
	case MethodBlend:
		if err := f.validateCuts(); err != nil {
			return err
		}
		return f.validateBlend()
	case MethodOrdinal:
		return f.validateOrdinal()
	default:
		return fmt.Errorf("forest: method %q", f.Method)
	}
	if len(f.Parts) != 0 || len(f.Weights) != 0 {
		return fmt.Errorf("forest: parts and weights belong to a blend")
	}
	if err := f.validateCuts(); err != nil {
		return err
	}
	if f.NFeatures < 1 {
		return fmt.Errorf("forest: %d features", f.NFeatures)
	}
	if f.Task == Classification {
		if len(f.Classes) == 0 {
			return fmt.Errorf("forest: a classifier without classes")
		}
		for i, c := range f.Classes {
			if math.IsNaN(c) || math.IsInf(c, 0) || (i > 0 && c <= f.Classes[i-1]) {
				return fmt.Errorf("forest: classes must be finite and increasing")
			}
		}
	} else if len(f.Classes) != 0 {
		return fmt.Errorf("forest: a regression forest with classes")
	}
	if len(f.Trees) == 0 {
		return fmt.Errorf("forest: no trees")
	}
	if f.Importances != nil && len(f.Importances) != f.NFeatures {
		return fmt.Errorf("forest: %d importances for %d features", len(f.Importances), f.NFeatures)
	}
	k := f.K()
	for ti := range f.Trees {
		t := &f.Trees[ti]
		n := len(t.Feature)
		if n == 0 || len(t.Threshold) != n || len(t.Left) != n || len(t.Right) != n || len(t.Value) != n*k {
			return fmt.Errorf("forest: tree %d: node arrays of unequal lengths", ti)
		}
		for j := 0; j < n; j++ {
			for _, v := range t.Value[j*k : (j+1)*k] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("forest: tree %d node %d: non-finite value", ti, j)
				}
			}
			if t.Feature[j] < 0 {
				continue
			}
			if int(t.Feature[j]) >= f.NFeatures {
				return fmt.Errorf("forest: tree %d node %d: feature %d out of range", ti, j, t.Feature[j])
			}
			if math.IsNaN(t.Threshold[j]) {
				return fmt.Errorf("forest: tree %d node %d: NaN threshold", ti, j)
			}
			if l, r := int(t.Left[j]), int(t.Right[j]); l <= j || r <= j || l >= n || r >= n {
				return fmt.Errorf("forest: tree %d node %d: children %d, %d must follow it within %d nodes", ti, j, l, r, n)
			}
		}
	}
	return nil
}

// validateBlend checks a blend: a regression of no trees of its own and
// 2..8 parts, each a valid forest or boosted model (no nested blends) with
// the blend's features, weights finite, ≥ 0 and summing to 1.
func (f *Forest) validateBlend() error {
	if f.Task != Regression || f.NFeatures < 1 || len(f.Trees) != 0 || len(f.Classes) != 0 {
		return fmt.Errorf("forest: a blend must be a regression over at least one feature with no trees or classes of its own")
	}
	if len(f.Parts) < 2 || len(f.Parts) > 8 || len(f.Weights) != len(f.Parts) {
		return fmt.Errorf("forest: a blend needs 2..8 parts and one weight per part (%d parts, %d weights)", len(f.Parts), len(f.Weights))
	}
	if f.Importances != nil && len(f.Importances) != f.NFeatures {
		return fmt.Errorf("forest: %d importances for %d features", len(f.Importances), f.NFeatures)
	}
	sum := 0.0
	for i := range f.Parts {
		p := &f.Parts[i]
		w := f.Weights[i]
		if math.IsNaN(w) || w < 0 || w > 1 {
			return fmt.Errorf("forest: blend weight %d is %v, want 0..1", i, w)
		}
		sum += w
		if p.Method == MethodBlend || p.Task != Regression || p.NFeatures != f.NFeatures || len(p.Cuts) != 0 {
			return fmt.Errorf("forest: blend part %d must be a regression forest or boosted model over %d features without cut points", i, f.NFeatures)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("forest: blend part %d: %w", i, err)
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("forest: blend weights sum to %v, want 1", sum)
	}
	return nil
}

// validateCuts checks the cut points: none, or a regression with at most
// 1000 finite cut points interleaved with one more finite label
// (CutLabels[j] < Cuts[j] < CutLabels[j+1]).
func (f *Forest) validateCuts() error {
	if len(f.Cuts) == 0 && len(f.CutLabels) == 0 {
		return nil
	}
	if f.Task != Regression || len(f.Cuts) > 1000 || len(f.CutLabels) != len(f.Cuts)+1 {
		return fmt.Errorf("forest: cut points need a regression and one label more than cuts (%d cuts, %d labels)", len(f.Cuts), len(f.CutLabels))
	}
	for j, c := range f.Cuts {
		lo, hi := f.CutLabels[j], f.CutLabels[j+1]
		if math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo < c && c < hi) {
			return fmt.Errorf("forest: cut %d (%v) must lie strictly between finite labels %v and %v", j, c, lo, hi)
		}
	}
	return nil
}
