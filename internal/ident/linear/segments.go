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
// The single-record functions (FitARXOpts, FitSubspace, SelectARX,
// SelectStateSpace) run the same code on one segment, so with a single
// segment every function gives exactly (bit for bit) the result of its
// single-record counterpart (which keeps its own argument checks and error
// messages). With several segments, the per-segment
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
// rows themselves; a single segment is returned as it is); used for
// statistics only.
func concatRows(x [][][]float64) [][]float64 {
	if len(x) == 1 {
		return x[0]
	}
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
	if err := validateARXFit(o, opts); err != nil {
		return nil, err
	}
	ny, nu, err := checkSegments(ys, us)
	if err != nil {
		return nil, err
	}
	if err := o.validateInputs(nu); err != nil {
		return nil, err
	}
	return fitARX(ys, us, ny, nu, o, opts)
}

// prepareSegments checks and scales the training segments.
func prepareSegments(ys, us [][][]float64, s Scaling) (*segData, error) {
	ny, nu, err := checkSegments(ys, us)
	if err != nil {
		return nil, err
	}
	return newSegData(ys, us, ny, nu, s), nil
}

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

// fitBDX0Projected solves the problem of fitBDX0 by variable
// projection: for fixed B, D, e each segment's initial state is a linear
// least-squares fit, so every segment's rows are projected onto the
// orthogonal complement of its observability columns C A^k (thin SVD,
// directions with σ ≤ 1e-10·σ_max treated as unobservable and left to the
// minimum-norm solution), the projected rows of all segments give B, D, e,
// and each initial state is then the minimum-norm least-squares fit of its
// segment (as EstimateX0LS over the whole segment).
func fitBDX0Projected(a, c []float64, n int, d *segData, feedthrough, offset bool) (b, dd []float64, x0s [][]float64, e []float64, err error) {
	ny, nu := d.ny, d.nu
	nB, nD, nE := bdxSizes(n, ny, nu, feedthrough, offset)
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
	b, dd = splitBD(th, nB, nD, ny, nu)
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
	return fitSubspace(d, opts)
}

// usableSegments returns the validation segments longer than start.
func usableSegments(y, u [][][]float64, start int) (ys, us [][][]float64) {
	for k := range y {
		if len(y[k]) > start {
			ys, us = append(ys, y[k]), append(us, u[k])
		}
	}
	return ys, us
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
	criterion, lambdas, start, err := arxSelectArgs(grid, lambdas, criterion)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := checkSegments(yVal, uVal); err != nil {
		return nil, nil, err
	}
	yv, uv := usableSegments(yVal, uVal, start)
	if len(yv) == 0 {
		return nil, nil, fmt.Errorf("linear: no validation segment is longer than the largest lag %d", start)
	}
	fit := func(o ARXOrders, lam float64) (*ARX, error) {
		op := opts
		op.Lambda = lam
		return FitARXSegments(yTr, uTr, o, op)
	}
	return selectARX(yv, uv, grid, lambdas, criterion, start, fit, progress)
}

// SelectStateSpaceSegments is SelectStateSpace for segmented data: one
// multi-experiment PO-MOESP decomposition of the training segments is
// shared by all candidate orders; each model (FitSubspaceSegments with opts
// and that order) is scored by free-run simulation of every validation
// segment longer than opts.NInit (default 5), with the initial state
// estimated from its first NInit samples. RMSE and NRMSE pool the samples
// k ≥ NInit of all those segments. The best model (fitted on the training
// segments only) and all scores are returned. Orders the training data
// cannot support (NY·BlockRows ≤ order for the block rows the data allow)
// are not fitted: their scores have Skipped set, and only a grid with no
// feasible order is an error. progress is as in SelectARXSegments (called
// after the decomposition with done = 0, then after every fitted order).
func SelectStateSpaceSegments(yTr, uTr, yVal, uVal [][][]float64, orders []int, opts SubspaceOptions, progress func(done, total int) error) (*StateSpace, []Score, error) {
	if len(orders) == 0 {
		return nil, nil, errNoOrders
	}
	d, err := prepareSegments(yTr, uTr, opts.Scaling)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := checkSegments(yVal, uVal); err != nil {
		return nil, nil, err
	}
	if _, err := maxOrder(orders); err != nil {
		return nil, nil, err
	}
	// orders the data cannot support are skipped, not fatal
	feasible, skipped := ssFeasible(d, orders, opts, fmt.Sprintf("%d training samples", d.T))
	if len(feasible) == 0 {
		var sc []Score
		for _, n := range orders {
			sc = append(sc, Score{Order: n, Criterion: CriterionSimulation, Value: math.Inf(1), Skipped: skipped[n]})
		}
		return nil, sc, noCandidate("state-space", sc)
	}
	maxN, _ := maxOrder(feasible)
	base := opts
	base.Order = maxN
	base, err = base.withSegmentDefaults(d)
	if err != nil {
		return nil, nil, err
	}
	start := base.NInit
	yv, uv := usableSegments(yVal, uVal, start)
	if len(yv) == 0 {
		return nil, nil, fmt.Errorf("linear: no validation segment is longer than NInit = %d", start)
	}
	r, err := poMOESP(d, base.BlockRows, !base.NoOffset)
	if err != nil {
		return nil, nil, err
	}
	if err := segProgress(progress, 0, len(feasible)); err != nil {
		return nil, nil, err
	}
	best, sc, err := selectStateSpace(d, r, base, feasible, yv, uv, progress)
	if len(skipped) == 0 {
		return best, sc, err
	}
	all := make([]Score, 0, len(orders))
	i := 0
	for _, n := range orders {
		if why, ok := skipped[n]; ok {
			all = append(all, Score{Order: n, Criterion: CriterionSimulation, Start: start, Value: math.Inf(1), Skipped: why})
		} else if i < len(sc) {
			all = append(all, sc[i])
			i++
		}
	}
	return best, all, err
}

// Restore makes an ARX model whose exported fields were filled from a
// saved copy (e.g. decoded from JSON) usable: it checks that Orders, NY,
// NU, the statistics and Theta are consistent and sets the internal
// regressor count. The restored model predicts exactly like the original.
func (m *ARX) Restore() error {
	if err := m.Orders.validateInputs(m.NU); err != nil {
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
