package nss

import (
	"errors"
	"fmt"
	"math"
)

// A model's free run in two parts, for the digital twin: a [Start] made
// once from a measured window (every member's encoder state), and
// [Runner]s (one per goroutine, with their own buffers; the members are
// only read) that continue it over many candidate input trajectories.
// StartFrom then Continue computes exactly what Ensemble.Simulate computes
// for the rows after the window (TestContinueMatchesSimulate): the same
// operations in the same order, so the same floats.

// Start is an ensemble's state at the end of a measured window: every
// member's state x as its encoder estimates it from the window's last
// Lag() rows. It is immutable once made.
type Start struct {
	x [][]float64 // [member][N]
}

// States returns the members' mean state (a copy).
func (s *Start) States() []float64 {
	if s == nil || len(s.x) == 0 {
		return nil
	}
	out := make([]float64, len(s.x[0]))
	for _, x := range s.x {
		for i, v := range x {
			out[i] += v
		}
	}
	for i := range out {
		out[i] /= float64(len(s.x))
	}
	return out
}

// StartFrom makes the start of a window from its measured inputs u and
// outputs y (the same number of rows, at least one, finite). With fewer
// rows than a member's Lag() the first row is held before them, as
// Simulate does. The members are only read (checked: Model.Check).
func (e Ensemble) StartFrom(u, y [][]float64) (*Start, error) {
	H := len(u)
	if len(e) == 0 {
		return nil, errors.New("nss: an ensemble without members")
	}
	if H == 0 || len(y) != H {
		return nil, fmt.Errorf("nss: a start needs as many input as output rows (%d, %d), at least one", H, len(y))
	}
	for _, m := range e {
		if m.NU != e[0].NU || m.NY != e[0].NY || m.N != e[0].N {
			return nil, errors.New("nss: the members differ in shape")
		}
	}
	for k := range u {
		if len(u[k]) != e[0].NU || len(y[k]) != e[0].NY {
			return nil, fmt.Errorf("nss: row %d has %d inputs and %d outputs, the model %d and %d", k, len(u[k]), len(y[k]), e[0].NU, e[0].NY)
		}
		if !allFinite(u[k]) || !allFinite(y[k]) {
			return nil, fmt.Errorf("nss: row %d of the window is not finite", k)
		}
	}
	s := &Start{}
	for _, m := range e {
		lag := m.Lag()
		uu, yy := u, y
		if H < lag {
			up := make([][]float64, 0, lag)
			yp := make([][]float64, 0, lag)
			for i := H; i < lag; i++ {
				up, yp = append(up, u[0]), append(yp, y[0])
			}
			uu, yy = append(up, u...), append(yp, y...)
		}
		un, yn := normalise(uu[len(uu)-lag:], yy[len(yy)-lag:], m.UMean, m.UStd, m.YMean, m.YStd)
		l := m.layout()
		phi, acts := make([]float64, l.dE), l.enc.Scratch()
		m.regressor(phi, yn, un, lag)
		x := make([]float64, l.n)
		l.encode(m.P, phi, acts, x)
		s.x = append(s.x, x)
	}
	return s, nil
}

// Runner continues free runs from starts with its own buffers: one
// goroutine's. The members are only read, so any number of runners may
// share them.
type Runner struct {
	e       Ensemble
	z, y    []float64
	x, xn   []float64
	hActs   [][]float64
	fActs   [][]float64
	un      []float64
	sum, sq []float64 // [T*NY] the members' sum and sum of squares
}

// NewRunner returns a runner of the ensemble (its members checked:
// Model.Check; all of one shape).
func (e Ensemble) NewRunner() *Runner {
	m := e[0]
	l := m.layout()
	return &Runner{e: e, z: make([]float64, l.n+l.nu), y: make([]float64, l.ny), x: make([]float64, l.n), xn: make([]float64, l.n),
		hActs: l.h.Scratch(), fActs: l.f.Scratch(), un: make([]float64, l.nu)}
}

// Continue predicts the outputs for the inputs u ([T][NU], T ≥ 1) after
// the window s was made from, into dst ([T*NY] row-major, physical
// units): the members' mean. It returns the first step whose prediction
// is not finite (T when none); dst holds NaN from there on.
func (r *Runner) Continue(s *Start, u [][]float64, dst []float64) (int, error) {
	return r.run(s, u, dst, nil)
}

// ContinueSpread is Continue that also writes the members' standard
// deviation (population, 0 for one member) into spread ([T*NY]).
func (r *Runner) ContinueSpread(s *Start, u [][]float64, dst, spread []float64) (int, error) {
	if len(spread) < len(u)*r.e[0].NY {
		return 0, fmt.Errorf("nss: the spread buffer holds %d values, %d needed", len(spread), len(u)*r.e[0].NY)
	}
	return r.run(s, u, dst, spread)
}

func (r *Runner) run(s *Start, u [][]float64, dst, spread []float64) (int, error) {
	e := r.e
	T, ny, nu := len(u), e[0].NY, e[0].NU
	if T == 0 {
		return 0, errors.New("nss: a continuation needs at least one step")
	}
	if s == nil || len(s.x) != len(e) {
		return 0, errors.New("nss: the start is not of this model")
	}
	for _, x := range s.x {
		if len(x) != e[0].N {
			return 0, errors.New("nss: the start is not of this model")
		}
	}
	if len(dst) < T*ny {
		return 0, fmt.Errorf("nss: the output buffer holds %d values, %d needed", len(dst), T*ny)
	}
	for k, row := range u {
		if len(row) != nu {
			return 0, fmt.Errorf("nss: input row %d has %d values, the model %d", k, len(row), nu)
		}
	}
	if cap(r.sum) < T*ny {
		r.sum, r.sq = make([]float64, T*ny), make([]float64, T*ny)
	}
	sum, sq := r.sum[:T*ny], r.sq[:T*ny]
	clear(sq)
	fail := T
	for i, m := range e {
		l := m.layout()
		// this member's free run into sum (the first) or added to it,
		// in member order: the sums Ensemble.Simulate makes
		copy(r.x, s.x[i])
		x, xn := r.x, r.xn
		mf := T
		for k := 0; k < T; k++ {
			for j := range r.un {
				r.un[j] = (u[k][j] - m.UMean[j]) / m.UStd[j]
			}
			if mf < T {
				for o := 0; o < ny; o++ {
					sum[k*ny+o] = math.NaN()
				}
				continue
			}
			copy(r.z, x)
			copy(r.z[l.n:], r.un)
			l.output(m.P, r.z, r.hActs, r.y)
			for o, v := range r.y {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					mf = k
				}
				yv := v*m.YStd[o] + m.YMean[o]
				if i == 0 {
					sum[k*ny+o] = yv
				} else {
					sum[k*ny+o] += yv
				}
				sq[k*ny+o] += yv * yv
			}
			if mf < T {
				for o := 0; o < ny; o++ {
					sum[k*ny+o] = math.NaN()
				}
				continue
			}
			l.transition(m.P, r.z, r.fActs, xn)
			x, xn = xn, x
		}
		fail = min(fail, mf)
	}
	K := float64(len(e))
	for k := 0; k < T; k++ {
		for o := 0; o < ny; o++ {
			j := k*ny + o
			v := sum[j]
			if K > 1 {
				v /= K
			}
			if k >= fail {
				v = math.NaN()
			}
			dst[j] = v
			if spread != nil {
				sd := 0.0
				if K > 1 {
					sd = math.Sqrt(max(0, sq[j]/K-v*v))
				}
				if k >= fail {
					sd = math.NaN()
				}
				spread[j] = sd
			}
		}
	}
	return fail, nil
}
