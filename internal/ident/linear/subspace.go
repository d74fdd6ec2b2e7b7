package linear

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"

	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// SubspaceOptions configure FitSubspace and SelectStateSpace.
type SubspaceOptions struct {
	// Order is the state dimension n; 0 selects it automatically from the
	// singular values (largest gap log σ_n − log σ_{n+1}, n ≤ MaxOrder).
	Order int
	// MaxOrder bounds the automatic order (default 10).
	MaxOrder int
	// BlockRows is the number of block rows i (past and future horizon) of
	// the block-Hankel matrices; 0 picks max(10, ⌈2·MaxOrder/NY⌉, Order+1)
	// limited by the data length.
	BlockRows int
	// Feedthrough estimates D; otherwise D = 0.
	Feedthrough bool
	// NoOffset disables the output offset. By default the model is affine,
	// ỹ = C x + D ũ + e with a constant e estimated together with B, D and
	// x0 (and refined by PEM), and the subspace step removes the mean of
	// every block-Hankel row (a constant instrument), so that an offset
	// between the training means and the linear operating point does not
	// show up as a spurious integrating state. e is folded into YMean after
	// the fit.
	NoOffset bool
	// Scaling of the data before identification (default Standardize).
	Scaling Scaling
	// StabilityRadius: every eigenvalue of A is forced to |λ| < radius
	// (default 0.9999; must be in (0, 1]).
	StabilityRadius float64
	// Refine runs a Levenberg–Marquardt prediction-error (output-error /
	// simulation-error) refinement of (A, B, C, D, x0) on the training data.
	Refine bool
	// RefineIters is the maximum number of LM iterations (default 50).
	RefineIters int
	// NInit is the number of measured samples used by SelectStateSpace to
	// estimate the initial state of the validation record; the score is
	// computed over samples k ≥ NInit (default 5).
	NInit int
	// Seed is accepted for API stability. All algorithms in this package
	// are deterministic and draw no random numbers, so it has no effect.
	Seed int64
}

func (o SubspaceOptions) withDefaults(T, ny, nu int) (SubspaceOptions, error) {
	if o.Order < 0 || o.MaxOrder < 0 || o.BlockRows < 0 {
		return o, errors.New("linear: negative subspace option")
	}
	if o.MaxOrder == 0 {
		o.MaxOrder = 10
	}
	if o.Order > 0 && o.MaxOrder < o.Order {
		o.MaxOrder = o.Order
	}
	if o.StabilityRadius == 0 {
		o.StabilityRadius = 0.9999
	}
	if o.StabilityRadius < 0 || o.StabilityRadius > 1 {
		return o, errors.New("linear: StabilityRadius must be in (0, 1]")
	}
	if o.RefineIters == 0 {
		o.RefineIters = 50
	}
	if o.NInit == 0 {
		o.NInit = 5
	}
	// largest s with j = T-2s+1 ≥ 2s(nu+ny) columns for the LQ step
	sMax := (T + 1) / (2*(nu+ny) + 2)
	if o.BlockRows == 0 {
		s := max(10, (2*o.MaxOrder+ny-1)/ny, o.Order+1)
		o.BlockRows = min(s, sMax)
	}
	if o.BlockRows > sMax {
		return o, fmt.Errorf("linear: BlockRows %d too large for %d samples (max %d)", o.BlockRows, T, sMax)
	}
	if o.BlockRows < 2 {
		return o, errShortData
	}
	if n := max(o.Order, 1); ny*o.BlockRows <= n {
		return o, fmt.Errorf("linear: order %d needs NY·BlockRows > order (BlockRows=%d)", n, o.BlockRows)
	}
	return o, nil
}

// ssData holds the scaled data of one segment (record).
type ssData struct {
	T, ny, nu                int
	ys, us                   []float64
	yMean, yStd, uMean, uStd []float64
	scaling                  Scaling
}

// segData holds scaled segments sharing one set of statistics; a single
// record is one segment.
type segData struct {
	ny, nu, T                int // T: total samples over all segments
	segs                     []*ssData
	yMean, yStd, uMean, uStd []float64
	scaling                  Scaling
}

// prepareSS checks and scales a single training record.
func prepareSS(y, u [][]float64, s Scaling) (*segData, error) {
	ny, nu, err := checkPair(y, u)
	if err != nil {
		return nil, err
	}
	return newSegData([][][]float64{y}, [][][]float64{u}, ny, nu, s), nil
}

// newSegData scales checked segments with the statistics of all of them.
func newSegData(ys, us [][][]float64, ny, nu int, s Scaling) *segData {
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
	return d
}

// moespResult is the order-independent part of PO-MOESP: the left singular
// vectors and singular values of L32.
type moespResult struct {
	s  int
	U  *mat.Dense
	sv []float64
}

// hankelColumns is the number of block-Hankel columns a segment of T
// samples gives with s block rows.
func hankelColumns(T, s int) int { return max(0, T-2*s+1) }

// poMOESP computes the past-output MOESP decomposition (Verhaegen 1994):
// an LQ factorisation of [Uf; Up; Yp; Yf] (block-Hankel, s block rows each)
// followed by an SVD of the block L32, whose column space estimates the
// extended observability matrix Γ_s. With several segments the
// block-Hankel columns of every segment are built separately and
// concatenated (multi-experiment MOESP); centre removes the mean of every
// block-Hankel row, pooled over all columns.
func poMOESP(d *segData, s int, centre bool) (*moespResult, error) {
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
	// H^T is j × cols; QR of H^T = Q R gives H = Rᵀ Qᵀ, i.e. L = Rᵀ.
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
	// L32[a][b] = L[r1+r2+a][r1+b] = R[r1+b][r1+r2+a]
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

// autoOrder picks the order with the largest log singular value gap.
func autoOrder(sv []float64, maxOrder int) int {
	best, bestGap := 1, math.Inf(-1)
	for n := 1; n <= maxOrder && n < len(sv); n++ {
		if sv[n] <= 0 {
			return n
		}
		g := math.Log(sv[n-1]) - math.Log(sv[n])
		if g > bestGap {
			best, bestGap = n, g
		}
	}
	return best
}

// acFromGamma estimates A and C of order n from Γ = U_n S_n^{1/2} using the
// shift invariance Γ↑ A = Γ↓ (least squares).
func acFromGamma(r *moespResult, ny, n int) (a, c *mat.Dense, err error) {
	s := r.s
	gam := mat.NewDense(ny*s, n, nil)
	for i := 0; i < ny*s; i++ {
		for k := 0; k < n; k++ {
			gam.Set(i, k, r.U.At(i, k)*math.Sqrt(r.sv[k]))
		}
	}
	c = mat.DenseCopyOf(gam.Slice(0, ny, 0, n))
	up := mat.DenseCopyOf(gam.Slice(0, ny*(s-1), 0, n))
	down := mat.DenseCopyOf(gam.Slice(ny, ny*s, 0, n))
	a, err = lstsq(up, down)
	return a, c, err
}

// fitBDX0 estimates B, D (if feedthrough), the output offset e (if offset)
// and one initial state per segment for given A and C by linear least
// squares on the simulation error of all segments (the output is linear in
// those parameters once A and C are fixed). One segment (a single record)
// is solved as one dense problem (fitBDX0SegmentsDense); several by
// eliminating the initial states (fitBDX0Projected), so that the problem
// does not grow by N columns per segment.
func fitBDX0(a, c []float64, n int, d *segData, feedthrough, offset bool) (b, dd []float64, x0s [][]float64, e []float64, err error) {
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

// bdxSizes returns the numbers of B, D (with feedthrough) and offset
// (with offset) parameters of fitBDX0.
func bdxSizes(n, ny, nu int, feedthrough, offset bool) (nB, nD, nE int) {
	nB = n * nu
	if feedthrough {
		nD = ny * nu
	}
	if offset {
		nE = ny
	}
	return nB, nD, nE
}

// splitBD returns B and D (zero without feedthrough, nD = 0) from the
// solution th of fitBDX0's least squares.
func splitBD(th []float64, nB, nD, ny, nu int) (b, dd []float64) {
	b = th[:nB]
	if nD > 0 {
		dd = th[nB : nB+nD]
	} else {
		dd = make([]float64, ny*nu)
	}
	return b, dd
}

// fitBDX0SegmentsDense solves the problem of fitBDX0 as one dense
// least-squares problem with the parameters B, D, x0 of segment 0, 1, …, e.
func fitBDX0SegmentsDense(a, c []float64, n int, d *segData, feedthrough, offset bool) (b, dd []float64, x0s [][]float64, e []float64, err error) {
	ny, nu, S := d.ny, d.nu, len(d.segs)
	nB, nD, nE := bdxSizes(n, ny, nu, feedthrough, offset)
	offE := nB + nD + n*S
	p := offE + nE
	phi := mat.NewDense(d.T*ny, p, nil)
	pr := phi.RawMatrix()
	rhsData := make([]float64, 0, d.T*ny)
	rowOff := 0
	for si, g := range d.segs {
		rhsData = append(rhsData, g.ys...)
		fillBDColumns(pr.Data[rowOff*pr.Stride:], pr.Stride, a, c, n, ny, nu, g, feedthrough, nB)
		// x0 columns: C A^k
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
	b, dd = splitBD(th, nB, nD, ny, nu)
	x0s = make([][]float64, S)
	for si := range x0s {
		x0s[si] = th[nB+nD+si*n : nB+nD+(si+1)*n]
	}
	e = make([]float64, ny)
	copy(e, th[offE:])
	return b, dd, x0s, e, nil
}

// stabilize returns A with every eigenvalue inside |λ| < radius. Unstable
// eigenvalues are reflected into the unit disc (λ → λ/|λ|², which keeps the
// frequency and the magnitude response shape up to a gain) and additionally
// clipped to the radius; A is rebuilt as Re(V Λ' V⁻¹) from its eigenvectors.
// If the eigenvector matrix is ill-conditioned (near-defective A) the whole
// matrix is scaled instead: A' = A·radius·(1−1e−9)/ρ(A). The second result
// reports whether A was changed.
func stabilize(a *mat.Dense, radius float64) (*mat.Dense, bool) {
	n, _ := a.Dims()
	lim := radius * (1 - 1e-9)
	var e mat.Eigen
	if !e.Factorize(a, mat.EigenRight) {
		return scaleToRadius(a, lim), true
	}
	vals := e.Values(nil)
	rho := 0.0
	for _, v := range vals {
		rho = math.Max(rho, cmplx.Abs(v))
	}
	if rho < radius {
		return a, false
	}
	var vc mat.CDense
	e.VectorsTo(&vc)
	v := make([]complex128, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			v[i*n+j] = vc.At(i, j)
		}
	}
	vinv, cond := cinv(v, n)
	if vinv == nil || cond > 1e8 {
		return scaleToRadius(a, lim), true
	}
	nv := make([]complex128, n)
	for i, l := range vals {
		r := cmplx.Abs(l)
		if r >= radius {
			r2 := math.Min(1/r, lim)
			l = l / complex(r, 0) * complex(r2, 0)
		}
		nv[i] = l
	}
	out := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var s complex128
			for k := 0; k < n; k++ {
				s += v[i*n+k] * nv[k] * vinv[k*n+j]
			}
			out.Set(i, j, real(s))
		}
	}
	if spectralRadius(out) >= radius {
		return scaleToRadius(a, lim), true
	}
	return out, true
}

func scaleToRadius(a *mat.Dense, lim float64) *mat.Dense {
	rho := spectralRadius(a)
	out := mat.DenseCopyOf(a)
	if rho > lim && !math.IsInf(rho, 0) {
		out.Scale(lim/rho, out)
	}
	return out
}

// cinv inverts a small complex matrix (Gauss–Jordan with partial pivoting)
// and returns an estimate of its 1-norm condition number.
func cinv(m []complex128, n int) ([]complex128, float64) {
	a := append([]complex128(nil), m...)
	inv := make([]complex128, n*n)
	for i := 0; i < n; i++ {
		inv[i*n+i] = 1
	}
	norm1 := func(x []complex128) float64 {
		best := 0.0
		for j := 0; j < n; j++ {
			s := 0.0
			for i := 0; i < n; i++ {
				s += cmplx.Abs(x[i*n+j])
			}
			best = math.Max(best, s)
		}
		return best
	}
	an := norm1(a)
	for col := 0; col < n; col++ {
		piv, pv := col, 0.0
		for r := col; r < n; r++ {
			if v := cmplx.Abs(a[r*n+col]); v > pv {
				piv, pv = r, v
			}
		}
		if pv == 0 {
			return nil, math.Inf(1)
		}
		if piv != col {
			for j := 0; j < n; j++ {
				a[col*n+j], a[piv*n+j] = a[piv*n+j], a[col*n+j]
				inv[col*n+j], inv[piv*n+j] = inv[piv*n+j], inv[col*n+j]
			}
		}
		p := a[col*n+col]
		for j := 0; j < n; j++ {
			a[col*n+j] /= p
			inv[col*n+j] /= p
		}
		for r := 0; r < n; r++ {
			if r == col {
				continue
			}
			f := a[r*n+col]
			if f == 0 {
				continue
			}
			for j := 0; j < n; j++ {
				a[r*n+j] -= f * a[col*n+j]
				inv[r*n+j] -= f * inv[col*n+j]
			}
		}
	}
	return inv, an * norm1(inv)
}

// FitSubspace identifies a state-space model with PO-MOESP (see the package
// documentation): LQ + SVD gives Γ_i and the order, A and C follow from
// shift invariance, A is made stable, B, D and the training initial state
// are then estimated by least squares on the simulation error, and the
// optional Levenberg–Marquardt refinement minimises the simulation error
// over all parameters.
func FitSubspace(y, u [][]float64, opts SubspaceOptions) (*StateSpace, error) {
	d, err := prepareSS(y, u, opts.Scaling)
	if err != nil {
		return nil, err
	}
	opts, err = opts.withDefaults(d.T, d.ny, d.nu)
	if err != nil {
		return nil, err
	}
	return fitSubspace(d, opts)
}

// fitSubspace is FitSubspace and FitSubspaceSegments after the data and
// the options (with defaults) are checked.
func fitSubspace(d *segData, opts SubspaceOptions) (*StateSpace, error) {
	r, err := poMOESP(d, opts.BlockRows, !opts.NoOffset)
	if err != nil {
		return nil, err
	}
	return fitFromMOESP(d, r, opts)
}

// fitFromMOESP fits the model of order opts.Order (0: automatic) from the
// decomposition r of the training segments d.
func fitFromMOESP(d *segData, r *moespResult, opts SubspaceOptions) (*StateSpace, error) {
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
	b, dd, x0s, e, err := fitBDX0(af, cf, n, d, opts.Feedthrough, !opts.NoOffset)
	if err != nil {
		return nil, err
	}
	m := newStateSpace(n, d.ny, d.nu, af, b, cf, dd)
	m.UMean, m.UStd, m.Scaling = d.uMean, d.uStd, d.scaling
	m.YStd = d.yStd
	m.BlockRows = r.s
	m.SingularValues = r.sv
	m.Stabilized = changed
	m.TrainMSE = m.trainMSE(d, x0s, e)
	m.TrainMSEInit = m.TrainMSE
	if opts.Refine {
		x0s, e = refineLM(m, d, x0s, e, opts)
	}
	m.X0Train = append([]float64(nil), x0s[0]...)
	// fold the output offset into the operating point
	m.YMean = make([]float64, d.ny)
	for o := range m.YMean {
		m.YMean[o] = d.yMean[o] + d.yStd[o]*e[o]
	}
	m.OutputOffset = e
	m.setPrior(d, x0s, e)
	return m, nil
}

// trainMSE is the mean squared simulation error (scaled units) over all
// segments, each simulated from its own initial state.
func (m *StateSpace) trainMSE(d *segData, x0s [][]float64, e []float64) float64 {
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
