package opcuasrv

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
)

// Tags besides the line's nodes.
const (
	// TagRunID holds the active run's id, "" between runs.
	TagRunID = "run_id"
	// TagCycle counts the steps since the server started.
	TagCycle = "cycle"
)

// nodeSpec is one numeric node of the live line.
type nodeSpec struct {
	id, unit, kind string
	min, max       float64
	noiseSD        float64
	resolution     float64 // 1/step of the reported value; 0: exact
	writable       bool
}

// resolutions of the measured nodes (as the offline simulator reports).
var resolutions = map[string]float64{
	sim.NodeAmbientTemperature: 100, sim.NodeCavityPressure: 100, sim.NodeFlashRate: 1000,
	sim.NodeMaterialBatchFactor: 10000, sim.NodeMeltTemperature: 100, sim.NodePartWeight: 1000, sim.NodeSinkRate: 1000,
}

// specs returns the numeric nodes of the line of the given kind in id
// order: the injection line's ten, the tank's three.
func specs(kind, lineID string) []nodeSpec {
	if kind == KindTank {
		return tankSpecs()
	}
	noise := sim.SensorNoiseSD()
	var out []nodeSpec
	for _, n := range sim.InjectionNodes(lineID, timeZero) {
		s := nodeSpec{id: n.ID, unit: n.Unit, kind: n.Kind, min: *n.Min, max: *n.Max, noiseSD: noise[n.ID],
			resolution: resolutions[n.ID], writable: n.Kind == core.NodeDCW}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// tankSpecs are the tank's nodes with the ranges of its line file
// (sim.WritePlantExports): the two setpoints writable within them, the
// level measured (noise from the tank itself, sim.PlantTruth().NoiseSD).
func tankSpecs() []nodeSpec {
	return []nodeSpec{
		{id: sim.TankFeed, unit: "l/min", kind: core.NodeDCW, min: 10, max: 20, writable: true},
		{id: sim.TankHeater, unit: "degC", kind: core.NodeDCW, min: 40, max: 60, writable: true},
		{id: sim.TankLevel, unit: "cm", kind: core.NodeDAQ, min: 30, max: 70},
	}
}

// line is the simulated machine and its clock. Every field is guarded by mu.
type line struct {
	mu sync.Mutex

	cfg     Options
	specs   []nodeSpec
	byID    map[string]int
	rng     *rand.Rand
	tank    *sim.TankLine // KindTank: the plant; the fields below it are the injection line's
	state   sim.State
	u       sim.Controls
	ambient float64
	walk    float64
	batch   float64

	nowMs    int64 // the line's clock: the instant of the last step
	step     uint64
	runIdx   int // 0-based run number on this server
	inRun    int // steps done in the current run (or idle)
	running  bool
	runID    string
	values   map[string]float64 // reported values of the last step
	truth    map[string]float64 // noise-free values of the last step
	writes   int
	refusals int

	hist histRing // the latest steps, for HistoryRead
}

func newLine(cfg Options) *line {
	l := &line{cfg: cfg, specs: specs(cfg.Kind, cfg.LineID), byID: map[string]int{},
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x6c697665)),
		values: map[string]float64{}, truth: map[string]float64{}}
	for i, s := range l.specs {
		l.byID[s.id] = i
	}
	if cfg.HistorySteps > 0 {
		l.hist = newHistRing(cfg.HistorySteps, len(l.specs))
	}
	l.nowMs = cfg.StartMs - cfg.StepMs
	if cfg.Kind == KindTank {
		l.tank = sim.NewTankLine(cfg.Seed, int(cfg.StepMs/1000), time.UnixMilli(l.nowMs))
		if len(cfg.Initial) > 0 {
			for id, v := range cfg.Initial {
				_ = l.tank.Write(context.Background(), id, v) // checked by normalize: a setpoint within its range
			}
			// Settle at the initial setpoints (ten time constants), no samples.
			for range int(10*sim.PlantTruth().TauSec*1000/float64(cfg.StepMs)) + 1 {
				l.tank.Step()
			}
		}
		l.startRun()
		return l
	}
	nom := sim.RecipeParams()
	get := func(id string) float64 { return nom[id].(map[string]any)["nominal"].(float64) }
	l.u = sim.Controls{HoldPressure: get(sim.NodeHoldPressure), HoldTime: get(sim.NodeHoldTime), MeltTemperatureSetpoint: get(sim.NodeMeltTemperatureSetpoint)}
	if cfg.Initial != nil {
		if v, ok := cfg.Initial[sim.NodeHoldPressure]; ok {
			l.u.HoldPressure = v
		}
		if v, ok := cfg.Initial[sim.NodeHoldTime]; ok {
			l.u.HoldTime = v
		}
		if v, ok := cfg.Initial[sim.NodeMeltTemperatureSetpoint]; ok {
			l.u.MeltTemperatureSetpoint = v
		}
	}
	l.ambient = 23
	l.state = sim.State{CavityPressure: l.u.HoldPressure, MeltTemperature: l.u.MeltTemperatureSetpoint + 0.35, FillFraction: 1}
	l.startRun()
	// Settle the plant at the initial setpoints (no samples), so the first
	// reported step is a steady line, not a cold start.
	for range 300 {
		l.state, _ = sim.TruePlant.Step(l.state, l.u, sim.Disturbances{AmbientTemperature: l.ambient, MaterialBatchFactor: l.batch}, 0, float64(cfg.StepMs)/1000)
	}
	return l
}

func (l *line) startRun() {
	l.running, l.inRun = true, 0
	l.runID = sim.RunID(l.cfg.RecipeID, l.cfg.FirstRun+l.runIdx)
	if l.tank != nil {
		return
	}
	l.batch = math.Round(clamp(1+0.035*l.rng.NormFloat64(), 0.9, 1.1)*1000) / 1000
}

// advance runs one physics step and returns the ids of the nodes whose
// reported value changed (every numeric node, the cycle, and run_id when
// a run starts or ends).
func (l *line) advance() (runChanged bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	runChanged = l.physics()
	l.hist.record(l)
	return runChanged
}

// physics is one step of advance (caller holds mu).
func (l *line) physics() (runChanged bool) {
	l.step++
	l.nowMs += l.cfg.StepMs
	dt := float64(l.cfg.StepMs) / 1000

	// Run bookkeeping: RunSteps steps in a run, then IdleSteps without.
	if l.running && l.inRun >= l.cfg.RunSteps {
		l.running, l.inRun, l.runID, runChanged = false, 0, "", true
		l.runIdx++
		if l.cfg.IdleSteps == 0 {
			l.startRun()
		}
	} else if !l.running && l.inRun >= l.cfg.IdleSteps {
		l.startRun()
		runChanged = true
	}
	l.inRun++

	if l.tank != nil {
		_, y := l.tank.Step()
		for _, id := range []string{sim.TankHeater, sim.TankFeed} {
			v, _ := l.tank.Read(context.Background(), id) // a tank node: never fails
			l.values[id], l.truth[id] = v, v
		}
		l.values[sim.TankLevel], l.truth[sim.TankLevel] = y, l.tank.TrueLevel()
		return runChanged
	}

	// Ambient: mean-reverting walk around 23 degC (tau 30 min).
	a := math.Exp(-dt / 1800)
	l.walk = a*l.walk + 0.5*math.Sqrt(1-a*a)*l.rng.NormFloat64()
	l.ambient = 23 + l.walk
	runs := l.cfg.WearRuns + float64(l.runIdx) + float64(l.inRun)/float64(max(1, l.cfg.RunSteps))
	wear := math.Tanh(0.012 * runs)
	d := sim.Disturbances{AmbientTemperature: l.ambient, MaterialBatchFactor: l.batch}
	var out sim.Outputs
	l.state, out = sim.TruePlant.Step(l.state, l.u, d, wear, dt)

	clean := map[string]float64{
		sim.NodeAmbientTemperature: d.AmbientTemperature, sim.NodeCavityPressure: l.state.CavityPressure,
		sim.NodeFlashRate: out.FlashRate, sim.NodeHoldPressure: l.u.HoldPressure, sim.NodeHoldTime: l.u.HoldTime,
		sim.NodeMaterialBatchFactor: d.MaterialBatchFactor, sim.NodeMeltTemperature: l.state.MeltTemperature,
		sim.NodeMeltTemperatureSetpoint: l.u.MeltTemperatureSetpoint, sim.NodePartWeight: out.PartWeight, sim.NodeSinkRate: out.SinkRate,
	}
	for _, s := range l.specs {
		v := clean[s.id]
		l.truth[s.id] = v
		if s.noiseSD > 0 {
			v += s.noiseSD * l.rng.NormFloat64()
			if (s.id == sim.NodeFlashRate || s.id == sim.NodeSinkRate) && v < 0 {
				v = 0
			}
		}
		if s.resolution > 0 {
			v = math.Round(v*s.resolution) / s.resolution
		}
		l.values[s.id] = v
	}
	return runChanged
}

// setControl applies a written setpoint from the next step on.
func (l *line) setControl(id string, v float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tank != nil {
		_ = l.tank.Write(context.Background(), id, v) // checked by SetAttribute: a finite setpoint within its range
	}
	switch id {
	case sim.NodeHoldPressure:
		l.u.HoldPressure = v
	case sim.NodeHoldTime:
		l.u.HoldTime = v
	case sim.NodeMeltTemperatureSetpoint:
		l.u.MeltTemperatureSetpoint = v
	}
	// A setpoint reads back what was written at once (the controller
	// holds it), not at the next step.
	l.values[id], l.truth[id] = v, v
	l.writes++
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }
