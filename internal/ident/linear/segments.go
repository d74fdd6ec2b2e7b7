package linear

// Multi-segment (multi-run) identification.
//
// Training data often comes as several separate records (runs, or the
// NaN-free pieces of a run) that must never be joined: a lag or a state
// trajectory that crossed the boundary between two records would pair
// samples that were never consecutive. The *Segments functions take the
// records as a list of segments ys[s] ([T_s][NY]) and us[s] ([T_s][NU]):
//
//   - normalisation statistics are computed over all segments together;
//   - ARX stacks the regression rows k = MaxLag … T_s−1 of every segment
//     (a segment not longer than MaxLag contributes no row);
//   - PO-MOESP builds the block-Hankel columns of every segment separately
//     (T_s−2i+1 columns each; a segment shorter than 2i contributes none)
//     and concatenates them column-wise before the LQ step
//     (multi-experiment MOESP); the Hankel row means removed for the
//     offset are pooled over all columns;
//   - B, D, the output offset and one initial state per segment are
//     estimated by one least-squares problem on the simulation error of all
//     segments, and the prediction-error refinement minimises the sum of
//     the segments' simulation errors, each segment simulated from its own
//     (refined) initial state; stability enforcement is unchanged.
//
// With a single segment every function gives exactly (bit for bit) the
// result of its single-record counterpart. With several, the per-segment
// initial states are eliminated rather than added as dense columns: the
// B/D/offset least squares projects each segment's rows onto the
// complement of its observability columns (variable projection), and each
// Levenberg–Marquardt step solves its arrow-shaped normal equations by a
// Schur complement on the shared parameters. Memory and time therefore
// grow linearly with the number of segments; the Jacobian of one segment
// (T_s·NY rows × the shared parameters + N) is held at a time.

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// checkSegments validates every segment pair and that all segments have
// the same numbers of outputs and inputs.
func checkSegments(ys, us [][][]float64) (ny, nu int, err error) {
	if len(ys) == 0 {
		return 0, 0, errors.New("linear: no segments")
	}
	if len(ys) != len(us) {
		return 0, 0, fmt.Errorf("linear: %d output segments but %d input segments", len(ys), len(us))
	}
	for k := range ys {
		a, b, err := checkPair(ys[k], us[k])
		if err != nil {
			return 0, 0, fmt.Errorf("linear: segment %d: %s", k, strings.TrimPrefix(err.Error(), "linear: "))
		}
		if k == 0 {
			ny, nu = a, b
		} else if a != ny || b != nu {
			return 0, 0, fmt.Errorf("linear: segment %d has %d outputs and %d inputs, segment 0 has %d and %d", k, a, b, ny, nu)
		}
	}
	return ny, nu, nil
}

// concatRows returns the rows of all segments in one slice (no copy of the
// rows themselves); used for statistics only.
func concatRows(x [][][]float64) [][]float64 {
	n := 0
	for _, s := range x {
		n += len(s)
	}
	out := make([][]float64, 0, n)
	for _, s := range x {
		out = append(out, s...)
	}
	return out
}

// FitARXSegments is FitARXOpts for data made of several separate segments:
// the regression rows k = MaxLag … T_s−1 of every segment are stacked (no
// regressor reaches across a segment boundary) and the normalisation uses
// the statistics of all segments together. Segments not longer than MaxLag
// contribute no rows (but do enter the statistics).
func FitARXSegments(ys, us [][][]float64, o ARXOrders, opts ARXOptions) (*ARX, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if opts.Lambda < 0 || math.IsNaN(opts.Lambda) {
		return nil, errors.New("linear: ridge lambda must be ≥ 0")
	}
	ny, nu, err := checkSegments(ys, us)
	if err != nil {
		return nil, err
	}
	m := &ARX{Orders: o, NY: ny, NU: nu, Lambda: opts.Lambda, Scaling: opts.Scaling, Intercept: !opts.NoIntercept}
	m.YMean, m.YStd = channelStats(concatRows(ys), opts.Scaling)
	m.UMean, m.UStd = channelStats(concatRows(us), opts.Scaling)
	p := numRegressors(o, ny, nu, m.Intercept)
	m.regressors = p
	if p == 0 {
		return nil, errors.New("linear: ARX model has no regressors")
	}
	lag := o.MaxLag()
	type seg struct {
		ys, us []float64
		T      int
	}
	segs := make([]seg, len(ys))
	nr := 0
	for k := range ys {
		segs[k] = seg{normalize(ys[k], m.YMean, m.YStd), normalize(us[k], m.UMean, m.UStd), len(ys[k])}
		nr += max(0, len(ys[k])-lag)
	}
	if nr <= 0 || (opts.Lambda == 0 && nr < p) {
		return nil, errShortData
	}
	m.TrainRows = nr
	nPen := 0
	if opts.Lambda > 0 {
		nPen = p
		if m.Intercept {
			nPen--
		}
	}
	rows := nr + nPen
	sl := math.Sqrt(opts.Lambda)
	theta := mat.NewDense(p, ny, nil)
	if !o.Diag {
		phi := mat.NewDense(rows, p, nil)
		yt := mat.NewDense(rows, ny, nil)
		pd, yd := phi.RawMatrix(), yt.RawMatrix()
		r := 0
		for _, s := range segs {
			for k := lag; k < s.T; k++ {
				fillRegressor(pd.Data[r*pd.Stride:r*pd.Stride+p], o, ny, nu, m.Intercept, s.ys, s.us, k, 0)
				copy(yd.Data[r*yd.Stride:r*yd.Stride+ny], s.ys[k*ny:(k+1)*ny])
				r++
			}
		}
		for i := 0; i < nPen; i++ {
			phi.Set(nr+i, i, sl)
		}
		x, err := lstsq(phi, yt)
		if err != nil {
			return nil, err
		}
		theta.Copy(x)
	} else {
		phi := mat.NewDense(rows, p, nil)
		yt := mat.NewDense(rows, 1, nil)
		pd := phi.RawMatrix()
		for out := 0; out < ny; out++ {
			r := 0
			for _, s := range segs {
				for k := lag; k < s.T; k++ {
					fillRegressor(pd.Data[r*pd.Stride:r*pd.Stride+p], o, ny, nu, m.Intercept, s.ys, s.us, k, out)
					yt.Set(r, 0, s.ys[k*ny+out])
					r++
				}
			}
			for i := 0; i < nPen; i++ {
				phi.Set(nr+i, i, sl)
			}
			x, err := lstsq(phi, yt)
			if err != nil {
				return nil, err
			}
			for i := 0; i < p; i++ {
				theta.Set(i, out, x.At(i, 0))
			}
		}
	}
	m.Theta = theta
	return m, nil
}

// segData holds scaled segments sharing one set of statistics.
type segData struct {
	ny, nu, T                int // T: total samples over all segments
	segs                     []*ssData
	yMean, yStd, uMean, uStd []float64
	scaling                  Scaling
}

func prepareSegments(ys, us [][][]float64, s Scaling) (*segData, error) {
	ny, nu, err := checkSegments(ys, us)
	if err != nil {
		return nil, err
	}
	d := &segData{ny: ny, nu: nu, scaling: s}
	d.yMean, d.yStd = channelStats(concatRows(ys), s)
	d.uMean, d.uStd = channelStats(concatRows(us), s)
	for k := range ys {
		sd := &ssData{T: len(ys[k]), ny: ny, nu: nu, scaling: s,
			yMean: d.yMean, yStd: d.yStd, uMean: d.uMean, uStd: d.uStd,
			ys: normalize(ys[k], d.yMean, d.yStd), us: normalize(us[k], d.uMean, d.uStd)}
		d.segs = append(d.segs, sd)
		d.T += sd.T
	}
	return d, nil
}

// hankelColumns is the number of block-Hankel columns a segment of T
// samples gives with s block rows.
func hankelColumns(T, s int) int { return max(0, T-2*s+1) }

// maxBlockRows is the largest s for which the segments give at least
// 2s(nu+ny) Hankel columns in total (the LQ step needs at least as many
// columns as rows); 0 if there is none.
func (d *segData) maxBlockRows() int {
	ok := func(s int) bool {
		j := 0
		for _, g := range d.segs {
			j += hankelColumns(g.T, s)
		}
		return j >= 2*s*(d.nu+d.ny)
	}
	maxT := 0
	for _, g := range d.segs {
		maxT = max(maxT, g.T)
	}
	lo, hi := 0, (maxT+1)/2+1 // ok(lo) holds, ok(hi) does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// withSegmentDefaults is withDefaults with the block-row limit of the
// segments (for one segment the two coincide).
func (o SubspaceOptions) withSegmentDefaults(d *segData) (SubspaceOptions, error) {
	if o.Order < 0 || o.MaxOrder < 0 || o.BlockRows < 0 {
		return o, errors.New("linear: negative subspace option")
	}
	sMax := d.maxBlockRows()
	if sMax < 2 {
		return o, errShortData
	}
	if o.BlockRows == 0 {
		maxOrder := o.MaxOrder
		if maxOrder == 0 {
			maxOrder = 10
		}
		if o.Order > 0 && maxOrder < o.Order {
			maxOrder = o.Order
		}
		s := max(10, (2*maxOrder+d.ny-1)/d.ny, o.Order+1)
		o.BlockRows = min(s, sMax)
	} else if o.BlockRows > sMax {
		return o, fmt.Errorf("linear: BlockRows %d too large for %d segment(s) of %d samples in total (max %d)", o.BlockRows, len(d.segs), d.T, sMax)
	}
	return o.withDefaults(d.T, d.ny, d.nu)
}

// poMOESPSegments is poMOESP over several segments: the block-Hankel
// columns of every segment are built separately and concatenated.
func poMOESPSegments(d *segData, s int, centre bool) (*moespResult, error) {
	ny, nu := d.ny, d.nu
	j := 0
	for _, g := range d.segs {
		j += hankelColumns(g.T, s)
	}
	r1 := nu * s
	r2 := (nu + ny) * s
	r3 := ny * s
	cols := r1 + r2 + r3
	if j < cols {
		return nil, errShortData
	}
	ht := make([]float64, j*cols)
	col := 0
	for _, g := range d.segs {
		for c := 0; c < hankelColumns(g.T, s); c++ {
			row := ht[col*cols : (col+1)*cols]
			col++
			p := 0
			for r := 0; r < s; r++ { // Uf
				copy(row[p:p+nu], g.us[(s+r+c)*nu:(s+r+c+1)*nu])
				p += nu
			}
			for r := 0; r < s; r++ { // Up
				copy(row[p:p+nu], g.us[(r+c)*nu:(r+c+1)*nu])
				p += nu
			}
			for r := 0; r < s; r++ { // Yp
				copy(row[p:p+ny], g.ys[(r+c)*ny:(r+c+1)*ny])
				p += ny
			}
			for r := 0; r < s; r++ { // Yf
				copy(row[p:p+ny], g.ys[(s+r+c)*ny:(s+r+c+1)*ny])
				p += ny
			}
		}
	}
	return moespFromHankel(ht, j, cols, r1, r2, r3, s, centre)
}

// moespFromHankel is the LQ + SVD part of poMOESP on the transposed,
// stacked block-Hankel matrix ht (j × cols, row-major).
func moespFromHankel(ht []float64, j, cols, r1, r2, r3, s int, centre bool) (*moespResult, error) {
	if centre {
		mean := make([]float64, cols)
		for c := 0; c < j; c++ {
			for i, v := range ht[c*cols : (c+1)*cols] {
				mean[i] += v
			}
		}
		for i := range mean {
			mean[i] /= float64(j)
		}
		for c := 0; c < j; c++ {
			row := ht[c*cols : (c+1)*cols]
			for i := range row {
				row[i] -= mean[i]
			}
		}
	}
	a := mat.NewDense(j, cols, ht)
	raw := a.RawMatrix()
	tau := make([]float64, cols)
	work := []float64{0}
	lapack64.Geqrf(raw, tau, work, -1)
	work = make([]float64, int(work[0]))
	lapack64.Geqrf(raw, tau, work, len(work))
	l32 := mat.NewDense(r3, r2, nil)
	for aa := 0; aa < r3; aa++ {
		for b := 0; b < r2; b++ {
			l32.Set(aa, b, raw.Data[(r1+b)*raw.Stride+r1+r2+aa])
		}
	}
	var svd mat.SVD
	if !svd.Factorize(l32, mat.SVDThinU) {
		return nil, errors.New("linear: SVD failed in subspace step")
	}
	res := &moespResult{s: s, U: &mat.Dense{}}
	svd.UTo(res.U)
	res.sv = svd.Values(nil)
	return res, nil
}

// fitBDX0Segments is fitBDX0 over several segments: B, D, the offset e and
// one initial state per segment, by one least-squares problem on the
// simulation error of all segments. One segment is solved exactly as
// fitBDX0 (fitBDX0SegmentsDense); several by eliminating the initial states
// (fitBDX0Projected), so that the problem does not grow by N columns per
// segment.
func fitBDX0Segments(a, c []float64, n int, d *segData, feedthrough, offset bool) (b, dd []float64, x0s [][]float64, e []float64, err error) {
	if len(d.segs) == 1 {
		return fitBDX0SegmentsDense(a, c, n, d, feedthrough, offset)
	}
	return fitBDX0Projected(a, c, n, d, feedthrough, offset)
}

// fillBDColumns writes, for the rows of segment g, the columns of the
// simulated output's dependence on B (B[i][in] at column i·nu+in, from
// the zero-state recursions) and, with feedthrough, on D (column
// dCol+o·nu+in) into dst (row-major, stride p).
func fillBDColumns(dst []float64, p int, a, c []float64, n, ny, nu int, g *ssData, feedthrough bool, dCol int) {
	z := make([]float64, n*n)
	zn := make([]float64, n*n)
	cz := make([]float64, ny*n)
	for in := 0; in < nu; in++ {
		clear(z)
		for k := 0; k < g.T; k++ {
			matMulFlat(cz, c, z, ny, n, n)
			for o := 0; o < ny; o++ {
				row := dst[(k*ny+o)*p:]
				for i := 0; i < n; i++ {
					row[i*nu+in] = cz[o*n+i]
				}
			}
			matMulFlat(zn, a, z, n, n, n)
			uk := g.us[k*nu+in]
			for i := 0; i < n; i++ {
				zn[i*n+i] += uk
			}
			z, zn = zn, z
		}
	}
	if feedthrough {
		for k := 0; k < g.T; k++ {
			for o := 0; o < ny; o++ {
				row := dst[(k*ny+o)*p:]
				for in := 0; in < nu; in++ {
					row[dCol+o*nu+in] = g.us[k*nu+in]
				}
			}
		}
	}
}

// fitBDX0Projected solves the problem of fitBDX0Segments by variable
// projection: for fixed B, D, e each segment's initial state is a linear
// least-squares fit, so every segment's rows are projected onto the
// orthogonal complement of its observability columns C A^k (thin SVD,
// directions with σ ≤ 1e-10·σ_max treated as unobservable and left to the
// minimum-norm solution), the projected rows of all segments give B, D, e,
// and each initial state is then the minimum-norm least-squares fit of its
// segment (as EstimateX0LS over the whole segment).
func fitBDX0Projected(a, c []float64, n int, d *segData, feedthrough, offset bool) (b, dd []float64, x0s [][]float64, e []float64, err error) {
	ny, nu := d.ny, d.nu
	nB := n * nu
	nD := 0
	if feedthrough {
		nD = ny * nu
	}
	nE := 0
	if offset {
		nE = ny
	}
	q := nB + nD + nE
	big := mat.NewDense(d.T*ny, q, nil)
	br := big.RawMatrix()
	rhs := mat.NewDense(d.T*ny, 1, nil)
	rowOff := 0
	for _, g := range d.segs {
		rk := g.T * ny
		gv := big.Slice(rowOff, rowOff+rk, 0, q).(*mat.Dense)
		yv := rhs.Slice(rowOff, rowOff+rk, 0, 1).(*mat.Dense)
		fillBDColumns(br.Data[rowOff*br.Stride:], br.Stride, a, c, n, ny, nu, g, feedthrough, nB)
		obs := mat.NewDense(rk, n, nil)
		pk := append([]float64(nil), c...)
		pn := make([]float64, len(pk))
		for k := 0; k < g.T; k++ {
			for o := 0; o < ny; o++ {
				obs.SetRow(k*ny+o, pk[o*n:(o+1)*n])
				if offset {
					gv.Set(k*ny+o, nB+nD+o, 1)
				}
				yv.Set(k*ny+o, 0, g.ys[k*ny+o])
			}
			matMulFlat(pn, pk, a, ny, n, n)
			pk, pn = pn, pk
		}
		var svd mat.SVD
		if !svd.Factorize(obs, mat.SVDThinU) {
			return nil, nil, nil, nil, errors.New("linear: SVD failed in the initial-state projection")
		}
		sv := svd.Values(nil)
		r := 0
		for r < len(sv) && sv[r] > 1e-10*sv[0] {
			r++
		}
		if r > 0 {
			var u mat.Dense
			svd.UTo(&u)
			ur := u.Slice(0, rk, 0, r)
			var t, corr mat.Dense
			t.Mul(ur.T(), gv)
			corr.Mul(ur, &t)
			gv.Sub(gv, &corr)
			t.Reset()
			corr.Reset()
			t.Mul(ur.T(), yv)
			corr.Mul(ur, &t)
			yv.Sub(yv, &corr)
		}
		rowOff += rk
	}
	x, err := lstsq(big, rhs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	th := make([]float64, q)
	for i := range th {
		th[i] = x.At(i, 0)
	}
	b = th[:nB]
	if feedthrough {
		dd = th[nB : nB+nD]
	} else {
		dd = make([]float64, ny*nu)
	}
	e = make([]float64, ny)
	copy(e, th[nB+nD:])
	tmp := newStateSpace(n, ny, nu, a, b, c, dd)
	x0s = make([][]float64, len(d.segs))
	for k, g := range d.segs {
		ys := make([]float64, len(g.ys))
		for i, v := range g.ys {
			ys[i] = v - e[i%ny]
		}
		x0s[k] = tmp.estimateX0Scaled(ys, g.us, g.T, false)
	}
	return b, dd, x0s, e, nil
}

// fitBDX0SegmentsDense solves the problem of fitBDX0Segments as one dense
// least-squares problem with the parameters B, D, x0 of segment 0, 1, …, e
// (for one segment exactly fitBDX0).
func fitBDX0SegmentsDense(a, c []float64, n int, d *segData, feedthrough, offset bool) (b, dd []float64, x0s [][]float64, e []float64, err error) {
	ny, nu, S := d.ny, d.nu, len(d.segs)
	nB := n * nu
	nD := 0
	if feedthrough {
		nD = ny * nu
	}
	nE := 0
	if offset {
		nE = ny
	}
	offE := nB + nD + n*S
	p := offE + nE
	phi := mat.NewDense(d.T*ny, p, nil)
	pr := phi.RawMatrix()
	z := make([]float64, n*n)
	zn := make([]float64, n*n)
	cz := make([]float64, ny*n)
	rhsData := make([]float64, 0, d.T*ny)
	rowOff := 0
	for si, g := range d.segs {
		rhsData = append(rhsData, g.ys...)
		for in := 0; in < nu; in++ {
			clear(z)
			for k := 0; k < g.T; k++ {
				matMulFlat(cz, c, z, ny, n, n)
				for o := 0; o < ny; o++ {
					row := pr.Data[(rowOff+k*ny+o)*pr.Stride:]
					for i := 0; i < n; i++ {
						row[i*nu+in] = cz[o*n+i]
					}
				}
				matMulFlat(zn, a, z, n, n, n)
				uk := g.us[k*nu+in]
				for i := 0; i < n; i++ {
					zn[i*n+i] += uk
				}
				z, zn = zn, z
			}
		}
		xoff := nB + nD + si*n
		pk := append([]float64(nil), c...)
		pn := make([]float64, len(pk))
		for k := 0; k < g.T; k++ {
			for o := 0; o < ny; o++ {
				row := pr.Data[(rowOff+k*ny+o)*pr.Stride:]
				copy(row[xoff:xoff+n], pk[o*n:(o+1)*n])
				if offset {
					row[offE+o] = 1
				}
				if feedthrough {
					for in := 0; in < nu; in++ {
						row[nB+o*nu+in] = g.us[k*nu+in]
					}
				}
			}
			matMulFlat(pn, pk, a, ny, n, n)
			pk, pn = pn, pk
		}
		rowOff += g.T * ny
	}
	rhs := mat.NewDense(d.T*ny, 1, rhsData)
	x, err := lstsq(phi, rhs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	th := make([]float64, p)
	for i := range th {
		th[i] = x.At(i, 0)
	}
	b = th[:nB]
	if feedthrough {
		dd = th[nB : nB+nD]
	} else {
		dd = make([]float64, ny*nu)
	}
	x0s = make([][]float64, S)
	for si := range x0s {
		x0s[si] = th[nB+nD+si*n : nB+nD+(si+1)*n]
	}
	e = make([]float64, ny)
	copy(e, th[offE:])
	return b, dd, x0s, e, nil
}

// FitSubspaceSegments is FitSubspace for data made of several separate
// segments (multi-experiment PO-MOESP, see the top of segments.go): the
// Hankel columns of every segment are concatenated, B, D, the offset and
// one initial state per segment are estimated on the simulation error of
// all segments, and the optional refinement minimises the sum of the
// segments' simulation errors, each from its own estimated initial state.
// Stability is enforced as in FitSubspace. BlockRows defaults as in
// FitSubspace, limited so that the segments give enough Hankel columns.
// X0Train holds the initial state of the first segment; the prior for
// EstimateX0 pools the simulated states of all segments.
func FitSubspaceSegments(ys, us [][][]float64, opts SubspaceOptions) (*StateSpace, error) {
	d, err := prepareSegments(ys, us, opts.Scaling)
	if err != nil {
		return nil, err
	}
	opts, err = opts.withSegmentDefaults(d)
	if err != nil {
		return nil, err
	}
	r, err := poMOESPSegments(d, opts.BlockRows, !opts.NoOffset)
	if err != nil {
		return nil, err
	}
	return fitFromMOESPSegments(d, r, opts)
}

func fitFromMOESPSegments(d *segData, r *moespResult, opts SubspaceOptions) (*StateSpace, error) {
	n := opts.Order
	if n == 0 {
		n = autoOrder(r.sv, min(opts.MaxOrder, d.ny*r.s-1))
	}
	if n >= d.ny*r.s {
		return nil, fmt.Errorf("linear: order %d too large for %d block rows", n, r.s)
	}
	a, c, err := acFromGamma(r, d.ny, n)
	if err != nil {
		return nil, err
	}
	a, changed := stabilize(a, opts.StabilityRadius)
	af, cf := flat(a), flat(c)
	b, dd, x0s, e, err := fitBDX0Segments(af, cf, n, d, opts.Feedthrough, !opts.NoOffset)
	if err != nil {
		return nil, err
	}
	m := newStateSpace(n, d.ny, d.nu, af, b, cf, dd)
	m.UMean, m.UStd, m.Scaling = d.uMean, d.uStd, d.scaling
	m.YStd = d.yStd
	m.BlockRows = r.s
	m.SingularValues = r.sv
	m.Stabilized = changed
	m.TrainMSE = m.trainMSESegments(d, x0s, e)
	m.TrainMSEInit = m.TrainMSE
	if opts.Refine {
		x0s, e = refineLMSegments(m, d, x0s, e, opts)
	}
	m.X0Train = append([]float64(nil), x0s[0]...)
	m.YMean = make([]float64, d.ny)
	for o := range m.YMean {
		m.YMean[o] = d.yMean[o] + d.yStd[o]*e[o]
	}
	m.OutputOffset = e
	m.setPriorSegments(d, x0s, e)
	return m, nil
}

// trainMSESegments is the mean squared simulation error (scaled units)
// over all segments, each simulated from its own initial state.
func (m *StateSpace) trainMSESegments(d *segData, x0s [][]float64, e []float64) float64 {
	s := 0.0
	for k, g := range d.segs {
		ys := make([]float64, g.T*d.ny)
		m.simScaled(g.us, g.T, x0s[k], ys, nil)
		for i, v := range ys {
			r := v + e[i%d.ny] - g.ys[i]
			s += r * r
		}
	}
	return s / float64(d.T*d.ny)
}

// refineLMSegments is refineLM over several segments. The parameter vector
// is A, B, C, D, x0 of every segment, e. A segment's residuals depend on the
// shared parameters (A, B, C, D, e) and on its own initial state only, so
// the normal equations JᵀJ, Jᵀr have an arrow structure: they are
// accumulated segment by segment from each segment's Jacobian, and (for
// more than one segment) every damped Levenberg–Marquardt system is solved
// by eliminating the initial-state blocks (Schur complement on the shared
// parameters), so the cost grows linearly with the number of segments.
// With one segment the computation is exactly refineLM's. It returns the
// refined initial states and offset and updates m like refineLM.
func refineLMSegments(m *StateSpace, d *segData, x0s [][]float64, e0 []float64, opts SubspaceOptions) ([][]float64, []float64) {
	n, ny, S := m.N, d.ny, len(d.segs)
	l := newPEMLayout(n, d.ny, d.nu, opts.Feedthrough, !opts.NoOffset)
	shared := l.offX        // A, B, C, D
	nE := l.params - l.offE // e
	ps := shared + nE       // shared parameters
	P := shared + n*S + nE  // global parameter count
	offEG := shared + n*S   // e in the global vector
	pl := l.params          // local parameters of one segment: shared, x0, e
	th := make([]float64, P)
	copy(th, m.a)
	copy(th[l.offB:], m.b)
	copy(th[l.offC:], m.c)
	if l.ft {
		copy(th[l.offD:], m.d)
	}
	for k := range x0s {
		copy(th[shared+k*n:], x0s[k])
	}
	if l.off {
		copy(th[offEG:], e0)
	}
	x0of := func(th []float64, k int) []float64 { return th[shared+k*n : shared+(k+1)*n] }
	offsetOf := func(th []float64) []float64 {
		e := make([]float64, ny)
		if l.off {
			copy(e, th[offEG:P])
		}
		return e
	}
	// sIdx maps a shared-parameter index (0..ps) to the global vector.
	sIdx := func(i int) int {
		if i < shared {
			return i
		}
		return offEG + i - shared
	}
	rows := d.T * ny
	rowOff := make([]int, S)
	xOff := make([]int, S)
	maxRows := 0
	for k, g := range d.segs {
		if k > 0 {
			rowOff[k] = rowOff[k-1] + d.segs[k-1].T*ny
			xOff[k] = xOff[k-1] + (d.segs[k-1].T+1)*n
		}
		maxRows = max(maxRows, g.T*ny)
	}
	res := make([]float64, rows)
	xs := make([]float64, d.T*n+S*n)
	cost := func(th []float64) (float64, bool) {
		mm := l.model(th)
		if spectralRadius(mm.A) >= opts.StabilityRadius {
			return math.Inf(1), false
		}
		e := offsetOf(th)
		s := 0.0
		for k, g := range d.segs {
			r := res[rowOff[k] : rowOff[k]+g.T*ny]
			mm.simScaled(g.us, g.T, x0of(th, k), r, xs[xOff[k]:xOff[k]+(g.T+1)*n])
			for i := range r {
				r[i] += e[i%ny] - g.ys[i]
				s += r[i] * r[i]
			}
		}
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return math.Inf(1), false
		}
		return s, true
	}
	c0, ok := cost(th)
	if !ok {
		return x0s, e0
	}
	m.TrainMSEInit = c0 / float64(rows)
	jac := make([]float64, maxRows*pl)
	resCur := make([]float64, rows)
	copy(resCur, res)

	// Normal equations. One segment: the dense JᵀJ (h) and Jᵀr (g) of
	// refineLM. Several: the blocks hss (shared × shared), hsk[k] (shared ×
	// x0_k), hkk[k] (x0_k × x0_k) and gs, gk[k].
	var h mat.SymDense
	g := mat.NewVecDense(pl, nil)
	var hss *mat.SymDense
	var gs []float64
	var hsk []*mat.Dense
	var hkk []*mat.SymDense
	var gk [][]float64
	if S > 1 {
		hss = mat.NewSymDense(ps, nil)
		gs = make([]float64, ps)
		for k := 0; k < S; k++ {
			hsk = append(hsk, mat.NewDense(ps, n, nil))
			hkk = append(hkk, mat.NewSymDense(n, nil))
			gk = append(gk, make([]float64, n))
		}
	}
	// local → shared index (−1 for the x0 columns)
	lsh := func(i int) int {
		switch {
		case i < shared:
			return i
		case i < shared+n:
			return -1
		default:
			return i - n
		}
	}
	buildNormal := func() {
		mm := l.model(th)
		if S > 1 {
			hss.Zero()
			clear(gs)
		}
		for k, sg := range d.segs {
			rk := sg.T * ny
			jk := jac[:rk*pl]
			jacobianSegment(jk, l, mm, x0of(th, k), sg)
			J := mat.NewDense(rk, pl, jk)
			rv := mat.NewVecDense(rk, resCur[rowOff[k]:rowOff[k]+rk])
			if S == 1 {
				h.SymOuterK(1, J.T())
				g.MulVec(J.T(), rv)
				return
			}
			var hk mat.SymDense
			hk.SymOuterK(1, J.T())
			var gv mat.VecDense
			gv.MulVec(J.T(), rv)
			for i := 0; i < pl; i++ {
				si := lsh(i)
				if si < 0 {
					gk[k][i-shared] = gv.AtVec(i)
					for j := i; j < shared+n; j++ {
						hkk[k].SetSym(i-shared, j-shared, hk.At(i, j))
					}
					continue
				}
				gs[si] += gv.AtVec(i)
				for j := 0; j < pl; j++ {
					sj := lsh(j)
					switch {
					case sj < 0:
						hsk[k].Set(si, j-shared, hk.At(i, j))
					case sj >= si:
						hss.SetSym(si, sj, hss.At(si, sj)+hk.At(i, j))
					}
				}
			}
		}
	}
	// diagonal of the normal matrix in global order, and its maximum
	diagOf := func() ([]float64, float64) {
		dg := make([]float64, P)
		if S == 1 {
			for i := range dg {
				dg[i] = h.At(i, i)
			}
		} else {
			for i := 0; i < ps; i++ {
				dg[sIdx(i)] = hss.At(i, i)
			}
			for k := 0; k < S; k++ {
				for i := 0; i < n; i++ {
					dg[shared+k*n+i] = hkk[k].At(i, i)
				}
			}
		}
		maxd := 0.0
		for _, v := range dg {
			maxd = math.Max(maxd, v)
		}
		return dg, maxd
	}
	step := make([]float64, P)
	stepVec := mat.NewVecDense(pl, nil)
	// solve computes the LM step for damping mu; false if a factorisation
	// fails.
	solve := func(dg []float64, maxd, mu float64) bool {
		damp := func(v float64) float64 { return v + mu*(v+1e-9*maxd) }
		if S == 1 {
			hm := mat.NewSymDense(P, nil)
			hm.CopySym(&h)
			for i := range dg {
				hm.SetSym(i, i, damp(dg[i]))
			}
			var ch mat.Cholesky
			if !ch.Factorize(hm) {
				return false
			}
			if err := ch.SolveVecTo(stepVec, g); err != nil {
				return false
			}
			copy(step, stepVec.RawVector().Data)
			return true
		}
		ds := make([]float64, ps)
		for i := range ds {
			ds[i] = damp(dg[sIdx(i)])
		}
		dks := make([][]float64, S)
		for k := range dks {
			dks[k] = make([]float64, n)
			for i := range dks[k] {
				dks[k][i] = damp(dg[shared+k*n+i])
			}
		}
		sx, kx, ok := solveArrow(hss, hsk, hkk, gs, gk, ds, dks)
		if !ok {
			return false
		}
		for i := 0; i < ps; i++ {
			step[sIdx(i)] = sx[i]
		}
		for k := 0; k < S; k++ {
			copy(step[shared+k*n:], kx[k])
		}
		return true
	}
	mu := 1e-3
	cur := c0
	accepted := 0
	trial := make([]float64, P)
	for it := 0; it < opts.RefineIters; it++ {
		buildNormal()
		dg, maxd := diagOf()
		if maxd == 0 {
			break
		}
		improved := false
		for try := 0; try < 12; try++ {
			if !solve(dg, maxd, mu) {
				mu *= 10
				continue
			}
			for i := range trial {
				trial[i] = th[i] - step[i]
			}
			c, ok := cost(trial)
			if ok && c < cur {
				rel := (cur - c) / cur
				copy(th, trial)
				copy(resCur, res)
				cur = c
				mu = math.Max(mu/3, 1e-12)
				improved = true
				accepted++
				if rel < 1e-9 {
					it = opts.RefineIters
				}
				break
			}
			mu *= 10
			if mu > 1e10 {
				break
			}
		}
		if !improved {
			break
		}
	}
	final := l.model(th)
	m.A, m.B, m.C, m.D = final.A, final.B, final.C, final.D
	m.sync()
	out := make([][]float64, S)
	for k := range out {
		out[k] = append([]float64(nil), x0of(th, k)...)
	}
	m.TrainMSE = cur / float64(rows)
	m.Refined = true
	m.RefineIters = accepted
	return out, offsetOf(th)
}

// solveArrow solves the symmetric positive definite arrow system
//
//	[ Hss    Hs1  …  HsS ] [xs]   [gs]
//	[ H1s    H11         ] [x1] = [g1]
//	[  ⋮           ⋱     ] [ ⋮]   [ ⋮]
//	[ HSs            HSS ] [xS]   [gS]
//
// whose diagonals are replaced by diagS (shared block) and diagK[k]
// (block k), by eliminating the diagonal blocks: the Schur complement
// Σ = Hss − Σ_k Hsk Hkk⁻¹ Hks gives xs = Σ⁻¹ (gs − Σ_k Hsk Hkk⁻¹ gk), then
// xk = Hkk⁻¹ (gk − Hks xs). ok is false if a Cholesky factorisation fails.
func solveArrow(hss *mat.SymDense, hsk []*mat.Dense, hkk []*mat.SymDense, gs []float64, gk [][]float64, diagS []float64, diagK [][]float64) (xs []float64, xk [][]float64, ok bool) {
	ps := hss.SymmetricDim()
	sch := mat.NewDense(ps, ps, nil)
	for i := 0; i < ps; i++ {
		for j := i; j < ps; j++ {
			v := hss.At(i, j)
			if i == j {
				v = diagS[i]
			}
			sch.Set(i, j, v)
			sch.Set(j, i, v)
		}
	}
	rs := mat.NewVecDense(ps, append([]float64(nil), gs...))
	chols := make([]mat.Cholesky, len(hkk))
	var x, w mat.Dense
	var t mat.VecDense
	for k := range hkk {
		n := hkk[k].SymmetricDim()
		hd := mat.NewSymDense(n, nil)
		hd.CopySym(hkk[k])
		for i := 0; i < n; i++ {
			hd.SetSym(i, i, diagK[k][i])
		}
		if !chols[k].Factorize(hd) {
			return nil, nil, false
		}
		x.Reset()
		if err := chols[k].SolveTo(&x, hsk[k].T()); err != nil { // Hkk⁻¹ Hks
			return nil, nil, false
		}
		w.Reset()
		w.Mul(hsk[k], &x)
		sch.Sub(sch, &w)
		t.Reset()
		t.MulVec(x.T(), mat.NewVecDense(n, gk[k]))
		rs.SubVec(rs, &t)
	}
	ss := mat.NewSymDense(ps, nil)
	for i := 0; i < ps; i++ {
		for j := i; j < ps; j++ {
			ss.SetSym(i, j, 0.5*(sch.At(i, j)+sch.At(j, i)))
		}
	}
	var cs mat.Cholesky
	if !cs.Factorize(ss) {
		return nil, nil, false
	}
	dsv := mat.NewVecDense(ps, nil)
	if err := cs.SolveVecTo(dsv, rs); err != nil {
		return nil, nil, false
	}
	xs = append([]float64(nil), dsv.RawVector().Data...)
	xk = make([][]float64, len(hkk))
	for k := range hkk {
		n := hkk[k].SymmetricDim()
		t.Reset()
		t.MulVec(hsk[k].T(), dsv)
		rk := mat.NewVecDense(n, append([]float64(nil), gk[k]...))
		rk.SubVec(rk, &t)
		dk := mat.NewVecDense(n, nil)
		if err := chols[k].SolveVecTo(dk, rk); err != nil {
			return nil, nil, false
		}
		xk[k] = dk.RawVector().Data
	}
	return xs, xk, true
}

// jacobianSegment fills jac (rows = T·ny of segment g, row-major, columns
// = the local parameters A, B, C, D, x0, e of layout l) with ∂ŷ/∂θ for the
// model mm started at x0 (the recursions of jacobianSS).
func jacobianSegment(jac []float64, l pemLayout, mm *StateSpace, x0 []float64, g *ssData) {
	n, ny, nu, T := l.n, l.ny, l.nu, g.T
	p := l.params
	ytmp := make([]float64, T*ny)
	xs := make([]float64, (T+1)*n)
	mm.simScaled(g.us, T, x0, ytmp, xs)
	a, c := mm.a, mm.c
	clear(jac)
	z := make([]float64, n*n)
	zn := make([]float64, n*n)
	cz := make([]float64, ny*n)
	inject := func(col func(i int) int, w func(k int) float64, init bool) {
		clear(z)
		if init {
			for i := 0; i < n; i++ {
				z[i*n+i] = 1
			}
		}
		for k := 0; k < T; k++ {
			matMulFlat(cz, c, z, ny, n, n)
			for o := 0; o < ny; o++ {
				row := jac[(k*ny+o)*p:]
				for i := 0; i < n; i++ {
					row[col(i)] = cz[o*n+i]
				}
			}
			matMulFlat(zn, a, z, n, n, n)
			if w != nil {
				if wk := w(k); wk != 0 {
					for i := 0; i < n; i++ {
						zn[i*n+i] += wk
					}
				}
			}
			z, zn = zn, z
		}
	}
	for j := 0; j < n; j++ {
		jj := j
		inject(func(i int) int { return i*n + jj }, func(k int) float64 { return xs[k*n+jj] }, false)
	}
	for in := 0; in < nu; in++ {
		ii := in
		inject(func(i int) int { return l.offB + i*nu + ii }, func(k int) float64 { return g.us[k*nu+ii] }, false)
	}
	inject(func(i int) int { return l.offX + i }, nil, true)
	for k := 0; k < T; k++ {
		for o := 0; o < ny; o++ {
			row := jac[(k*ny+o)*p:]
			copy(row[l.offC+o*n:l.offC+(o+1)*n], xs[k*n:(k+1)*n])
			if l.ft {
				copy(row[l.offD+o*nu:l.offD+(o+1)*nu], g.us[k*nu:(k+1)*nu])
			}
			if l.off {
				row[l.offE+o] = 1
			}
		}
	}
}

// setPriorSegments is setPrior over several segments: the state mean and
// covariance pool the simulated states of all segments (each from its own
// initial state), the noise variance all simulation errors.
func (m *StateSpace) setPriorSegments(d *segData, x0s [][]float64, e []float64) {
	N := m.N
	yss := make([][]float64, len(d.segs))
	xss := make([][]float64, len(d.segs))
	for k, g := range d.segs {
		yss[k] = make([]float64, g.T*d.ny)
		xss[k] = make([]float64, (g.T+1)*N)
		m.simScaled(g.us, g.T, x0s[k], yss[k], xss[k])
	}
	T := float64(d.T)
	mean := make([]float64, N)
	for k, g := range d.segs {
		for t := 0; t < g.T; t++ {
			for i := 0; i < N; i++ {
				mean[i] += xss[k][t*N+i]
			}
		}
	}
	for i := range mean {
		mean[i] /= T
	}
	cov := mat.NewSymDense(N, nil)
	for k, g := range d.segs {
		for t := 0; t < g.T; t++ {
			x := xss[k][t*N : (t+1)*N]
			for i := 0; i < N; i++ {
				for j := i; j < N; j++ {
					cov.SetSym(i, j, cov.At(i, j)+(x[i]-mean[i])*(x[j]-mean[j])/T)
				}
			}
		}
	}
	nv := make([]float64, d.ny)
	for k, g := range d.segs {
		for t := 0; t < g.T; t++ {
			for o := 0; o < d.ny; o++ {
				r := yss[k][t*d.ny+o] + e[o] - g.ys[t*d.ny+o]
				nv[o] += r * r / T
			}
		}
	}
	m.XMean, m.XCov, m.NoiseVar = mean, cov, nv
}

// pooledScore computes per-output RMSE and NRMSE over samples k ≥ start of
// every segment together (the std is that of the pooled true values).
func pooledScore(yTrue, yPred [][][]float64, start int) (rmse, nrmse []float64) {
	var yt, yp [][]float64
	for k := range yTrue {
		if len(yTrue[k]) > start {
			yt = append(yt, yTrue[k][start:]...)
			yp = append(yp, yPred[k][start:]...)
		}
	}
	return RMSE(yt, yp, 0), NRMSE(yt, yp, 0)
}

func segProgress(progress func(done, total int) error, done, total int) error {
	if progress == nil {
		return nil
	}
	return progress(done, total)
}

// usableSegments returns the indices of the segments longer than start.
func usableSegments(y [][][]float64, start int) []int {
	var idx []int
	for k := range y {
		if len(y[k]) > start {
			idx = append(idx, k)
		}
	}
	return idx
}

// SelectARXSegments is SelectARX for segmented data: every candidate
// (orders × lambdas) is fitted with FitARXSegments on the training segments
// (opts gives scaling and intercept; its Lambda is replaced by each value
// of lambdas, nil meaning {0}) and scored on every validation segment
// longer than the largest MaxLag of the grid, with the free run
// ("simulation") initialised from that many measured outputs of the
// segment, or with one-step prediction ("one_step"). RMSE and NRMSE pool
// the scored samples of all validation segments (samples k ≥ start of each
// segment; the NRMSE divides by the std of the pooled true values). The
// best model (fitted on the training segments only) and all scores are
// returned. progress, if not nil, is called after every candidate with the
// number of candidates done and their total; a non-nil error from it stops
// the selection and is returned.
func SelectARXSegments(yTr, uTr, yVal, uVal [][][]float64, grid []ARXOrders, lambdas []float64, criterion string, opts ARXOptions, progress func(done, total int) error) (*ARX, []Score, error) {
	if criterion == "" {
		criterion = CriterionSimulation
	}
	if criterion != CriterionSimulation && criterion != CriterionOneStep {
		return nil, nil, fmt.Errorf("linear: unknown criterion %q", criterion)
	}
	if len(grid) == 0 {
		return nil, nil, errors.New("linear: empty ARX grid")
	}
	if len(lambdas) == 0 {
		lambdas = []float64{0}
	}
	if _, _, err := checkSegments(yVal, uVal); err != nil {
		return nil, nil, err
	}
	start := 0
	for _, o := range grid {
		start = max(start, o.MaxLag())
	}
	use := usableSegments(yVal, start)
	if len(use) == 0 {
		return nil, nil, fmt.Errorf("linear: no validation segment is longer than the largest lag %d", start)
	}
	var best *ARX
	bestV := math.Inf(1)
	var scores []Score
	for _, o := range grid {
		for _, lam := range lambdas {
			sc := Score{Orders: o, Lambda: lam, Criterion: criterion, Start: start, Value: math.Inf(1)}
			op := opts
			op.Lambda = lam
			m, err := FitARXSegments(yTr, uTr, o, op)
			if err != nil {
				sc.Err = err
				scores = append(scores, sc)
				if err := segProgress(progress, len(scores), len(grid)*len(lambdas)); err != nil {
					return nil, scores, err
				}
				continue
			}
			yt := make([][][]float64, 0, len(use))
			yp := make([][][]float64, 0, len(use))
			for _, k := range use {
				var pred [][]float64
				if criterion == CriterionSimulation {
					pred = m.Simulate(uVal[k], yVal[k][:start])
				} else {
					pred = m.PredictOneStep(yVal[k], uVal[k])
				}
				yt, yp = append(yt, yVal[k]), append(yp, pred)
			}
			sc.RMSE, sc.NRMSE = pooledScore(yt, yp, start)
			sc.Value = finiteOr(Mean(sc.NRMSE))
			scores = append(scores, sc)
			if sc.Value < bestV {
				best, bestV = m, sc.Value
			}
			if err := segProgress(progress, len(scores), len(grid)*len(lambdas)); err != nil {
				return nil, scores, err
			}
		}
	}
	if best == nil {
		return nil, scores, errors.New("linear: no ARX candidate could be fitted and evaluated")
	}
	return best, scores, nil
}

// SelectStateSpaceSegments is SelectStateSpace for segmented data: one
// multi-experiment PO-MOESP decomposition of the training segments is
// shared by all candidate orders; each model (FitSubspaceSegments with opts
// and that order) is scored by free-run simulation of every validation
// segment longer than opts.NInit (default 5), with the initial state
// estimated from its first NInit samples. RMSE and NRMSE pool the samples
// k ≥ NInit of all those segments. The best model (fitted on the training
// segments only) and all scores are returned. progress is as in
// SelectARXSegments (called after the decomposition with done = 0, then
// after every order).
func SelectStateSpaceSegments(yTr, uTr, yVal, uVal [][][]float64, orders []int, opts SubspaceOptions, progress func(done, total int) error) (*StateSpace, []Score, error) {
	if len(orders) == 0 {
		return nil, nil, errors.New("linear: no candidate orders")
	}
	d, err := prepareSegments(yTr, uTr, opts.Scaling)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := checkSegments(yVal, uVal); err != nil {
		return nil, nil, err
	}
	maxN := 0
	for _, n := range orders {
		if n <= 0 {
			return nil, nil, fmt.Errorf("linear: order %d must be positive", n)
		}
		maxN = max(maxN, n)
	}
	base := opts
	base.Order = maxN
	base, err = base.withSegmentDefaults(d)
	if err != nil {
		return nil, nil, err
	}
	start := base.NInit
	use := usableSegments(yVal, start)
	if len(use) == 0 {
		return nil, nil, fmt.Errorf("linear: no validation segment is longer than NInit = %d", start)
	}
	r, err := poMOESPSegments(d, base.BlockRows, !base.NoOffset)
	if err != nil {
		return nil, nil, err
	}
	if err := segProgress(progress, 0, len(orders)); err != nil {
		return nil, nil, err
	}
	var best *StateSpace
	bestV := math.Inf(1)
	var scores []Score
	for _, n := range orders {
		o := base
		o.Order = n
		sc := Score{Order: n, BlockRows: base.BlockRows, Criterion: CriterionSimulation, Start: start, Value: math.Inf(1)}
		m, err := fitFromMOESPSegments(d, r, o)
		if err != nil {
			sc.Err = err
			scores = append(scores, sc)
			if err := segProgress(progress, len(scores), len(orders)); err != nil {
				return nil, scores, err
			}
			continue
		}
		yt := make([][][]float64, 0, len(use))
		yp := make([][][]float64, 0, len(use))
		for _, k := range use {
			yt = append(yt, yVal[k])
			yp = append(yp, m.SimulateFrom(yVal[k], uVal[k], start))
		}
		sc.RMSE, sc.NRMSE = pooledScore(yt, yp, start)
		sc.Value = finiteOr(Mean(sc.NRMSE))
		scores = append(scores, sc)
		if sc.Value < bestV {
			best, bestV = m, sc.Value
		}
		if err := segProgress(progress, len(scores), len(orders)); err != nil {
			return nil, scores, err
		}
	}
	if best == nil {
		return nil, scores, errors.New("linear: no state-space candidate could be fitted")
	}
	return best, scores, nil
}

// Restore makes an ARX model whose exported fields were filled from a
// saved copy (e.g. decoded from JSON) usable: it checks that Orders, NY,
// NU, the statistics and Theta are consistent and sets the internal
// regressor count. The restored model predicts exactly like the original.
func (m *ARX) Restore() error {
	if err := m.Orders.validate(); err != nil {
		return err
	}
	if m.NY <= 0 || m.NU < 0 {
		return fmt.Errorf("linear: ARX with %d outputs and %d inputs", m.NY, m.NU)
	}
	if err := restoreCheckStats("y", m.YMean, m.YStd, m.NY); err != nil {
		return err
	}
	if err := restoreCheckStats("u", m.UMean, m.UStd, m.NU); err != nil {
		return err
	}
	p := numRegressors(m.Orders, m.NY, m.NU, m.Intercept)
	if p == 0 {
		return errors.New("linear: ARX model has no regressors")
	}
	if m.Theta == nil {
		return errors.New("linear: ARX without parameters")
	}
	if r, c := m.Theta.Dims(); r != p || c != m.NY {
		return fmt.Errorf("linear: Theta is %d×%d, %v with %d outputs and %d inputs needs %d×%d", r, c, m.Orders, m.NY, m.NU, p, m.NY)
	}
	if err := restoreCheckFinite("Theta", m.Theta); err != nil {
		return err
	}
	m.regressors = p
	return nil
}

// Restore makes a state-space model whose exported fields were filled from
// a saved copy usable: it checks the dimensions of A, B, C, D, the
// statistics and (if present) the initial-state prior XMean, XCov,
// NoiseVar, and refreshes the internal flat copies of the matrices. The
// restored model simulates and estimates initial states exactly like the
// original.
func (m *StateSpace) Restore() error {
	n, ny, nu := m.N, m.NY, m.NU
	if n <= 0 || ny <= 0 || nu < 0 {
		return fmt.Errorf("linear: state-space model with order %d, %d outputs, %d inputs", n, ny, nu)
	}
	for _, c := range []struct {
		name string
		x    *mat.Dense
		r, c int
	}{{"A", m.A, n, n}, {"B", m.B, n, nu}, {"C", m.C, ny, n}, {"D", m.D, ny, nu}} {
		if c.x == nil {
			return fmt.Errorf("linear: %s missing", c.name)
		}
		if r, cc := c.x.Dims(); r != c.r || cc != c.c {
			return fmt.Errorf("linear: %s is %d×%d, want %d×%d", c.name, r, cc, c.r, c.c)
		}
		if err := restoreCheckFinite(c.name, c.x); err != nil {
			return err
		}
	}
	if err := restoreCheckStats("y", m.YMean, m.YStd, ny); err != nil {
		return err
	}
	if err := restoreCheckStats("u", m.UMean, m.UStd, nu); err != nil {
		return err
	}
	if m.XMean != nil || m.XCov != nil || m.NoiseVar != nil {
		if len(m.XMean) != n || m.XCov == nil || m.XCov.SymmetricDim() != n || len(m.NoiseVar) != ny {
			return fmt.Errorf("linear: initial-state prior needs XMean [%d], XCov %d×%d and NoiseVar [%d]", n, n, n, ny)
		}
	}
	m.sync()
	return nil
}

func restoreCheckStats(name string, mean, scale []float64, w int) error {
	if len(mean) != w || len(scale) != w {
		return fmt.Errorf("linear: %s statistics have %d means and %d scales, want %d", name, len(mean), len(scale), w)
	}
	for i := range scale {
		if !(scale[i] > 0) || math.IsInf(scale[i], 0) || math.IsNaN(mean[i]) || math.IsInf(mean[i], 0) {
			return fmt.Errorf("linear: %s channel %d has mean %g and scale %g", name, i, mean[i], scale[i])
		}
	}
	return nil
}

func restoreCheckFinite(name string, x mat.Matrix) error {
	r, c := x.Dims()
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if v := x.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("linear: %s[%d][%d] is not finite", name, i, j)
			}
		}
	}
	return nil
}
