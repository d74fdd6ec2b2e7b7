package physics

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

var fieldRe = regexp.MustCompile(`^fuzz\.aml:([0-9]+):([0-9]+)$`)

// FuzzParse: Parse never panics; failures are *core.Error with code
// AML_PHYSICS_INVALID and positioned problems; a model that parses
// simulates without panicking, with typed errors only, and its compiled
// program agrees bit for bit with the AST reference evaluator.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"injection", "cascaded_tanks", "cascaded_tanks_overflow", "emps"} {
		src, err := os.ReadFile(examples + name + ".aml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, s := range []string{
		head + "next(x) = x + k * dt * (u - x)\n",
		head + "let a = b\nlet b = a\nnext(x) = a\n",
		"model t\nsolver rk4 substeps 3\nstate x unit m range [0, 1] init 0.5\nd(x) = -sqrt(x) * 1 [m^(1/2)/s]\nobs y unit m = x\n",
		"model t\nstate c unit 1 init 1\nnext(c) = if(c > 0 and not c > 5, log(c), -c) + 2^-1 ** 2\n",
		"model t version 1.2\ndt 0.5\nstate x unit ? init 0\ndisturbance w default 2\nconst k = 3 * pi unit 1/s\nnext(x) = x + w * k * dt\nguard g unit % = min(1 [%], 2 [%], 3 [%])\n",
		"model t\nstate x init 1\nnext(x) = x / 0\n",
		"model t\nstate x init 1e308\nnext(x) = x * 10\n",
		"state\n(((\n[unit %/ bar^(1/0)]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := Parse("fuzz.aml", src)
		if err != nil {
			var ae *core.Error
			if !errors.As(err, &ae) || ae.Code != CodePhysicsInvalid || len(ae.Problems) == 0 || ae.Kind() != core.KindUnprocessable {
				t.Fatalf("untyped or empty error: %#v", err)
			}
			lines := strings.Count(string(src), "\n") + 1
			for _, p := range ae.Problems {
				mm := fieldRe.FindStringSubmatch(p.Field)
				if mm == nil || p.Message == "" {
					t.Fatalf("bad problem %+v", p)
				}
				if len(mm[1]) > 7 {
					t.Fatalf("line out of range: %+v", p)
				}
				var line int
				for _, c := range mm[1] {
					line = line*10 + int(c-'0')
				}
				if line < 1 || line > lines {
					t.Fatalf("line %d outside 1..%d: %+v", line, lines, p)
				}
			}
			return
		}
		s, err := m.NewSim(m.ParamVector())
		if err != nil {
			t.Fatalf("nominal params rejected: %v", err)
		}
		u := make([]float64, len(m.Controls))
		for i := range u {
			u[i] = 1.5
		}
		d := make([]float64, len(m.Disturbances))
		for i := range d {
			d[i] = 0.75
		}
		x := s.Init(nil, u, d)
		dt := 0.5
		if m.FixedDt > 0 {
			dt = m.FixedDt
		}
		xn := make([]float64, len(x))
		out := make([]float64, len(m.OutputNames()))
		for step := 0; step < 3; step++ {
			err := s.Step(x, u, d, dt, xn, out)
			if err != nil && core.CodeOf(err) != CodePhysicsNonFinite {
				t.Fatalf("step: %v", err)
			}
			wx, wo := refStep(m, m.ParamVector(), x, u, d, dt)
			for i := range xn {
				if !sameFloat(xn[i], wx[i]) {
					t.Fatalf("x[%d] = %v, reference %v", i, xn[i], wx[i])
				}
			}
			for i := range out {
				if !sameFloat(out[i], wo[i]) {
					t.Fatalf("out[%d] = %v, reference %v", i, out[i], wo[i])
				}
			}
			if err != nil {
				break
			}
			copy(x, xn)
		}
	})
}
