package forest

import (
	"fmt"
	"testing"
)

// TestDeclaredGridsPinned pins every point of the declared grids TuneGrid
// and CVGrid, in order, for the feature counts of the published benchmarks
// (d = 13) and for small d where the mtry choices collide and are dropped.
// The grids are part of published figures: a change here changes what
// those figures mean.
func TestDeclaredGridsPinned(t *testing.T) {
	tune := func(mtry ...int) []Candidate {
		var g []Candidate
		for _, m := range mtry {
			for _, l := range []int{1, 2, 4} {
				g = append(g,
					Candidate{MaxFeatures: m, MinLeaf: l, Bootstrap: true, SampleFraction: 1},
					Candidate{MaxFeatures: m, MinLeaf: l, Bootstrap: false, SampleFraction: 0.632})
			}
		}
		return g
	}
	boost := []CVCandidate{
		{Method: MethodBoost, LearningRate: 0.05, MaxDepth: 3, MinLeaf: 3, SampleFraction: 0.8},
		{Method: MethodBoost, LearningRate: 0.05, MaxDepth: 5, MinLeaf: 3, SampleFraction: 0.8},
		{Method: MethodBoost, LearningRate: 0.1, MaxDepth: 3, MinLeaf: 3, SampleFraction: 0.8},
		{Method: MethodBoost, LearningRate: 0.1, MaxDepth: 5, MinLeaf: 3, SampleFraction: 0.8},
	}
	cv := func(mtry ...int) []CVCandidate {
		var g []CVCandidate
		for _, m := range mtry {
			for _, l := range []int{1, 2} {
				g = append(g,
					CVCandidate{Method: MethodForest, MaxFeatures: m, MinLeaf: l, Bootstrap: true, SampleFraction: 1},
					CVCandidate{Method: MethodForest, MaxFeatures: m, MinLeaf: l, Bootstrap: false, SampleFraction: 0.632})
			}
		}
		return append(g, boost...)
	}
	for _, c := range []struct {
		d             int
		tuneMtry, cvM []int
	}{
		{1, []int{1}, []int{1}},
		{2, []int{1}, []int{1}},
		{3, []int{1, 2}, []int{1}},
		{4, []int{2, 1}, []int{2, 1}},
		{6, []int{2, 3}, []int{2}},
		{9, []int{3, 5}, []int{3}},
		{10, []int{3, 5}, []int{3}},
		{13, []int{3, 4, 7}, []int{3, 4}},
		{16, []int{4, 5, 8}, []int{4, 5}},
	} {
		if got, want := fmt.Sprintf("%+v", TuneGrid(c.d)), fmt.Sprintf("%+v", tune(c.tuneMtry...)); got != want {
			t.Errorf("TuneGrid(%d) =\n%s\nwant\n%s", c.d, got, want)
		}
		if got, want := fmt.Sprintf("%+v", CVGrid(c.d)), fmt.Sprintf("%+v", cv(c.cvM...)); got != want {
			t.Errorf("CVGrid(%d) =\n%s\nwant\n%s", c.d, got, want)
		}
	}
	if n := len(TuneGrid(13)); n != 18 {
		t.Errorf("TuneGrid(13): %d points, want 18", n)
	}
	if n := len(CVGrid(13)); n != 12 {
		t.Errorf("CVGrid(13): %d points, want 12", n)
	}
	// CVGrid2 at the published config's d = 13: CVGrid's 8 forests, extra
	// trees (mtry 3, 13 × min leaf 1, 3), ordinal forests (mtry 3, 4 × min
	// leaf 1, 5), then CVGrid's 4 boosted settings.
	var g2 []CVCandidate
	for _, c := range cv(3, 4) {
		if c.Method == MethodForest {
			g2 = append(g2, c)
		}
	}
	for _, m := range []int{3, 13} {
		for _, l := range []int{1, 3} {
			g2 = append(g2, CVCandidate{Method: MethodForest, RandomSplits: true, MaxFeatures: m, MinLeaf: l, Bootstrap: false, SampleFraction: 1})
		}
	}
	for _, m := range []int{3, 4} {
		for _, l := range []int{1, 5} {
			g2 = append(g2, CVCandidate{Method: MethodOrdinal, MaxFeatures: m, MinLeaf: l, Bootstrap: true, SampleFraction: 1})
		}
	}
	g2 = append(g2, boost...)
	if got, want := fmt.Sprintf("%+v", CVGrid2(13)), fmt.Sprintf("%+v", g2); got != want {
		t.Errorf("CVGrid2(13) =\n%s\nwant\n%s", got, want)
	}
	if n := len(CVGrid2(13)); n != 20 {
		t.Errorf("CVGrid2(13): %d points, want 20", n)
	}
}
