package linear

import (
	"math"
	"math/cmplx"
	"sort"
	"testing"
)

// The poles of a fitted ARX are the roots of its A polynomial: y(k) =
// 1.5 y(k−1) − 0.56 y(k−2) + u(k−1) has poles 0.8 and 0.7; a 2-output
// diagonal model with own-lag coefficients 1.1 and 0.5 has poles 1.1, 0.5.
func TestARXPoles(t *testing.T) {
	const T = 400
	u := make([][]float64, T)
	y := make([][]float64, T)
	for k := range T {
		u[k] = []float64{math.Sin(float64(k)/3) + math.Cos(float64(k)/11)}
		y[k] = []float64{0}
		if k >= 2 {
			y[k][0] = 1.5*y[k-1][0] - 0.56*y[k-2][0] + u[k-1][0]
		}
	}
	m, err := FitARX(y, u, ARXOrders{NA: 2, NB: 1, NK: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Poles()
	mods := []float64{cmplx.Abs(p[0]), cmplx.Abs(p[1])}
	sort.Float64s(mods)
	if len(p) != 2 || math.Abs(mods[0]-0.7) > 1e-6 || math.Abs(mods[1]-0.8) > 1e-6 {
		t.Fatalf("poles %v", p)
	}

	// 2 outputs, diagonal structure, the first unstable (short data, it
	// grows as 1.1^k)
	const T2 = 60
	u, y = make([][]float64, T2), make([][]float64, T2)
	for k := range T2 {
		u[k] = []float64{math.Sin(float64(k) / 2)}
		y[k] = []float64{1, 1}
		if k > 0 {
			y[k] = []float64{1.1*y[k-1][0] + u[k-1][0], 0.5*y[k-1][1] - u[k-1][0]}
		}
	}
	m, err = FitARX(y, u, ARXOrders{NA: 1, NB: 1, NK: 1, Diag: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p = m.Poles()
	mods = []float64{cmplx.Abs(p[0]), cmplx.Abs(p[1])}
	sort.Float64s(mods)
	if len(p) != 2 || math.Abs(mods[0]-0.5) > 1e-6 || math.Abs(mods[1]-1.1) > 1e-6 {
		t.Fatalf("diag poles %v", p)
	}
	// no autoregressive part: no poles
	m, err = FitARX(y, u, ARXOrders{NA: 0, NB: 2, NK: 1}, 0)
	if err != nil || len(m.Poles()) != 0 {
		t.Fatalf("FIR: %v %v", err, m.Poles())
	}
}
