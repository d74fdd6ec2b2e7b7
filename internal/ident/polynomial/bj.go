package polynomial

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// BJ is the Box–Jenkins model of one output
//
//	y(k) = Σ_i B_i(q)/F(q) u_i(k − nk_i) + c + C(q)/D(q) e(k),
//	C = 1 + c_1 q⁻¹ + … + c_nc q⁻ⁿᶜ,  D = 1 + d_1 q⁻¹ + … + d_nd q⁻ⁿᵈ,
//
// the output-error model's dynamics (shared denominator F, per-input
// delays) with its own noise model: the disturbance v = y − B/F u − c is
// coloured noise, filtered by C/D and independent of the dynamics (unlike
// ARMAX, whose noise shares A). [FitBJ] minimises the one-step prediction
// errors
//
//	ε(k) = D/C (y(k) − B/F u(k) − c)
//
// with the Levenberg–Marquardt solver, starting from the output-error fit
// and an ARMA(nd, nc) model of its simulation residuals (Hannan–Rissanen:
// a long AR model's residuals as the regressors of the moving average),
// and rejecting steps that make F unstable or C or D non-minimum-phase (a
// root on or outside the unit circle: the predictor filters by 1/C and
// its k-step noise prediction by 1/D). The covariance is σ² (JᵀJ)⁻¹.
type BJ struct {
	Orders OEOrders
	NC, ND int
	F      []float64   // f_1 … f_nf
	B      [][]float64 // [input][nb]
	C, D   []float64   // c_1 … c_nc, d_1 … d_nd
	Offset float64
	// Cov is the covariance of (f, b row-major, c, d, offset), Sigma2 the
	// variance of the prediction errors, Cost their final sum of squares,
	// StartCost that of the start (OE plus the residuals' ARMA) and
	// OECost the OE fit's simulation-error sum of squares.
	Cov                      *mat.SymDense
	Sigma2                   float64
	Cost, StartCost, OECost  float64
	Iterations, OEIterations int
	SpectralRadius, CMaxRoot float64
	DMaxRoot                 float64
}

func (m *BJ) maxLag() int { return max(m.Orders.maxLag(), m.NC, m.ND) }

// filter runs the predictor over u ([T][inputs]) with the first n0 = len(y0)
// outputs measured: the dynamics' free run w (started from the first
// min(lag, n0) outputs), the disturbance v = y − w over the measured rows
// and its innovations e (0 before row min(lag, n0)); later rows are
// predicted with future innovations 0. It returns the predicted outputs
// (the measured ones over the first n0 rows) and e.
func (m *BJ) filter(y0 []float64, u [][]float64) (yy, e []float64) {
	T := len(u)
	n0 := min(len(y0), T)
	n := min(m.maxLag(), n0)
	w := simulate(m.Orders, m.F, m.B, m.Offset, u, y0[:n])
	v := make([]float64, T)
	e = make([]float64, T)
	yy = make([]float64, T)
	for k := 0; k < T; k++ {
		if k < n {
			v[k] = y0[k] - w[k]
			yy[k] = y0[k]
			continue
		}
		q := 0.0 // v̂(k|k−1) = (1 − D/C) v(k)
		for j := 1; j <= m.ND; j++ {
			q -= m.D[j-1] * v[k-j]
		}
		for j := 1; j <= m.NC; j++ {
			q += m.C[j-1] * e[k-j]
		}
		if k < n0 {
			v[k] = y0[k] - w[k]
			e[k] = v[k] - q
			yy[k] = y0[k]
		} else {
			v[k] = q
			yy[k] = w[k] + q
		}
	}
	return yy, e
}

// Predict returns the model's outputs over u given the first len(y0)
// measured outputs: those rows, then the k-step-ahead predictions (as
// [ARMAX.Predict]).
func (m *BJ) Predict(y0 []float64, u [][]float64) []float64 {
	yy, _ := m.filter(y0, u)
	return yy
}

// PredictOneStep returns the one-step-ahead predictions ŷ(k|k−1) of the
// record (NaN for its first rows, which only start the predictor).
func (m *BJ) PredictOneStep(y []float64, u [][]float64) []float64 {
	_, e := m.filter(y, u)
	out := make([]float64, len(y))
	n := min(m.maxLag(), len(y))
	for k := range out {
		out[k] = y[k] - e[k]
		if k < n {
			out[k] = math.NaN()
		}
	}
	return out
}

// Poles are the roots of F (the dynamics; the noise model's roots are
// CMaxRoot and DMaxRoot).
func (m *BJ) Poles() []complex128 { return poles(m.F) }

// FitBJ fits a Box–Jenkins model of one output to the segments (y
// [seg][T], u [seg][T][inputs]): o are the dynamics' orders (as
// [FitOE]), nc and nd the noise model's.
func FitBJ(ctx context.Context, y [][]float64, u [][][]float64, o OEOrders, nc, nd int) (*BJ, error) {
	if nc < 0 || nd < 1 {
		return nil, fmt.Errorf("polynomial: Box–Jenkins noise orders nc %d ≥ 0, nd %d ≥ 1 (without a noise model use OE)", nc, nd)
	}
	oe, err := FitOE(ctx, y, u, o)
	if err != nil {
		return nil, err
	}
	m := &BJ{Orders: o, NC: nc, ND: nd, OECost: oe.Cost, OEIterations: oe.Iterations}
	n := m.maxLag()
	nOE := o.maxLag()
	rows := make([]int, len(y))
	var vs [][]float64 // the OE simulation residuals, per segment
	for s := range y {
		if len(y[s]) <= n+1 {
			return nil, fmt.Errorf("polynomial: segment %d has %d rows, needs more than %d", s, len(y[s]), n+1)
		}
		rows[s] = len(y[s]) - n
		sim := oe.Simulate(u[s], y[s][:nOE])
		v := make([]float64, len(y[s])-nOE)
		for k := range v {
			v[k] = y[s][nOE+k] - sim[nOE+k]
		}
		vs = append(vs, v)
	}
	c0, d0, err := armaStart(vs, nc, nd)
	if err != nil {
		return nil, err
	}
	nu := len(u[0][0])
	nd0 := o.NF + nu*o.NB
	np := nd0 + nc + nd + 1
	th0 := make([]float64, 0, np)
	th0 = append(th0, oe.F...)
	for _, row := range oe.B {
		th0 = append(th0, row...)
	}
	th0 = append(append(append(th0, c0...), d0...), oe.C)
	unpack := func(th []float64) *BJ {
		b := make([][]float64, nu)
		for i := range b {
			b[i] = th[o.NF+i*o.NB : o.NF+(i+1)*o.NB]
		}
		return &BJ{Orders: o, NC: nc, ND: nd, F: th[:o.NF], B: b, C: th[nd0 : nd0+nc], D: th[nd0+nc : nd0+nc+nd], Offset: th[np-1]}
	}
	valid := func(th []float64) bool {
		t := unpack(th)
		return spectralRadius(t.F) < 1 && spectralRadius(t.C) < 1 && spectralRadius(t.D) < 1
	}
	resid := func(blk int, th, r []float64) {
		_, e := unpack(th).filter(y[blk], u[blk])
		copy(r, e[n:])
	}
	if !valid(th0) {
		return nil, errors.New("polynomial: the Box–Jenkins start is not stable and minimum phase")
	}
	p := pemProblem(rows, np, valid, resid)
	res, err := solvePEM(ctx, p, th0)
	if err != nil {
		return nil, fmt.Errorf("polynomial: Box–Jenkins fit: %w", err)
	}
	t := unpack(append([]float64(nil), res.Shared...))
	m.F, m.B, m.C, m.D, m.Offset = t.F, t.B, t.C, t.D, t.Offset
	m.Cost, m.StartCost, m.Iterations = res.Cost, res.InitialCost, res.Iterations
	m.SpectralRadius, m.CMaxRoot, m.DMaxRoot = spectralRadius(m.F), spectralRadius(m.C), spectralRadius(m.D)
	m.Sigma2, m.Cov = covariance(p, res)
	return m, nil
}

// armaStart fits D v = C e to the records v by Hannan–Rissanen: the
// residuals ê of a long AR model by least squares, then v(k) on −v(k−1 …
// k−nd) and ê(k−1 … k−nc) by least squares; roots on or outside the unit
// circle are shrunk inside (as [FitOE]'s start).
func armaStart(vs [][]float64, nc, nd int) (c, d []float64, err error) {
	p := max(10, 2*(nc+nd))
	ar, err := lsq(vs, p, p, func(v, _ []float64, k int, row []float64) {
		for j := 1; j <= p; j++ {
			row[j-1] = v[k-j]
		}
	}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("polynomial: the noise model's AR start: %w", err)
	}
	es := make([][]float64, len(vs))
	for s, v := range vs {
		es[s] = make([]float64, len(v))
		for k := p; k < len(v); k++ {
			es[s][k] = v[k]
			for j := 1; j <= p; j++ {
				es[s][k] -= ar[j-1] * v[k-j]
			}
		}
	}
	th, err := lsq(vs, nc+nd, p+max(nc, nd), func(v, e []float64, k int, row []float64) {
		for j := 1; j <= nc; j++ {
			row[j-1] = e[k-j]
		}
		for j := 1; j <= nd; j++ {
			row[nc+j-1] = -v[k-j]
		}
	}, es)
	if err != nil {
		return nil, nil, fmt.Errorf("polynomial: the noise model's ARMA start: %w", err)
	}
	c, d = stableStart(th[:nc], nc), stableStart(th[nc:], nd)
	return c, d, nil
}

// lsq solves v(k) ≈ row(k)·θ (width values) over the rows k ≥ start of
// every record by least squares (Householder QR); fill writes row(k) from
// record v and its companion e (es[s], or nil).
func lsq(vs [][]float64, width, start int, fill func(v, e []float64, k int, row []float64), es [][]float64) ([]float64, error) {
	var rowsX [][]float64
	var rhs []float64
	for s, v := range vs {
		var e []float64
		if es != nil {
			e = es[s]
		}
		for k := start; k < len(v); k++ {
			row := make([]float64, width)
			fill(v, e, k, row)
			rowsX, rhs = append(rowsX, row), append(rhs, v[k])
		}
	}
	if len(rowsX) <= width {
		return nil, fmt.Errorf("%d rows for %d parameters", len(rowsX), width)
	}
	X := mat.NewDense(len(rowsX), width, nil)
	for i, r := range rowsX {
		X.SetRow(i, r)
	}
	var qr mat.QR
	qr.Factorize(X)
	var th mat.VecDense
	if err := qr.SolveVecTo(&th, false, mat.NewVecDense(len(rhs), rhs)); err != nil {
		return nil, err
	}
	return th.RawVector().Data, nil
}
