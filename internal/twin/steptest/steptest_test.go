package steptest

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

func frozen(t testing.TB) *contract.SceneContract {
	t.Helper()
	s := contract.DefaultInjectionScene()
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze("quality-lead", h, time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return s
}

var base = map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246}

func TestStepsPlan(t *testing.T) {
	p, err := Design(frozen(t), Options{Base: base, Variables: []string{"hold_pressure"}})
	if err != nil {
		t.Fatal(err)
	}
	// maxDeltaPerAction 2: up, back, down, back, 60 s apart.
	want := []Move{{0, map[string]float64{"hold_pressure": 66}}, {60, map[string]float64{"hold_pressure": 64}},
		{120, map[string]float64{"hold_pressure": 62}}, {180, map[string]float64{"hold_pressure": 64}}}
	if !reflect.DeepEqual(p.Moves, want) || p.HoldSec != 60 || p.DurationSec != 240 || p.Actions != 4 {
		t.Fatalf("plan %+v", p)
	}
	// The default scene allows 3 actions per run: the plan says so.
	if len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "allows 3 per run") || !strings.Contains(p.Problems[0], "over 2 runs") {
		t.Fatalf("problems %q", p.Problems)
	}
}

func TestPRBSOneAtATime(t *testing.T) {
	s := frozen(t)
	s.WritePolicy.MaxActionsPerRun = 1000
	p, err := Design(s, Options{Signal: SignalPRBS, Base: base, OneAtATime: true, Switches: 6, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Problems) != 0 || len(p.Variables) != 3 {
		t.Fatalf("%+v", p)
	}
	for _, m := range p.Moves {
		if len(m.Set) != 1 {
			t.Fatalf("one at a time moves %v together", m.Set)
		}
	}
	// Half of maxDeltaPerAction: a PRBS move spans twice the amplitude.
	if p.Amplitude["hold_time"] != 0.25 || p.Amplitude["hold_pressure"] != 1 {
		t.Fatalf("amplitudes %v", p.Amplitude)
	}
	// Each variable: 6 switches and a return to base.
	if len(p.Moves) != 3*7 {
		t.Fatalf("%d moves", len(p.Moves))
	}
	q, _ := Design(s, Options{Signal: SignalPRBS, Base: base, OneAtATime: true, Switches: 6, Seed: 3})
	r, _ := Design(s, Options{Signal: SignalPRBS, Base: base, OneAtATime: true, Switches: 6, Seed: 4})
	if !reflect.DeepEqual(p, q) || reflect.DeepEqual(p.Moves, r.Moves) {
		t.Fatal("the sequence is not a function of the seed")
	}
}

func TestRefusals(t *testing.T) {
	s := frozen(t)
	draft := contract.DefaultInjectionScene()
	cases := []struct {
		name, field string
		scene       *contract.SceneContract
		o           Options
	}{
		{"draft scene", "scene", draft, Options{Base: base}},
		{"unknown signal", "signal", s, Options{Base: base, Signal: "chirp"}},
		{"not a control", "variables", s, Options{Base: base, Variables: []string{"part_weight"}}},
		{"twice", "variables", s, Options{Base: base, Variables: []string{"hold_time", "hold_time"}}},
		{"no base", "base.hold_time", s, Options{Base: map[string]float64{"hold_pressure": 64}, Variables: []string{"hold_time"}}},
		{"at the edge", "base.hold_time", s, Options{Base: map[string]float64{"hold_time": 14}, Variables: []string{"hold_time"}}},
		{"amplitude over the policy", "amplitude.hold_time", s, Options{Base: base, Variables: []string{"hold_time"}, Amplitude: map[string]float64{"hold_time": 0.6}}},
		{"PRBS amplitude over half the policy", "amplitude.hold_pressure", s, Options{Signal: SignalPRBS, Base: base, Variables: []string{"hold_pressure"}, Amplitude: map[string]float64{"hold_pressure": 1.5}}},
		{"amplitude out of range", "amplitude.hold_time", s, Options{Base: map[string]float64{"hold_time": 13.8}, Variables: []string{"hold_time"}, Amplitude: map[string]float64{"hold_time": 0.5}}},
		{"hold shorter than the policy", "holdSec", s, Options{Base: base, HoldSec: 30}},
		{"one switch", "switches", s, Options{Base: base, Signal: SignalPRBS, Switches: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Design(c.scene, c.o)
			var ae *core.Error
			if err == nil || core.CodeOf(err) != core.CodeInvalidArgument || !asErr(err, &ae) || ae.Field != c.field {
				t.Fatalf("want AML_INVALID_ARGUMENT on %s, got %v", c.field, err)
			}
		})
	}
}

// TestPlanInvariants (property): for random operating points, amplitudes,
// signals and seeds, every plan Design returns keeps the write policy
// (each move within maxDeltaPerAction of the previous value, moves at
// least the policy's interval apart), the controls' ranges, and ends at
// the base.
func TestPlanInvariants(t *testing.T) {
	s := frozen(t)
	rng := rand.New(rand.NewPCG(7, 7))
	planned := 0
	defer func() {
		if planned < 250 {
			t.Errorf("only %d of 500 random cases made a plan: the property is barely exercised", planned)
		}
	}()
	for i := range 500 {
		o := Options{Base: map[string]float64{}, Amplitude: map[string]float64{}, Seed: uint64(i + 1), OneAtATime: rng.IntN(2) == 0, Switches: 2 + rng.IntN(12)}
		if rng.IntN(2) == 0 {
			o.Signal = SignalPRBS
		}
		for _, c := range s.Controls {
			o.Base[c.ID] = *c.Min + rng.Float64()*(*c.Max-*c.Min)
			if rng.IntN(2) == 0 {
				o.Amplitude[c.ID] = rng.Float64() * s.WritePolicy.MaxDeltaPerAction[c.ID]
			}
		}
		p, err := Design(s, o)
		if err != nil {
			if core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("case %d: %v", i, err)
			}
			continue
		}
		planned++
		if err := p.check(s); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		end := map[string]float64{}
		for _, m := range p.Moves {
			for v, x := range m.Set {
				end[v] = x
			}
		}
		for _, v := range p.Variables {
			if math.Abs(end[v]-p.Base[v]) > 1e-12 {
				t.Fatalf("case %d: %s ends at %g, not its base %g", i, v, end[v], p.Base[v])
			}
		}
	}
}

func asErr(err error, target **core.Error) bool {
	e, ok := err.(*core.Error)
	if ok {
		*target = e
	}
	return ok
}
