package sim

import (
	"math"
	"math/rand/v2"

	"github.com/aml-project/aml/internal/core"
)

// A closed-loop line: the injection line driven step by step by a
// controller's setpoints instead of the generator's excitation schedule,
// for studies that compare controllers on the same line. The same seed,
// run index and options give the same disturbances (ambient temperature,
// material lots, mould wear) and the same sensor noise whatever the
// controller does, so two controllers are compared on identical
// conditions. Measured nodes get gaussian sensor noise at the sensor
// resolution (no outliers, dropouts or gaps: a controller study measures
// control, the cleaning is tested elsewhere).

// ClosedLoopConfig configures a [ClosedLine].
type ClosedLoopConfig struct {
	Seed     uint64
	StepMs   int64 // default 1000
	RunSteps int   // steps of one run (default 600)
	// AgeRuns is the line's age in runs at run 0 (the mould's wear level).
	AgeRuns int
	// Wear lets the unmeasured mould wear grow run by run (and within a
	// run) from AgeRuns on; without, it stays at its AgeRuns level.
	Wear bool
	// MaterialLots gives every run a new material lot (batch factor) that
	// changes mid-run in about a quarter of the runs, as the generator
	// does; without, the batch factor is 1.
	MaterialLots bool
	// StartMs is run 0's first sample; runs follow each other without gap.
	StartMs int64
}

// ClosedLine is a closed-loop simulated injection line. Not safe for
// concurrent use.
type ClosedLine struct {
	cfg   ClosedLoopConfig
	run   int
	k     int
	dist  *disturber
	rn    *rand.Rand
	state State
	dt    float64
	last  Disturbances
}

// ClosedNodes are the node ids of a [ClosedSample]'s values, in order.
func ClosedNodes() []string {
	out := make([]string, len(signals))
	for i, s := range signals {
		out[i] = s.id
	}
	return out
}

// ClosedSample is one step of a closed line: every node's measured value
// (ClosedNodes order) and the noise-free values.
type ClosedSample struct {
	TsMs     int64
	Measured []float64
	Truth    []float64
	// WearG is the unmeasured part-weight bias of the step.
	WearG float64
}

// NewClosedLine returns the line before its first run.
func NewClosedLine(cfg ClosedLoopConfig) *ClosedLine {
	if cfg.StepMs <= 0 {
		cfg.StepMs = DefaultStepMs
	}
	if cfg.RunSteps <= 0 {
		cfg.RunSteps = 600
	}
	if cfg.StartMs == 0 {
		cfg.StartMs = DefaultStartMs
	}
	return &ClosedLine{cfg: cfg, run: -1, dt: float64(cfg.StepMs) / 1000}
}

// StartRun starts run r (0-based) with the controls u: the machine is
// settled at u (a run continues the line's production, it does not start
// cold), the disturbances and noise are run r's.
func (l *ClosedLine) StartRun(r int, u Controls) {
	c := l.cfg
	l.run, l.k = r, 0
	ic := InjectionConfig{Seed: c.Seed, StepMs: c.StepMs, StartMs: c.StartMs + int64(r)*int64(c.RunSteps)*c.StepMs, AgeRuns: c.AgeRuns}
	l.dist = newDisturber(ic, r, c.RunSteps)
	if !c.MaterialLots {
		l.dist.batch, l.dist.batch2, l.dist.changeAt = 1, 1, -1
	}
	l.rn = newStream(c.Seed, r, streamNoise)
	d := l.dist.peek()
	l.state = State{CavityPressure: u.HoldPressure, MeltTemperature: u.MeltTemperatureSetpoint + 0.35, FillFraction: 1}
	for range 300 {
		l.state, _ = TruePlant.Step(l.state, u, d, 0, l.dt)
	}
}

// peek returns the disturbances of the next step without advancing.
func (d *disturber) peek() Disturbances {
	ts := d.start
	hour := float64(ts%86_400_000) / 3_600_000
	amb := d.base + ambientDailyAmplitude*math.Sin(2*math.Pi*(hour-11)/24) + d.walk
	return Disturbances{AmbientTemperature: clamp(amb, 10, 40), MaterialBatchFactor: d.batch}
}

// Run is the current run's index; K the steps done in it.
func (l *ClosedLine) Run() int { return l.run }

// K is the number of steps done in the current run.
func (l *ClosedLine) K() int { return l.k }

// WearAt is the mould wear (part-weight bias, g) at step k of run r.
func (l *ClosedLine) WearAt(r, k int) float64 {
	age := float64(l.cfg.AgeRuns)
	if l.cfg.Wear {
		age += float64(r) + float64(k)/float64(l.cfg.RunSteps)
	}
	return mouldWear(age)
}

// Step runs one step with the controls u.
func (l *ClosedLine) Step(u Controls) ClosedSample {
	d := l.dist.at(l.k)
	l.last = d
	wear := l.WearAt(l.run, l.k)
	var out Outputs
	l.state, out = TruePlant.Step(l.state, u, d, wear, l.dt)
	truth := make([]float64, len(signals))
	truth[idxAmbient] = d.AmbientTemperature
	truth[idxPressure] = l.state.CavityPressure
	truth[idxFlash] = out.FlashRate
	truth[idxHoldP] = u.HoldPressure
	truth[idxHoldT] = u.HoldTime
	truth[idxBatch] = d.MaterialBatchFactor
	truth[idxMelt] = l.state.MeltTemperature
	truth[idxMeltSP] = u.MeltTemperatureSetpoint
	truth[idxWeight] = out.PartWeight
	truth[idxSink] = out.SinkRate
	meas := make([]float64, len(signals))
	for i := range signals {
		s := &signals[i]
		meas[i] = truth[i]
		if s.kind == core.NodeDAQ {
			meas[i] = measure(s, i, truth[i], l.rn)
		}
	}
	ts := l.cfg.StartMs + (int64(l.run)*int64(l.cfg.RunSteps)+int64(l.k))*l.cfg.StepMs
	l.k++
	return ClosedSample{TsMs: ts, Measured: meas, Truth: truth, WearG: wear}
}

// SteadyWeight is the part weight the true plant settles to under the
// controls u with the current step's disturbances and wear (an oracle's
// knowledge: nothing a controller on a real line has).
func (l *ClosedLine) SteadyWeight(u Controls) float64 {
	d := l.last
	if l.k == 0 {
		d = l.dist.peek()
	}
	s := State{CavityPressure: u.HoldPressure, MeltTemperature: u.MeltTemperatureSetpoint + 0.35, FillFraction: 1}
	var out Outputs
	for range 200 {
		s, out = TruePlant.Step(s, u, d, l.WearAt(l.run, l.k), l.dt)
	}
	return out.PartWeight
}
