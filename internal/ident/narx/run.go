package narx

import (
	"errors"
	"fmt"
	"math"
)

// A model's free run in two parts, for the digital twin: a [Start] made
// once from a measured window, and [Runner]s (one per goroutine, with
// their own buffers; the model is only read) that continue it over many
// candidate input trajectories. Start then Continue computes exactly what
// Simulate computes for the window's rows followed by the continuation's
// inputs (TestContinueMatchesSimulate).

// Start is a model's state at the end of a measured window: the last
// Lag() rows of its normalised outputs and inputs, the history the
// regressor reads. It is immutable once made.
type Start struct {
	yn, un [][]float64 // [Lag()][NY], [Lag()][NU]
}

// StartFrom makes the start of a window from its measured inputs u and
// outputs y (the same number of rows, at least one, finite). With fewer
// than Lag() rows the first row is held before them, as Simulate does.
func (m *Model) StartFrom(u, y [][]float64) (*Start, error) {
	H := len(u)
	if H == 0 || len(y) != H {
		return nil, fmt.Errorf("narx: a start needs as many input as output rows (%d, %d), at least one", H, len(y))
	}
	for k := range u {
		if len(u[k]) != m.NU || len(y[k]) != m.NY {
			return nil, fmt.Errorf("narx: row %d has %d inputs and %d outputs, the model %d and %d", k, len(u[k]), len(y[k]), m.NU, m.NY)
		}
		if !allFinite(u[k]) || !allFinite(y[k]) {
			return nil, fmt.Errorf("narx: row %d of the window is not finite", k)
		}
	}
	lag := m.Lag()
	if H < lag {
		up := make([][]float64, 0, lag)
		yp := make([][]float64, 0, lag)
		for i := H; i < lag; i++ {
			up, yp = append(up, u[0]), append(yp, y[0])
		}
		u, y = append(up, u...), append(yp, y...)
	}
	un, yn := m.normalise(u[len(u)-lag:], y[len(y)-lag:])
	return &Start{yn: yn, un: un}, nil
}

// Runner continues free runs from starts with its own buffers: one
// goroutine's. The model is only read, so any number of runners may share
// it.
type Runner struct {
	m       *Model
	scratch [][]float64
	phi     []float64
	yn, un  [][]float64 // [Lag()+T] rows: the start's, then the continuation's
}

// NewRunner returns a runner of the model (checked: Check).
func (m *Model) NewRunner() *Runner {
	r := &Runner{m: m, phi: make([]float64, m.Dim())}
	for _, l := range m.Layers {
		r.scratch = append(r.scratch, make([]float64, l.Out))
	}
	return r
}

// Continue predicts the outputs for the inputs u ([T][NU], T ≥ 1) after
// the window s was made from, into dst ([T*NY] row-major, physical
// units). It returns the first step whose prediction is not finite (T
// when none); dst holds NaN from there on.
func (r *Runner) Continue(s *Start, u [][]float64, dst []float64) (int, error) {
	m := r.m
	T, lag := len(u), m.Lag()
	if T == 0 {
		return 0, errors.New("narx: a continuation needs at least one step")
	}
	if s == nil || len(s.yn) != lag || len(s.un) != lag {
		return 0, errors.New("narx: the start is not of this model")
	}
	if len(dst) < T*m.NY {
		return 0, fmt.Errorf("narx: the output buffer holds %d values, %d needed", len(dst), T*m.NY)
	}
	for k, row := range u {
		if len(row) != m.NU {
			return 0, fmt.Errorf("narx: input row %d has %d values, the model %d", k, len(row), m.NU)
		}
	}
	n := lag + T
	for len(r.yn) < n {
		r.yn, r.un = append(r.yn, make([]float64, m.NY)), append(r.un, make([]float64, m.NU))
	}
	for i := 0; i < lag; i++ {
		copy(r.yn[i], s.yn[i])
		copy(r.un[i], s.un[i])
	}
	for k, row := range u {
		un := r.un[lag+k]
		for j := range un {
			un[j] = (row[j] - m.UMean[j]) / m.UStd[j]
		}
	}
	fail := T
	for k := 0; k < T; k++ {
		t := lag + k
		y := r.yn[t]
		m.regressor(r.phi, r.yn, r.un, t)
		m.stepWith(r.phi, y, r.scratch)
		for o, v := range y {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				y[o] = math.NaN()
				fail = min(fail, k)
			}
			dst[k*m.NY+o] = v*m.YStd[o] + m.YMean[o]
		}
		if fail < T {
			for o := range y {
				dst[k*m.NY+o] = math.NaN()
			}
		}
	}
	return fail, nil
}
