package sim

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestStepHandComputed(t *testing.T) {
	cases := []struct {
		name               string
		s                  State
		u                  Controls
		d                  Disturbances
		dt                 float64
		want               State
		weight, flash, snk float64
	}{
		{
			// pressure = 60 + (1/5)(70-60) = 62
			// temp     = 245 + (1/25)(250-245) + 25*0.0005 = 245.2125
			// fill     = 0.5 + 0.05 = 0.55
			// weight   = 31.8 + 0.1*2 + 0.015*(245.2125-247) + 0.1*0.25 = 31.9981875
			// flash    = max(0, (62-78)*0.12) = 0
			// sink     = (70-62)*0.035 + (245.2125-250)*0.02 = 0.28 - 0.09575 = 0.18425
			name: "mid", s: State{60, 245, 0.5}, u: Controls{70, 8, 250}, d: Disturbances{25, 1.1}, dt: 1,
			want: State{62, 245.2125, 0.55}, weight: 31.9981875, flash: 0, snk: 0.18425,
		},
		{
			// pressure = 85 + (2/5)(90-85) = 87
			// temp     = 255 + (2/25)(255-255) + 10*0.0005 = 255.005
			// fill     = clamp(0.95 + 0.1) = 1
			// weight   = 31.8 + 0.1*27 + 0.015*8.005 + (-0.2)*0.25 = 34.570075
			// flash    = (87-78)*0.12 = 1.08
			// sink     = max(0, -17*0.035 + 5.005*0.02) = max(0, -0.4949) = 0
			name: "high pressure", s: State{85, 255, 0.95}, u: Controls{90, 4, 255}, d: Disturbances{10, 0.8}, dt: 2,
			want: State{87, 255.005, 1}, weight: 34.570075, flash: 1.08, snk: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, out := Step(tc.s, tc.u, tc.d, NominalParams, tc.dt)
			const tol = 1e-9
			if !near(got.CavityPressure, tc.want.CavityPressure, tol) || !near(got.MeltTemperature, tc.want.MeltTemperature, tol) ||
				!near(got.FillFraction, tc.want.FillFraction, tol) {
				t.Errorf("state = %+v, want %+v", got, tc.want)
			}
			if !near(out.PartWeight, tc.weight, tol) || !near(out.FlashRate, tc.flash, tol) || !near(out.SinkRate, tc.snk, tol) {
				t.Errorf("outputs = %+v, want weight %v flash %v sink %v", out, tc.weight, tc.flash, tc.snk)
			}
		})
	}
}

func TestParamsInsidePriorsAndDifferent(t *testing.T) {
	nom, tru := NominalParams.Map(), TrueParams.Map()
	priors := ParamPriors()
	if len(priors) != len(nom) {
		t.Fatalf("%d priors for %d params", len(priors), len(nom))
	}
	for _, p := range priors {
		n, ok := nom[p.Name]
		if !ok {
			t.Fatalf("prior %s has no parameter", p.Name)
		}
		if n != p.Nominal {
			t.Errorf("%s: prior nominal %v, NominalParams %v", p.Name, p.Nominal, n)
		}
		for label, v := range map[string]float64{"nominal": n, "true": tru[p.Name]} {
			if v < p.Min || v > p.Max {
				t.Errorf("%s %s value %v outside prior [%v, %v]", p.Name, label, v, p.Min, p.Max)
			}
		}
		if tru[p.Name] == n {
			t.Errorf("%s: true value equals nominal %v; calibration would have nothing to find", p.Name, n)
		}
	}
}

// With no unmodelled effects and a 1 s step the plant is the grey-box.
func TestPlantReducesToStep(t *testing.T) {
	pl := Plant{Params: NominalParams, MaxSubstepSec: 1}
	s := State{40, 240, 0}
	for k := range 50 {
		u := Controls{HoldPressure: 50 + float64(k%5)*8, HoldTime: 9, MeltTemperatureSetpoint: 235 + float64(k%3)*10}
		d := Disturbances{AmbientTemperature: 18 + float64(k%7), MaterialBatchFactor: 0.95}
		want, wout := Step(s, u, d, NominalParams, 1)
		got, gout := pl.Step(s, u, d, 0, 1)
		if !near(got.CavityPressure, want.CavityPressure, 1e-9) || !near(got.MeltTemperature, want.MeltTemperature, 1e-9) ||
			!near(got.FillFraction, want.FillFraction, 1e-12) || !near(gout.PartWeight, wout.PartWeight, 1e-9) ||
			!near(gout.FlashRate, wout.FlashRate, 1e-9) || !near(gout.SinkRate, wout.SinkRate, 1e-9) {
			t.Fatalf("step %d: plant %+v %+v, grey-box %+v %+v", k, got, gout, want, wout)
		}
		s = want
	}
}

func TestTruePlantEffects(t *testing.T) {
	u := Controls{HoldPressure: 70, HoldTime: 4, MeltTemperatureSetpoint: 247}
	d := Disturbances{AmbientTemperature: 23, MaterialBatchFactor: 1}
	s := State{CavityPressure: 70, MeltTemperature: 247}

	// At hold time 4 s and 70 bar both unmodelled weight terms vanish.
	_, out := TruePlant.Step(s, u, d, 0, 1)
	ns, _ := TruePlant.Step(s, u, d, 0, 1)
	want := observe(TrueParams, ns.CavityPressure, ns.MeltTemperature, 1).PartWeight
	if !near(out.PartWeight, want, 1e-9) {
		t.Errorf("weight at 4 s / 70 bar = %v, want grey-box %v", out.PartWeight, want)
	}
	// Hold-time effect: +0.4*(1-exp(-(14-4)/3)).
	u2 := u
	u2.HoldTime = 14
	_, out2 := TruePlant.Step(s, u2, d, 0, 1)
	if d := out2.PartWeight - out.PartWeight; !near(d, 0.4*(1-math.Exp(-10.0/3)), 1e-9) {
		t.Errorf("hold-time effect = %v", d)
	}
	// Weight bias passes straight through.
	_, out3 := TruePlant.Step(s, u, d, 0.25, 1)
	if d := out3.PartWeight - out.PartWeight; !near(d, 0.25, 1e-12) {
		t.Errorf("weight bias effect = %v", d)
	}

	// Quadratic pressure effect: compare the plant with and without it.
	flat := TruePlant
	flat.PressureCurvature = 0
	hp := State{CavityPressure: 90, MeltTemperature: 247}
	u3 := Controls{HoldPressure: 90, HoldTime: 4, MeltTemperatureSetpoint: 247}
	_, a := TruePlant.Step(hp, u3, d, 0, 1)
	_, b := flat.Step(hp, u3, d, 0, 1)
	if d := b.PartWeight - a.PartWeight; !near(d, 0.001*20*20, 1e-9) {
		t.Errorf("pressure curvature effect = %v, want 0.4", d)
	}
}

// The true plant settles about thermalTauSec*0.0115 degC above the melt
// setpoint whatever the ambient temperature, and does not drift.
func TestTruePlantTemperatureStaysPhysical(t *testing.T) {
	for _, amb := range []float64{10, 23, 40} {
		s := State{CavityPressure: 65, MeltTemperature: 245}
		u := Controls{HoldPressure: 65, HoldTime: 8, MeltTemperatureSetpoint: 245}
		d := Disturbances{AmbientTemperature: amb, MaterialBatchFactor: 1}
		for range 8 * 3600 {
			s, _ = TruePlant.Step(s, u, d, 0, 1)
		}
		want := 245 + TrueParams.ThermalTauSec*(AmbientHeatingPerStep*23)
		if !near(s.MeltTemperature, want, 1e-6) {
			t.Errorf("ambient %v: melt after 8 h = %v, want %v", amb, s.MeltTemperature, want)
		}
	}
}

// A long dt is integrated in substeps: one 10 s step equals ten 1 s steps,
// and a one-hour step stays stable.
func TestTruePlantSubsteps(t *testing.T) {
	s0 := State{CavityPressure: 0, MeltTemperature: 240}
	u := Controls{HoldPressure: 80, HoldTime: 10, MeltTemperatureSetpoint: 255}
	d := Disturbances{AmbientTemperature: 30, MaterialBatchFactor: 1.05}
	long, lout := TruePlant.Step(s0, u, d, 0.1, 10)
	s := s0
	var out Outputs
	for range 10 {
		s, out = TruePlant.Step(s, u, d, 0.1, 1)
	}
	if !near(long.CavityPressure, s.CavityPressure, 1e-9) || !near(long.MeltTemperature, s.MeltTemperature, 1e-9) ||
		!near(lout.PartWeight, out.PartWeight, 1e-9) {
		t.Errorf("10 s step %+v %+v, ten 1 s steps %+v %+v", long, lout, s, out)
	}
	hour, _ := TruePlant.Step(s0, u, d, 0, 3600)
	if !near(hour.CavityPressure, 80, 1e-6) || math.Abs(hour.MeltTemperature-255) > 1 {
		t.Errorf("one-hour step not settled: %+v", hour)
	}
}
