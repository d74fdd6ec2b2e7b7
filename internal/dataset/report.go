package dataset

import (
	"math"
	"slices"
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
	negZero := false
	for _, v := range vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
			negZero = negZero || (v == 0 && math.Signbit(v))
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
	if negZero {
		// -0 and +0 tie: which one a sort puts first is the sort's
		// business, and the summary has always taken the sorted order's.
		sort.Float64s(xs)
		s.Min, s.Max = xs[0], xs[len(xs)-1]
		s.P05, s.P50, s.P95 = quantile(xs, 0.05), quantile(xs, 0.5), quantile(xs, 0.95)
		return s
	}
	// Without -0, equal values are the same bits, so the order statistics
	// the summary reads (extremes and the two neighbours of each quantile
	// position) are the sorted order's, found by selection instead of a
	// sort.
	s.Min, s.Max = xs[0], xs[0]
	for _, v := range xs[1:] {
		s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	}
	var ranks [6]int
	qs := [3]float64{0.05, 0.5, 0.95}
	for i, q := range qs {
		ranks[2*i], ranks[2*i+1] = quantileRanks(len(xs), q)
	}
	var at [6]float64
	orderStats(xs, ranks[:], at[:])
	var out [3]float64
	for i, q := range qs {
		out[i] = quantileOf(len(xs), q, at[2*i], at[2*i+1])
	}
	s.P05, s.P50, s.P95 = out[0], out[1], out[2]
	return s
}

// orderStats sets at[i] to the ranks[i]-th smallest value of a (NaN-free),
// reordering a: the distinct ranks in increasing order, each selected in
// the part above the previous one.
func orderStats(a []float64, ranks []int, at []float64) {
	u := slices.Clone(ranks)
	slices.Sort(u)
	u = slices.Compact(u)
	val := make([]float64, len(u))
	start := 0
	for i, k := range u {
		if k == start { // the smallest of the rest: one scan
			m := start
			for j := start + 1; j < len(a); j++ {
				if a[j] < a[m] {
					m = j
				}
			}
			a[start], a[m] = a[m], a[start]
			val[i] = a[start]
		} else {
			val[i] = cleanSelect(a[start:], k-start)
		}
		start = k + 1
	}
	for i, k := range ranks {
		at[i] = val[slices.Index(u, k)]
	}
}

// quantileRanks are the order statistics quantile reads for n values.
func quantileRanks(n int, q float64) (lo, hi int) {
	pos := q * float64(n-1)
	lo = int(math.Floor(pos))
	return lo, min(lo+1, n-1)
}

// quantileOf is quantile given its two order statistics xlo and xhi.
func quantileOf(n int, q, xlo, xhi float64) float64 {
	pos := q * float64(n-1)
	lo := math.Floor(pos)
	return xlo + (pos-lo)*(xhi-xlo)
}

// quantile of sorted xs with linear interpolation between order statistics
// (numpy's default "linear" method).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	lo, hi := quantileRanks(len(xs), q)
	return quantileOf(len(xs), q, xs[lo], xs[hi])
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

// lagCols caches one run's mean-removed columns, their masks, squares and
// missing indices, and the sums of squares that do not depend on the
// pair, for the lag cross-correlations of all its (input, target) pairs:
// each column is copied once; Σa² of an input (per lag) is formed once and
// serves every pair whose target is complete, Σb² of a target every pair
// whose input is complete; only a pair with a gap on the other side forms
// its own masked sums, and its pair counts come from the missing indices.
// Every sum is still formed over the same terms in the same order as the
// plain per-pair loop, so the report's figures are bit for bit the same
// (TestLagSumsBitIdentical).
type lagCols struct {
	g           *runGrid
	nAll, lag   int
	cols        map[int]*lagCol
	sxxIn, syyT map[int][]float64
}

type lagCol struct {
	v, m []float64
	sq   []float64 // v[t]·v[t], for pairs with gaps (lagCol.squares)
	miss []int     // indices of missing values (lagCol.missing)
	full bool
}

func newLagCols(g *runGrid, nAll, maxLag int) *lagCols {
	return &lagCols{g: g, nAll: nAll, lag: maxLag, cols: map[int]*lagCol{}, sxxIn: map[int][]float64{}, syyT: map[int][]float64{}}
}

func (lc *lagCols) col(j int) *lagCol {
	c := lc.cols[j]
	if c == nil {
		c = &lagCol{}
		c.v, c.m, c.full = column(lc.g, lc.nAll, j)
		lc.cols[j] = c
	}
	return c
}

// lagRange is the range of a's indices paired at lag li-maxLag.
func lagRange(T, maxLag, li int) (lo, hi, lag int) {
	lag = li - maxLag
	return max(0, -lag), min(T, T-lag), lag
}

// squares returns, for each lag, the sum of squares of a complete
// column over the indices it takes part in at that lag: as the input
// (a[lo:hi]) or as the target (b[lo+lag:hi+lag]).
func (lc *lagCols) squares(j int, target bool) []float64 {
	cache := lc.sxxIn
	if target {
		cache = lc.syyT
	}
	if s, ok := cache[j]; ok {
		return s
	}
	x := lc.col(j).v
	T, L := lc.g.steps, 2*lc.lag+1
	s := make([]float64, L)
	// The index range [p, q) of x at lag li.
	rng := func(li int) (p, q int) {
		lo, hi, lag := lagRange(T, lc.lag, li)
		if hi <= lo {
			return 0, 0
		}
		if target {
			return lo + lag, hi + lag
		}
		return lo, hi
	}
	li := 0
	// Four lags at a time, as in sums: each sum over its own range in
	// increasing index order, the four ranges' common part in one loop.
	for ; li+4 <= L; li += 4 {
		var p, q [4]int
		cp, cq := 0, T
		for k := range 4 {
			p[k], q[k] = rng(li + k)
			cp, cq = max(cp, p[k]), min(cq, q[k])
		}
		if cq <= cp {
			break
		}
		var acc [4]float64
		for k := range 4 {
			for _, v := range x[p[k]:cp] {
				acc[k] += v * v
			}
		}
		s0, s1, s2, s3 := acc[0], acc[1], acc[2], acc[3]
		for _, v := range x[cp:cq] {
			sq := v * v
			s0 += sq
			s1 += sq
			s2 += sq
			s3 += sq
		}
		acc = [4]float64{s0, s1, s2, s3}
		for k := range 4 {
			for _, v := range x[cq:max(cq, q[k])] {
				acc[k] += v * v
			}
			s[li+k] = acc[k]
		}
	}
	for ; li < L; li++ {
		p, q := rng(li)
		var sq float64
		for _, v := range x[p:q] {
			sq += v * v
		}
		s[li] = sq
	}
	cache[j] = s
	return s
}

func (lc *lagCols) sums(ci, co int) lagSums {
	maxLag := lc.lag
	L := 2*maxLag + 1
	s := lagSums{sxy: make([]float64, L), sxx: make([]float64, L), syy: make([]float64, L), n: make([]int, L)}
	A, B := lc.col(ci), lc.col(co)
	T := lc.g.steps
	lagDots(A.v, B.v, T, maxLag, s.sxy)
	// Σa²·w and Σb²·w (w = m_a[i]·m_b[i+lag]). Where b is complete, w is
	// m_a[i], and a[i]·a[i] is +0 wherever m_a[i] is 0, so Σa²·w is the
	// column's own Σa² (squares, shared by every pair of a): the same
	// terms in the same order. Likewise Σb²·w where a is complete. Where
	// the other column has gaps, Σ(a[i]·a[i])·m_b[i+lag] is the same
	// lagged dot product as Σab, term for term the plain loop's
	// (a[i]·a[i])·w, since a[i]·a[i] = +0 where m_a[i] is 0. Σab needs no
	// mask: a column is 0 where its mask is, so a[i]·b[i+lag] is the plain
	// loop's (a[i]·b[i+lag])·w term for term, bit for bit (w = 1: the same
	// product; w = +0: a ±0 or NaN product, unchanged by ·(+0)).
	if B.full {
		copy(s.sxx, lc.squares(ci, false))
	} else {
		lagDots(A.squares(), B.m, T, maxLag, s.sxx)
	}
	if A.full {
		copy(s.syy, lc.squares(co, true))
	} else {
		lagDots(A.m, B.squares(), T, maxLag, s.syy)
	}
	for li := range L {
		lo, hi, _ := lagRange(T, maxLag, li)
		s.n[li] = max(0, hi-lo)
	}
	if !A.full || !B.full {
		pairCounts(A, B, T, maxLag, s.n)
	}
	return s
}

// lagDots sets out[li] to Σ a[i]·b[i+lag] over the indices paired at lag
// li-maxLag (lagRange), each sum in increasing index order. Four lags at
// a time: each lag's sum runs over its own indices in increasing order
// (its part before the four lags' common range, the common range together
// with the others, then its part after), so it adds the same terms in the
// same order as one lag alone, while the four independent sums keep the
// FPU busy.
func lagDots(a, b []float64, T, maxLag int, out []float64) {
	L := 2*maxLag + 1
	li := 0
	for ; li+4 <= L; li += 4 {
		var lo, hi, lag [4]int
		clo, chi := 0, T
		ok := true
		for k := range 4 {
			lo[k], hi[k], lag[k] = lagRange(T, maxLag, li+k)
			if hi[k] <= lo[k] {
				ok = false
			}
			clo, chi = max(clo, lo[k]), min(chi, hi[k])
		}
		if !ok || chi <= clo {
			for k := range 4 {
				out[li+k], _ = dotLag(a, b, lo[k], hi[k], lag[k])
			}
			continue
		}
		var acc [4]float64
		for k := range 4 {
			for i := lo[k]; i < clo; i++ {
				acc[k] += a[i] * b[i+lag[k]]
			}
		}
		s0, s1, s2, s3 := acc[0], acc[1], acc[2], acc[3]
		b0, b1, b2, b3 := b[clo+lag[0]:chi+lag[0]], b[clo+lag[1]:chi+lag[1]], b[clo+lag[2]:chi+lag[2]], b[clo+lag[3]:chi+lag[3]]
		ac := a[clo:chi]
		b0, b1, b2, b3 = b0[:len(ac)], b1[:len(ac)], b2[:len(ac)], b3[:len(ac)]
		for t, x := range ac {
			s0 += x * b0[t]
			s1 += x * b1[t]
			s2 += x * b2[t]
			s3 += x * b3[t]
		}
		acc = [4]float64{s0, s1, s2, s3}
		for k := range 4 {
			for i := chi; i < hi[k]; i++ {
				acc[k] += a[i] * b[i+lag[k]]
			}
			out[li+k] = acc[k]
		}
	}
	for ; li < L; li++ {
		lo, hi, lag := lagRange(T, maxLag, li)
		out[li], _ = dotLag(a, b, lo, hi, lag)
	}
}

// pairCounts sets n[li] to the number of indices paired at lag li-maxLag
// where both columns have a value — the plain loop's Σ m_a[i]·m_b[i+lag],
// a sum of 0s and 1s and so an exact integer — from the columns' missing
// indices: the pairs, less those with a missing input, less those with a
// missing target, plus those missing both (counted twice).
func pairCounts(A, B *lagCol, T, maxLag int, n []int) {
	ma, mb := A.missing(), B.missing()
	for li := range n {
		lo, hi, lag := lagRange(T, maxLag, li)
		if hi <= lo {
			n[li] = 0
			continue
		}
		a0, a1 := sort.SearchInts(ma, lo), sort.SearchInts(ma, hi)
		b0, b1 := sort.SearchInts(mb, lo+lag), sort.SearchInts(mb, hi+lag)
		both := 0
		for _, i := range ma[a0:a1] {
			if B.m[i+lag] == 0 {
				both++
			}
		}
		n[li] = hi - lo - (a1 - a0) - (b1 - b0) + both
	}
}

// missing lists the indices where the column has no value (ascending).
func (c *lagCol) missing() []int {
	if c.miss == nil {
		c.miss = []int{}
		for t, m := range c.m {
			if m == 0 {
				c.miss = append(c.miss, t)
			}
		}
	}
	return c.miss
}

// squares is v[t]·v[t] for every t, computed once per column.
func (c *lagCol) squares() []float64 {
	if c.sq == nil {
		c.sq = squaresOf(c.v)
	}
	return c.sq
}

// squaresOf is v[t]·v[t] for every t.
func squaresOf(v []float64) []float64 {
	sq := make([]float64, len(v))
	for t, x := range v {
		sq[t] = x * x
	}
	return sq
}

// dotLag is Σ a[i]·b[i+lag] over lo ≤ i < hi, in order, and its count.
func dotLag(a, b []float64, lo, hi, lag int) (float64, int) {
	if hi <= lo {
		return 0, 0
	}
	var q float64
	for i := lo; i < hi; i++ {
		q += a[i] * b[i+lag]
	}
	return q, hi - lo
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
