package physics

import (
	"errors"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// head is a valid model prefix of 5 lines; snippets below start at line 6.
const head = `model t version 1
solver discrete
state x unit bar init 1
control u unit bar
param k = 0.5 in [0.1, 1] unit 1/s
`

func parseErr(t *testing.T, src string) *core.Error {
	t.Helper()
	_, err := Parse("m.aml", []byte(src))
	if err == nil {
		t.Fatalf("no error for:\n%s", src)
	}
	var ae *core.Error
	if !errors.As(err, &ae) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
	if ae.Code != CodePhysicsInvalid || ae.Kind() != core.KindUnprocessable {
		t.Fatalf("code %s kind %s", ae.Code, ae.Kind())
	}
	if ae.Field != ae.Problems[0].Field {
		t.Fatalf("field %s vs first problem %s", ae.Field, ae.Problems[0].Field)
	}
	return ae
}

type wantProb struct{ field, msg string }

func TestParseErrors(t *testing.T) {
	eq := "next(x) = x + k * dt * (u - x)\n"
	cases := []struct {
		name string
		src  string
		want []wantProb // every problem, in order
	}{
		{"unknown name with suggestion", head + "next(x) = x + k * dt * (uu - x)\n",
			[]wantProb{{"m.aml:6:25", `unknown name "uu" (did you mean "u"?)`}}},
		{"unknown function", head + "next(x) = x + ex(1) * 0 [bar]\n",
			[]wantProb{{"m.aml:6:15", `unknown function "ex" (did you mean "exp"?)`}}},
		{"reserved dt", head + eq + "control dt unit s\n",
			[]wantProb{{"m.aml:7:9", `"dt" cannot be declared: it is the step length in seconds`}}},
		{"reserved t", head + eq + "let t = 1\n",
			[]wantProb{{"m.aml:7:5", `"t" cannot be declared: it is reserved for time`}}},
		{"reserved function name", head + eq + "param max = 1 in [0, 2]\n",
			[]wantProb{{"m.aml:7:7", `"max" cannot be declared: it is a function`}}},
		{"reserved keyword", head + eq + "let unit = 1\n",
			[]wantProb{{"m.aml:7:5", `"unit" cannot be declared: it is a keyword`}}},
		{"duplicate declaration", head + eq + "control x unit bar\n",
			[]wantProb{{"m.aml:7:9", `duplicate declaration of "x" (first declared as state at line 3)`}}},
		{"argument count", head + "next(x) = clamp(x, 0)\n",
			[]wantProb{{"m.aml:6:11", "clamp takes 3 argument(s), found 2"}}},
		{"argument count variadic", head + "next(x) = max(x)\n",
			[]wantProb{{"m.aml:6:11", "max takes at least 2 argument(s), found 1"}}},
		{"time not available", head + "next(x) = x + t * 0 [bar/s]\n",
			[]wantProb{{"m.aml:6:15", "t (time) is not available"}}},
		{"missing equation", head,
			[]wantProb{{"m.aml:3:7", `state "x" has no equation: add next(x) = ...`}}},
		{"second equation", head + eq + "next(x) = x\n",
			[]wantProb{{"m.aml:7:1", `second equation for state "x" (the first is at line 6)`}}},
		{"d in a discrete model", head + "d(x) = k * (u - x)\n",
			[]wantProb{{"m.aml:6:1", "d(x) needs solver euler or rk4, but the solver is discrete"}}},
		{"next in an rk4 model", strings.Replace(head, "discrete", "rk4", 1) + eq,
			[]wantProb{{"m.aml:6:1", "next(x) needs solver discrete, but the solver is rk4"}}},
		{"equation for a control", head + eq + "next(u) = u\n",
			[]wantProb{{"m.aml:7:6", `next(u): "u" is a control, not a state`}}},
		{"substeps with discrete", strings.Replace(head, "discrete", "discrete substeps 4", 1) + eq,
			[]wantProb{{"m.aml:2:26", "substeps needs solver euler or rk4"}}},
		{"unknown statement", head + eq + "paramm z = 1 in [0, 2]\n",
			[]wantProb{{"m.aml:7:1", `unknown statement "paramm" (did you mean "param"?)`}}},
		{"unclosed parenthesis", head + "next(x) = (x + 1\n",
			[]wantProb{{"m.aml:7:1", "expected ')' to close '(', found end of file"}}},
		{"stray token", head + "next(x) = x x\n",
			[]wantProb{{"m.aml:6:13", `unexpected name "x": expected end of line`}}},
		{"bad character", head + "next(x) = x $ 1\n",
			[]wantProb{{"m.aml:6:13", "unexpected character '$'"}, {"m.aml:6:15", "unexpected number 1: expected end of line"}}},
		{"malformed number", head + "next(x) = x * 1.2.3\n",
			[]wantProb{{"m.aml:6:15", "malformed number 1.2.3"}}},
		{"unknown unit", head + eq + "control v unit barr\n",
			[]wantProb{{"m.aml:7:16", `unknown unit "barr" (did you mean "bar"?)`}, {"m.aml:7:9", `control "v" is declared but never used`}}[:1]},
		{"param outside bounds", head + eq + "param p = 2 in [0, 1]\n",
			[]wantProb{{"m.aml:7:16", `the value 2 of "p" is outside its bounds [0, 1]`}}},
		{"const uses a state", head + eq + "const c = x * 2\n",
			[]wantProb{{"m.aml:7:11", `a const can only use numbers and other consts; "x" is a state`}}},
		{"init uses a state", "model t\nstate x init y\nstate y init 0\nnext(x) = x\nnext(y) = y\n",
			[]wantProb{{"m.aml:2:14", `init can only use controls, disturbances, params and consts; "y" is a state`}}},
		{"condition as value", head + "next(x) = x > u\n",
			[]wantProb{{"m.aml:6:13", "expected a number, found a condition"}}},
		{"number as condition", head + "next(x) = if(x, u, x)\n",
			[]wantProb{{"m.aml:6:14", "the first argument of if must be a condition"}}},
		{"chained comparison", head + "next(x) = if(0 [bar] < x < u, u, x)\n",
			[]wantProb{{"m.aml:6:26", "comparisons cannot be chained"}}},
		{"missing model", "state x init 0\nnext(x) = x\n",
			[]wantProb{{"m.aml:1:1", "missing model statement"}}},
		{"d() in an expression", head + "next(x) = d(x)\n",
			[]wantProb{{"m.aml:6:11", "d(...) may only start an equation line"}}},
		{"nesting limit", head + "next(x) = " + strings.Repeat("(", 300) + "x" + strings.Repeat(")", 300) + "\n",
			[]wantProb{{"m.aml:6:211", "expression nested too deeply"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ae := parseErr(t, tc.src)
			if len(ae.Problems) != len(tc.want) {
				t.Fatalf("got %d problems %+v, want %+v", len(ae.Problems), ae.Problems, tc.want)
			}
			for i, w := range tc.want {
				p := ae.Problems[i]
				if p.Field != w.field || !strings.Contains(p.Message, w.msg) {
					t.Errorf("problem %d: got %s %q, want %s %q", i, p.Field, p.Message, w.field, w.msg)
				}
			}
		})
	}
}

// TestAllProblemsTogether: one source with many independent mistakes
// reports each of them, sorted by position.
func TestAllProblemsTogether(t *testing.T) {
	src := `model many
state x unit bar init 1
state y unit bar
control u unit bar
param k = 0.5 in [0.1, 1] unit 1/s
param k = 1 in [0, 2]
let a = b + 1
let b = a * 2
next(x) = x + k * dt * (uu - x)
next(y) = y + dt
obs w unit g = clamp(x, 0)
`
	ae := parseErr(t, src)
	want := []wantProb{
		{"m.aml:6:7", `duplicate declaration of "k"`},
		{"m.aml:7:5", "cycle among definitions: a -> b -> a"},
		{"m.aml:9:25", `unknown name "uu"`},
		{"m.aml:10:13", "unit mismatch in '+': bar [M L^-1 T^-2] vs s [T]"},
		{"m.aml:11:16", "clamp takes 3 argument(s), found 2"},
	}
	if len(ae.Problems) != len(want) {
		t.Fatalf("got %+v", ae.Problems)
	}
	for i, w := range want {
		p := ae.Problems[i]
		if p.Field != w.field || !strings.Contains(p.Message, w.msg) {
			t.Errorf("problem %d: got %s %q, want %s %q", i, p.Field, p.Message, w.field, w.msg)
		}
	}
	if !strings.HasPrefix(ae.Message, "5 problem(s): m.aml:6:7: duplicate") {
		t.Errorf("message: %s", ae.Message)
	}
}

func TestCycleDetection(t *testing.T) {
	src := head + `let p1 = p2 + 1 [bar]
let p2 = obs1 * 2
obs obs1 = p3
let p3 = max(p1, x)
let ok = x * 2
next(x) = ok
`
	ae := parseErr(t, src)
	if len(ae.Problems) != 1 || ae.Problems[0].Field != "m.aml:6:5" ||
		!strings.Contains(ae.Problems[0].Message, "cycle among definitions: p1 -> p2 -> obs1 -> p3 -> p1") {
		t.Fatalf("%+v", ae.Problems)
	}
	// A self-reference is a cycle of length one.
	ae = parseErr(t, head+"let z = z + 1\nnext(x) = x\n")
	if !strings.Contains(ae.Problems[0].Message, "z -> z") || ae.Problems[0].Field != "m.aml:6:5" {
		t.Fatalf("%+v", ae.Problems)
	}
}

func TestUnitErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      wantProb
	}{
		{"add pressure and time", head + "next(x) = x + dt\n",
			wantProb{"m.aml:6:13", "unit mismatch in '+': bar [M L^-1 T^-2] vs s [T]"}},
		{"equation unit", head + "next(x) = k\n",
			wantProb{"m.aml:6:1", "unit mismatch: next(x) must be in bar [M L^-1 T^-2], but the expression is in 1/s [T^-1]"}},
		{"derivative unit", "model t\nsolver euler\nstate x unit m init 0\nd(x) = x\n",
			wantProb{"m.aml:4:1", "d(x) must be in m/s [L T^-1], but the expression is in m [L]"}},
		{"same dimension other scale", "model t\nstate w unit g init 0\nconst kilo = 1 [kg]\nnext(w) = w + kilo\n",
			wantProb{"m.aml:4:13", "unit mismatch in '+': g vs kg: same dimension, but the scale differs by a factor 0.001"}},
		{"percent is not 1", "model t\nstate f unit 1 init 0\nnext(f) = f + 5 [%]\n",
			wantProb{"m.aml:3:13", "unit mismatch in '+': 1 vs %"}},
		{"log of a pressure", head + "next(x) = x * log(u)\n",
			wantProb{"m.aml:6:19", "log needs a pure number (unit 1), found bar"}},
		{"exp of a time", head + "next(x) = x * exp(-dt)\n",
			wantProb{"m.aml:6:19", "exp needs a pure number (unit 1), found s"}},
		{"min mixes units", head + "next(x) = min(x, dt)\n",
			wantProb{"m.aml:6:18", "unit mismatch in min(...) arguments"}},
		{"if branches", head + "next(x) = if(x > u, x, k)\n",
			wantProb{"m.aml:6:24", "unit mismatch in the branches of if(...)"}},
		{"comparison", head + "next(x) = if(x > k, x, u)\n",
			wantProb{"m.aml:6:16", "unit mismatch in comparison '>'"}},
		{"variable exponent on a unit", head + "next(x) = x ^ (k * dt)\n",
			wantProb{"m.aml:6:13", "a base with a unit (bar) needs a constant exponent"}},
		{"exponent with a unit", head + "next(x) = x ^ dt\n",
			wantProb{"m.aml:6:15", "the exponent of ^ needs a pure number (unit 1), found s"}},
		{"declared obs unit", head + "next(x) = x\nobs y unit g = x\n",
			wantProb{"m.aml:7:5", "unit mismatch: obs y must be in g [M], but the expression is in bar"}},
		{"init unit", "model t\nstate x unit bar init dtt\ncontrol dtt unit s\nnext(x) = x\n",
			wantProb{"m.aml:2:23", "unit mismatch: init of x must be in bar"}},
		{"literal needs a unit", head + "next(x) = x + dt * 0.5\n",
			wantProb{"m.aml:6:13", "unit mismatch in '+': bar [M L^-1 T^-2] vs s [T]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ae := parseErr(t, tc.src)
			p := ae.Problems[0]
			if len(ae.Problems) != 1 || p.Field != tc.want.field || !strings.Contains(p.Message, tc.want.msg) {
				t.Fatalf("got %+v, want %+v", ae.Problems, tc.want)
			}
		})
	}
}

func TestUnitsAccepted(t *testing.T) {
	srcs := map[string]string{
		"bare numbers adapt": head + "next(x) = max(0, x - 60) + 60\n",
		"sqrt halves":        "model t\nsolver euler\nstate h unit m range [0, 2] init 1\nparam a = 0.1 in [0.01, 1] unit m^(1/2)/s\nd(h) = -a * sqrt(h)\n",
		"derived units":      "model t\nsolver rk4\nstate v unit m/s init 0\ncontrol F unit N\nparam M = 2 in [1, 3] unit kg\nparam c = 1 in [0, 2] unit N*s/m\nd(v) = (F - c * v) / M\n",
		"volt and ampere":    "model t\nstate i unit A init 0\ncontrol U unit V\nparam R = 2 in [1, 3] unit Ohm\nnext(i) = U / R\n",
		"power of a unit":    "model t\nsolver euler\nstate e unit J init 0\ncontrol v unit m/s\nparam m = 1 in [0.5, 2] unit kg\nd(e) = 0.5 * m * v^2 / 1 [s]\n",
		"unchecked unit":     "model t\nstate x unit ? init 0\ncontrol u unit bar\nnext(x) = x + u * 2 [s]\n",
		"pure exponentials":  head + "next(x) = u + (x - u) * exp(-k * dt)\n",
		"degC and K":         "model t\nstate T unit degC init 20\ncontrol Ta unit K\nnext(T) = T + 0.1 * (Ta - T)\n",
		"percent":            "model t\nstate f unit % init 0\nnext(f) = f + 1 [%]\n",
	}
	for name, src := range srcs {
		if _, err := Parse("m.aml", []byte(src)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDomainChecks(t *testing.T) {
	// Division by a parameter whose bounds include 0: an error.
	ae := parseErr(t, head+"param g = 0.5 in [-1, 1] unit 1/s\nnext(x) = x + u * dt / g * 0 [1/s^2]\n")
	if p := ae.Problems[0]; len(ae.Problems) != 1 || p.Field != "m.aml:7:22" ||
		!strings.Contains(p.Message, "division by zero possible: the denominator g can be 0 (its interval is [-1, 1])") {
		t.Fatalf("%+v", ae.Problems)
	}
	// log of a state whose range reaches 0: an error.
	ae = parseErr(t, "model t\nstate c unit 1 range [0, 5] init 1\nnext(c) = c + 0.1 * log(c)\n")
	if p := ae.Problems[0]; len(ae.Problems) != 1 || p.Field != "m.aml:3:21" ||
		!strings.Contains(p.Message, "log of a value that can be <= 0: c has the interval [0, 5]") {
		t.Fatalf("%+v", ae.Problems)
	}
	// sqrt of a possibly negative difference: an error.
	ae = parseErr(t, "model t\nsolver euler\nstate h unit m range [0, 2] init 1\nparam a = 0.1 in [0.01, 1] unit m^(1/2)/s\nd(h) = -a * sqrt(h - 1 [m])\n")
	if p := ae.Problems[0]; len(ae.Problems) != 1 || p.Field != "m.aml:5:13" ||
		!strings.Contains(p.Message, "sqrt of a value that can be negative: h - 1 [m] has the interval [-1, 1]") {
		t.Fatalf("%+v", ae.Problems)
	}
	// Without a range the same log is only a warning that names the state.
	m, err := Parse("m.aml", []byte("model t\nstate c unit 1 init 1\nnext(c) = c + 0.1 * log(c)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Warnings) != 1 || m.Warnings[0].Field != "m.aml:3:21" ||
		!strings.Contains(m.Warnings[0].Message, "declare range [lo, hi] on c to check it") {
		t.Fatalf("%+v", m.Warnings)
	}
	// Safe by intervals: positive ranges, max(eps, ...), guarded divisions.
	for _, src := range []string{
		"model t\nstate c unit 1 range [0.1, 5] init 1\nnext(c) = c + 0.1 * log(c)\n",
		"model t\nstate c unit 1 init 1\nnext(c) = c + 0.1 * log(max(1e-9, c))\n",
		"model t\nstate c unit 1 init 1\nnext(c) = if(c > 0, 1 / c, 0)\n",
		"model t\nstate c unit 1 init 1\nnext(c) = if(c <= 0, 0, 1 / c)\n",
		"model t\nstate c unit 1 init 1\nnext(c) = if(c > 0 and c < 10, log(c), 0)\n",
		"model t\nstate c unit 1 init 1\nnext(c) = sqrt(c^2 + 1) + 1 / (abs(c) + 1) + exp(-c) + (c^2)^0.5\n",
		"model t\nstate c unit 1 init 1\nnext(c) = c / dt * 1 [s]\n",
	} {
		m, err := Parse("m.aml", []byte(src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if len(m.Warnings) != 0 {
			t.Errorf("%s: warnings %+v", src, m.Warnings)
		}
	}
	// Negative powers and fractional powers.
	ae = parseErr(t, "model t\nstate c unit 1 range [-1, 1] init 0\nnext(c) = c^-1 + c^0.5\n")
	if len(ae.Problems) != 2 || ae.Problems[0].Field != "m.aml:3:12" || ae.Problems[1].Field != "m.aml:3:19" {
		t.Fatalf("%+v", ae.Problems)
	}
}

func TestWarningsDoNotFail(t *testing.T) {
	m, err := Parse("m.aml", []byte(head+"param unused = 1 in [0, 2]\nnext(x) = x + k * dt * (u - x)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0].Message, `param "unused" is declared but never used`) || m.Warnings[0].Field != "m.aml:6:7" {
		t.Fatalf("%+v", m.Warnings)
	}
}
