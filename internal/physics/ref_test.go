package physics

import (
	"math"
)

// refStep is an independent implementation of Sim.Step on the checked AST
// (evalNode, maps, no compilation), used to test the compiled program.
func refStep(m *Model, params, x, u, d []float64, dt float64) (xNext, out []float64) {
	c := m.chk
	vals := map[string]float64{"dt": dt, "pi": math.Pi}
	for i, p := range m.Params {
		vals[p.Name] = params[i]
	}
	for i, s := range m.Controls {
		vals[s.Name] = u[i]
	}
	for i, s := range m.Disturbances {
		if d == nil {
			vals[s.Name] = s.Value
		} else {
			vals[s.Name] = d[i]
		}
	}
	for k, v := range c.consts {
		vals[k.name] = v
	}
	lookup := func(n *node) float64 { return vals[n.name] }
	f := func(xs []float64) (rhs, out []float64) {
		for i, s := range m.States {
			vals[s.Name] = xs[i]
		}
		for _, dcl := range c.order {
			if dcl.kind != KindConst {
				vals[dcl.name] = evalNode(dcl.expr, lookup)
			}
		}
		rhs = make([]float64, len(xs))
		for i, s := range m.States {
			rhs[i] = evalNode(c.eqOf[s.Name].expr, lookup)
		}
		for _, o := range m.Obs {
			out = append(out, vals[o.Name])
		}
		for _, o := range m.Guards {
			out = append(out, vals[o.Name])
		}
		return rhs, out
	}
	n := len(x)
	switch m.Solver {
	case "discrete":
		return f(x)
	case "euler":
		h := dt / float64(m.Substeps)
		acc := append([]float64(nil), x...)
		for k := 0; k < m.Substeps; k++ {
			r, o := f(acc)
			if k == 0 {
				out = o
			}
			for i := range acc {
				acc[i] += h * r[i]
			}
		}
		return acc, out
	default:
		h := dt / float64(m.Substeps)
		acc := append([]float64(nil), x...)
		xs := make([]float64, n)
		for k := 0; k < m.Substeps; k++ {
			k1, o := f(acc)
			if k == 0 {
				out = o
			}
			for i := range xs {
				xs[i] = acc[i] + h/2*k1[i]
			}
			k2, _ := f(xs)
			for i := range xs {
				xs[i] = acc[i] + h/2*k2[i]
			}
			k3, _ := f(xs)
			for i := range xs {
				xs[i] = acc[i] + h*k3[i]
			}
			k4, _ := f(xs)
			for i := range acc {
				acc[i] += h / 6 * (k1[i] + 2*k2[i] + 2*k3[i] + k4[i])
			}
		}
		return acc, out
	}
}

// sameFloat is bitwise equality that treats every NaN as equal.
func sameFloat(a, b float64) bool {
	if math.IsNaN(a) && math.IsNaN(b) {
		return true
	}
	return math.Float64bits(a) == math.Float64bits(b)
}
