package dataset

import (
	"math"
	"sort"
)

// Report is report.json: what the build saw and did. Like the manifest it
// holds no clock times, so it is part of the hashed, reproducible dataset.
type Report struct {
	Kind    string       `json:"kind"`
	Nodes   []NodeReport `json:"nodes"`
	Runs    []RunReport  `json:"runs"`
	Lags    []LagReport  `json:"lags"`
	Dropped []RunReason  `json:"droppedRuns"`
	Windows struct {
		Train int `json:"train"`
		Val   int `json:"val"`
		Test  int `json:"test"`
	} `json:"windows"`
	LineageVerified bool `json:"lineageVerified"`
}

// NodeReport summarises one node. Summary is over the train runs' aligned
// values (every train run, not the first); the cleaning figures are summed
// over every used run.
type NodeReport struct {
	NodeID            string      `json:"nodeId"`
	Role              string      `json:"role"`
	ModelUnit         string      `json:"modelUnit"`
	Summary           Summary     `json:"summary"`
	Cleaning          CleanCounts `json:"cleaning"`
	Align             AlignCounts `json:"align"`
	CleanedRatio      float64     `json:"cleanedRatio"`      // (state+range+hampel)/raw
	InterpolatedRatio float64     `json:"interpolatedRatio"` // interpolated/buckets
	MissingRatio      float64     `json:"missingRatio"`      // missing/buckets over the used runs' common grids
}

// Summary is a distribution summary of finite values.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	P05   float64 `json:"p05"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
}

// RunReport is one used run: its grid, cleaning per node and target profile.
type RunReport struct {
	RunID        string                 `json:"runId"`
	Split        string                 `json:"split"`
	Steps        int                    `json:"steps"`
	MissingRatio float64                `json:"missingRatio"`
	Cleaning     map[string]CleanCounts `json:"cleaning"`
	Align        map[string]AlignCounts `json:"align"`
	Targets      []TargetProfile        `json:"targets"`
}

// TargetProfile is a target's per-run summary and a profile of at most
// ProfilePoints bucket means for plotting.
type TargetProfile struct {
	NodeID    string    `json:"nodeId"`
	Summary   Summary   `json:"summary"`
	ProfileMs []int64   `json:"profileMs"`
	Profile   []float64 `json:"profile"`
}

// ProfilePoints caps a run profile's length.
const ProfilePoints = 100

// LagReport is the lag cross-correlation of a control (or disturbance) with a
// target over all train runs: corr(input(t), target(t+lag)) for lag in
// [-MaxLag, MaxLag] beats, each run's mean removed, pairs pooled over runs.
// BestLag maximises |corr|; a positive lag means the target follows.
type LagReport struct {
	Input    string    `json:"input"`
	Target   string    `json:"target"`
	MaxLag   int       `json:"maxLag"`
	BestLag  int       `json:"bestLag"`
	BestCorr float64   `json:"bestCorr"`
	Corr     []float64 `json:"corr"` // index i ↔ lag i-MaxLag; 0 where undefined
}

// summarize computes a Summary of the finite values (population std).
func summarize(vals []float64) Summary {
	xs := make([]float64, 0, len(vals))
	for _, v := range vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	var s Summary
	s.Count = len(xs)
	if s.Count == 0 {
		return s
	}
	mean, m2 := 0.0, 0.0
	for i, v := range xs { // Welford
		d := v - mean
		mean += d / float64(i+1)
		m2 += d * (v - mean)
	}
	s.Mean, s.Std = mean, math.Sqrt(m2/float64(len(xs)))
	sort.Float64s(xs)
	s.Min, s.Max = xs[0], xs[len(xs)-1]
	s.P05, s.P50, s.P95 = quantile(xs, 0.05), quantile(xs, 0.5), quantile(xs, 0.95)
	return s
}

// quantile of sorted xs with linear interpolation between order statistics
// (numpy's default "linear" method).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(xs)-1)
	return xs[lo] + (pos-float64(lo))*(xs[hi]-xs[lo])
}

// lagSums are one run's partial sums for the lag cross-correlation of one
// (input, target) pair: for each lag, Σab, Σa², Σb² and the pair count over
// mean-removed, finite pairs (a = input(t), b = target(t+lag)). They are
// computed per run while the build is still reading later runs, and the
// train runs' sums are added once the split is known.
type lagSums struct {
	sxy, sxx, syy []float64
	n             []int
}

func runLagSums(g *runGrid, nAll, ci, co, maxLag int) lagSums {
	L := 2*maxLag + 1
	s := lagSums{sxy: make([]float64, L), sxx: make([]float64, L), syy: make([]float64, L), n: make([]int, L)}
	// Contiguous, mean-removed copies; a missing value becomes 0 with mask 0
	// so the inner loops have no branches.
	a, ma, fullA := column(g, nAll, ci)
	b, mb, fullB := column(g, nAll, co)
	T := g.steps
	for li := 0; li < L; li++ {
		lag := li - maxLag
		lo, hi := max(0, -lag), min(T, T-lag)
		if hi <= lo {
			continue
		}
		as, bs := a[lo:hi], b[lo+lag:hi+lag]
		var sxy, sxx, syy float64
		n := 0
		if fullA && fullB {
			for t := range as {
				x, y := as[t], bs[t]
				sxy += x * y
				sxx += x * x
				syy += y * y
			}
			n = len(as)
		} else {
			mas, mbs := ma[lo:hi], mb[lo+lag:hi+lag]
			cnt := 0.0
			for t := range as {
				x, y, w := as[t], bs[t], mas[t]*mbs[t]
				sxy += x * y * w
				sxx += x * x * w
				syy += y * y * w
				cnt += w
			}
			n = int(cnt)
		}
		s.sxy[li], s.sxx[li], s.syy[li], s.n[li] = sxy, sxx, syy, n
	}
	return s
}

// column copies grid column j, mean-removed, NaN replaced by 0; mask is 1
// where the value exists; full reports that none is missing.
func column(g *runGrid, nAll, j int) (vals, mask []float64, full bool) {
	m := colMean(g, nAll, j)
	vals, mask, full = make([]float64, g.steps), make([]float64, g.steps), true
	for t := range vals {
		v := float64(g.vals[t*nAll+j])
		if v != v {
			full = false
			continue
		}
		vals[t], mask[t] = v-m, 1
	}
	return vals, mask, full
}

// lagCorr pools the runs' sums: corr(lag) = Σab / sqrt(Σa²·Σb²).
func lagCorr(parts []lagSums, maxLag int) (corr []float64, best int, bestCorr float64) {
	corr = make([]float64, 2*maxLag+1)
	bestAbs := -1.0
	for li := range corr {
		var sxy, sxx, syy float64
		n := 0
		for _, p := range parts {
			sxy += p.sxy[li]
			sxx += p.sxx[li]
			syy += p.syy[li]
			n += p.n[li]
		}
		if n < 3 || sxx == 0 || syy == 0 {
			continue
		}
		c := sxy / math.Sqrt(sxx*syy)
		corr[li] = c
		if math.Abs(c) > bestAbs+1e-12 {
			bestAbs, best, bestCorr = math.Abs(c), li-maxLag, c
		}
	}
	return corr, best, bestCorr
}

// lagPairs lists the (input column, target column) pairs the report
// correlates: every control and disturbance with every target.
func lagPairs(nodes []node) [][2]int {
	var out [][2]int
	for j, n := range nodes {
		if n.Role != RoleControl && n.Role != RoleDisturbance {
			continue
		}
		for k, m := range nodes {
			if m.Role == RoleTarget {
				out = append(out, [2]int{j, k})
			}
		}
	}
	return out
}

func colMean(g *runGrid, nAll, j int) float64 {
	s, n := 0.0, 0
	for t := 0; t < g.steps; t++ {
		if v := float64(g.vals[t*nAll+j]); !math.IsNaN(v) {
			s += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

// profile reduces a series to at most ProfilePoints bucket means.
func profile(ts []int64, vals []float64) ([]int64, []float64) {
	n := len(vals)
	if n == 0 {
		return []int64{}, []float64{}
	}
	buckets := min(ProfilePoints, n)
	outT := make([]int64, 0, buckets)
	outV := make([]float64, 0, buckets)
	for b := 0; b < buckets; b++ {
		lo, hi := b*n/buckets, (b+1)*n/buckets
		s, c := 0.0, 0
		for i := lo; i < hi; i++ {
			if !math.IsNaN(vals[i]) {
				s += vals[i]
				c++
			}
		}
		if c == 0 {
			continue
		}
		outT = append(outT, ts[lo])
		outV = append(outV, s/float64(c))
	}
	return outT, outV
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
