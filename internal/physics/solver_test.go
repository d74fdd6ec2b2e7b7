package physics

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func decay(t testing.TB, solver string) *Model {
	t.Helper()
	m, err := Parse("decay.aml", []byte(`model decay
solver `+solver+`
state x unit 1 init 1
param k = 1 in [0.1, 10] unit 1/s
d(x) = -k * x
obs y = x
`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// run simulates dx/dt = -k x for n steps of dt and returns x(n*dt).
func runDecay(t *testing.T, m *Model, dt float64, n int) float64 {
	t.Helper()
	s, err := m.NewSim(m.ParamVector())
	if err != nil {
		t.Fatal(err)
	}
	U := make([][]float64, n)
	X, Y, err := s.Simulate([]float64{1}, U, nil, dt)
	if err != nil {
		t.Fatal(err)
	}
	for k := range Y { // outputs are those of the step's start
		if Y[k][0] != X[k][0] {
			t.Fatalf("step %d: y %v x %v", k, Y[k][0], X[k][0])
		}
	}
	return X[n][0]
}

func TestEulerVersusRK4(t *testing.T) {
	exact := math.Exp(-5)
	relErr := func(v float64) float64 { return math.Abs(v-exact) / exact }
	euler := relErr(runDecay(t, decay(t, "euler"), 0.1, 50))
	rk4 := relErr(runDecay(t, decay(t, "rk4"), 0.1, 50))
	t.Logf("relative error at t=5: euler %.3g, rk4 %.3g", euler, rk4)
	// Euler: (1-h)^n; rk4: fourth order.
	if math.Abs(euler-(exact-math.Pow(0.9, 50))/exact) > 1e-12 {
		t.Errorf("euler is not (1-h)^n: %g", euler)
	}
	if !(rk4 < 1e-5) || !(rk4 < euler*1e-4) {
		t.Errorf("rk4 error %g not << euler error %g", rk4, euler)
	}
	// Substeps: euler is first order (10 substeps: ~10x smaller error),
	// rk4 fourth order (2 substeps: ~16x smaller).
	e10 := relErr(runDecay(t, decay(t, "euler substeps 10"), 0.1, 50))
	if r := euler / e10; r < 8 || r > 12 {
		t.Errorf("euler substeps 10: error ratio %g", r)
	}
	r2 := relErr(runDecay(t, decay(t, "rk4 substeps 2"), 0.1, 50))
	if r := rk4 / r2; r < 14 || r > 18 {
		t.Errorf("rk4 substeps 2: error ratio %g", r)
	}
	// substeps N at dt is the same as N steps at dt/N.
	for _, solver := range []string{"euler", "rk4"} {
		a := runDecay(t, decay(t, solver+" substeps 4"), 0.4, 10)
		b := runDecay(t, decay(t, solver), 0.1, 40)
		if math.Abs(a-b) > 1e-15*math.Abs(b) {
			t.Errorf("%s: substeps 4 at 0.4 s %v, 40 steps at 0.1 s %v", solver, a, b)
		}
	}
}

func TestFixedDt(t *testing.T) {
	m, err := Parse("m.aml", []byte("model t\ndt 0.5\nstate x unit s init 0\nnext(x) = x + dt\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewSim(nil)
	x := []float64{0}
	if err := s.Step(x, nil, nil, 0, x, nil); err != nil || x[0] != 0.5 {
		t.Fatalf("dt 0 → model dt: %v %v", x, err)
	}
	if err := s.Step(x, nil, nil, 0.5, x, nil); err != nil || x[0] != 1 {
		t.Fatalf("same dt: %v %v", x, err)
	}
	if err := s.Step(x, nil, nil, 1, x, nil); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("other dt: %v", err)
	}
}

func TestSimErrors(t *testing.T) {
	m := injection(t)
	if _, err := m.NewSim([]float64{1}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("short params: %v", err)
	}
	p := m.ParamVector()
	p[1] = 0.5 // pressureTauSec below its bound 1
	if _, err := m.NewSim(p); core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "pressureTauSec = 0.5 is outside its bounds [1, 30]") {
		t.Fatalf("out of bounds: %v", err)
	}
	p[1] = math.NaN()
	if _, err := m.NewSim(p); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("NaN: %v", err)
	}
	s, _ := m.NewSim(m.ParamVector())
	x, u, d := []float64{240, 60, 0.5}, []float64{70, 8, 245}, []float64{23, 1}
	xn, out := make([]float64, 3), make([]float64, 5)
	for name, err := range map[string]error{
		"x":   s.Step(x[:2], u, d, 1, xn, out),
		"u":   s.Step(x, u[:1], d, 1, xn, out),
		"d":   s.Step(x, u, d[:1], 1, xn, out),
		"out": s.Step(x, u, d, 1, xn, out[:1]),
		"dt":  s.Step(x, u, d, math.NaN(), xn, out),
	} {
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != name {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Non-finite values: typed error naming the equation or output.
	x[0] = math.Inf(1)
	err := s.Step(x, u, d, 1, xn, out)
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != CodePhysicsNonFinite || ae.Field != "next(melt_temperature)" || ae.Kind() != core.KindUnprocessable {
		t.Fatalf("non-finite: %#v", err)
	}
	m2, err := Parse("m.aml", []byte("model t\nstate x unit 1 init 1\nobs y = log(x)\nnext(x) = x - 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := m2.NewSim(nil)
	X, Y, err := s2.Simulate([]float64{1}, make([][]float64, 5), nil, 1)
	if !errors.As(err, &ae) || ae.Code != CodePhysicsNonFinite || ae.Field != "y" || !strings.HasPrefix(ae.Message, "step 1: y is NaN") {
		t.Fatalf("%v", err)
	}
	if len(X) != 3 || len(Y) != 2 || X[1][0] != -1 {
		t.Fatalf("partial trajectory %v %v", X, Y)
	}
	// A disturbance without default needs d.
	m3, _ := Parse("m.aml", []byte("model t\nstate x unit 1 init 1\ndisturbance w unit 1\nnext(x) = x + w\n"))
	s3, _ := m3.NewSim(nil)
	if err := s3.Step([]float64{1}, nil, nil, 1, []float64{0}, nil); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("%v", err)
	}
}

func TestStepAliasingAndAllocs(t *testing.T) {
	for _, f := range []string{"injection", "cascaded_tanks", "cascaded_tanks_overflow", "emps"} {
		m := mustParseFile(t, examples+f+".aml")
		s, err := m.NewSim(m.ParamVector())
		if err != nil {
			t.Fatal(err)
		}
		u := make([]float64, len(m.Controls))
		for i := range u {
			u[i] = 3
		}
		if f == "injection" {
			u = []float64{70, 8, 245}
		}
		x := s.Init(nil, u, nil)
		if f == "emps" {
			x[0] = 0.1
		}
		out := make([]float64, len(m.OutputNames()))
		xn := make([]float64, len(x))
		if err := s.Step(x, u, nil, 1e-3, xn, out); err != nil {
			t.Fatal(err)
		}
		// In place gives the same result.
		xi := append([]float64(nil), x...)
		if err := s.Step(xi, u, nil, 1e-3, xi, out); err != nil {
			t.Fatal(err)
		}
		for i := range xi {
			if xi[i] != xn[i] {
				t.Fatalf("%s: aliasing changes the result: %v vs %v", f, xi, xn)
			}
		}
		allocs := testing.AllocsPerRun(200, func() {
			if err := s.Step(x, u, nil, 1e-3, xn, out); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per Step", f, allocs)
		}
	}
}

// TestCompiledMatchesReference checks the compiled program against the AST
// evaluator on every example, with random parameters and inputs.
func TestCompiledMatchesReference(t *testing.T) {
	for _, f := range []string{"injection", "cascaded_tanks", "cascaded_tanks_overflow", "emps"} {
		m := mustParseFile(t, examples+f+".aml")
		lo, hi := m.ParamBounds()
		for i := range 300 {
			p := make([]float64, len(lo))
			for j := range p {
				p[j] = lo[j] + (hi[j]-lo[j])*math.Mod(float64(i*7+j*13)*0.618034, 1)
			}
			s, err := m.NewSim(p)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float64, len(m.States))
			for j := range x {
				x[j] = 0.5 + math.Mod(float64(i+3*j)*0.7548776, 1)*9
			}
			u := make([]float64, len(m.Controls))
			for j := range u {
				u[j] = math.Mod(float64(i*5+j)*0.5698403, 1) * 10
			}
			dt := 0.5 + float64(i%4)
			xn, out := make([]float64, len(x)), make([]float64, len(m.OutputNames()))
			_ = s.Step(x, u, nil, dt, xn, out)
			wx, wo := refStep(m, p, x, u, nil, dt)
			for j := range xn {
				if !sameFloat(xn[j], wx[j]) {
					t.Fatalf("%s case %d: x[%d] = %v, reference %v", f, i, j, xn[j], wx[j])
				}
			}
			for j := range out {
				if !sameFloat(out[j], wo[j]) {
					t.Fatalf("%s case %d: out[%d] = %v, reference %v", f, i, j, out[j], wo[j])
				}
			}
		}
	}
}
