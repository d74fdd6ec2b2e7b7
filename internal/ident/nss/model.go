package nss

import (
	"errors"
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/ident/mlp"
)

// Model is a fitted neural state-space model. All its parameters are in
// P, laid out by Layout (A, B, C, D, E, e0, then the networks f, h and
// the encoder), in units normalised by UMean/UStd and YMean/YStd.
type Model struct {
	N, NA, NB, NY, NU int
	Feedthrough       bool
	Hidden            []int
	UMean, UStd       []float64
	YMean, YStd       []float64
	P                 []float64

	lay *layout
	w   *work
}

// layout is where every part lives in P.
type layout struct {
	n, ny, nu, dE, dh      int
	oA, oB, oC, oD, oE, o0 int
	f, h, enc              *mlp.Net
	total                  int
}

func newLayout(n, na, nb, ny, nu int, ft bool, hidden []int) *layout {
	l := &layout{n: n, ny: ny, nu: nu, dE: ny*na + nu*nb, dh: n}
	if ft {
		l.dh = n + nu
	}
	l.oA = 0
	l.oB = l.oA + n*n
	l.oC = l.oB + n*nu
	l.oD = l.oC + ny*n
	l.oE = l.oD + ny*nu
	l.o0 = l.oE + n*l.dE
	sizes := func(in, out int) []int { return append(append([]int{in}, hidden...), out) }
	l.f = mlp.New(sizes(n+nu, n), l.o0+n)
	l.h = mlp.New(sizes(l.dh, ny), l.f.Base+l.f.Len())
	l.enc = mlp.New(sizes(l.dE, n), l.h.Base+l.h.Len())
	l.total = l.enc.Base + l.enc.Len()
	return l
}

// Lag is the number of past rows the encoder reads.
func (m *Model) Lag() int { return max(m.NA, m.NB, 1) }

// NumParams is the length P must have.
func (m *Model) NumParams() int { return m.layout().total }

func (m *Model) layout() *layout {
	if m.lay == nil {
		m.lay = newLayout(m.N, m.NA, m.NB, m.NY, m.NU, m.Feedthrough, m.Hidden)
	}
	return m.lay
}

// Check validates the model's shapes and values.
func (m *Model) Check() error {
	if m.N < 1 || m.N > 1000 || m.NA < 1 || m.NB < 1 || m.NA > 10000 || m.NB > 10000 || m.NY < 1 || m.NU < 1 || m.NY > 1000 || m.NU > 1000 {
		return fmt.Errorf("nss: order %d, na %d, nb %d, %d outputs, %d inputs", m.N, m.NA, m.NB, m.NY, m.NU)
	}
	if len(m.Hidden) > 8 {
		return fmt.Errorf("nss: %d hidden layers", len(m.Hidden))
	}
	for _, h := range m.Hidden {
		if h < 1 || h > 4096 {
			return fmt.Errorf("nss: hidden layer of %d units", h)
		}
	}
	if len(m.UMean) != m.NU || len(m.UStd) != m.NU || len(m.YMean) != m.NY || len(m.YStd) != m.NY {
		return errors.New("nss: normalisation of the wrong size")
	}
	// the layout's size, computed without allocating a huge model first
	if want := m.layout().total; len(m.P) != want {
		return fmt.Errorf("nss: %d parameters, want %d", len(m.P), want)
	}
	for _, v := range [][]float64{m.UMean, m.UStd, m.YMean, m.YStd, m.P} {
		if !allFinite(v) {
			return errors.New("nss: non-finite value")
		}
	}
	for _, s := range append(append([]float64{}, m.UStd...), m.YStd...) {
		if !(s > 0) {
			return errors.New("nss: non-positive scale")
		}
	}
	if !m.Feedthrough {
		for _, v := range m.P[m.lay.oD:m.lay.oE] {
			if v != 0 {
				return errors.New("nss: a feedthrough term in a model without feedthrough")
			}
		}
	}
	return nil
}

func allFinite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// regressor fills phi with the encoder's input for a state at row t:
// y(t−1) … y(t−na) per output, then u(t−1) … u(t−nb) per input.
func (m *Model) regressor(phi []float64, yn, un [][]float64, t int) {
	k := 0
	for o := 0; o < m.NY; o++ {
		for i := 1; i <= m.NA; i++ {
			phi[k] = yn[t-i][o]
			k++
		}
	}
	for j := 0; j < m.NU; j++ {
		for i := 1; i <= m.NB; i++ {
			phi[k] = un[t-i][j]
			k++
		}
	}
}

// work is the scratch of one simulated subsequence of up to L steps.
type work struct {
	L                int
	phi              []float64
	encActs, encD    [][]float64
	xs               [][]float64 // [L][n]
	z                [][]float64 // [L][n+nu]
	fActs, hActs     [][][]float64
	fD, hD           [][]float64
	dY               [][]float64
	gx, gxk, dzf, dz []float64
	y                []float64
}

func (l *layout) newWork(L int) *work {
	w := &work{L: L, phi: make([]float64, l.dE), encActs: l.enc.Scratch(), encD: l.enc.Scratch(), fD: l.f.Scratch(), hD: l.h.Scratch(),
		gx: make([]float64, l.n), gxk: make([]float64, l.n), dzf: make([]float64, l.n+l.nu), dz: make([]float64, l.n+l.nu), y: make([]float64, l.ny)}
	for k := 0; k < L; k++ {
		w.xs = append(w.xs, make([]float64, l.n))
		w.z = append(w.z, make([]float64, l.n+l.nu))
		w.fActs = append(w.fActs, l.f.Scratch())
		w.hActs = append(w.hActs, l.h.Scratch())
		w.dY = append(w.dY, make([]float64, l.ny))
	}
	return w
}

// encode writes the state the encoder gives for phi into x.
func (l *layout) encode(p, phi []float64, acts [][]float64, x []float64) {
	out := l.enc.Forward(p, phi, acts)
	E := p[l.oE:l.o0]
	for i := 0; i < l.n; i++ {
		a := p[l.o0+i] + out[i]
		row := E[i*l.dE : (i+1)*l.dE]
		for k, v := range phi {
			a += row[k] * v
		}
		x[i] = a
	}
}

// output writes y = C x + D u + h(z) for z = [x, u] (u only with
// feedthrough) into y.
func (l *layout) output(p, z []float64, acts [][]float64, y []float64) {
	out := l.h.Forward(p, z[:l.dh], acts)
	n, nu := l.n, l.nu
	C, D := p[l.oC:l.oD], p[l.oD:l.oE]
	for o := 0; o < l.ny; o++ {
		a := out[o]
		for i, v := range z[:n] {
			a += C[o*n+i] * v
		}
		if l.dh > n {
			for j, v := range z[n : n+nu] {
				a += D[o*nu+j] * v
			}
		}
		y[o] = a
	}
}

// transition writes x+ = A x + B u + f(z) for z = [x, u] into xn.
func (l *layout) transition(p, z []float64, acts [][]float64, xn []float64) {
	out := l.f.Forward(p, z, acts)
	n, nu := l.n, l.nu
	A, B := p[l.oA:l.oB], p[l.oB:l.oC]
	for i := 0; i < n; i++ {
		a := out[i]
		for k, v := range z[:n] {
			a += A[i*n+k] * v
		}
		for j, v := range z[n : n+nu] {
			a += B[i*nu+j] * v
		}
		xn[i] = a
	}
}

// Simulate runs the model in free run over the inputs u (len(u) rows of
// NU) from the measured outputs y0 (the first len(y0) rows, returned as
// given): the encoder estimates the state at row len(y0) from the Lag()
// rows before it, and every later output is simulated from the inputs.
// With fewer than Lag() measured rows (but at least one) the first input
// and output are held before the first row.
func (m *Model) Simulate(u, y0 [][]float64) [][]float64 {
	lag := m.Lag()
	pad := 0
	if len(y0) < lag && len(y0) > 0 && len(u) > 0 {
		pad = lag - len(y0)
		up := make([][]float64, 0, pad+len(u))
		yp := make([][]float64, 0, pad+len(y0))
		for i := 0; i < pad; i++ {
			up, yp = append(up, u[0]), append(yp, y0[0])
		}
		u, y0 = append(up, u...), append(yp, y0...)
	}
	un, yn0 := normalise(u, y0, m.UMean, m.UStd, m.YMean, m.YStd)
	out := make([][]float64, len(u)-pad)
	for t := range out {
		out[t] = make([]float64, m.NY)
		if t+pad < len(y0) {
			copy(out[t], y0[t+pad])
		}
	}
	t0 := len(y0)
	if t0 >= len(u) || t0 < lag {
		if t0 < len(u) { // no measured row: nothing to start from
			for t := max(0, t0-pad); t < len(out); t++ {
				for o := range out[t] {
					out[t][o] = math.NaN()
				}
			}
		}
		return out
	}
	l := m.layout()
	if m.w == nil {
		m.w = l.newWork(1)
	}
	w := m.w
	m.regressor(w.phi, yn0, un, t0)
	x, xn, z := make([]float64, l.n), make([]float64, l.n), w.z[0]
	l.encode(m.P, w.phi, w.encActs, x)
	for t := t0; t < len(u); t++ {
		copy(z, x)
		copy(z[l.n:], un[t])
		l.output(m.P, z, w.hActs[0], w.y)
		bad := false
		for o, v := range w.y {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				bad = true
			}
			out[t-pad][o] = v*m.YStd[o] + m.YMean[o]
		}
		if bad {
			for ; t < len(u); t++ {
				for o := range out[t-pad] {
					out[t-pad][o] = math.NaN()
				}
			}
			break
		}
		l.transition(m.P, z, w.fActs[0], xn)
		x, xn = xn, x
	}
	return out
}

func normalise(u, y [][]float64, um, us, ym, ys []float64) (un, yn [][]float64) {
	un = make([][]float64, len(u))
	for t, r := range u {
		un[t] = make([]float64, len(um))
		for j := range un[t] {
			un[t][j] = (r[j] - um[j]) / us[j]
		}
	}
	yn = make([][]float64, len(y))
	for t, r := range y {
		yn[t] = make([]float64, len(ym))
		for o := range yn[t] {
			yn[t][o] = (r[o] - ym[o]) / ys[o]
		}
	}
	return un, yn
}

// Ensemble is a model made of members trained from different seeds: its
// simulation is the mean of theirs.
type Ensemble []*Model

// Lag is the largest window a member's encoder reads.
func (e Ensemble) Lag() int {
	l := 1
	for _, m := range e {
		l = max(l, m.Lag())
	}
	return l
}

// Simulate is the mean of the members' Simulate (a NaN where any member
// diverges).
func (e Ensemble) Simulate(u, y0 [][]float64) [][]float64 {
	var out [][]float64
	for i, m := range e {
		s := m.Simulate(u, y0)
		if i == 0 {
			out = s
			continue
		}
		for t, r := range s {
			for o, v := range r {
				out[t][o] += v
			}
		}
	}
	if k := float64(len(e)); k > 1 {
		for t, r := range out {
			if t < len(y0) {
				copy(r, y0[t])
				continue
			}
			for o := range r {
				r[o] /= k
			}
		}
	}
	return out
}
