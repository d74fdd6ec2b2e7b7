package process

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Structure is the response type of one input.
type Structure string

// The structures.
const (
	FOPDT Structure = "fopdt"
	SOPDT Structure = "sopdt"
	IPDT  Structure = "ipdt"
)

// NumParams is the number of dynamic parameters of s (K, time constants,
// θ).
func (s Structure) NumParams() int {
	switch s {
	case FOPDT:
		return 3
	case SOPDT:
		return 4
	case IPDT:
		return 2
	}
	return 0
}

// ParamNames names the parameters of s in their vector order.
func (s Structure) ParamNames() []string {
	switch s {
	case FOPDT:
		return []string{"K", "tau", "theta"}
	case SOPDT:
		return []string{"K", "tau1", "tau2", "theta"}
	case IPDT:
		return []string{"K", "theta"}
	}
	return nil
}

// states is the number of filter states whose initial deviation is
// estimated (the IPDT state is the offset).
func (s Structure) states() int {
	switch s {
	case FOPDT:
		return 1
	case SOPDT:
		return 2
	}
	return 0
}

// Valid reports whether s is a known structure.
func (s Structure) Valid() bool { return s.NumParams() > 0 }

// Pair is the response of the output to one input. Tau1 is τ (FOPDT) or
// the larger time constant (SOPDT), Tau2 the smaller one (SOPDT only); an
// IPDT pair has neither. K is in output units per input unit (IPDT: per
// input unit and second).
type Pair struct {
	Structure  Structure
	K          float64
	Tau1, Tau2 float64
	Theta      float64
}

// vector appends the pair's parameters in ParamNames order.
func (p Pair) vector(x []float64) []float64 {
	switch p.Structure {
	case FOPDT:
		return append(x, p.K, p.Tau1, p.Theta)
	case SOPDT:
		return append(x, p.K, p.Tau1, p.Tau2, p.Theta)
	default:
		return append(x, p.K, p.Theta)
	}
}

func pairOf(s Structure, x []float64) Pair {
	switch s {
	case FOPDT:
		return Pair{Structure: s, K: x[0], Tau1: x[1], Theta: x[2]}
	case SOPDT:
		return Pair{Structure: s, K: x[0], Tau1: x[1], Tau2: x[2], Theta: x[3]}
	default:
		return Pair{Structure: s, K: x[0], Theta: x[1]}
	}
}

// Model is the model of one output: y = Offset + Drift·t + Σ_i response_i.
type Model struct {
	Dt     float64   // sampling period (s)
	Pairs  []Pair    // one per input
	UMean  []float64 // the input reference ū
	Offset float64   // c at rest (the mean over the training records)
	Drift  float64   // d (output units per second; only with an IPDT pair)
	// NoiseVar is the output noise variance σ²; YStd and OffsetStd are
	// the prior standard deviations of the initial state deviations (mean
	// 0) and of the offset (mean Offset) in Simulate: Fit sets them to the
	// training output's standard deviation and to twice the standard
	// deviation of the records' offsets (0, with a single record: YStd).
	NoiseVar, YStd, OffsetStd float64
}

// HasIntegrator reports whether a pair is IPDT (the model has a drift).
func (m *Model) HasIntegrator() bool {
	for _, p := range m.Pairs {
		if p.Structure == IPDT {
			return true
		}
	}
	return false
}

// Validate checks the model's shape and parameters.
func (m *Model) Validate() error {
	if !(m.Dt > 0) || math.IsInf(m.Dt, 0) {
		return fmt.Errorf("process: sampling period %v", m.Dt)
	}
	if len(m.Pairs) == 0 || len(m.UMean) != len(m.Pairs) {
		return fmt.Errorf("process: %d pairs, %d input references", len(m.Pairs), len(m.UMean))
	}
	for i, p := range m.Pairs {
		if !p.Structure.Valid() {
			return fmt.Errorf("process: input %d: unknown structure %q", i, p.Structure)
		}
		bad := !finite(p.K) || !finite(p.Theta) || p.Theta < 0 || !finite(m.UMean[i])
		if p.Structure != IPDT {
			bad = bad || !(p.Tau1 > 0) || !finite(p.Tau1)
		}
		if p.Structure == SOPDT {
			bad = bad || !(p.Tau2 > 0) || !finite(p.Tau2)
		}
		if bad {
			return fmt.Errorf("process: input %d: invalid parameters %+v", i, p)
		}
	}
	if !finite(m.Offset) || !finite(m.Drift) || !(m.NoiseVar >= 0) || !(m.YStd >= 0) || !(m.OffsetStd >= 0) || math.IsInf(m.NoiseVar+m.YStd+m.OffsetStd, 0) {
		return fmt.Errorf("process: offset %v, drift %v, noise variance %v, yStd %v, offsetStd %v", m.Offset, m.Drift, m.NoiseVar, m.YStd, m.OffsetStd)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// delayed is the input column i of u delayed by theta seconds with the
// fractional part interpolated, minus ref; values before the first row
// are the first row's.
func delayed(dst []float64, u [][]float64, i int, theta, dt, ref float64) []float64 {
	T := len(u)
	dst = dst[:0]
	s := math.Max(theta, 0) / dt
	m := int(math.Floor(s))
	f := s - float64(m)
	at := func(k int) float64 {
		if k < 0 {
			k = 0
		}
		return u[k][i]
	}
	for k := 0; k < T; k++ {
		dst = append(dst, (1-f)*at(k-m)+f*at(k-m-1)-ref)
	}
	return dst
}

// response adds the response of pair p to the delayed input v (from rest
// at v(0)) to y, and fills the free responses of unit initial state
// deviations into free (one column per state).
func response(y []float64, v []float64, p Pair, dt float64, free [][]float64) {
	T := len(v)
	switch p.Structure {
	case FOPDT:
		a := math.Exp(-dt / p.Tau1)
		x := p.K * v[0]
		fr := 1.0
		for k := 0; k < T; k++ {
			x = a*x + (1-a)*p.K*v[k]
			y[k] += x
			if free != nil {
				fr *= a
				free[0][k] = fr
			}
		}
	case SOPDT:
		a1, a2 := math.Exp(-dt/p.Tau1), math.Exp(-dt/p.Tau2)
		x1 := p.K * v[0]
		x2 := x1
		f1, f2 := 1.0, 0.0 // free response of a unit x1 deviation (x2 output)
		g2 := 1.0          // of a unit x2 deviation
		for k := 0; k < T; k++ {
			x1 = a1*x1 + (1-a1)*p.K*v[k]
			x2 = a2*x2 + (1-a2)*x1
			y[k] += x2
			if free != nil {
				f1 *= a1
				f2 = a2*f2 + (1-a2)*f1
				g2 *= a2
				free[0][k] = f2
				free[1][k] = g2
			}
		}
	case IPDT:
		x := 0.0
		for k := 0; k < T; k++ {
			x += dt * p.K * v[k]
			y[k] += x
		}
	}
}

// basis is the forced response (from rest, without offset) of m to u and
// the free-response columns [1, state deviations...].
func (m *Model) basis(u [][]float64, withFree bool) (forced []float64, free [][]float64) {
	T := len(u)
	forced = make([]float64, T)
	free = [][]float64{make([]float64, T)}
	for k := range free[0] {
		free[0][k] = 1
	}
	v := make([]float64, 0, T)
	for i, p := range m.Pairs {
		v = delayed(v, u, i, p.Theta, m.Dt, m.UMean[i])
		var fr [][]float64
		if withFree && p.Structure.states() > 0 {
			fr = make([][]float64, p.Structure.states())
			for j := range fr {
				fr[j] = make([]float64, T)
			}
			free = append(free, fr...)
		}
		response(forced, v, p, m.Dt, fr)
	}
	if m.Drift != 0 {
		for k := range forced {
			forced[k] += m.Drift * m.Dt * float64(k)
		}
	}
	return forced, free
}

// solveLinear returns β minimising Σ_k (r(k) − Σ_j β_j A_j(k))² + Σ_j
// ridge_j β_j² over the first n rows (the columns A and residual target r
// are full-length).
func solveLinear(A [][]float64, r []float64, n int, ridge []float64) []float64 {
	q := len(A)
	h := mat.NewSymDense(q, nil)
	g := mat.NewVecDense(q, nil)
	for i := 0; i < q; i++ {
		for j := i; j < q; j++ {
			s := 0.0
			for k := 0; k < n; k++ {
				s += A[i][k] * A[j][k]
			}
			if i == j {
				s += ridge[i]
			}
			h.SetSym(i, j, s)
		}
		s := 0.0
		for k := 0; k < n; k++ {
			s += A[i][k] * r[k]
		}
		g.SetVec(i, s)
	}
	var ch mat.Cholesky
	beta := make([]float64, q)
	if !ch.Factorize(h) {
		// singular: fall back to the offset alone
		if n > 0 {
			s := 0.0
			for k := 0; k < n; k++ {
				s += r[k]
			}
			beta[0] = s / float64(n)
		}
		return beta
	}
	var x mat.VecDense
	if err := ch.SolveVecTo(&x, g); err != nil && x.Len() == 0 {
		return beta
	}
	copy(beta, x.RawVector().Data)
	return beta
}

// Simulate simulates the output over the inputs u ([T][len(Pairs)]). The
// first nInit values of y (at least nInit; the rest is not read) are
// measurements that initialise the model: the offset and the initial
// state deviations are their MAP estimate under the priors offset ~
// N(Offset, OffsetStd²), deviations ~ N(0, YStd²) and noise variance
// NoiseVar (see the package documentation), so that a few rows move the
// decaying initial state rather than the persistent offset. Rows before
// the largest dead time depend on inputs before the first row and are
// used only when there are no others. With nInit = 0 the model starts at
// rest with the training offset. All T rows are simulated (the first
// nInit too).
func (m *Model) Simulate(u [][]float64, y []float64, nInit int) []float64 {
	forced, free := m.basis(u, nInit > 0)
	out := make([]float64, len(u))
	if nInit <= 0 {
		for k := range out {
			out[k] = forced[k] + m.Offset
		}
		return out
	}
	k0 := min(m.deadSteps(), nInit-1)
	cols := make([][]float64, len(free))
	for j := range free {
		cols[j] = free[j][k0:]
	}
	r := make([]float64, nInit-k0)
	for k := range r {
		r[k] = y[k0+k] - forced[k0+k] - m.Offset
	}
	prior := func(sd float64) float64 {
		if !(sd > 0) {
			sd = math.Max(m.YStd, 1e-6)
		}
		return math.Max(m.NoiseVar, 1e-12*sd*sd) / (sd * sd)
	}
	ridge := make([]float64, len(cols))
	ridge[0] = prior(m.OffsetStd)
	for j := 1; j < len(ridge); j++ {
		ridge[j] = prior(m.YStd)
	}
	beta := solveLinear(cols, r, len(r), ridge)
	beta[0] += m.Offset
	for k := range out {
		out[k] = forced[k]
		for j, c := range free {
			out[k] += beta[j] * c[k]
		}
	}
	return out
}

// deadSteps is the number of leading rows that depend on inputs before
// the first one: the largest dead time in whole steps, plus one.
func (m *Model) deadSteps() int {
	th := 0.0
	for _, p := range m.Pairs {
		th = math.Max(th, p.Theta)
	}
	return int(math.Ceil(th/m.Dt-1e-9)) + 1
}
