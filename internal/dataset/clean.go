package dataset

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/aml-project/aml/internal/core"
)

// Cleaning and grid alignment of one node's series within one run.
//
// Clean applies three rules in order; a sample is dropped (and counted) by
// the first rule that rejects it:
//
//  1. state:  with StateFilter, a sample whose State is neither "ok" nor
//     empty is dropped (exact, case-sensitive match on core.StateOK).
//  2. range:  a sample whose Value is NaN or ±Inf is always dropped; with
//     Min (Max) set, a value < *Min (> *Max) is dropped. Bounds are
//     inclusive: a value equal to a bound is kept.
//  3. hampel: time-windowed, two-sided Hampel test, enabled when
//     HampelWindowUs > 0 and HampelThreshold > 0. Let W = HampelWindowUs,
//     k = HampelThreshold, and let S be the node's samples that survived
//     rules 1 and 2 (the test looks only at S, never at dropped samples,
//     and is not iterated: a point removed by Hampel still counts as a
//     neighbour of the others). For a point (t, x) of S:
//
//     L = values of S with timestamp in [t-W, t)   (left neighbourhood)
//     R = values of S with timestamp in (t, t+W]   (right neighbourhood)
//
//     For a side N with at least 2 points:
//     med_N = median(N) (mean of the two middle values when |N| is even),
//     σ_N = max(1.4826·median(|N - med_N|), σ_floor),
//     and x agrees with N when |x - med_N| <= k·σ_N.
//     A side with fewer than 2 points does not vote (counts as agreeing).
//     x is removed only if it disagrees with BOTH sides; in particular it
//     is kept when either side has fewer than 2 points.
//
//     σ_floor = max(noise, 1e-9·max(1, |median(S)|)), where
//     noise = 1.4826·median(|x[i+1] - x[i]|)/√2 over consecutive points of
//     S (a robust estimate of the sample-to-sample noise, in the series'
//     own units; 0 when S has fewer than 2 points). The floor is relative
//     to the series' own scale, never an absolute constant in raw units.
//
// Why two-sided: the edge of a setpoint step agrees with the side it
// belongs to (the last sample before the step with L, the first sample
// after it with R), so step edges are kept even when MAD = 0, while an
// isolated spike disagrees with both sides and is removed. A burst of m
// consecutive outliers is removed when each side's window holds at least
// 2m+1 points (e.g. up to 2 samples with 5 points per side); longer
// plateaus are level changes and are kept. Consequences of the rule: a
// point with fewer than 2 neighbours on either side (the first two and
// last two samples of a series, samples next to a data gap longer than W)
// cannot be judged and is kept; on an otherwise constant series
// (MAD = 0, noise = 0) any single-sample deviation larger than
// k·1e-9·max(1,|median|) is removed, including a one-sample flicker of
// one quantisation step.
//
// Cost: O(n·w) for n points and w points per window, with one reusable
// scratch buffer and selection (no per-point allocation).
//
// Align puts a cleaned series on the epoch-aligned beat grid; see Align.

// CleanConfig holds the cleaning rules for one node.
type CleanConfig struct {
	StateFilter     bool     // drop samples whose State is not "ok" (empty State counts as ok)
	Min, Max        *float64 // range filter: drop values < Min or > Max (nil = no bound); NaN/Inf always dropped
	HampelWindowUs  int64    // Hampel half-window in µs (neighbours within ±HampelWindowUs of the point); <= 0 disables
	HampelThreshold float64  // k (typically 3); <= 0 (or NaN) disables
}

// CleanCounts says how many samples each rule dropped. A sample is counted
// once, by the first rule that drops it, in the order state → range →
// hampel, so Raw = State + Range + Hampel + Kept.
type CleanCounts struct {
	Raw    int `json:"raw"`
	State  int `json:"state"`
	Range  int `json:"range"`
	Hampel int `json:"hampel"`
	Kept   int `json:"kept"`
}

// Add adds o to c (summing across runs).
func (c *CleanCounts) Add(o CleanCounts) {
	c.Raw += o.Raw
	c.State += o.State
	c.Range += o.Range
	c.Hampel += o.Hampel
	c.Kept += o.Kept
}

// Clean applies cfg to one node's points and returns the kept points (a new
// slice, never aliasing points, non-nil) and the per-rule counts. The input
// is not modified.
//
// Precondition: points are sorted by TsUs, strictly increasing. Clean never
// fails: input that is not sorted by TsUs is stably sorted (on a copy)
// first, so the result is always in time order; points that share a
// timestamp are never in each other's Hampel neighbourhood.
func Clean(points []core.Point, cfg CleanConfig) ([]core.Point, CleanCounts) {
	cnt := CleanCounts{Raw: len(points)}
	if !slices.IsSortedFunc(points, cleanCmpTs) {
		points = slices.Clone(points)
		slices.SortStableFunc(points, cleanCmpTs)
	}

	// Rules 1 and 2: collect the survivors' indices.
	surv := make([]int, 0, len(points))
	for i, p := range points {
		switch {
		case cfg.StateFilter && p.State != "" && p.State != core.StateOK:
			cnt.State++
		case math.IsNaN(p.Value) || math.IsInf(p.Value, 0),
			cfg.Min != nil && p.Value < *cfg.Min,
			cfg.Max != nil && p.Value > *cfg.Max:
			cnt.Range++
		default:
			surv = append(surv, i)
		}
	}

	// Rule 3.
	var outlier []bool
	if cfg.HampelWindowUs > 0 && cfg.HampelThreshold > 0 && len(surv) >= 3 {
		ts := make([]int64, len(surv))
		xs := make([]float64, len(surv))
		for j, i := range surv {
			ts[j] = points[i].TsUs
			xs[j] = points[i].Value
		}
		outlier = cleanHampel(ts, xs, cfg.HampelWindowUs, cfg.HampelThreshold)
	}

	kept := make([]core.Point, 0, len(surv))
	for j, i := range surv {
		if outlier != nil && outlier[j] {
			cnt.Hampel++
			continue
		}
		kept = append(kept, points[i])
	}
	cnt.Kept = len(kept)
	return kept, cnt
}

// cleaner cleans and aligns one node's series at a time for the dataset
// build, with buffers it reuses for every node of every run: the build
// makes no per-sample allocation after the first run. Its result is
// Align(Clean(points shifted by shiftUs)) exactly (TestCleanerMatches).
type cleaner struct {
	ts  []int64
	xs  []float64
	out []bool
	buf []float64
	cnt []int
}

// cleanAlign is Align(Clean(p), fromUs, toUs, acfg) for p = points with
// shiftUs subtracted from every time; the grid reuses vals and obs.
// Rules 1 and 2 run in the pass that extracts times and values, the Hampel
// test and the bucket means over those arrays; no []core.Point is copied.
func (c *cleaner) cleanAlign(points []core.Point, shiftUs int64, cfg CleanConfig, fromUs, toUs int64, acfg AlignConfig, vals []float64, obs []bool) (Grid, CleanCounts, AlignCounts) {
	if !slices.IsSortedFunc(points, cleanCmpTs) {
		// Not what a store returns; the general path sorts a copy.
		p := make([]core.Point, len(points))
		for i, q := range points {
			p[i] = q
			p[i].TsUs -= shiftUs
		}
		kept, cc := Clean(p, cfg)
		g, ac := Align(kept, fromUs, toUs, acfg)
		return g, cc, ac
	}
	cnt := CleanCounts{Raw: len(points)}
	ts, xs := c.ts[:0], c.xs[:0]
	for _, p := range points {
		switch {
		case cfg.StateFilter && p.State != "" && p.State != core.StateOK:
			cnt.State++
		case math.IsNaN(p.Value) || math.IsInf(p.Value, 0),
			cfg.Min != nil && p.Value < *cfg.Min,
			cfg.Max != nil && p.Value > *cfg.Max:
			cnt.Range++
		default:
			ts = append(ts, p.TsUs-shiftUs)
			xs = append(xs, p.Value)
		}
	}
	if cfg.HampelWindowUs > 0 && cfg.HampelThreshold > 0 && len(ts) >= 3 {
		c.out, c.buf = cleanHampelInto(ts, xs, cfg.HampelWindowUs, cfg.HampelThreshold, c.out, c.buf)
		w := 0
		for j, bad := range c.out {
			if bad {
				cnt.Hampel++
				continue
			}
			ts[w], xs[w] = ts[j], xs[j]
			w++
		}
		ts, xs = ts[:w], xs[:w]
	}
	cnt.Kept = len(ts)
	c.ts, c.xs = ts, xs
	g, ac, bc := alignTV(ts, xs, fromUs, toUs, acfg, vals, obs, c.cnt)
	c.cnt = bc
	return g, cnt, ac
}

func cleanCmpTs(a, b core.Point) int {
	switch {
	case a.TsUs < b.TsUs:
		return -1
	case a.TsUs > b.TsUs:
		return 1
	}
	return 0
}

// cleanHampel returns, for each point of the (finite, time-sorted) series,
// whether the two-sided time-windowed Hampel test flags it as an outlier.
// ts must be non-decreasing.
func cleanHampel(ts []int64, xs []float64, w int64, k float64) []bool {
	out, _ := cleanHampelInto(ts, xs, w, k, nil, nil)
	return out
}

// cleanHampelInto is cleanHampel writing its verdicts into out and using
// buf as scratch, each reused when its capacity is at least len(xs) (the
// dataset build cleans every node of every run with one pair); it returns
// the verdicts and the scratch for the next call.
func cleanHampelInto(ts []int64, xs []float64, w int64, k float64, out []bool, buf []float64) ([]bool, []float64) {
	n := len(xs)
	if cap(out) < n {
		out = make([]bool, n)
	} else {
		out = out[:n]
		clear(out)
	}

	// σ floor from the whole series: robust noise and overall level.
	if cap(buf) < n {
		buf = make([]float64, n)
	}
	buf = buf[:n]
	noise, maxAbs := 0.0, 0.0
	for _, x := range xs {
		maxAbs = max(maxAbs, math.Abs(x))
	}
	if n >= 2 {
		d := buf[:n-1]
		for i := range d {
			d[i] = math.Abs(xs[i+1] - xs[i])
		}
		noise = 1.4826 * cleanMedian(d) / math.Sqrt2
	}
	// The level's median is needed only when the noise is below 1e-9 of
	// the largest |x|: |median| <= max|x| (a value, or the midpoint of
	// two), so otherwise the floor is the noise either way.
	floor := noise
	if noise < 1e-9*max(1, maxAbs) {
		copy(buf, xs)
		level := cleanMedian(buf)
		floor = max(noise, 1e-9*max(1, math.Abs(level)))
	}
	kFloor := k * floor

	scratch := buf[:0] // reused for every window (a window holds at most n-1 points)
	// Window pointers, all monotone for non-decreasing ts:
	// [l, le) has ts in [t-w, t); [rs, r) has ts in (t, t+w].
	l, le, rs, r := 0, 0, 0, 0
	for i := range n {
		t, x := ts[i], xs[i]
		lo, hi := cleanSatSub(t, w), cleanSatAdd(t, w)
		for l < n && ts[l] < lo {
			l++
		}
		le = max(le, l)
		for le < n && ts[le] < t {
			le++
		}
		rs = max(rs, le)
		for rs < n && ts[rs] <= t {
			rs++
		}
		r = max(r, rs)
		for r < n && ts[r] <= hi {
			r++
		}
		nl, nr := le-l, r-rs
		if nl < 2 || nr < 2 {
			continue // a side that does not vote agrees
		}
		if cap(scratch) < max(nl, nr) {
			scratch = make([]float64, 0, max(nl, nr))
		}
		if cleanAgrees(x, xs[l:le], scratch, k, floor, kFloor) {
			continue
		}
		if cleanAgrees(x, xs[rs:r], scratch, k, floor, kFloor) {
			continue
		}
		out[i] = true
	}
	return out, buf
}

// cleanAgrees reports whether x is within k·max(1.4826·MAD, floor) of the
// median of side (len(side) >= 2). scratch must have capacity >= len(side).
func cleanAgrees(x float64, side, scratch []float64, k, floor, kFloor float64) bool {
	if len(side) <= smallSide {
		return cleanAgreesSmall(x, side, k, floor, kFloor)
	}
	s := scratch[:len(side)]
	copy(s, side)
	med := cleanMedian(s)
	d := math.Abs(x - med)
	if d <= kFloor {
		return true // σ_N >= floor, so the MAD cannot change the verdict
	}
	for j, v := range s {
		s[j] = math.Abs(v - med)
	}
	sigma := max(1.4826*cleanMedian(s), floor)
	return d <= k*sigma
}

// smallSide is the largest side cleanAgreesSmall judges (a window of a
// few samples, the common case: 5 s at 1 Hz is 5 points a side).
const smallSide = 8

// cleanAgreesSmall is cleanAgrees for 2 <= len(side) <= smallSide, on a
// sorted copy in a stack array: the same medians (order statistics; an
// even count's midpoint of the two middle values in increasing order, two
// values in their given order, as cleanMedian takes them), so the same
// verdict, without the general selection's set-up.
func cleanAgreesSmall(x float64, side []float64, k, floor, kFloor float64) bool {
	var s [smallSide]float64
	n := copy(s[:], side)
	if n == 2 {
		med := cleanMid(s[0], s[1])
		d := math.Abs(x - med)
		if d <= kFloor {
			return true
		}
		sigma := max(1.4826*cleanMid(math.Abs(s[0]-med), math.Abs(s[1]-med)), floor)
		return d <= k*sigma
	}
	insertionSort(s[:n])
	med := sortedMedian(s[:n])
	d := math.Abs(x - med)
	if d <= kFloor {
		return true
	}
	for j := range n {
		s[j] = math.Abs(s[j] - med)
	}
	insertionSort(s[:n])
	sigma := max(1.4826*sortedMedian(s[:n]), floor)
	return d <= k*sigma
}

func insertionSort(a []float64) {
	for i := 1; i < len(a); i++ {
		v := a[i]
		j := i - 1
		for j >= 0 && a[j] > v {
			a[j+1] = a[j]
			j--
		}
		a[j+1] = v
	}
}

// sortedMedian is cleanMedian of sorted a, len(a) >= 3.
func sortedMedian(a []float64) float64 {
	n := len(a)
	if n%2 == 1 {
		return a[n/2]
	}
	return cleanMid(a[n/2-1], a[n/2])
}

// cleanMedian returns the median of a (NaN-free), reordering a. The median
// of an even count is the midpoint of the two middle values; of an empty
// slice, 0.
func cleanMedian(a []float64) float64 {
	n := len(a)
	switch n {
	case 0:
		return 0
	case 1:
		return a[0]
	case 2:
		return cleanMid(a[0], a[1])
	}
	m := cleanSelect(a, n/2)
	if n%2 == 1 {
		return m
	}
	// After selecting index n/2, a[:n/2] holds the values <= m: the lower
	// middle value is their maximum.
	lower := a[0]
	for _, v := range a[1 : n/2] {
		lower = max(lower, v)
	}
	return cleanMid(lower, m)
}

// cleanMid is the midpoint of a and b without overflow.
func cleanMid(a, b float64) float64 {
	if (a >= 0) == (b >= 0) {
		return a + (b-a)/2
	}
	return (a + b) / 2
}

// cleanSelect reorders a (NaN-free) so that a[k] is its k-th smallest value,
// a[:k] <= a[k] <= a[k+1:], and returns a[k]. Quickselect with a
// median-of-three pivot; falls back to sorting the remaining range after
// too many rounds, so the worst case is O(n log n).
func cleanSelect(a []float64, k int) float64 {
	lo, hi := 0, len(a)-1
	budget := 2 * bits.Len(uint(len(a)))
	for hi-lo > 12 {
		if budget == 0 {
			slices.Sort(a[lo : hi+1])
			return a[k]
		}
		budget--
		mid := lo + (hi-lo)/2
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < pivot {
				i++
			}
			for a[j] > pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// a[lo..j] <= pivot, a[j+1..i-1] == pivot, a[i..hi] >= pivot.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	for i := lo + 1; i <= hi; i++ {
		v := a[i]
		j := i - 1
		for j >= lo && a[j] > v {
			a[j+1] = a[j]
			j--
		}
		a[j+1] = v
	}
	return a[k]
}

func cleanSatAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func cleanSatSub(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// AlignConfig holds the grid rules for one node.
type AlignConfig struct {
	BeatUs      int64 // grid spacing in µs, > 0
	MaxInterpUs int64 // fill a gap linearly only if its missing span (time between the two observed neighbours minus one beat) is <= MaxInterpUs; <= 0 = never interpolate
}

// Grid is a node's series on the beat grid: Values[k] is the value of bucket
// k = [StartUs + k·BeatUs, StartUs + (k+1)·BeatUs) (epoch µs); NaN where
// missing.
// Observed[k] is true where the bucket had at least one sample (value =
// bucket mean), false where interpolated or missing.
type Grid struct {
	StartUs  int64
	BeatUs   int64
	Values   []float64
	Observed []bool
}

// AlignCounts describes a grid: Buckets = Observed + Interpolated + Missing.
type AlignCounts struct {
	Buckets      int `json:"buckets"` // grid steps in [fromUs, toUs]
	Observed     int `json:"observed"`
	Interpolated int `json:"interpolated"`
	Missing      int `json:"missing"` // still NaN after interpolation
}

// Add adds o to c (summing across runs).
func (c *AlignCounts) Add(o AlignCounts) {
	c.Buckets += o.Buckets
	c.Observed += o.Observed
	c.Interpolated += o.Interpolated
	c.Missing += o.Missing
}

// Align buckets points (cleaned, sorted by TsUs) onto the absolute,
// epoch-aligned grid (epoch µs) of spacing BeatUs covering [fromUs, toUs] inclusive:
// bucket starts are multiples of BeatUs (floor division, also for negative
// times), StartUs = floor(fromUs/BeatUs)·BeatUs and the last bucket is
// floor(toUs/BeatUs). Points outside [fromUs, toUs] are ignored, even when
// they fall in the first or last bucket; points with a NaN or infinite
// Value are ignored; State is not looked at.
//
// A bucket's value is the mean of its points, computed as
// ref + Σ(x−ref)/n with ref the bucket's first value, each x−ref split
// exactly into value and rounding error (TwoSum) and summed with Neumaier
// compensation: a bucket of equal values gets exactly that value, large
// offsets and cancellation do not lose the small part.
// Then every gap between two observed buckets a < b whose missing span
// (b−a−1)·BeatUs is <= MaxInterpUs is filled by linear interpolation,
// v_a + (v_b−v_a)·(j−a)/(b−a) (evaluated from the nearer end, see
// alignLerp); a longer gap is left entirely NaN. Nothing is
// extrapolated before the first or after the last observed bucket.
//
// With BeatUs <= 0 or toUs < fromUs the grid is empty (no buckets).
// Unsorted input gives the same buckets (runs of one bucket are merged).
func Align(points []core.Point, fromUs, toUs int64, cfg AlignConfig) (Grid, AlignCounts) {
	ts := make([]int64, len(points))
	xs := make([]float64, len(points))
	for i, p := range points {
		ts[i], xs[i] = p.TsUs, p.Value
	}
	g, c, _ := alignTV(ts, xs, fromUs, toUs, cfg, nil, nil, nil)
	return g, c
}

// alignTV is Align over a series held as its times ts and values xs
// (len(ts) == len(xs)). The grid's Values and Observed reuse vals and obs,
// and the per-bucket counts cnt, when their capacity suffices (the dataset
// build aligns every run's nodes with one set per node); nil allocates.
// It also returns the counts' buffer for the next call.
func alignTV(ts []int64, xs []float64, fromUs, toUs int64, cfg AlignConfig, vals []float64, obs []bool, cnt []int) (Grid, AlignCounts, []int) {
	beat := cfg.BeatUs
	g := Grid{BeatUs: beat, Values: []float64{}, Observed: []bool{}}
	if beat <= 0 || toUs < fromUs {
		return g, AlignCounts{}, cnt
	}
	k0 := alignFloorDiv(fromUs, beat)
	n := int(alignFloorDiv(toUs, beat) - k0 + 1)
	g.StartUs = k0 * beat
	g.Values = reuse(vals, n)
	g.Observed = reuse(obs, n)
	cnt = reuse(cnt, n)

	in := func(t int64) bool {
		return t >= fromUs && t <= toUs
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

	for i := 0; i < len(ts); {
		t, v := ts[i], xs[i]
		i++
		if !in(t) || !finite(v) {
			continue
		}
		k := int(alignFloorDiv(t, beat) - k0)
		// Mean of the run of consecutive points in bucket k.
		ref := v
		var sum, comp float64
		m := 1
		for ; i < len(ts); i++ {
			qt, qv := ts[i], xs[i]
			if !in(qt) || int(alignFloorDiv(qt, beat)-k0) != k {
				break
			}
			if !finite(qv) {
				continue
			}
			// d + e == qv - ref exactly (TwoSum), then Neumaier.
			d := qv - ref
			bb := d - qv
			e := (qv - (d - bb)) + (-ref - bb)
			s := sum + d
			if math.Abs(sum) >= math.Abs(d) {
				comp += (sum - s) + d
			} else {
				comp += (d - s) + sum
			}
			comp += e
			sum = s
			m++
		}
		mean := (ref + sum/float64(m)) + comp/float64(m)
		if cnt[k] == 0 {
			g.Values[k] = mean
		} else { // bucket revisited (unsorted input): weighted merge
			tot := cnt[k] + m
			g.Values[k] += (mean - g.Values[k]) * float64(m) / float64(tot)
		}
		cnt[k] += m
	}

	var c AlignCounts
	c.Buckets = n
	last := -1 // last observed bucket
	maxGap := int64(-1)
	if cfg.MaxInterpUs > 0 {
		maxGap = cfg.MaxInterpUs / beat // (b-a-1)·beat <= MaxInterpUs ⇔ b-a-1 <= this
	}
	for k := range n {
		if cnt[k] == 0 {
			g.Values[k] = math.NaN()
			continue
		}
		g.Observed[k] = true
		c.Observed++
		if last >= 0 && k-last > 1 && int64(k-last-1) <= maxGap {
			va, vb := g.Values[last], g.Values[k]
			span := float64(k - last)
			for j := last + 1; j < k; j++ {
				g.Values[j] = alignLerp(va, vb, float64(j-last), float64(k-j), span)
			}
			c.Interpolated += k - last - 1
		}
		last = k
	}
	c.Missing = c.Buckets - c.Observed - c.Interpolated
	return g, c, cnt
}

// reuse returns buf[:n] cleared, or a new slice when buf is too small.
func reuse[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// alignLerp interpolates between va (at distance i) and vb (at distance r),
// span = i + r, from the nearer end: va + (vb−va)·i/span when i <= r, else
// vb − (vb−va)·r/span. Equal ends give exactly that value; the result is
// exact wherever i/span is (e.g. halves, quarters).
func alignLerp(va, vb, i, r, span float64) float64 {
	d := vb - va
	if math.IsInf(d, 0) { // ends of opposite sign near ±MaxFloat64
		return va*(r/span) + vb*(i/span)
	}
	if i <= r {
		return va + d*(i/span)
	}
	return vb - d*(r/span)
}

// alignFloorDiv is floor(a/b) for b > 0.
func alignFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// CommonRange returns the index range [lo, hi) of grid steps covered by
// every grid: lo = max over grids of the first non-NaN index, hi = min over
// grids of (last non-NaN index + 1). Grids inside the range may still hold
// NaN in interior gaps. All grids must share StartUs, BeatUs and
// len(Values); otherwise CommonRange returns an error. When there are no
// grids, a grid is empty or all-NaN, the spans do not overlap, or on error,
// it returns lo = hi = 0 (safe to slice with).
func CommonRange(grids []Grid) (lo, hi int, err error) {
	if len(grids) == 0 {
		return 0, 0, nil
	}
	g0 := grids[0]
	for i, g := range grids[1:] {
		if g.StartUs != g0.StartUs || g.BeatUs != g0.BeatUs || len(g.Values) != len(g0.Values) {
			return 0, 0, fmt.Errorf("dataset: grid %d (start %d µs, beat %d µs, %d steps) does not match grid 0 (start %d µs, beat %d µs, %d steps)",
				i+1, g.StartUs, g.BeatUs, len(g.Values), g0.StartUs, g0.BeatUs, len(g0.Values))
		}
	}
	lo, hi = 0, len(g0.Values)
	for _, g := range grids {
		first := slices.IndexFunc(g.Values, func(v float64) bool { return !math.IsNaN(v) })
		if first < 0 {
			return 0, 0, nil
		}
		lastEnd := first + 1
		for j := len(g.Values) - 1; j > first; j-- {
			if !math.IsNaN(g.Values[j]) {
				lastEnd = j + 1
				break
			}
		}
		lo, hi = max(lo, first), min(hi, lastEnd)
	}
	if lo >= hi {
		return 0, 0, nil
	}
	return lo, hi, nil
}
