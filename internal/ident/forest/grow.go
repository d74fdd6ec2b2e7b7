package forest

import (
	"math"
	"math/rand/v2"
)

// builder grows trees; one per worker, its buffers reused across trees.
type builder struct {
	dt    *data
	opt   Options
	rng   *rand.Rand
	src   *rand.PCG
	w     []float64 // per row: bootstrap count (0 = out of bag)
	idx   []int32   // d·m: per feature, the in-bag rows in that feature's order
	m     int       // in-bag distinct rows
	tmp   []int32   // partition scratch, m
	left  []bool    // per row: goes left at the current split
	feats []int     // feature permutation
	lc    []float64 // k: left class weights during a scan
	tc    []float64 // k: node class weights
	rc    []float64 // k: right child's class weights
	stack []item
}

type item struct {
	node   int32
	lo, hi int32
	depth  int32
}

func newBuilder(dt *data, opt Options) *builder {
	src := rand.NewPCG(0, 0)
	b := &builder{
		dt: dt, opt: opt, src: src, rng: rand.New(src),
		w: make([]float64, dt.n), idx: make([]int32, dt.d*dt.n), tmp: make([]int32, dt.n),
		left: make([]bool, dt.n), feats: make([]int, dt.d),
		lc: make([]float64, dt.k), tc: make([]float64, dt.k), rc: make([]float64, dt.k),
	}
	return b
}

// treeSeed mixes the forest seed and the tree index into a PCG stream.
func treeSeed(seed uint64, t int) (uint64, uint64) {
	return seed ^ 0x6a09e667f3bcc909, uint64(t)*0x9e3779b97f4a7c15 + 0xbb67ae8584caa73b
}

// grow grows tree t; it returns the tree, the in-bag counts and the
// impurity decrease per feature.
func (b *builder) grow(t int) (Tree, []uint16, []float64) {
	dt, opt := b.dt, b.opt
	b.src.Seed(treeSeed(opt.Seed, t))
	n, d := dt.n, dt.d
	clear(b.w)
	draws := max(1, int(math.Round(opt.SampleFraction*float64(n))))
	switch {
	case opt.Bootstrap:
		for j := 0; j < draws; j++ {
			b.w[b.rng.IntN(n)]++
		}
	case draws < n:
		perm := b.rng.Perm(n)
		for _, i := range perm[:draws] {
			b.w[i] = 1
		}
	default:
		for i := range b.w {
			b.w[i] = 1
		}
	}
	inbag := make([]uint16, n)
	m := 0
	for i, v := range b.w {
		if v > 0 {
			m++
			inbag[i] = uint16(min(v, math.MaxUint16))
		}
	}
	b.m = m
	for f := 0; f < d; f++ {
		dst := b.idx[f*m : (f+1)*m]
		p := 0
		for _, i := range dt.order[f] {
			if b.w[i] > 0 {
				dst[p] = i
				p++
			}
		}
	}
	for f := range b.feats {
		b.feats[f] = f
	}
	imp := make([]float64, d)
	tr := Tree{}

	// root
	b.nodeStats(0, m)
	b.addNode(&tr, b.tc)
	b.stack = append(b.stack[:0], item{node: 0, lo: 0, hi: int32(m)})
	for len(b.stack) > 0 {
		it := b.stack[len(b.stack)-1]
		b.stack = b.stack[:len(b.stack)-1]
		lo, hi := int(it.lo), int(it.hi)
		if hi-lo < opt.MinSplit || hi-lo < 2*opt.MinLeaf || (opt.MaxDepth > 0 && int(it.depth) >= opt.MaxDepth) {
			continue
		}
		wTot, parent, pure := b.nodeStats(lo, hi)
		if pure {
			continue
		}
		bestF, bestPos, bestG, bestThr := -1, 0, parent, 0.0
		// draw features until MaxFeatures non-constant ones are scanned
		visited := 0
		for j := 0; j < d && visited < opt.MaxFeatures; j++ {
			r := j + b.rng.IntN(d-j)
			b.feats[j], b.feats[r] = b.feats[r], b.feats[j]
			f := b.feats[j]
			s := b.idx[f*m+lo : f*m+hi]
			col := dt.xc[f]
			if col[s[0]] == col[s[len(s)-1]] {
				continue
			}
			visited++
			var pos int
			var g, thr float64
			if opt.RandomSplits {
				pos, g, thr = b.scanRandom(s, col, wTot)
			} else {
				pos, g = b.scan(s, col, wTot)
				if pos >= 0 {
					xa, xb := col[s[pos]], col[s[pos+1]]
					if thr = xa + (xb-xa)/2; !(thr >= xa && thr < xb) {
						thr = xa
					}
				}
			}
			if pos >= 0 && g > bestG {
				bestF, bestPos, bestG, bestThr = f, pos, g, thr
			}
		}
		if bestF < 0 || bestG-parent <= 1e-12*math.Abs(parent) {
			continue
		}
		imp[bestF] += bestG - parent
		s := b.idx[bestF*m+lo : bestF*m+hi]
		thr := bestThr
		nl := bestPos + 1
		for p, i := range s {
			b.left[i] = p < nl
		}
		for f := 0; f < d; f++ {
			b.partition(b.idx[f*m+lo : f*m+hi])
		}
		li := b.child(&tr, lo, lo+nl)
		ri := b.child(&tr, lo+nl, hi)
		tr.Feature[it.node] = int32(bestF)
		tr.Threshold[it.node] = thr
		tr.Left[it.node], tr.Right[it.node] = li, ri
		b.stack = append(b.stack,
			item{node: ri, lo: int32(lo + nl), hi: int32(hi), depth: it.depth + 1},
			item{node: li, lo: int32(lo), hi: int32(lo + nl), depth: it.depth + 1})
	}

	return tr, inbag, imp
}

// child appends the node holding rows [lo, hi) (any feature's range).
func (b *builder) child(tr *Tree, lo, hi int) int32 {
	b.nodeStats(lo, hi)
	return b.addNode(tr, b.tc)
}

// addNode appends a leaf whose value is the node statistics in tc
// (class weights, normalised; or the regression mean in tc[0]).
func (b *builder) addNode(tr *Tree, tc []float64) int32 {
	id := int32(len(tr.Feature))
	tr.Feature = append(tr.Feature, -1)
	tr.Threshold = append(tr.Threshold, 0)
	tr.Left = append(tr.Left, -1)
	tr.Right = append(tr.Right, -1)
	tr.Value = append(tr.Value, tc...)
	return id
}

// nodeStats fills tc for rows [lo, hi) of feature 0's range — class
// probabilities, or the mean in tc[0] — and returns the node's weight, its
// criterion Σ_k W_k²/W (classification) or S²/W (regression), and whether
// the node is pure.
func (b *builder) nodeStats(lo, hi int) (w, crit float64, pure bool) {
	dt := b.dt
	s := b.idx[lo:hi] // feature 0
	if dt.cls != nil {
		clear(b.tc)
		for _, i := range s {
			b.tc[dt.cls[i]] += b.w[i]
			w += b.w[i]
		}
		nz := 0
		ent := xlx(w)
		for c, v := range b.tc {
			crit += v * v / w
			ent -= xlx(v)
			if v > 0 {
				nz++
			}
			b.tc[c] = v / w
		}
		switch b.opt.Criterion {
		case CriterionEntropy:
			crit = -ent
		case CriterionGainRatio:
			crit = 0
		}
		return w, crit, nz <= 1
	}
	sum := 0.0
	y0 := dt.y[s[0]]
	pure = true
	for _, i := range s {
		sum += b.w[i] * dt.y[i]
		w += b.w[i]
		if dt.y[i] != y0 {
			pure = false
		}
	}
	b.tc[0] = sum / w
	return w, sum * sum / w, pure
}

// scan finds the best split of the node's rows s (sorted by col): it
// returns the last position of the left side and the criterion
// Σ_k L_k²/W_L + Σ_k R_k²/W_R (or S_L²/W_L + S_R²/W_R), −1 when no split
// keeps MinLeaf rows on each side.
func (b *builder) scan(s []int32, col []float64, wTot float64) (int, float64) {
	dt := b.dt
	minLeaf := b.opt.MinLeaf
	best, bestG := -1, math.Inf(-1)
	last := len(s) - minLeaf // left side ends at p ≤ last-1
	wl := 0.0
	if dt.cls != nil {
		lc := b.lc
		clear(lc)
		// tc holds probabilities; class totals are tc·wTot
		rc := b.rc
		for c := range rc {
			rc[c] = b.tc[c] * wTot
		}
		gini := b.opt.Criterion == "" || b.opt.Criterion == CriterionGini
		for p := 0; p < last; p++ {
			i := s[p]
			wi := b.w[i]
			lc[dt.cls[i]] += wi
			wl += wi
			if p+1 < minLeaf || col[s[p+1]] == col[i] {
				continue
			}
			if !gini {
				if g := b.infoScore(lc, rc, wl, wTot); g > bestG {
					best, bestG = p, g
				}
				continue
			}
			wr := wTot - wl
			sl, sr := 0.0, 0.0
			for c, l := range lc {
				r := rc[c] - l
				sl += l * l
				sr += r * r
			}
			if g := sl/wl + sr/wr; g > bestG {
				best, bestG = p, g
			}
		}
		return best, bestG
	}
	sTot := b.tc[0] * wTot
	sl := 0.0
	for p := 0; p < last; p++ {
		i := s[p]
		wi := b.w[i]
		sl += wi * dt.y[i]
		wl += wi
		if p+1 < minLeaf || col[s[p+1]] == col[i] {
			continue
		}
		sr := sTot - sl
		if g := sl*sl/wl + sr*sr/(wTot-wl); g > bestG {
			best, bestG = p, g
		}
	}
	return best, bestG
}

// partition reorders s stably: rows going left first.
func (b *builder) partition(s []int32) {
	l, r := 0, 0
	for _, i := range s {
		if b.left[i] {
			s[l] = i
			l++
		} else {
			b.tmp[r] = i
			r++
		}
	}
	copy(s[l:], b.tmp[:r])
}

// scanRandom is the extremely-randomised split of the node's rows s
// (sorted by col, not constant): a threshold drawn uniformly between the
// node's least and greatest value. It returns the last left position, the
// criterion as scan and the threshold; −1 when a side keeps fewer than
// MinLeaf rows.
func (b *builder) scanRandom(s []int32, col []float64, wTot float64) (int, float64, float64) {
	dt := b.dt
	lo, hi := col[s[0]], col[s[len(s)-1]]
	thr := lo + b.rng.Float64()*(hi-lo)
	if thr >= hi {
		thr = lo
	}
	wl := 0.0
	p := 0
	if dt.cls != nil {
		lc := b.lc
		clear(lc)
		for ; col[s[p]] <= thr; p++ {
			lc[dt.cls[s[p]]] += b.w[s[p]]
			wl += b.w[s[p]]
		}
		if p < b.opt.MinLeaf || len(s)-p < b.opt.MinLeaf {
			return -1, 0, 0
		}
		if b.opt.Criterion != "" && b.opt.Criterion != CriterionGini {
			rc := b.rc
			for c := range rc {
				rc[c] = b.tc[c] * wTot
			}
			return p - 1, b.infoScore(lc, rc, wl, wTot), thr
		}
		wr := wTot - wl
		sl, sr := 0.0, 0.0
		for c, l := range lc {
			r := b.tc[c]*wTot - l
			sl += l * l
			sr += r * r
		}
		return p - 1, sl/wl + sr/wr, thr
	}
	sl := 0.0
	for ; col[s[p]] <= thr; p++ {
		sl += b.w[s[p]] * dt.y[s[p]]
		wl += b.w[s[p]]
	}
	if p < b.opt.MinLeaf || len(s)-p < b.opt.MinLeaf {
		return -1, 0, 0
	}
	sr := b.tc[0]*wTot - sl
	return p - 1, sl*sl/wl + sr*sr/(wTot-wl), thr
}

// xlx is v·ln v, 0 for v ≤ 0 (its limit).
func xlx(v float64) float64 {
	if v <= 0 {
		return 0
	}
	return v * math.Log(v)
}

// infoScore is the entropy criteria's score of a split with left class
// weights lc (wl in all) of a node with class weights tot (wTot in all):
// for CriterionEntropy minus the children's weighted entropy,
// −(W_L·H_L + W_R·H_R), which exceeds the node's −W·H (nodeStats) by W
// times the information gain; for CriterionGainRatio the gain over the
// split's own entropy (W·H(W_L/W, W_R/W)), against a node score of 0.
func (b *builder) infoScore(lc, tot []float64, wl, wTot float64) float64 {
	wr := wTot - wl
	child := xlx(wl) + xlx(wr)
	for c, l := range lc {
		child -= xlx(l) + xlx(tot[c]-l)
	}
	if b.opt.Criterion == CriterionEntropy {
		return -child
	}
	parent := xlx(wTot)
	for _, t := range tot {
		parent -= xlx(t)
	}
	split := xlx(wTot) - xlx(wl) - xlx(wr)
	if !(split > 0) {
		return math.Inf(-1)
	}
	return (parent - child) / split
}
