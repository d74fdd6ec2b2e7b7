package physics

import (
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/core"
)

// Sim simulates one model with one parameter vector. Its Step does not
// allocate. A Sim is not safe for concurrent use; make one per goroutine
// (NewSim is cheap) — the Model itself is shared.
type Sim struct {
	m      *Model
	p      *program
	slots  []float64
	params []float64
	xs     []float64 // integration state
	k      [4][]float64
}

// NewSim makes a simulator with the given parameters (in [Model.ParamNames]
// order). Every parameter must be finite and inside its prior bounds: the
// static domain checks assumed those bounds.
func (m *Model) NewSim(params []float64) (*Sim, error) {
	p := m.prog
	n := len(m.States)
	s := &Sim{m: m, p: p, slots: make([]float64, p.nSlots), params: make([]float64, len(m.Params)), xs: make([]float64, n)}
	for i := range s.k {
		s.k[i] = make([]float64, n)
	}
	copy(s.slots, p.constVals)
	if err := s.SetParams(params); err != nil {
		return nil, err
	}
	return s, nil
}

// Model returns the model the Sim runs.
func (s *Sim) Model() *Model { return s.m }

// Params returns a copy of the current parameters.
func (s *Sim) Params() []float64 { return append([]float64(nil), s.params...) }

// SetParams replaces the parameters (same rules as NewSim) without
// allocating, so an optimiser can reuse one Sim.
func (s *Sim) SetParams(params []float64) error {
	m := s.m
	if len(params) != len(m.Params) {
		return core.FieldErrorf(core.CodeInvalidArgument, "params", "model %s has %d params (%v), got %d values", m.Name, len(m.Params), m.ParamNames(), len(params))
	}
	for i, v := range params {
		d := m.Params[i]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return core.FieldErrorf(core.CodeInvalidArgument, "params."+d.Name, "param %s is %v", d.Name, v)
		}
		if v < d.Lo || v > d.Hi {
			return core.FieldErrorf(core.CodeInvalidArgument, "params."+d.Name, "param %s = %g is outside its bounds [%g, %g]", d.Name, v, d.Lo, d.Hi)
		}
	}
	copy(s.params, params)
	copy(s.slots[s.p.pBase:], params)
	return nil
}

// Init returns the initial state: stateInit[name] where given, otherwise
// the state's init expression evaluated with the controls, disturbances and
// parameters, otherwise 0. controls or disturbances may be nil or short;
// missing entries take their declared default (NaN when there is none, which
// makes an init that uses them NaN). Unknown names in stateInit are ignored.
func (s *Sim) Init(stateInit map[string]float64, controls, disturbances []float64) []float64 {
	p := s.p
	for i, def := range p.uDefaults {
		v := def
		if i < len(controls) {
			v = controls[i]
		}
		s.slots[p.uBase+int32(i)] = v
	}
	for i, def := range p.dDefaults {
		v := def
		if i < len(disturbances) {
			v = disturbances[i]
		}
		s.slots[p.dBase+int32(i)] = v
	}
	for i := range s.m.States {
		s.slots[p.xBase+int32(i)] = 0
	}
	run(p.init, s.slots)
	x := make([]float64, len(s.m.States))
	for i, d := range s.m.States {
		x[i] = s.slots[p.xBase+int32(i)]
		if v, ok := stateInit[d.Name]; ok {
			x[i] = v
		}
	}
	return x
}

func lenErr(what string, want, got int, names []string) error {
	return core.FieldErrorf(core.CodeInvalidArgument, what, "%s has %d values, the model needs %d (%v)", what, got, want, names)
}

// Step advances the model by one sample of dt seconds, from state x with
// controls u and disturbances d, writing the new state to xNext and the
// outputs ([Model.OutputNames] order: obs, then guards) to out.
//
// The update rule is the same everywhere: every expression — let, obs,
// guard, next() and d() — is evaluated from the previous step's values x,
// u, d (and dt). The outputs are those of the step's start: out = h(x, u,
// d). Discrete models set xNext = next(x); euler and rk4 integrate d(x)
// over dt in Substeps equal sub-steps with u and d held constant.
//
// d may be nil when every disturbance has a default; out may be nil. xNext
// may alias x. When the model declares a fixed dt, pass 0 (or that same
// value). A NaN or ±Inf in xNext or out is an error with code
// [CodePhysicsNonFinite]; xNext and out then hold the non-finite values.
func (s *Sim) Step(x, u, d []float64, dt float64, xNext, out []float64) error {
	m, p := s.m, s.p
	nx := len(m.States)
	if len(x) != nx {
		return lenErr("x", nx, len(x), m.StateNames())
	}
	if len(xNext) != nx {
		return lenErr("xNext", nx, len(xNext), m.StateNames())
	}
	if len(u) != len(m.Controls) {
		return lenErr("u", len(m.Controls), len(u), m.ControlNames())
	}
	if out != nil && len(out) != len(p.outSlots) {
		return lenErr("out", len(p.outSlots), len(out), m.OutputNames())
	}
	if d == nil {
		if !p.dAllDef {
			return core.FieldErrorf(core.CodeInvalidArgument, "d", "d is nil but not every disturbance of %s has a default", m.Name)
		}
		copy(s.slots[p.dBase:], p.dDefaults)
	} else {
		if len(d) != len(m.Disturbances) {
			return lenErr("d", len(m.Disturbances), len(d), m.DisturbanceNames())
		}
		copy(s.slots[p.dBase:], d)
	}
	if m.FixedDt > 0 {
		switch {
		case dt == 0:
			dt = m.FixedDt
		case !scaleEq(dt, m.FixedDt):
			return core.FieldErrorf(core.CodeInvalidArgument, "dt", "model %s declares dt %g s, got %g s", m.Name, m.FixedDt, dt)
		}
	}
	if !(dt > 0) || math.IsInf(dt, 0) {
		return core.FieldErrorf(core.CodeInvalidArgument, "dt", "dt must be a positive number of seconds, got %g", dt)
	}
	copy(s.slots[p.uBase:], u)
	s.slots[p.dtSlot] = dt

	xs := s.slots[p.xBase : p.xBase+int32(nx)]
	rhs := s.slots[p.rBase : p.rBase+int32(nx)]
	switch m.Solver {
	case "discrete":
		copy(xs, x)
		run(p.full, s.slots)
		s.outputs(out)
		copy(xNext, rhs)
	case "euler":
		h := dt / float64(m.Substeps)
		acc := s.xs
		copy(acc, x)
		for k := 0; k < m.Substeps; k++ {
			copy(xs, acc)
			if k == 0 {
				run(p.full, s.slots)
				s.outputs(out)
			} else {
				run(p.deriv, s.slots)
			}
			for i := range acc {
				acc[i] += h * rhs[i]
			}
		}
		copy(xNext, acc)
	case "rk4":
		h := dt / float64(m.Substeps)
		acc := s.xs
		k1, k2, k3, k4 := s.k[0], s.k[1], s.k[2], s.k[3]
		copy(acc, x)
		for k := 0; k < m.Substeps; k++ {
			copy(xs, acc)
			if k == 0 {
				run(p.full, s.slots)
				s.outputs(out)
			} else {
				run(p.deriv, s.slots)
			}
			copy(k1, rhs)
			for i := range xs {
				xs[i] = acc[i] + h/2*k1[i]
			}
			run(p.deriv, s.slots)
			copy(k2, rhs)
			for i := range xs {
				xs[i] = acc[i] + h/2*k2[i]
			}
			run(p.deriv, s.slots)
			copy(k3, rhs)
			for i := range xs {
				xs[i] = acc[i] + h*k3[i]
			}
			run(p.deriv, s.slots)
			copy(k4, rhs)
			for i := range acc {
				acc[i] += h / 6 * (k1[i] + 2*k2[i] + 2*k3[i] + k4[i])
			}
		}
		copy(xNext, acc)
	}
	for i, v := range xNext {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nonFinite(p.eqNames[i], v)
		}
	}
	for i, v := range out {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nonFinite(p.outNames[i], v)
		}
	}
	return nil
}

func (s *Sim) outputs(out []float64) {
	for i := range out {
		out[i] = s.slots[s.p.outSlots[i]]
	}
}

func nonFinite(field string, v float64) error {
	return newErr(CodePhysicsNonFinite, field, "%s is %v", field, v)
}

// Simulate runs Step over a control sequence from x0. U has one row per
// step. D is nil (defaults), one row (held for every step) or one row per
// step; a nil row means the defaults. X has len(U)+1 rows: X[0] = x0 and
// X[k+1] the state after step k. Y has len(U) rows: Y[k] are the outputs of
// step k, computed from X[k], U[k], D[k]. On error X and Y hold the steps
// completed so far, and the error's message names the step.
func (s *Sim) Simulate(x0 []float64, U [][]float64, D [][]float64, dt float64) (X, Y [][]float64, err error) {
	m := s.m
	nx, ny := len(m.States), len(s.p.outSlots)
	if len(x0) != nx {
		return nil, nil, lenErr("x0", nx, len(x0), m.StateNames())
	}
	if D != nil && len(D) != 1 && len(D) != len(U) {
		return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "D", "D has %d rows: want 0, 1 or len(U) = %d", len(D), len(U))
	}
	xb := make([]float64, (len(U)+1)*nx)
	yb := make([]float64, len(U)*ny)
	X = make([][]float64, len(U)+1)
	Y = make([][]float64, len(U))
	X[0] = xb[:nx:nx]
	copy(X[0], x0)
	for k, u := range U {
		var d []float64
		switch {
		case len(D) == 1:
			d = D[0]
		case len(D) > 1:
			d = D[k]
		}
		X[k+1] = xb[(k+1)*nx : (k+2)*nx : (k+2)*nx]
		Y[k] = yb[k*ny : (k+1)*ny : (k+1)*ny]
		if err := s.Step(X[k], u, d, dt, X[k+1], Y[k]); err != nil {
			if ae, ok := err.(*core.Error); ok {
				cp := *ae
				cp.Message = fmt.Sprintf("step %d: %s", k, ae.Message)
				err = &cp
			}
			return X[:k+2], Y[:k+1], err
		}
	}
	return X, Y, nil
}
