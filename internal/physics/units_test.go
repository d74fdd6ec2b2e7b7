package physics

import (
	"math"
	"strings"
	"testing"
)

func TestUnitParsing(t *testing.T) {
	cases := []struct {
		in, str, dim string
		scale        float64
	}{
		{"bar", "bar", "M L^-1 T^-2", 1e5},
		{"g/bar", "g/bar", "L T^2", 1e-8},
		{"1/s", "1/s", "T^-1", 1},
		{"m/s^2", "m/s^2", "L T^-2", 1},
		{"kg*m^2/s^2", "kg*m^2/s^2", "M L^2 T^-2", 1},
		{"V", "V", "M L^2 T^-3 I^-1", 1},
		{"A", "A", "I", 1},
		{"%", "%", "dimensionless", 0.01},
		{"1", "1", "dimensionless", 1},
		{"degC", "degC", "Θ", 1},
		{"g/degC", "g/degC", "M Θ^-1", 1e-3},
		{"V^(1/2)/s", "V^(1/2)/s", "M^(1/2) L T^(-5/2) I^(-1/2)", 1},
		{"V^0.5/s", "V^(1/2)/s", "M^(1/2) L T^(-5/2) I^(-1/2)", 1},
		{"N*s/m", "N*s/m", "M T^-1", 1},
		{"s^-2", "1/s^2", "T^-2", 1},
		{"(m/s)^2", "m^2/s^2", "L^2 T^-2", 1},
		{"%/bar", "%/bar", "M^-1 L T^2", 1e-7},
		{"mm/min", "mm/min", "L T^-1", 1e-3 / 60},
		{"g/(bar*s)", "g/(bar*s)", "L T", 1e-8},
		{"m^(1/3)", "m^(1/3)", "L^(1/3)", 1},
	}
	for _, tc := range cases {
		u, err := parseUnitText(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if u.String() != tc.str || u.dimString() != tc.dim || math.Abs(u.scale-tc.scale) > 1e-12*tc.scale {
			t.Errorf("%s: got %s [%s] ×%g, want %s [%s] ×%g", tc.in, u, u.dimString(), u.scale, tc.str, tc.dim, tc.scale)
		}
	}
	for in, msg := range map[string]string{
		"furlong":   `unknown unit "furlong"`,
		"2/s":       "only 1 may appear",
		"m^x":       "expected number (the exponent)",
		"m s":       `unexpected name "s" after the unit`,
		"m^0.12345": "not a simple fraction",
		"":          "expected a unit",
	} {
		_, err := parseUnitText(in)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: got %v, want %q", in, err, msg)
		}
	}
}

func TestUnitAlgebra(t *testing.T) {
	mu := func(s string) unit {
		u, err := parseUnitText(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	// g/bar * bar = g, symbolically and dimensionally.
	r, _ := mu("g/bar").mul(mu("bar"))
	if r.String() != "g" || !r.same(mu("g")) {
		t.Fatalf("g/bar*bar = %s", r)
	}
	// N/kg and m/s^2: same unit, different symbols.
	if !mu("N/kg").same(mu("m/s^2")) || mu("N/kg").String() == mu("m/s^2").String() {
		t.Fatal("N/kg vs m/s^2")
	}
	// sqrt halves exponents exactly.
	h, _ := mu("m^3/s^2").pow(rat{1, 2})
	if h.dimString() != "L^(3/2) T^-1" {
		t.Fatal(h.dimString())
	}
	// same dimension, different scale: not the same unit
	if mu("kg").same(mu("g")) || !mu("kg").sameDim(mu("g")) || mu("%").same(one) {
		t.Fatal("scale")
	}
	if !mu("degC").same(mu("K")) {
		t.Fatal("degC and K differ only by an offset, which is ignored")
	}
	// rationals
	for x, want := range map[float64]rat{0.5: {1, 2}, -1.5: {-3, 2}, 1.0 / 3: {1, 3}, 2: {2, 1}, 0: {0, 1}} {
		if r, ok := ratFromFloat(x); !ok || r != want {
			t.Errorf("%v → %v %v", x, r, ok)
		}
	}
	if _, ok := ratFromFloat(math.Pi); ok {
		t.Error("pi is not a simple fraction")
	}
	// exponent growth is capped, not overflowed
	u := mu("m")
	ok := true
	for i := 0; i < 40 && ok; i++ {
		u, ok = u.pow(rat{1, 3})
	}
	if ok {
		t.Error("expected the exponent cap")
	}
}

func TestLineContinuation(t *testing.T) {
	src := `model t
state x unit 1 init 0   # comment
control u unit 1

let a = 1 +
  2
let b = (1
  + 2)
let c = 1
  + 2
  * 3
let e = max(1,
            2)
next(x) = a + b + c + e + u
`
	m, err := Parse("m.aml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1 + 2", "b": "(1 + 2)", "c": "1 + 2 * 3", "e": "max(1, 2)"}
	for _, l := range m.Lets {
		if l.Expr != want[l.Name] {
			t.Errorf("let %s = %q, want %q", l.Name, l.Expr, want[l.Name])
		}
	}
	s, _ := m.NewSim(nil)
	x := []float64{0}
	if err := s.Step(x, []float64{1}, nil, 1, x, nil); err != nil || x[0] != 3+3+7+2+1 {
		t.Fatalf("%v %v", x, err)
	}
}

func TestOperators(t *testing.T) {
	cases := map[string]float64{
		"-2^2":                        -4,
		"2^3^2":                       512,
		"2**-1":                       0.5,
		"(-2)^2":                      4,
		"10 - 4 - 3":                  3,
		"12 / 3 / 2":                  2,
		"exp(0) + log(1)":             1,
		"sqrt(16) + abs(-3)":          7,
		"min(3, 1, 2)":                1,
		"max(3, 1, 2)":                3,
		"clamp(5, 0, 1)":              1,
		"clamp(-5, 0, 1)":             0,
		"pow(2, 10)":                  1024,
		"tanh(0) + sign(-3)":          -1,
		"sign(0)":                     0,
		"if(1 < 2, 10, 20)":           10,
		"if(1 >= 2, 10, 20)":          20,
		"if(1 == 1 and 2 != 2, 1, 0)": 0,
		"if(1 == 1 or 2 != 2, 1, 0)":  1,
		"if(not 1 > 2, 1, 0)":         1,
		"if(u > 0, u, -u)":            2,
		"if(u <= 2 and u >= 2, 1, 0)": 1,
		"cos(0) + sin(0)":             1,
		"pi":                          math.Pi,
		"u * 1.5e1":                   30,
		".5 + u":                      2.5,
	}
	for expr, want := range cases {
		m, err := Parse("m.aml", []byte("model t\nstate x unit 1 init 0\ncontrol u unit 1\nnext(x) = "+expr+"\n"))
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		s, _ := m.NewSim(nil)
		x := []float64{0}
		if err := s.Step(x, []float64{2}, nil, 1, x, nil); err != nil || math.Abs(x[0]-want) > 1e-12 {
			t.Errorf("%s = %v (%v), want %v", expr, x[0], err, want)
		}
	}
}
