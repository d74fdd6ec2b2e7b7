package physics

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/safefile"
)

// MaxSourceBytes is the largest model source Parse accepts.
const MaxSourceBytes = 1 << 20

// Decl is one declared name of a model.
type Decl struct {
	Kind Kind
	Name string
	// Unit is the unit as declared ("g/bar"), "1" for a state, control,
	// disturbance or param declared without one, "?" when unit checks are
	// switched off for it, or for let/obs/guard/const without a unit clause
	// the inferred unit ("" for a bare number).
	Unit string
	// Pos is "file:line:col" of the name in the declaration.
	Pos       string
	Line, Col int
	// Value is a param's nominal value, a const's value, or a control's or
	// disturbance's default (NaN when it has none).
	Value float64
	// Lo and Hi are a param's prior bounds or a declared range; ±Inf when
	// no range is declared.
	Lo, Hi   float64
	HasRange bool
	// Expr is the defining expression as written (const, let, obs, guard)
	// or a state's init expression ("" when the state has no init: it
	// starts at 0 unless given).
	Expr string
	// Equation is a state's next(...) or d(...) right-hand side as written.
	Equation string
}

// Model is a checked and compiled grey-box model. It is immutable and safe
// for concurrent use; each goroutine simulates with its own [Sim].
type Model struct {
	Name, Version string
	// File is the name the source was parsed under (used in positions).
	File string
	// Solver is "discrete", "euler" or "rk4".
	Solver string
	// Substeps is the number of integration steps per dt (euler, rk4); 1
	// for discrete models.
	Substeps int
	// FixedDt is the step length declared by `dt`, in seconds; 0 when the
	// step comes from the data (the dataset beat).
	FixedDt float64

	States, Controls, Disturbances, Params, Consts, Lets, Obs, Guards []Decl

	// Warnings are findings that do not stop the model: unused names and
	// domain checks that could not be settled because ranges are missing.
	Warnings []core.Problem

	prog *program
	chk  *checker // the checked source, kept for the reference evaluator in tests
}

// ParseFile reads and parses a model file. Positions in problems use the
// file's base name.
func ParseFile(path string) (*Model, error) {
	src, err := safefile.ReadFile(path, MaxSourceBytes)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, core.Wrap(core.CodeNotFound, err, "read physics model %s", path)
		}
		return nil, core.Wrap(core.CodeInvalidArgument, err, "read physics model %s", path)
	}
	return Parse(filepath.Base(path), src)
}

// Parse parses, checks and compiles a model source. name is used in the
// positions of problems ("name:line:col"). Every problem is reported at
// once in a *core.Error with code [CodePhysicsInvalid].
func Parse(name string, src []byte) (*Model, error) {
	if name == "" {
		name = "model.aml"
	}
	d := &diag{file: name, maxProbs: 200}
	if len(src) > MaxSourceBytes {
		d.errorf(Pos{1, 1}, "the source is %d bytes; the limit is %d", len(src), MaxSourceBytes)
		return nil, d.err()
	}
	raw := parseSource(name, src, d)
	c := check(raw, src, d)
	if err := d.err(); err != nil {
		return nil, err
	}
	m := build(c, name)
	m.Warnings = d.problems(d.warns)
	m.prog = compile(c, m)
	m.chk = c
	return m, nil
}

func build(c *checker, file string) *Model {
	raw := c.m
	m := &Model{
		Name: raw.name, Version: raw.version, File: file,
		Solver: c.solver, Substeps: 1,
	}
	if raw.substeps > 0 {
		m.Substeps = raw.substeps
	}
	if raw.hasDt {
		m.FixedDt = raw.dt
	}
	for _, rd := range raw.decls {
		if c.names[rd.name] != rd {
			continue
		}
		d := Decl{
			Kind: rd.kind, Name: rd.name,
			Pos: c.d.field(rd.pos), Line: rd.pos.Line, Col: rd.pos.Col,
			Value: math.NaN(), Lo: rd.lo, Hi: rd.hi, HasRange: rd.hasRange,
		}
		q := c.qty[rd]
		switch {
		case rd.unit != nil:
			d.Unit = rd.unit.text
		case !rd.kind.algebraic():
			d.Unit = "1"
		case q.any:
			d.Unit = "?"
		case q.free:
			d.Unit = ""
		default:
			d.Unit = q.u.String()
		}
		switch rd.kind {
		case KindParam:
			d.Value = rd.value
		case KindConst:
			d.Value = c.consts[rd]
		case KindControl, KindDisturbance:
			if rd.hasDef {
				d.Value = rd.def
			}
		}
		if rd.expr != nil {
			d.Expr = c.text2(rd.expr)
		}
		if rd.init != nil {
			d.Expr = c.text2(rd.init)
		}
		if eq := c.eqOf[rd.name]; eq != nil && rd.kind == KindState {
			d.Equation = c.text2(eq.expr)
		}
		switch rd.kind {
		case KindState:
			m.States = append(m.States, d)
		case KindControl:
			m.Controls = append(m.Controls, d)
		case KindDisturbance:
			m.Disturbances = append(m.Disturbances, d)
		case KindParam:
			m.Params = append(m.Params, d)
		case KindConst:
			m.Consts = append(m.Consts, d)
		case KindLet:
			m.Lets = append(m.Lets, d)
		case KindObs:
			m.Obs = append(m.Obs, d)
		case KindGuard:
			m.Guards = append(m.Guards, d)
		}
	}
	return m
}

// text2 is the full source text of an expression, whitespace collapsed.
func (c *checker) text2(n *node) string {
	if n.off < 0 || n.end > len(c.src) || n.off >= n.end {
		return ""
	}
	return strings.Join(strings.Fields(string(c.src[n.off:n.end])), " ")
}

func names(ds []Decl) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

// ParamNames returns the parameter names in declaration order: the order
// of every parameter vector.
func (m *Model) ParamNames() []string { return names(m.Params) }

// ParamVector returns the nominal parameter values.
func (m *Model) ParamVector() []float64 {
	out := make([]float64, len(m.Params))
	for i, p := range m.Params {
		out[i] = p.Value
	}
	return out
}

// ParamBounds returns the prior bounds of the parameters.
func (m *Model) ParamBounds() (lo, hi []float64) {
	lo = make([]float64, len(m.Params))
	hi = make([]float64, len(m.Params))
	for i, p := range m.Params {
		lo[i], hi[i] = p.Lo, p.Hi
	}
	return lo, hi
}

// StateNames, ControlNames and DisturbanceNames give the order of the x, u
// and d vectors.
func (m *Model) StateNames() []string       { return names(m.States) }
func (m *Model) ControlNames() []string     { return names(m.Controls) }
func (m *Model) DisturbanceNames() []string { return names(m.Disturbances) }

// OutputNames gives the order of the output vector of [Sim.Step]: the obs
// in declaration order, then the guards.
func (m *Model) OutputNames() []string {
	return append(names(m.Obs), names(m.Guards)...)
}

// DisturbanceDefaults returns the declared defaults (NaN where none).
func (m *Model) DisturbanceDefaults() []float64 {
	out := make([]float64, len(m.Disturbances))
	for i, d := range m.Disturbances {
		out[i] = d.Value
	}
	return out
}

// Lookup finds a declared name.
func (m *Model) Lookup(name string) (Decl, bool) {
	for _, list := range [][]Decl{m.States, m.Controls, m.Disturbances, m.Params, m.Consts, m.Lets, m.Obs, m.Guards} {
		for _, d := range list {
			if d.Name == name {
				return d, true
			}
		}
	}
	return Decl{}, false
}

// String summarises the model, e.g. "injection_greybox 1.0.0 (discrete, 3 states, 5 params)".
func (m *Model) String() string {
	return fmt.Sprintf("%s %s (%s, %d states, %d params)", m.Name, m.Version, m.Solver, len(m.States), len(m.Params))
}
