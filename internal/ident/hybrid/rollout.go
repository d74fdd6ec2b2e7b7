package hybrid

import (
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/physics"
)

// Rollouts from a measured stretch: the digital twin's path.
//
// A twin evaluates many candidate control sequences from one measured
// window. [Model.StartFrom] estimates the state once — exactly as
// [Model.Simulate] does for a window: initial state fitted to the window's
// measured rows, then the free run through the window's inputs — and keeps
// what a continuation needs in an immutable [Start]: the state after the
// window's last row and the standardised residual features of the window's
// rows (the network's lags reach back into the window). [Model.Roll] then
// continues from a Start with new inputs into a caller-owned [Rollout]
// buffer. Nothing a rollout computes is written back into the Start, so
// rollouts from one Start are independent of each other and of their
// order: no state or history leaks between candidates.
//
// Start + Roll over F steps gives bit for bit the last F rows of
// Model.Simulate over the window followed by the same F inputs (same
// update rule, same features, same member order in the ensemble mean).

// Start is the model's state at the end of a measured stretch. It is
// immutable once made: Roll only reads it, so one Start serves any number
// of concurrent rollouts.
type Start struct {
	// X0 is the estimated state at the stretch's first row, Last the state
	// at its last row and Next the state after it, where a continuation
	// begins (model state order).
	X0, Last, Next []float64
	// Hist is the prediction over the stretch itself (hybrid, physics
	// alone, ensemble spread), [T][outputs].
	Hist *Prediction
	// HistOut are the model outputs (obs, then guards) of the physics at
	// each row of the stretch, [T][obs+guards].
	HistOut [][]float64
	// T is the stretch's length in rows.
	T int
	// raw holds the standardised base features (outputs, states, controls)
	// of every row of the stretch, T×base (nil without an ensemble).
	raw []float64
}

// StartFrom estimates the state over a measured stretch: u and d (nil for
// defaults) are its inputs, y its measured outputs (NaN where missing) and
// nInit the rows the initial-state fit uses (all rows for a window, as
// PredictBatch does). It fails when the physics fails inside the stretch:
// a state that cannot be propagated to the stretch's end is no start.
func (m *Model) StartFrom(sim *physics.Sim, u, d, y [][]float64, nInit int) (*Start, error) {
	T := len(u)
	if T == 0 {
		return nil, fmt.Errorf("hybrid: an empty stretch has no state")
	}
	if d != nil && len(d) < T {
		return nil, fmt.Errorf("hybrid: %d disturbance rows for %d steps", len(d), T)
	}
	sys := m.Sys
	x0 := m.InitialState(sim, u, d, y, nInit)
	t := sys.newTraj(T)
	sys.simulate(sim, x0, u, d, T, t)
	if t.fail < T {
		return nil, fmt.Errorf("hybrid: the physics simulation fails at row %d of the %d-row stretch (initial state %v)", t.fail, T, x0)
	}
	nx, ny, nout := sys.nx, sys.ny, sys.nout
	s := &Start{X0: x0, T: T, Last: append([]float64(nil), t.X[(T-1)*nx:T*nx]...), Next: append([]float64(nil), t.xc...)}
	for _, v := range s.Next {
		if !finite(v) {
			return nil, fmt.Errorf("hybrid: the state after the stretch is not finite (%v)", s.Next)
		}
	}
	p := &Prediction{X0: x0, Fail: T, Y: make([][]float64, T), Phys: make([][]float64, T), Spread: make([][]float64, T)}
	s.HistOut = make([][]float64, T)
	for k := 0; k < T; k++ {
		p.Phys[k] = append([]float64(nil), t.Yh[k*ny:(k+1)*ny]...)
		p.Y[k] = append([]float64(nil), p.Phys[k]...)
		p.Spread[k] = make([]float64, ny)
		s.HistOut[k] = append([]float64(nil), t.O[k*nout:(k+1)*nout]...)
	}
	if e := m.Residual; e != nil && len(e.Members) > 0 {
		nb := e.base()
		s.raw = make([]float64, T*nb)
		for k := 0; k < T; k++ {
			e.baseRow(sys, t.O[k*nout:(k+1)*nout], t.X[k*nx:(k+1)*nx], u[k], s.raw[k*nb:(k+1)*nb])
		}
		mean, spread := e.Predict(e.Features(sys, t, u, T), T)
		for k := 0; k < T; k++ {
			for o := 0; o < ny; o++ {
				p.Y[k][o] += m.OutStd[o] * mean[k*ny+o]
				p.Spread[k][o] = m.OutStd[o] * spread[k*ny+o]
			}
		}
	}
	s.Hist = p
	return s, nil
}

// baseRow writes the standardised base features of one row (model
// outputs, states, controls) to dst, as Features does.
func (e *Ensemble) baseRow(sys *System, o, x, u, dst []float64) {
	copy(dst, o)
	copy(dst[sys.nout:], x)
	copy(dst[sys.nout+sys.nx:], u)
	for i := range dst {
		dst[i] = (dst[i] - e.FeatMean[i]) / e.FeatStd[i]
	}
}

// Rollout is the reusable result buffer of [Model.Roll]: one per
// goroutine. Its slices are overwritten by the next Roll.
type Rollout struct {
	// T is the number of steps rolled out.
	T int
	// Y is the hybrid prediction (physics + mean residual), Phys the
	// physics alone and Spread the ensemble members' standard deviation,
	// T×outputs row-major ([System.Outputs] order).
	Y, Phys, Spread []float64
	// Out are the physics model outputs (obs, then guards) and X the
	// states at each step's start, T×(obs+guards) and T×states.
	Out, X []float64
	// Fail is the first step whose physics step failed (T when none);
	// rows from there on repeat the last good row.
	Fail int

	t                    *traj
	raw, feat, h, yv, sq []float64
	live                 []*Net
	packed               [][]float64 // live[i]'s W1 for the AVX2 kernel (nil without)
}

// NewRollout returns an empty rollout buffer for m.
func (m *Model) NewRollout() *Rollout {
	r := &Rollout{t: m.Sys.newTraj(0)}
	if e := m.Residual; e != nil {
		for _, n := range e.Members {
			if !n.isZero() {
				r.live = append(r.live, n)
				r.packed = append(r.packed, n.packW1())
			}
		}
	}
	return r
}

// isZero reports whether the network's output layer is all zero: it then
// predicts exactly 0 for every input (Scale·tanh(0)), as an early-stopped
// member that never beat the physics does.
func (n *Net) isZero() bool {
	_, _, w2, b2 := n.parts()
	for _, v := range w2 {
		if v != 0 {
			return false
		}
	}
	for _, v := range b2 {
		if v != 0 {
			return false
		}
	}
	return true
}

func grow(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}

// Roll continues from s over len(u) steps with controls u and
// disturbances d (nil: the declared defaults; else one row per step) into
// r, which must come from m.NewRollout. sim must carry the model's
// parameters and is used by this goroutine only. s is not modified.
func (m *Model) Roll(sim *physics.Sim, s *Start, u, d [][]float64, r *Rollout) error {
	T := len(u)
	if T == 0 {
		return fmt.Errorf("hybrid: a rollout needs at least one step")
	}
	if d != nil && len(d) < T {
		return fmt.Errorf("hybrid: %d disturbance rows for %d steps", len(d), T)
	}
	sys := m.Sys
	nx, ny, nout := sys.nx, sys.ny, sys.nout
	t := r.t
	sys.simulate(sim, s.Next, u, d, T, t)
	if t.fail == 0 {
		return fmt.Errorf("hybrid: the physics simulation fails at the first step of the rollout (state %v)", s.Next)
	}
	r.T, r.Fail = T, t.fail
	r.Y, r.Phys, r.Spread = grow(r.Y, T*ny), grow(r.Phys, T*ny), grow(r.Spread, T*ny)
	r.Out, r.X = t.O[:T*nout], t.X[:T*nx]
	copy(r.Phys, t.Yh[:T*ny])
	copy(r.Y, r.Phys)
	clear(r.Spread)
	e := m.Residual
	if e == nil || len(e.Members) == 0 {
		return nil
	}
	nb, dim := e.base(), e.Dim()
	r.raw = grow(r.raw, T*nb)
	for k := 0; k < T; k++ {
		e.baseRow(sys, t.O[k*nout:(k+1)*nout], t.X[k*nx:(k+1)*nx], u[k], r.raw[k*nb:(k+1)*nb])
	}
	// mean and sum of squares of the members' corrections, members outer
	// as Ensemble.Predict, so the result is bit for bit Simulate's.
	r.sq = grow(r.sq, T*ny)
	clear(r.sq)
	mean := r.Spread // accumulate the mean here, then turn it into the spread
	if len(r.live) > 0 {
		r.feat = grow(r.feat, dim)
		hid := 0
		for _, n := range r.live {
			hid = max(hid, n.Hidden)
		}
		r.h = grow(r.h, hid)
		r.yv = grow(r.yv, ny)
		H := s.T
		// steps outer, members inner: every (step, output) still sums
		// its members in member order, as Ensemble.Predict does.
		for k := 0; k < T; k++ {
			abs := H + k
			for l := 0; l < e.Lags; l++ {
				kk := max(0, abs-l*e.Stride)
				var src []float64
				if kk < H {
					src = s.raw[kk*nb : (kk+1)*nb]
				} else {
					src = r.raw[(kk-H)*nb : (kk-H+1)*nb]
				}
				copy(r.feat[l*nb:(l+1)*nb], src)
			}
			for i, n := range r.live {
				n.forwardPacked(r.packed[i], r.feat, r.h[:n.Hidden], r.yv)
				for o, v := range r.yv[:ny] {
					mean[k*ny+o] += v
					r.sq[k*ny+o] += v * v
				}
			}
		}
	}
	K := float64(len(e.Members))
	for i := range mean {
		mu := mean[i] / K
		sd := math.Sqrt(math.Max(0, r.sq[i]/K-mu*mu))
		o := i % ny
		r.Y[i] += m.OutStd[o] * mu
		r.Spread[i] = m.OutStd[o] * sd
	}
	return nil
}

// forward4 is Forward computing four hidden units at once: each unit's
// sum runs over the inputs in the same order as in Forward, so the result
// is bit for bit Forward's, but the four independent sums keep the
// floating-point pipeline busy (about three times faster on one core).
func (n *Net) forward4(x, h, y []float64) {
	w1, b1, w2, b2 := n.parts()
	in, H := n.In, n.Hidden
	x = x[:in:in]
	j := 0
	for ; j+4 <= H; j += 4 {
		wa := w1[j*in : (j+1)*in : (j+1)*in]
		wb := w1[(j+1)*in : (j+2)*in : (j+2)*in]
		wc := w1[(j+2)*in : (j+3)*in : (j+3)*in]
		wd := w1[(j+3)*in : (j+4)*in : (j+4)*in]
		a, b, c, d := b1[j], b1[j+1], b1[j+2], b1[j+3]
		for k, xv := range x {
			a += float64(wa[k] * xv)
			b += float64(wb[k] * xv)
			c += float64(wc[k] * xv)
			d += float64(wd[k] * xv)
		}
		h[j], h[j+1], h[j+2], h[j+3] = math.Tanh(a), math.Tanh(b), math.Tanh(c), math.Tanh(d)
	}
	for ; j < H; j++ {
		w := w1[j*in : (j+1)*in : (j+1)*in]
		a := b1[j]
		for k, xv := range x {
			a += float64(w[k] * xv)
		}
		h[j] = math.Tanh(a)
	}
	n.output(w2, b2, h, y)
}

// output is the output layer of Forward: y = Scale·tanh(W2·h + b2), each
// sum over the hidden units in order.
func (n *Net) output(w2, b2, h, y []float64) {
	H := n.Hidden
	for o := range y[:n.Out] {
		w := w2[o*H : (o+1)*H : (o+1)*H]
		a := b2[o]
		for jj, hv := range h[:H] {
			a += float64(w[jj] * hv)
		}
		y[o] = n.Scale * math.Tanh(a)
	}
}

// packW1 lays out W1 for the AVX2 kernel: input-major over the whole
// blocks of four hidden units (w[k·H4+u] = W1[u][k], H4 = Hidden rounded
// down to a multiple of 4), so the kernel reads one row per input for all
// of them; the units after the last whole block are not in it. nil
// without AVX2 (or without a whole block): forwardPacked then runs
// forward4.
func (n *Net) packW1() []float64 {
	H4 := n.Hidden &^ 3
	if !useAVX2 || H4 == 0 || n.In == 0 {
		return nil
	}
	w1, _, _, _ := n.parts()
	in := n.In
	w := make([]float64, H4*in)
	for k := 0; k < in; k++ {
		for u := 0; u < H4; u++ {
			w[k*H4+u] = w1[u*in+k]
		}
	}
	return w
}

// forwardPacked is forward4 with the whole blocks of four hidden units in
// the AVX2 kernels (wp from packW1; nil runs forward4): each unit's sum
// still starts from its bias and adds the products in input order, every
// product and sum rounded separately, and tanhAVX2 is math.Tanh bit for
// bit, so the result is bit for bit Forward's.
func (n *Net) forwardPacked(wp, x, h, y []float64) {
	if wp == nil {
		n.forward4(x, h, y)
		return
	}
	w1, b1, w2, b2 := n.parts()
	in, H := n.In, n.Hidden
	H4 := H &^ 3
	x = x[:in:in]
	copy(h[:H4], b1[:H4])
	hiddenAVX2(wp, x, h[:H4])
	if useTanhAVX2 {
		tanhAVX2(h[:H4], &tanhVec)
	} else {
		for j, a := range h[:H4] {
			h[j] = math.Tanh(a)
		}
	}
	for j := H4; j < H; j++ {
		w := w1[j*in : (j+1)*in : (j+1)*in]
		a := b1[j]
		for k, xv := range x {
			a += float64(w[k] * xv)
		}
		h[j] = math.Tanh(a)
	}
	n.output(w2, b2, h, y)
}
