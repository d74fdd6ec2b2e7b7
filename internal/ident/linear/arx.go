package linear

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/aml-project/aml/internal/ident/lsq"
	"gonum.org/v1/gonum/mat"
)

// ARXOrders gives the structure of an ARX model
//
//	y(k) = Σ_{i=1..NA} A_i y(k−i) + Σ_a Σ_{j=nk_a..nk_a+nb_a−1} b_{a,j} u_a(k−j) + c.
//
// NK ≥ 0 is the input delay (NK = 0 means direct feed-through of u(k)) and
// NB the input order, the same for every input unless NKs and NBs give
// them per input (nk_a = NKs[a], nb_a = NBs[a]; either list, when not nil,
// has one entry per input and replaces the scalar). With Diag set, A_i is
// diagonal: every output is regressed on its own past only (plus all
// inputs), i.e. NY independent MISO ARX models.
type ARXOrders struct {
	NA, NB, NK int
	NBs, NKs   []int
	Diag       bool
}

// InputNB returns the input order of input a.
func (o ARXOrders) InputNB(a int) int {
	if o.NBs != nil {
		return o.NBs[a]
	}
	return o.NB
}

// InputNK returns the delay of input a.
func (o ARXOrders) InputNK(a int) int {
	if o.NKs != nil {
		return o.NKs[a]
	}
	return o.NK
}

// PerInput reports whether the orders are given per input.
func (o ARXOrders) PerInput() bool { return o.NBs != nil || o.NKs != nil }

// nInputs is the number of inputs the per-input lists fix (0 when none).
func (o ARXOrders) nInputs() int { return max(len(o.NBs), len(o.NKs)) }

// inputLags returns the smallest delay and one past the largest lag of the
// inputs with nb_a > 0 over nu inputs (lo = hi = 0 when there is none).
func (o ARXOrders) inputLags(nu int) (lo, hi int) {
	if !o.PerInput() {
		if o.NB == 0 || nu == 0 {
			return 0, 0
		}
		return o.NK, o.NK + o.NB
	}
	first := true
	for a := 0; a < nu; a++ {
		nb, nk := o.InputNB(a), o.InputNK(a)
		if nb == 0 {
			continue
		}
		if first || nk < lo {
			lo = nk
		}
		if first || nk+nb > hi {
			hi = nk + nb
		}
		first = false
	}
	return lo, hi
}

// MaxLag returns the number of initial samples needed before a full
// regressor can be formed: max(NA, nk_a+nb_a−1 over the inputs) (and 0 for
// a static model).
func (o ARXOrders) MaxLag() int {
	_, hi := o.inputLags(max(1, o.nInputs()))
	return max(o.NA, hi-1)
}

func (o ARXOrders) String() string {
	s := "full"
	if o.Diag {
		s = "diag"
	}
	if o.PerInput() {
		n := o.nInputs()
		nb, nk := make([]int, n), make([]int, n)
		for a := range n {
			nb[a], nk[a] = o.InputNB(a), o.InputNK(a)
		}
		return fmt.Sprintf("ARX(na=%d nb=%v nk=%v %s)", o.NA, nb, nk, s)
	}
	return fmt.Sprintf("ARX(na=%d nb=%d nk=%d %s)", o.NA, o.NB, o.NK, s)
}

func (o ARXOrders) validate() error {
	if o.NA < 0 || o.NB < 0 || o.NK < 0 {
		return fmt.Errorf("linear: negative ARX order in %v", o)
	}
	for _, l := range [][]int{o.NBs, o.NKs} {
		for _, v := range l {
			if v < 0 {
				return fmt.Errorf("linear: negative ARX order in %v", o)
			}
		}
	}
	return nil
}

// validateInputs checks the per-input lists against the number of inputs.
func (o ARXOrders) validateInputs(nu int) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.NBs != nil && len(o.NBs) != nu {
		return fmt.Errorf("linear: %d per-input nb for %d inputs", len(o.NBs), nu)
	}
	if o.NKs != nil && len(o.NKs) != nu {
		return fmt.Errorf("linear: %d per-input nk for %d inputs", len(o.NKs), nu)
	}
	return nil
}

// ARXOptions are the less common fitting options of FitARXOpts.
type ARXOptions struct {
	// Lambda ≥ 0 is a ridge penalty λ·||θ||² on all non-intercept
	// parameters, in the scaled coordinates (sum-of-squares form: the data
	// term is Σ_k ||e(k)||², not its mean).
	Lambda float64
	// Scaling of y and u before fitting (default Standardize).
	Scaling Scaling
	// NoIntercept drops the constant term c. With Standardize or
	// CenterOnly scaling the intercept then is the training mean.
	NoIntercept bool
}

// ARX is a fitted (MIMO) ARX model. The parameters are kept in the scaled
// coordinates ỹ = (y−YMean)/YStd, ũ = (u−UMean)/UStd; Coefficients converts
// them to the original units.
//
// Theta has one column per output. For the full structure every column
// uses the regressor
//
//	[ỹ(k−1)ᵀ … ỹ(k−NA)ᵀ  ũ(k−NK)ᵀ … ũ(k−NK−NB+1)ᵀ  1]
//
// (each ỹ block has NY entries, each ũ block NU entries, the 1 only with an
// intercept). For Diag, column o uses [ỹ_o(k−1) … ỹ_o(k−NA) ũ(k−NK)ᵀ … 1].
type ARX struct {
	Orders     ARXOrders
	Theta      *mat.Dense
	NY, NU     int
	YMean      []float64
	YStd       []float64
	UMean      []float64
	UStd       []float64
	Lambda     float64
	Scaling    Scaling
	Intercept  bool
	TrainRows  int // number of regression rows used in the fit
	regressors int
}

// NumRegressors returns the number of regressors per output equation
// (rows of Theta).
func (m *ARX) NumRegressors() int { return m.regressors }

func numRegressors(o ARXOrders, ny, nu int, icpt bool) int {
	p := o.NB * nu
	if o.PerInput() {
		p = 0
		for a := 0; a < nu; a++ {
			p += o.InputNB(a)
		}
	}
	if o.Diag {
		p += o.NA
	} else {
		p += o.NA * ny
	}
	if icpt {
		p++
	}
	return p
}

// fillRegressor writes the regressor of time k into dst. ys and us are the
// scaled, flat ([T*ny], [T*nu]) signals; samples before time 0 are taken as
// zero, i.e. at the training mean. out selects the output for Diag models.
func fillRegressor(dst []float64, o ARXOrders, ny, nu int, icpt bool, ys, us []float64, k, out int) {
	p := 0
	if o.Diag {
		for i := 1; i <= o.NA; i++ {
			if t := k - i; t >= 0 {
				dst[p] = ys[t*ny+out]
			} else {
				dst[p] = 0
			}
			p++
		}
	} else {
		for i := 1; i <= o.NA; i++ {
			if t := k - i; t >= 0 {
				copy(dst[p:p+ny], ys[t*ny:(t+1)*ny])
			} else {
				clear(dst[p : p+ny])
			}
			p += ny
		}
	}
	if o.PerInput() {
		// lag-major, input-minor over the inputs whose window holds the
		// lag: with equal windows the layout of the scalar orders
		lo, hi := o.inputLags(nu)
		for j := lo; j < hi; j++ {
			t := k - j
			for a := 0; a < nu; a++ {
				if nk := o.InputNK(a); j < nk || j >= nk+o.InputNB(a) {
					continue
				}
				if t >= 0 {
					dst[p] = us[t*nu+a]
				} else {
					dst[p] = 0
				}
				p++
			}
		}
	} else {
		for j := o.NK; j < o.NK+o.NB; j++ {
			if t := k - j; t >= 0 {
				copy(dst[p:p+nu], us[t*nu:(t+1)*nu])
			} else {
				clear(dst[p : p+nu])
			}
			p += nu
		}
	}
	if icpt {
		dst[p] = 1
	}
}

// FitARX fits an ARX model by linear least squares (Householder QR) with an
// optional ridge penalty λ on the non-intercept parameters, standardising the
// data with the training statistics and including an intercept. y is [T][ny],
// u is [T][nu]. The regression uses the rows k = MaxLag … T−1.
func FitARX(y, u [][]float64, o ARXOrders, lambda float64) (*ARX, error) {
	return FitARXOpts(y, u, o, ARXOptions{Lambda: lambda})
}

// FitARXOpts is FitARX with all options.
func FitARXOpts(y, u [][]float64, o ARXOrders, opts ARXOptions) (*ARX, error) {
	if err := validateARXFit(o, opts); err != nil {
		return nil, err
	}
	ny, nu, err := checkPair(y, u)
	if err != nil {
		return nil, err
	}
	if err := o.validateInputs(nu); err != nil {
		return nil, err
	}
	return fitARX([][][]float64{y}, [][][]float64{u}, ny, nu, o, opts)
}

// validateARXFit checks the orders and the ridge parameter of a fit.
func validateARXFit(o ARXOrders, opts ARXOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if opts.Lambda < 0 || math.IsNaN(opts.Lambda) {
		return errors.New("linear: ridge lambda must be ≥ 0")
	}
	return nil
}

// fitARX is the least-squares fit of FitARXOpts and FitARXSegments on
// checked segments (one for a single record) of ny outputs and nu inputs:
// the regression rows k = MaxLag … T_s−1 of every segment are stacked, so
// that no regressor reaches across a segment boundary, and the scaling uses
// the statistics of all segments together.
func fitARX(ys, us [][][]float64, ny, nu int, o ARXOrders, opts ARXOptions) (*ARX, error) {
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
	sl := math.Sqrt(opts.Lambda)
	// the regression rows, segment after segment, then the nPen ridge rows
	// √λ·e_i; the solver asks for them a panel at a time (from several
	// goroutines), so Φ is never stored
	starts := make([]int, len(segs)+1)
	for k, sg := range segs {
		starts[k+1] = starts[k] + max(0, sg.T-lag)
	}
	fill := func(out, nrhs int) func(dst []float64, i0, n int) {
		w := p + nrhs
		return func(dst []float64, i0, n int) {
			s := sort.SearchInts(starts, i0+1) - 1 // last segment starting at or before i0
			for i := i0; i < i0+n; i++ {
				row := dst[(i-i0)*w : (i-i0+1)*w]
				if i >= nr {
					clear(row)
					row[i-nr] = sl
					continue
				}
				for i >= starts[s+1] {
					s++
				}
				sg := segs[s]
				k := lag + i - starts[s]
				fillRegressor(row[:p], o, ny, nu, m.Intercept, sg.ys, sg.us, k, out)
				if nrhs == 1 {
					row[p] = sg.ys[k*ny+out]
				} else {
					copy(row[p:], sg.ys[k*ny:(k+1)*ny])
				}
			}
		}
	}
	theta := mat.NewDense(p, ny, nil)
	if !o.Diag {
		x, err := lsq.SolveRows(lsq.Rows{N: nr + nPen, C: p, K: ny, Fill: fill(0, ny)})
		if err != nil {
			return nil, err
		}
		theta.Copy(x)
	} else {
		for out := 0; out < ny; out++ {
			x, err := lsq.SolveRows(lsq.Rows{N: nr + nPen, C: p, K: 1, Fill: fill(out, 1)})
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

// predictRow computes the scaled prediction of all outputs at time k into
// dst, using the scaled output history ys (measured or simulated) and us.
func (m *ARX) predictRow(dst, phi []float64, ys, us []float64, k int) {
	th := m.Theta.RawMatrix()
	p := m.regressors
	if !m.Orders.Diag {
		fillRegressor(phi, m.Orders, m.NY, m.NU, m.Intercept, ys, us, k, 0)
		clear(dst)
		for r := 0; r < p; r++ {
			v := phi[r]
			row := th.Data[r*th.Stride : r*th.Stride+m.NY]
			for o := range dst {
				dst[o] += v * row[o]
			}
		}
		return
	}
	for o := 0; o < m.NY; o++ {
		fillRegressor(phi, m.Orders, m.NY, m.NU, m.Intercept, ys, us, k, o)
		s := 0.0
		for r := 0; r < p; r++ {
			s += phi[r] * th.Data[r*th.Stride+o]
		}
		dst[o] = s
	}
}

func (m *ARX) check(name string, x [][]float64, w int) {
	for k, row := range x {
		if len(row) != w {
			panic(fmt.Sprintf("linear: %s row %d has %d channels, model expects %d", name, k, len(row), w))
		}
	}
}

// PredictOneStep returns the one-step-ahead predictions ŷ(k|k−1) computed
// from the measured outputs y and inputs u (and u(k) itself when NK = 0).
// Rows k < Orders.MaxLag() are NaN. y and u must have the same length.
func (m *ARX) PredictOneStep(y, u [][]float64) [][]float64 {
	m.check("y", y, m.NY)
	m.check("u", u, m.NU)
	if len(y) != len(u) {
		panic("linear: PredictOneStep needs len(y) == len(u)")
	}
	T := len(y)
	ys := normalize(y, m.YMean, m.YStd)
	us := normalize(u, m.UMean, m.UStd)
	out := nanRows(T, m.NY)
	phi := make([]float64, m.regressors)
	pred := make([]float64, m.NY)
	for k := m.Orders.MaxLag(); k < T; k++ {
		m.predictRow(pred, phi, ys, us, k)
		for o, v := range pred {
			out[k][o] = v*m.YStd[o] + m.YMean[o]
		}
	}
	return out
}

// Simulate runs the model in free-run (simulation) mode on the inputs u.
// The first len(yInit) outputs are the given measured values (returned
// unchanged); from then on the model uses only its own past predictions.
// Output and input values before time 0 are taken as the training means.
// For comparability with one-step prediction pass at least MaxLag() initial
// outputs.
func (m *ARX) Simulate(u [][]float64, yInit [][]float64) [][]float64 {
	m.check("u", u, m.NU)
	m.check("yInit", yInit, m.NY)
	T := len(u)
	us := normalize(u, m.UMean, m.UStd)
	ys := make([]float64, T*m.NY)
	nInit := min(len(yInit), T)
	for k := 0; k < nInit; k++ {
		for o := 0; o < m.NY; o++ {
			ys[k*m.NY+o] = (yInit[k][o] - m.YMean[o]) / m.YStd[o]
		}
	}
	phi := make([]float64, m.regressors)
	for k := nInit; k < T; k++ {
		m.predictRow(ys[k*m.NY:(k+1)*m.NY], phi, ys, us, k)
	}
	out := denormalize(ys, T, m.YMean, m.YStd)
	for k := 0; k < nInit; k++ {
		copy(out[k], yInit[k]) // exact, not round-tripped through the scaling
	}
	return out
}

// Coefficients returns the model in the original (unscaled) units:
// A[i-1] (NY×NY) multiplies y(k−i), B[j] (NY×NU) multiplies u(k−NK−j), and
// c is the constant term. With per-input orders NK is the smallest delay
// and column a of B[j] is zero outside input a's lags nk_a … nk_a+nb_a−1.
func (m *ARX) Coefficients() (A, B []*mat.Dense, c []float64) {
	ny, nu := m.NY, m.NU
	lo, hi := m.Orders.inputLags(nu)
	A = make([]*mat.Dense, m.Orders.NA)
	B = make([]*mat.Dense, hi-lo)
	c = make([]float64, ny)
	for i := range A {
		A[i] = mat.NewDense(ny, ny, nil)
	}
	for j := range B {
		B[j] = mat.NewDense(ny, nu, nil)
	}
	for o := 0; o < ny; o++ {
		r := 0
		for i := 0; i < m.Orders.NA; i++ {
			if m.Orders.Diag {
				A[i].Set(o, o, m.Theta.At(r, o))
				r++
				continue
			}
			for q := 0; q < ny; q++ {
				A[i].Set(o, q, m.YStd[o]*m.Theta.At(r, o)/m.YStd[q])
				r++
			}
		}
		for j := lo; j < hi; j++ {
			for a := 0; a < nu; a++ {
				if nk := m.Orders.InputNK(a); j < nk || j >= nk+m.Orders.InputNB(a) {
					continue
				}
				B[j-lo].Set(o, a, m.YStd[o]*m.Theta.At(r, o)/m.UStd[a])
				r++
			}
		}
		c[o] = m.YMean[o]
		if m.Intercept {
			c[o] += m.YStd[o] * m.Theta.At(r, o)
		}
		for i := range A {
			for q := 0; q < ny; q++ {
				c[o] -= A[i].At(o, q) * m.YMean[q]
			}
		}
		for j := range B {
			for a := 0; a < nu; a++ {
				c[o] -= B[j].At(o, a) * m.UMean[a]
			}
		}
	}
	return A, B, c
}

// Poles returns the poles of the model's autoregressive part: the
// eigenvalues of the block companion matrix of y(k) = Σ_i A_i y(k−i) + …
// (NA·NY of them; none for NA = 0). The model's free run is stable when
// every pole lies strictly inside the unit circle.
func (m *ARX) Poles() []complex128 {
	na, ny := m.Orders.NA, m.NY
	if na == 0 || ny == 0 {
		return nil
	}
	A, _, _ := m.Coefficients()
	n := na * ny
	c := mat.NewDense(n, n, nil)
	for i := 0; i < na; i++ {
		for r := 0; r < ny; r++ {
			for q := 0; q < ny; q++ {
				c.Set(r, i*ny+q, A[i].At(r, q))
			}
		}
	}
	for r := ny; r < n; r++ {
		c.Set(r, r-ny, 1)
	}
	return eigenvalues(c)
}
