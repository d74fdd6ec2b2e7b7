package physics

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/sim"
)

const examples = "../../examples/physics/"

func mustParseFile(t testing.TB, path string) *Model {
	t.Helper()
	m, err := ParseFile(path)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return m
}

func injection(t testing.TB) *Model { return mustParseFile(t, examples+"injection.aml") }

func TestInjectionDeclarations(t *testing.T) {
	m := injection(t)
	if m.Name != "injection_greybox" || m.Version != "1.0.0" || m.Solver != "discrete" || m.FixedDt != 0 {
		t.Fatalf("header: %+v", m)
	}
	want := func(got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	}
	want(m.StateNames(), []string{"melt_temperature", "cavity_pressure", "fill_fraction"})
	want(m.ControlNames(), []string{"hold_pressure", "hold_time", "melt_temperature_setpoint"})
	want(m.DisturbanceNames(), []string{"ambient_temperature", "material_batch_factor"})
	want(m.OutputNames(), []string{"weight", "pressure", "temperature", "flash_rate", "sink_rate"})
	// Parameters: same names, nominals and priors as the Go port.
	priors := sim.ParamPriors()
	want(m.ParamNames(), []string{priors[0].Name, priors[1].Name, priors[2].Name, priors[3].Name, priors[4].Name})
	lo, hi := m.ParamBounds()
	nom := m.ParamVector()
	for i, p := range priors {
		if nom[i] != p.Nominal || lo[i] != p.Min || hi[i] != p.Max || m.Params[i].Unit != p.Unit {
			t.Errorf("param %s: got %v [%v,%v] %s, want %+v", p.Name, nom[i], lo[i], hi[i], m.Params[i].Unit, p)
		}
	}
	// The only warning: hold_time does not enter the grey-box.
	if len(m.Warnings) != 1 || m.Warnings[0].Field != "injection.aml:24:9" {
		t.Errorf("warnings: %+v", m.Warnings)
	}
	if d, _ := m.Lookup("weight"); d.Unit != "g" || d.Kind != KindObs {
		t.Errorf("weight: %+v", d)
	}
}

func portParams(v []float64) sim.Params {
	return sim.Params{PressureGain: v[0], PressureTauSec: v[1], ThermalTauSec: v[2], WeightBase: v[3], WeightTempGain: v[4]}
}

// TestInjectionMatchesGoPort compares Sim.Step with internal/sim.Step bit
// for bit on random states, controls, disturbances, steps and parameters.
func TestInjectionMatchesGoPort(t *testing.T) {
	m := injection(t)
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := m.ParamBounds()
	s, err := m.NewSim(m.ParamVector())
	if err != nil {
		t.Fatal(err)
	}
	xNext := make([]float64, 3)
	out := make([]float64, 5) // weight, pressure, temperature, flash_rate, sink_rate
	var flash, sink, fillClamped, nonNominal int
	const n = 20000
	for i := range n {
		params := m.ParamVector()
		if i%2 == 1 { // half the cases with random parameters inside the priors
			for j := range params {
				params[j] = lo[j] + rng.Float64()*(hi[j]-lo[j])
			}
			nonNominal++
		}
		if err := s.SetParams(params); err != nil {
			t.Fatal(err)
		}
		st := sim.State{
			MeltTemperature: 200 + rng.Float64()*80,
			CavityPressure:  20 + rng.Float64()*100,
			FillFraction:    rng.Float64() * 1.1,
		}
		u := sim.Controls{
			HoldPressure:            40 + rng.Float64()*60,
			HoldTime:                4 + rng.Float64()*10,
			MeltTemperatureSetpoint: 230 + rng.Float64()*35,
		}
		d := sim.Disturbances{AmbientTemperature: 10 + rng.Float64()*25, MaterialBatchFactor: 0.9 + rng.Float64()*0.2}
		dt := []float64{1, 0.1, 0.5, 2, 4, 10, rng.Float64() * 5}[i%7]
		if i%7 == 6 {
			dt += 1e-3
		}

		want, wantOut := sim.Step(st, u, d, portParams(params), dt)
		x := []float64{st.MeltTemperature, st.CavityPressure, st.FillFraction}
		uv := []float64{u.HoldPressure, u.HoldTime, u.MeltTemperatureSetpoint}
		dv := []float64{d.AmbientTemperature, d.MaterialBatchFactor}
		if err := s.Step(x, uv, dv, dt, xNext, out); err != nil {
			t.Fatal(err)
		}
		got := []float64{xNext[0], xNext[1], xNext[2], out[0], out[3], out[4], out[1], out[2]}
		exp := []float64{want.MeltTemperature, want.CavityPressure, want.FillFraction, wantOut.PartWeight, wantOut.FlashRate, wantOut.SinkRate,
			want.CavityPressure, want.MeltTemperature}
		names := []string{"melt_temperature", "cavity_pressure", "fill_fraction", "weight", "flash_rate", "sink_rate", "guard pressure", "guard temperature"}
		for k := range got {
			if math.Float64bits(got[k]) != math.Float64bits(exp[k]) {
				t.Fatalf("case %d %s: got %.17g, Go port %.17g (x=%v u=%v d=%v dt=%v params=%v)", i, names[k], got[k], exp[k], x, uv, dv, dt, params)
			}
		}
		if out[3] > 0 {
			flash++
		}
		if out[4] > 0 {
			sink++
		}
		if xNext[2] == 1 {
			fillClamped++
		}
	}
	// Both guards active and inactive in a good share of the cases.
	for name, c := range map[string]int{"flash": flash, "sink": sink, "fill clamped": fillClamped} {
		if c < n/10 || c > n*9/10 {
			t.Errorf("%s active in %d of %d cases: the table does not exercise both sides", name, c, n)
		}
	}
	if nonNominal != n/2 {
		t.Fatal(nonNominal)
	}
}

func TestInjectionInitAndSimulate(t *testing.T) {
	m := injection(t)
	s, err := m.NewSim(m.ParamVector())
	if err != nil {
		t.Fatal(err)
	}
	u := []float64{72, 8, 248}
	x0 := s.Init(nil, u, nil)
	if x0[0] != 248 || x0[1] != 72 || x0[2] != 1 {
		t.Fatalf("init: %v", x0)
	}
	x0 = s.Init(map[string]float64{"cavity_pressure": 61, "unknown": 3}, u, nil)
	if x0[0] != 248 || x0[1] != 61 || x0[2] != 1 {
		t.Fatalf("init with estimate: %v", x0)
	}

	// A trajectory with changing setpoints, against repeated sim.Step.
	var U [][]float64
	for k := range 200 {
		U = append(U, []float64{60 + float64(k%40), 8, 240 + float64(k%15)})
	}
	X, Y, err := s.Simulate(x0, U, nil, 1) // nil D: the declared defaults
	if err != nil {
		t.Fatal(err)
	}
	if len(X) != len(U)+1 || len(Y) != len(U) {
		t.Fatalf("lengths %d %d", len(X), len(Y))
	}
	st := sim.State{MeltTemperature: x0[0], CavityPressure: x0[1], FillFraction: x0[2]}
	d := sim.Disturbances{AmbientTemperature: 23, MaterialBatchFactor: 1}
	for k, u := range U {
		var o sim.Outputs
		st, o = sim.Step(st, sim.Controls{HoldPressure: u[0], HoldTime: u[1], MeltTemperatureSetpoint: u[2]}, d, sim.NominalParams, 1)
		if X[k+1][0] != st.MeltTemperature || X[k+1][1] != st.CavityPressure || X[k+1][2] != st.FillFraction {
			t.Fatalf("step %d state %v, Go port %+v", k, X[k+1], st)
		}
		if Y[k][0] != o.PartWeight || Y[k][3] != o.FlashRate || Y[k][4] != o.SinkRate {
			t.Fatalf("step %d outputs %v, Go port %+v", k, Y[k], o)
		}
	}
}
