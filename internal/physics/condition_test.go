package physics

import (
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func TestCondition(t *testing.T) {
	vars := []string{"pressure", "temperature", "flash_rate"}
	cases := []struct {
		src              string
		at               []float64
		holds            bool
		lo, hi           []float64
		always, possibly bool
	}{
		{"pressure < 80", []float64{70, 0, 0}, true, []float64{70, 0, 0}, []float64{79, 0, 0}, true, true},
		{"pressure < 80", []float64{85, 0, 0}, false, []float64{70, 0, 0}, []float64{85, 0, 0}, false, true},
		{"pressure < 80", []float64{85, 0, 0}, false, []float64{81, 0, 0}, []float64{85, 0, 0}, false, false},
		{"flash_rate <= 0.5 [%] and abs(temperature - 245) <= 5", []float64{0, 247, 0.2}, true,
			[]float64{0, 241, 0}, []float64{0, 249, 0.4}, true, true},
		{"not (pressure > 80) or flash_rate == 0", []float64{90, 0, 0}, true, []float64{90, 0, 0}, []float64{90, 0, 0}, true, true},
		{"if(pressure > 80, flash_rate, 0) < 1 + dt", []float64{90, 0, 1.5}, true, []float64{85, 0, 0}, []float64{90, 0, 2.5}, false, true},
		{"max(pressure, temperature)\n  > 100", []float64{90, 120, 0}, true, []float64{90, 101, 0}, []float64{95, 130, 0}, true, true},
	}
	for _, c := range cases {
		cond, err := ParseCondition(c.src, vars, 1)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if got := cond.Holds(c.at); got != c.holds {
			t.Errorf("%q at %v: holds %v, want %v", c.src, c.at, got, c.holds)
		}
		a, p := cond.HoldsOn(c.lo, c.hi)
		if a != c.always || p != c.possibly {
			t.Errorf("%q on [%v, %v]: always %v possibly %v, want %v %v", c.src, c.lo, c.hi, a, p, c.always, c.possibly)
		}
	}
	c, _ := ParseCondition("pressure < 80 and flash_rate < 1", vars, 1)
	if n := c.Names(); len(n) != 2 || n[0] != "flash_rate" || n[1] != "pressure" {
		t.Errorf("names %v", n)
	}
	if c.Holds([]float64{1}) {
		t.Error("short values hold")
	}
	for _, bad := range []string{"", "pressure + 1", "pressur < 3", "foo(pressure) < 1", "pressure < 1 extra", "pressure < < 1",
		"max(pressure) < 1", "pressure < 1 < 2", "t > 0", "(pressure < 1"} {
		if _, err := ParseCondition(bad, vars, 1); core.CodeOf(err) != CodePhysicsInvalid {
			t.Errorf("%q: %v, want %s", bad, err, CodePhysicsInvalid)
		}
	}
}

func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{"pressure < 80", "a and b", "if(x > 0, 1/x, 0) < 3", "((((", "abs(x-1) <= 2 [bar]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		c, err := ParseCondition(src, []string{"x", "pressure"}, 1)
		if err != nil {
			return
		}
		c.Holds([]float64{1, 2})
		c.HoldsOn([]float64{0, 0}, []float64{1, 2})
	})
}
