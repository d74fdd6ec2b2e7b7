package sim

import "math"

// Params are the five identifiable parameters of the injection-moulding
// grey-box. Field names follow the upstream model (pressureGain, ...); see
// [Params.Map] for the upstream spelling.
type Params struct {
	// PressureGain is the part-weight sensitivity to cavity pressure, g/bar.
	PressureGain float64
	// PressureTauSec is the time constant of cavity pressure following the
	// hold-pressure setpoint, s.
	PressureTauSec float64
	// ThermalTauSec is the time constant of melt temperature following its
	// setpoint, s.
	ThermalTauSec float64
	// WeightBase is the part weight at 60 bar and 247 degC, g.
	WeightBase float64
	// WeightTempGain is the part-weight sensitivity to melt temperature,
	// g/degC.
	WeightTempGain float64
}

// NominalParams are the upstream model's nominal (prior mean) parameters:
// what an engineer would write down before calibration.
var NominalParams = Params{
	PressureGain:   0.10,
	PressureTauSec: 5,
	ThermalTauSec:  25,
	WeightBase:     31.8,
	WeightTempGain: 0.015,
}

// TrueParams are the parameters the simulated plant ([TruePlant]) actually
// runs with. They lie inside the priors ([ParamPriors]) but differ from
// [NominalParams], so a calibration that works should move each parameter
// from its nominal value toward this one. Tests and calibration checks
// compare against it; treat it as read-only.
var TrueParams = Params{
	PressureGain:   0.12,
	PressureTauSec: 6,
	ThermalTauSec:  30,
	WeightBase:     31.5,
	WeightTempGain: 0.02,
}

// ParamPrior is the prior range of one grey-box parameter.
type ParamPrior struct {
	Name    string // upstream name, e.g. "pressureGain"
	Unit    string
	Nominal float64
	Min     float64
	Max     float64
}

// ParamPriors returns the prior range of each parameter, in the order of
// the [Params] fields.
func ParamPriors() []ParamPrior {
	return []ParamPrior{
		{Name: "pressureGain", Unit: "g/bar", Nominal: NominalParams.PressureGain, Min: 0.02, Max: 0.30},
		{Name: "pressureTauSec", Unit: "s", Nominal: NominalParams.PressureTauSec, Min: 1, Max: 30},
		{Name: "thermalTauSec", Unit: "s", Nominal: NominalParams.ThermalTauSec, Min: 5, Max: 120},
		{Name: "weightBase", Unit: "g", Nominal: NominalParams.WeightBase, Min: 20, Max: 50},
		{Name: "weightTempGain", Unit: "g/degC", Nominal: NominalParams.WeightTempGain, Min: -0.1, Max: 0.1},
	}
}

// Map returns the parameters keyed by their upstream names.
func (p Params) Map() map[string]float64 {
	return map[string]float64{
		"pressureGain":   p.PressureGain,
		"pressureTauSec": p.PressureTauSec,
		"thermalTauSec":  p.ThermalTauSec,
		"weightBase":     p.WeightBase,
		"weightTempGain": p.WeightTempGain,
	}
}

// State is the plant's dynamic state. CavityPressure and MeltTemperature are
// measured; FillFraction is not (it is never emitted as a node).
type State struct {
	CavityPressure  float64 // bar
	MeltTemperature float64 // degC
	FillFraction    float64 // 0..1
}

// Controls are the writable setpoints.
type Controls struct {
	HoldPressure            float64 // bar
	HoldTime                float64 // s
	MeltTemperatureSetpoint float64 // degC
}

// Disturbances are the measured, uncontrolled inputs.
type Disturbances struct {
	AmbientTemperature  float64 // degC
	MaterialBatchFactor float64 // ratio, 1 = reference batch
}

// Outputs are the quality observations of one step.
type Outputs struct {
	PartWeight float64 // g
	FlashRate  float64 // %
	SinkRate   float64 // %
}

// AmbientHeatingPerStep is the upstream temperature equation's ambient term:
// every step adds AmbientHeatingPerStep*ambient_temperature degC, whatever dt
// is. [Step] keeps it exactly, because the model being identified has it.
const AmbientHeatingPerStep = 0.0005

// Step advances the upstream grey-box by one step of dt seconds:
//
//	pressure = cavity_pressure + (dt/pressureTauSec) * (hold_pressure - cavity_pressure)
//	temp     = melt_temperature + (dt/thermalTauSec) * (melt_temperature_setpoint - melt_temperature)
//	           + ambient_temperature*0.0005
//	fill     = clamp(fill_fraction + dt*0.05, 0, 1)
//	weight   = weightBase + pressureGain*(pressure-60) + weightTempGain*(temp-247)
//	           + (material_batch_factor-1)*0.25
//	flash    = max(0, (pressure-78)*0.12)
//	sink     = max(0, (70-pressure)*0.035 + (temp-250)*0.02)
//
// The outputs are computed from the new state. Step is pure: it has no
// randomness, no unmodelled effects and no hidden inputs. Hold time does not
// enter it (the real plant's hold-time effect is one of the things a
// residual model has to learn).
func Step(s State, u Controls, d Disturbances, p Params, dt float64) (State, Outputs) {
	var n State
	n.CavityPressure = s.CavityPressure + (dt/p.PressureTauSec)*(u.HoldPressure-s.CavityPressure)
	n.MeltTemperature = s.MeltTemperature + (dt/p.ThermalTauSec)*(u.MeltTemperatureSetpoint-s.MeltTemperature) +
		d.AmbientTemperature*AmbientHeatingPerStep
	n.FillFraction = clamp(s.FillFraction+dt*0.05, 0, 1)
	return n, observe(p, n.CavityPressure, n.MeltTemperature, d.MaterialBatchFactor)
}

// observe is the grey-box observation map shared by [Step] and [Plant.Step].
func observe(p Params, pressure, temp, batch float64) Outputs {
	return Outputs{
		PartWeight: p.WeightBase + p.PressureGain*(pressure-60) + p.WeightTempGain*(temp-247) + (batch-1)*0.25,
		FlashRate:  math.Max(0, (pressure-78)*0.12),
		SinkRate:   math.Max(0, (70-pressure)*0.035+(temp-250)*0.02),
	}
}

// Plant is the simulated "true" injection-moulding machine: the grey-box
// structure of [Step] with its own parameters plus smooth effects the
// grey-box does not model.
type Plant struct {
	Params Params

	// HoldTimeGain and HoldTimeTauSec give a saturating hold-time effect on
	// part weight: + HoldTimeGain*(1-exp(-(hold_time-4)/HoldTimeTauSec)) g.
	HoldTimeGain   float64
	HoldTimeTauSec float64
	// PressureCurvature gives a mild quadratic pressure effect on part
	// weight: - PressureCurvature*(pressure-70)^2 g.
	PressureCurvature float64
	// AmbientCooling is a heat-loss term that keeps the melt temperature
	// physical: - dt*AmbientCooling*(ambient_temperature-23) degC per step.
	AmbientCooling float64
	// MaxSubstepSec is the longest internal integration step; a longer dt is
	// split into equal substeps no longer than this (0 means 1 s).
	MaxSubstepSec float64
}

// TruePlant is the plant the generator simulates: [TrueParams] plus
//
//   - a saturating hold-time effect on weight, +0.4*(1-exp(-(hold_time-4)/3)) g;
//   - a mild quadratic pressure effect on weight, -0.001*(pressure-70)^2 g;
//   - ambient cooling, -dt*0.0005*(ambient_temperature-23) degC per step.
//
// Treat it as read-only.
var TruePlant = Plant{
	Params:            TrueParams,
	HoldTimeGain:      0.4,
	HoldTimeTauSec:    3,
	PressureCurvature: 0.001,
	AmbientCooling:    0.0005,
	MaxSubstepSec:     1,
}

// Step advances the plant by dt seconds and returns the new state and the
// noise-free outputs at its end. weightBiasG is an unmeasured additive bias
// on part weight (the generator feeds mould wear through it).
//
// The plant integrates in substeps h <= MaxSubstepSec so it is stable and
// dt-independent. In each substep the melt temperature follows
//
//	temp += (h/thermalTauSec)*(setpoint - temp) + h*0.0005*ambient - h*AmbientCooling*(ambient-23)
//
// i.e. the upstream per-step ambient term is applied per second of simulated
// time. At h = 1 s (the default sample period) it is exactly the grey-box
// term, plus the cooling; with AmbientCooling = 0.0005 the two ambient terms
// cancel down to a constant 0.0115 degC/s, so the melt settles about
// thermalTauSec*0.0115 = 0.35 degC above its setpoint whatever the ambient
// temperature is, instead of by an ambient-dependent amount. Pressure and
// fill follow the grey-box equations with h.
func (pl Plant) Step(s State, u Controls, d Disturbances, weightBiasG float64, dt float64) (State, Outputs) {
	maxH := pl.MaxSubstepSec
	if maxH <= 0 {
		maxH = 1
	}
	n := 1
	if dt > maxH {
		n = int(math.Ceil(dt/maxH - 1e-9))
	}
	h := dt / float64(n)
	p := pl.Params
	for range n {
		s.CavityPressure += (h / p.PressureTauSec) * (u.HoldPressure - s.CavityPressure)
		s.MeltTemperature += (h/p.ThermalTauSec)*(u.MeltTemperatureSetpoint-s.MeltTemperature) +
			h*AmbientHeatingPerStep*d.AmbientTemperature - h*pl.AmbientCooling*(d.AmbientTemperature-23)
		s.FillFraction = clamp(s.FillFraction+h*0.05, 0, 1)
	}
	out := observe(p, s.CavityPressure, s.MeltTemperature, d.MaterialBatchFactor)
	if pl.HoldTimeTauSec > 0 {
		out.PartWeight += pl.HoldTimeGain * (1 - math.Exp(-(u.HoldTime-4)/pl.HoldTimeTauSec))
	}
	dp := s.CavityPressure - 70
	out.PartWeight += -pl.PressureCurvature*dp*dp + weightBiasG
	return s, out
}

func clamp(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}
