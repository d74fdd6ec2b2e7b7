package steptest

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/linear"
)

// StateSpaceFit is linear_state_space@1's model class (PO-MOESP with
// stability enforcement and Levenberg–Marquardt refinement,
// internal/ident/linear, the defaults of the trainer) fitted from the
// executed test with per-input delays (the trainer's delays param) taken
// from process_model@1's dead times rounded to samples — a subspace model
// of order n cannot represent a dead time of many samples, and an ARX
// delay sweep (linear.EstimateDelays) cannot tell the delays of a slow
// process apart from its one-step residuals (on the tank it picks 1
// sample for both) — the order chosen among 1..ssMaxOrder by block
// cross-validation (linear.SelectStateSpaceCV); then its own gains and
// unit step responses per input (in PairReport: SSK, SSDeadTimeSec,
// SSStep). Its dead times are thus process_model@1's, rounded; its gains,
// dynamics and curves are fitted independently.
type StateSpaceFit struct {
	Order int `json:"order"`
	// Delays are the input delays in samples the model sees (u(k − d));
	// with the state update's own step, an input acts DeadTime samples
	// after it changes.
	Delays []int `json:"delays"`
	// RMSE is the free-run error of the model over the test (original
	// units, initial state estimated from the first 5 samples).
	RMSE           float64 `json:"rmse"`
	SpectralRadius float64 `json:"spectralRadius"`
	Stabilized     bool    `json:"stabilized"`
	// Model is the fitted model (for in-process callers; not serialised).
	Model *linear.StateSpace `json:"-"`
}

// State-space fit settings: the trainer's defaults where they apply
// (refinement on, 5 initial-state samples, 3 CV folds), a smaller order
// range (a step test of a few inputs rarely supports more).
const (
	ssMaxOrder = 4
	ssFolds    = 3
	ssInit     = 5
)

// fitStateSpace fits linear_state_space@1 to y (one output) and u (the
// inputs) sampled every dt seconds, input a delayed by its dead time
// thetaSec[a] (a dead time of n samples: the state update's one and
// n − 1 of input delay).
func fitStateSpace(ctx context.Context, y []float64, u [][]float64, dt float64, thetaSec []float64) (*StateSpaceFit, error) {
	T, nu := len(y), len(u[0])
	ys := make([][]float64, T)
	for k := range y {
		ys[k] = []float64{y[k]}
	}
	delays, dmax := make([]int, nu), 0
	for a, th := range thetaSec {
		delays[a] = max(0, min(int(math.Round(th/dt))-1, T/10))
		dmax = max(dmax, delays[a])
	}
	ud := make([][]float64, T-dmax)
	for k := range ud {
		ud[k] = make([]float64, nu)
		for a, d := range delays {
			ud[k][a] = u[dmax+k-d][a]
		}
	}
	yd := ys[dmax:]
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	orders := make([]int, ssMaxOrder)
	for i := range orders {
		orders[i] = i + 1
	}
	m, _, err := linear.SelectStateSpaceCV([][][]float64{yd}, [][][]float64{ud}, orders,
		linear.SubspaceOptions{MaxOrder: ssMaxOrder, Refine: true, NInit: ssInit}, ssFolds, func(int, int) error { return ctx.Err() })
	if err != nil {
		return nil, err
	}
	sim := m.SimulateFrom(yd, ud, ssInit)
	return &StateSpaceFit{Order: m.N, Delays: delays, RMSE: linear.RMSE(yd, sim, ssInit)[0], SpectralRadius: m.SpectralRadius(),
		Stabilized: m.Stabilized, Model: m}, nil
}

// dcGain is the steady-state gain of output 0 to input a in original
// units: yStd·(C (I−A)⁻¹ B + D)/uStd.
func dcGain(m *linear.StateSpace, a int) (float64, error) {
	n := m.N
	ia := mat.NewDense(n, n, nil)
	for i := range n {
		ia.Set(i, i, 1)
	}
	ia.Sub(ia, m.A)
	var x mat.Dense
	if err := x.Solve(ia, m.B.Slice(0, n, a, a+1)); err != nil {
		return 0, core.Errorf(core.CodeInvalidArgument, "state-space model has a pole at 1: %v", err)
	}
	var g mat.Dense
	g.Mul(m.C.Slice(0, 1, 0, n), &x)
	k := g.At(0, 0)
	if m.D != nil {
		k += m.D.At(0, a)
	}
	return m.YStd[0] * k / m.UStd[a], nil
}

// ssStepCurve is the model's response to a unit step of input a written
// at t = 0, at the given times (dt apart on the line's samples): sample
// j, at (j+1)·dt, is the first to see the new input, which the model sees
// delays[a] samples later and which acts through the state update one
// sample after that.
func ssStepCurve(m *linear.StateSpace, delays []int, a int, dt float64, at []float64) []float64 {
	K := int(math.Round(at[len(at)-1]/dt)) + 1
	base := make([][]float64, K)
	step := make([][]float64, K)
	for k := range K {
		base[k] = append([]float64(nil), m.UMean...)
		step[k] = append([]float64(nil), m.UMean...)
		if k >= delays[a] {
			step[k][a]++
		}
	}
	y0 := m.Simulate(base, nil)
	y1 := m.Simulate(step, nil)
	out := make([]float64, len(at))
	for i, t := range at {
		k := int(math.Round(t/dt)) - 1
		if k >= 0 {
			out[i] = y1[k][0] - y0[k][0]
		}
	}
	return out
}
