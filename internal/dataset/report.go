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

// lagCols caches one run's mean-removed columns, and the sums of squares
// that do not depend on the pair, for the lag cross-correlations of all
// its (input, target) pairs: each column is copied once, and when both
// columns of a pair are complete Σa² (per input and lag) and Σb² (per
// target and lag) are computed once instead of once per pair. Every sum
// is still formed over the same terms in the same order as the plain
// per-pair loop, so the report's figures are bit for bit the same.
type lagCols struct {
	g           *runGrid
	nAll, lag   int
	cols        map[int]*lagCol
	sxxIn, syyT map[int][]float64
}

type lagCol struct {
	v, m []float64
	sq   []float64 // v[t]·v[t], for gappy pairs (lagCols.gappy)
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
	a, b := A.v, B.v
	T := lc.g.steps
	full := A.full && B.full
	if full {
		copy(s.sxx, lc.squares(ci, false))
		copy(s.syy, lc.squares(co, true))
	}
	// Σab four lags at a time: each lag's sum runs over its own indices in
	// increasing order (its part before the four lags' common range, the
	// common range together with the others, then its part after), so it
	// adds the same terms in the same order as one lag alone, while the
	// four independent sums keep the FPU busy.
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
				s.sxy[li+k], s.n[li+k] = dotLag(a, b, lo[k], hi[k], lag[k])
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
			s.sxy[li+k], s.n[li+k] = acc[k], hi[k]-lo[k]
		}
	}
	for ; li < L; li++ {
		lo, hi, lag := lagRange(T, maxLag, li)
		if hi > lo {
			s.sxy[li], s.n[li] = dotLag(a, b, lo, hi, lag)
		}
	}
	if !full {
		lc.gappy(A, B, &s)
	}
	return s
}

// gappy fills Σa²·w, Σb²·w and the pair counts of a pair with a gap
// (w = m_a[i]·m_b[i+lag], the masks). Σab needs no mask: a column is 0
// where its mask is, so a[i]·b[i+lag] is the plain loop's
// (a[i]·b[i+lag])·w term for term, bit for bit (w = 1: the same product;
// w = +0: a ±0 or NaN product, unchanged by ·(+0)), and sums already
// formed like the complete pairs'. Likewise (a[i]·a[i])·m_b[i+lag] is the
// plain loop's (a[i]·a[i])·w, since a[i]·a[i] = +0 where m_a is 0; so
// every term and its order are the plain loop's, four lags at a time
// (eight independent sums, then four, instead of four).
func (lc *lagCols) gappy(A, B *lagCol, s *lagSums) {
	if A.sq == nil {
		A.sq = squaresOf(A.v)
	}
	if B.sq == nil {
		B.sq = squaresOf(B.v)
	}
	aa, bb, ma, mb := A.sq, B.sq, A.m, B.m
	T, maxLag := lc.g.steps, lc.lag
	L := 2*maxLag + 1
	one := func(li, lo, hi, lag int) {
		var sxx, syy, cnt float64
		for i := lo; i < hi; i++ {
			sxx += aa[i] * mb[i+lag]
			syy += bb[i+lag] * ma[i]
			cnt += ma[i] * mb[i+lag]
		}
		s.sxx[li], s.syy[li], s.n[li] = sxx, syy, int(cnt)
	}
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
				if hi[k] > lo[k] {
					one(li+k, lo[k], hi[k], lag[k])
				} else {
					s.sxx[li+k], s.syy[li+k], s.n[li+k] = 0, 0, 0
				}
			}
			continue
		}
		var xx, yy, cc [4]float64
		for k := range 4 {
			for i := lo[k]; i < clo; i++ {
				xx[k] += aa[i] * mb[i+lag[k]]
				yy[k] += bb[i+lag[k]] * ma[i]
				cc[k] += ma[i] * mb[i+lag[k]]
			}
		}
		n := chi - clo
		aac, mac := aa[clo:chi], ma[clo:chi]
		b0, b1, b2, b3 := bb[clo+lag[0]:][:n], bb[clo+lag[1]:][:n], bb[clo+lag[2]:][:n], bb[clo+lag[3]:][:n]
		m0, m1, m2, m3 := mb[clo+lag[0]:][:n], mb[clo+lag[1]:][:n], mb[clo+lag[2]:][:n], mb[clo+lag[3]:][:n]
		x0, x1, x2, x3 := xx[0], xx[1], xx[2], xx[3]
		y0, y1, y2, y3 := yy[0], yy[1], yy[2], yy[3]
		c0, c1, c2, c3 := cc[0], cc[1], cc[2], cc[3]
		for t := range aac {
			x, m := aac[t], mac[t]
			x0 += x * m0[t]
			y0 += b0[t] * m
			x1 += x * m1[t]
			y1 += b1[t] * m
			x2 += x * m2[t]
			y2 += b2[t] * m
			x3 += x * m3[t]
			y3 += b3[t] * m
		}
		// the counts in a loop of their own: twelve sums at once would not
		// fit the registers
		for t, m := range mac {
			c0 += m * m0[t]
			c1 += m * m1[t]
			c2 += m * m2[t]
			c3 += m * m3[t]
		}
		xx, yy, cc = [4]float64{x0, x1, x2, x3}, [4]float64{y0, y1, y2, y3}, [4]float64{c0, c1, c2, c3}
		for k := range 4 {
			for i := chi; i < hi[k]; i++ {
				xx[k] += aa[i] * mb[i+lag[k]]
				yy[k] += bb[i+lag[k]] * ma[i]
				cc[k] += ma[i] * mb[i+lag[k]]
			}
			s.sxx[li+k], s.syy[li+k], s.n[li+k] = xx[k], yy[k], int(cc[k])
		}
	}
	for ; li < L; li++ {
		lo, hi, lag := lagRange(T, maxLag, li)
		if hi > lo {
			one(li, lo, hi, lag)
		} else {
			s.sxx[li], s.syy[li], s.n[li] = 0, 0, 0
		}
	}
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
