package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Header is what a data set holds besides its runs: the configuration, the
// context entities, the recipe parameters and the nodes.
type Header struct {
	// Config is the configuration with defaults applied.
	Config  InjectionConfig
	Line    core.Line
	Product core.Product
	Recipe  core.Recipe
	// RecipeParams is the content of the recipe's version (setpoint ranges
	// and nominal values), as stored by PutRecipeVersion.
	RecipeParams map[string]any
	// Nodes are the ten nodes, sorted by ID.
	Nodes []core.Node
}

func newHeader(c InjectionConfig) Header {
	created := time.UnixMilli(c.StartMs).UTC()
	return Header{
		Config:       c,
		Line:         core.Line{ID: c.LineID, Name: "Injection moulding line (simulated)", CreatedAt: created},
		Product:      core.Product{ID: c.ProductID, LineID: c.LineID, Name: "Injection-moulded part A (simulated)", CreatedAt: created},
		Recipe:       core.Recipe{ID: c.RecipeID, LineID: c.LineID, ProductID: c.ProductID, Name: "Injection recipe A (simulated)", CreatedAt: created},
		RecipeParams: RecipeParams(),
		Nodes:        InjectionNodes(c.LineID, created),
	}
}

// Output is a generated data set held in memory: the header and the runs
// with their samples. [Stream] produces the same data run by run.
type Output struct {
	Header
	Runs []RunData
}

// RunData is one run and its samples, sorted by (TsUs, Node).
type RunData struct {
	Run     core.Run
	Samples []core.Sample
}

// SampleCount is the number of samples over all runs.
func (o *Output) SampleCount() int {
	n := 0
	for _, r := range o.Runs {
		n += len(r.Samples)
	}
	return n
}

// Sample states the generator emits besides core.StateOK.
const (
	StateBad       = "bad"
	StateUncertain = "uncertain"
)

// controlSpec is the recipe range, nominal value and setpoint resolution of
// one control.
type controlSpec struct {
	idx              int
	nominal, perUnit float64 // perUnit: 1/resolution
}

var controlSpecs = [3]controlSpec{
	{idx: idxHoldP, nominal: 65, perUnit: 2},   // 0.5 bar
	{idx: idxHoldT, nominal: 8, perUnit: 10},   // 0.1 s
	{idx: idxMeltSP, nominal: 245, perUnit: 2}, // 0.5 degC
}

// measResolution is the reporting resolution (1/step) of measured nodes.
var measResolution = func() [len(signals)]float64 {
	var r [len(signals)]float64
	r[idxAmbient] = 100
	r[idxPressure] = 100
	r[idxFlash] = 1000
	r[idxBatch] = 10000
	r[idxMelt] = 100
	r[idxWeight] = 1000
	r[idxSink] = 1000
	return r
}()

// Impairment rates, per measured sample.
const (
	pDropout    = 0.005  // isolated missing sample
	pIsolated   = 0.0015 // isolated non-ok sample
	pOutlier    = 0.002  // ok-flagged spike
	pBurstStart = 0.0004 // start of a 3..15-sample non-ok burst (~0.36% of samples)
	pRunGaps    = 0.5    // a run has 1..2 silent gaps of 10..60 s
	pGapAll     = 0.35   // a gap silences every measured node, not one
	pBatchMid   = 0.25   // the material batch changes mid-run
)

// Slow drifts across runs.
const (
	mouldWearGPerRun       = 0.012 // part weight bias, g per run (grows within a run too) ...
	mouldWearMaxG          = 1.0   // ... saturating at this
	ambientDriftPerRun     = 0.15  // degC per run ...
	ambientDriftMax        = 4.0   // ... saturating at this
	ambientBase            = 21.5  // degC
	ambientDailyAmplitude  = 3.0   // degC
	ambientWalkSD          = 0.5   // degC, stationary sd of the weather random walk
	ambientWalkTauSec      = 1800.0
	meltInitialSD          = 1.5 // degC, melt temperature offset at run start
	batchSD                = 0.035
	spikeMinSD, spikeMaxSD = 8.0, 25.0 // outlier size in noise SDs
	uncertainNoiseFactor   = 5.0
)

// GenerateInjection simulates cfg.Runs runs of the injection-moulding line
// and holds every sample in memory (at most MaxInMemorySamples; [Stream]
// writes larger data sets run by run). The result depends only on cfg: the
// same config and seed give identical samples, another seed gives different
// ones, and [Stream] gives the same ones. Errors are *core.Error with code
// AML_INVALID_ARGUMENT and Field set.
func GenerateInjection(cfg InjectionConfig) (*Output, error) {
	o, _, err := generate(cfg, false)
	return o, err
}

// generate is GenerateInjection; with keepTruth it also returns, per run, the
// noise-free value of every node at every step, flattened as
// truth[step*len(signals)+signalIndex].
func generate(cfg InjectionConfig, keepTruth bool) (*Output, [][]float64, error) {
	c, err := cfg.Normalize()
	if err != nil {
		return nil, nil, err
	}
	if total := c.MaxSamples(); total > MaxInMemorySamples {
		return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, FieldRuns,
			"%d runs of %d steps would be up to %d samples, at most %d are generated in memory; stream them (sim.Stream, aml sim injection) or use fewer runs or a longer step",
			c.Runs, c.steps(), total, MaxInMemorySamples)
	}
	o := &Output{Header: newHeader(c), Runs: make([]RunData, c.Runs)}
	var truth [][]float64
	if keepTruth {
		truth = make([][]float64, c.Runs)
	}

	// Each run draws from its own random streams, so runs are independent
	// and can be simulated concurrently without changing the result.
	workers := min(runtime.GOMAXPROCS(0), c.Runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r := range next {
				rd, tr := simulateRun(c, r, keepTruth)
				o.Runs[r] = rd
				if keepTruth {
					truth[r] = tr
				}
			}
		})
	}
	for r := range c.Runs {
		next <- r
	}
	close(next)
	wg.Wait()
	return o, truth, nil
}

// RecipeParams returns the recipe content: for each control its range,
// nominal value and unit.
func RecipeParams() map[string]any {
	m := make(map[string]any, len(controlSpecs))
	for _, cs := range controlSpecs {
		s := signals[cs.idx]
		m[s.id] = map[string]any{"min": s.min, "max": s.max, "nominal": cs.nominal, "unit": s.unit}
	}
	return m
}

// RunID is the id of run r (0-based) of a recipe: "<recipe>-run-001".
func RunID(recipeID string, r int) string {
	return fmt.Sprintf("%s-run-%03d", recipeID, r+1)
}

// Random stream purposes.
const (
	streamSchedule = iota + 1
	streamDisturbance
	streamNoise
	streamImpairment
	streamGaps
	streamInit
)

func newStream(seed uint64, run int, purpose uint64) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix64(seed), splitmix64(uint64(run)<<8|purpose)))
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// scheduler yields the setpoints of each step in turn: the recipe's nominal
// values, then a step every 2..8 minutes moving one, several or all controls
// by 10..50% of their range, at the setpoint resolution.
type scheduler struct {
	rs     *rand.Rand
	stepMs int64
	u      [3]float64
	next   int // the step of the next move
}

func newScheduler(c InjectionConfig, r int) *scheduler {
	s := &scheduler{rs: newStream(c.Seed, r, streamSchedule), stepMs: c.StepMs}
	for i, cs := range controlSpecs {
		s.u[i] = cs.nominal
	}
	s.next = s.holdSteps()
	return s
}

func (s *scheduler) holdSteps() int {
	ms := 120_000 + s.rs.Float64()*360_000
	return max(1, int(math.Ceil(ms/float64(s.stepMs))))
}

// at returns the setpoints of step k; it is called for k = 0, 1, 2, ...
func (s *scheduler) at(k int) Controls {
	if k == s.next {
		rs := s.rs
		var move [3]bool
		if rs.Float64() < 0.35 {
			move[rs.IntN(3)] = true
		} else {
			moved := false
			for i := range move {
				move[i] = rs.Float64() < 0.6
				moved = moved || move[i]
			}
			if !moved {
				move[rs.IntN(3)] = true
			}
		}
		for i, cs := range controlSpecs {
			if !move[i] {
				continue
			}
			lo, hi := signals[cs.idx].min, signals[cs.idx].max
			size := (0.1 + 0.4*rs.Float64()) * (hi - lo)
			if rs.IntN(2) == 0 {
				size = -size
			}
			v := s.u[i] + size
			if v < lo || v > hi {
				v = s.u[i] - size
			}
			s.u[i] = clamp(math.Round(v*cs.perUnit)/cs.perUnit, lo, hi)
		}
		s.next += s.holdSteps()
	}
	return Controls{HoldPressure: s.u[0], HoldTime: s.u[1], MeltTemperatureSetpoint: s.u[2]}
}

// disturber yields the ambient temperature and material batch factor of
// each step in turn. Ambient is a daily sinusoid (coolest in the early
// morning) plus a mean-reverting random walk plus a slow drift across runs;
// the batch factor is a new batch per run, changed mid-run in some runs.
type disturber struct {
	rd                   *rand.Rand
	batch, batch2        float64
	changeAt             int
	a, innov, walk, base float64
	start, stepMs        int64
}

func newDisturber(c InjectionConfig, r, n int) *disturber {
	rd := newStream(c.Seed, c.FirstRun+r, streamDisturbance)
	newBatch := func() float64 {
		return math.Round(clamp(1+batchSD*rd.NormFloat64(), 0.9, 1.1)*1000) / 1000
	}
	d := &disturber{rd: rd, batch: newBatch(), changeAt: -1, start: c.runStartMs(r), stepMs: c.StepMs}
	d.batch2 = d.batch
	if rd.Float64() < pBatchMid {
		d.changeAt = int(float64(n) * (0.2 + 0.6*rd.Float64()))
		d.batch2 = newBatch()
	}
	dt := float64(c.StepMs) / 1000
	d.a = math.Exp(-dt / ambientWalkTauSec)
	d.innov = ambientWalkSD * math.Sqrt(1-d.a*d.a)
	d.walk = ambientWalkSD * rd.NormFloat64()
	d.base = ambientBase + ambientDrift(c.AgeRuns+r)
	return d
}

// at returns the disturbances of step k; it is called for k = 0, 1, 2, ...
func (d *disturber) at(k int) Disturbances {
	ts := d.start + int64(k)*d.stepMs
	hour := float64(ts%86_400_000) / 3_600_000
	amb := d.base + ambientDailyAmplitude*math.Sin(2*math.Pi*(hour-11)/24) + d.walk
	d.walk = d.a*d.walk + d.innov*d.rd.NormFloat64()
	if k == d.changeAt {
		d.batch = d.batch2
	}
	return Disturbances{AmbientTemperature: clamp(amb, 10, 40), MaterialBatchFactor: d.batch}
}

// mouldWear is the part-weight bias after runs (fractional) runs: about
// mouldWearGPerRun per run at first, saturating at mouldWearMaxG.
func mouldWear(runs float64) float64 {
	return mouldWearMaxG * math.Tanh(mouldWearGPerRun*runs/mouldWearMaxG)
}

// ambientDrift is the ambient baseline shift of run r: about
// ambientDriftPerRun per run at first, saturating at ambientDriftMax.
func ambientDrift(r int) float64 {
	return ambientDriftMax * math.Tanh(ambientDriftPerRun*float64(r)/ambientDriftMax)
}

// span is the steps [from, to) of one gap.
type span struct{ from, to int }

// gapSpans lists, per measured node, the steps at which the node is silent.
func gapSpans(c InjectionConfig, r, n int) [len(signals)][]span {
	var gaps [len(signals)][]span
	rg := newStream(c.Seed, r, streamGaps)
	if rg.Float64() >= pRunGaps {
		return gaps
	}
	measured := measuredIdx()
	for range 1 + rg.IntN(2) {
		durMs := 10_000 + rg.Float64()*50_000
		length := max(1, int(math.Ceil(durMs/float64(c.StepMs))))
		from := rg.IntN(max(1, n-length))
		targets := measured
		if rg.Float64() >= pGapAll {
			targets = []int{measured[rg.IntN(len(measured))]}
		}
		for _, i := range targets {
			gaps[i] = append(gaps[i], span{from, min(n, from+length)})
		}
	}
	return gaps
}

func inGap(gaps []span, k int) bool {
	for _, g := range gaps {
		if k >= g.from && k < g.to {
			return true
		}
	}
	return false
}

func measuredIdx() []int {
	var m []int
	for i, s := range signals {
		if s.kind == core.NodeDAQ {
			m = append(m, i)
		}
	}
	return m
}

// burst is a node's current run of non-ok samples.
type burst struct {
	left  int
	state string
	mode  int
}

// runRecord is the run record of run r (0-based): id, context and span.
func runRecord(c InjectionConfig, r int) core.Run {
	n := c.steps()
	start := c.runStartMs(r)
	version := 1
	end := start + (n-1)*c.StepMs
	return core.Run{
		ID: RunID(c.RecipeID, c.FirstRun+r), LineID: c.LineID, ProductID: c.ProductID, RecipeID: c.RecipeID,
		RecipeVersion: &version, StartedMs: start, EndedMs: &end, Status: core.RunEnded,
	}
}

// runGen simulates run r (0-based) step by step, holding only the state of
// the current step: its memory does not grow with the run's length.
type runGen struct {
	c           InjectionConfig
	r, n, k     int // k: the next step
	start       int64
	dt          float64
	runID       string
	sch         *scheduler
	dist        *disturber
	gaps        [len(signals)][]span
	rn, ri      *rand.Rand
	state       State
	clean, last [len(signals)]float64 // last: last reported ok value, for frozen garbage
	bursts      [len(signals)]burst
}

func newRunGen(c InjectionConfig, r int) *runGen {
	n := int(c.steps())
	// k is the run's number on the line: its id and random streams
	// (timing stays relative to StartMs).
	k := c.FirstRun + r
	g := &runGen{
		c: c, r: r, n: n, start: c.runStartMs(r), dt: float64(c.StepMs) / 1000, runID: RunID(c.RecipeID, k),
		sch: newScheduler(c, k), dist: newDisturber(c, r, n), gaps: gapSpans(c, k, n),
		rn: newStream(c.Seed, k, streamNoise), ri: newStream(c.Seed, k, streamImpairment),
	}
	// The machine starts with an empty cavity and the melt near its
	// setpoint (step 0's setpoints are the nominal ones).
	rinit := newStream(c.Seed, k, streamInit)
	g.state = State{CavityPressure: 0, MeltTemperature: g.sch.u[2] + meltInitialSD*rinit.NormFloat64()}
	return g
}

// done reports whether every step has been simulated.
func (g *runGen) done() bool { return g.k >= g.n }

// step simulates the next step and appends its samples to dst; with truth
// not nil it also stores the step's noise-free values at
// truth[step*len(signals):].
func (g *runGen) step(dst []core.Sample, truth []float64) []core.Sample {
	c, k := &g.c, g.k
	g.k++
	ctl, dist := g.sch.at(k), g.dist.at(k)
	var out Outputs
	wear := mouldWear(float64(c.AgeRuns+g.r) + float64(k)/float64(g.n))
	g.state, out = TruePlant.Step(g.state, ctl, dist, wear, g.dt)
	clean := &g.clean
	clean[idxAmbient] = dist.AmbientTemperature
	clean[idxPressure] = g.state.CavityPressure
	clean[idxFlash] = out.FlashRate
	clean[idxHoldP] = ctl.HoldPressure
	clean[idxHoldT] = ctl.HoldTime
	clean[idxBatch] = dist.MaterialBatchFactor
	clean[idxMelt] = g.state.MeltTemperature
	clean[idxMeltSP] = ctl.MeltTemperatureSetpoint
	clean[idxWeight] = out.PartWeight
	clean[idxSink] = out.SinkRate
	if truth != nil {
		copy(truth[k*len(signals):], clean[:])
	}
	if k == 0 {
		g.last = *clean
	}

	tsUs := (g.start + int64(k)*c.StepMs) * 1000
	for i := range signals {
		s := &signals[i]
		v, st := clean[i], core.StateOK // setpoints are always logged, ok
		if s.kind == core.NodeDAQ {
			var ok bool
			if v, st, ok = impair(s, i, clean[i], &g.last[i], &g.bursts[i], inGap(g.gaps[i], k), g.ri, g.rn); !ok {
				continue
			}
		}
		dst = append(dst, core.Sample{
			Node: s.id, TsUs: tsUs, Value: v, State: st,
			Line: c.LineID, Product: c.ProductID, Recipe: c.RecipeID, Run: g.runID,
		})
	}
	return dst
}

// fill appends whole steps to dst while they fit in limit samples (at least
// one step unless the run is done).
func (g *runGen) fill(dst []core.Sample, limit int) []core.Sample {
	for !g.done() && (len(dst) == 0 || len(dst)+len(signals) <= limit) {
		dst = g.step(dst, nil)
	}
	return dst
}

// simulateRun generates run r (0-based) in full.
func simulateRun(c InjectionConfig, r int, keepTruth bool) (RunData, []float64) {
	g := newRunGen(c, r)
	rd := RunData{Run: runRecord(c, r), Samples: make([]core.Sample, 0, g.n*len(signals))}
	var truth []float64
	if keepTruth {
		truth = make([]float64, g.n*len(signals))
	}
	for !g.done() {
		rd.Samples = g.step(rd.Samples, truth)
	}
	return rd, truth
}

// impair turns the clean value of measured node i into what the data
// acquisition reports (gap: the node is silent at this step): ok reports
// false for a missing sample (gap or dropout); otherwise v is the reported
// value and st its state.
func impair(s *signalSpec, i int, clean float64, last *float64, b *burst, gap bool, ri, rn *rand.Rand) (v float64, st string, ok bool) {
	if gap {
		if b.left > 0 {
			b.left--
		}
		return 0, "", false
	}
	if b.left > 0 {
		b.left--
		return garbage(s, b.state, b.mode, clean, *last, rn), b.state, true
	}
	u := ri.Float64()
	switch {
	case u < pDropout:
		return 0, "", false
	case u < pDropout+pIsolated:
		st, mode := badState(ri)
		return garbage(s, st, mode, clean, *last, rn), st, true
	case u < pDropout+pIsolated+pBurstStart:
		st, mode := badState(ri)
		*b = burst{left: 2 + ri.IntN(13), state: st, mode: mode} // 3..15 samples with this one
		return garbage(s, st, mode, clean, *last, rn), st, true
	case u < pDropout+pIsolated+pBurstStart+pOutlier:
		spike := (spikeMinSD + (spikeMaxSD-spikeMinSD)*ri.Float64()) * s.noiseSD
		if !s.nonNegative && ri.IntN(2) == 0 {
			spike = -spike
		}
		v = measure(s, i, clean+spike, rn)
	default:
		v = measure(s, i, clean, rn)
	}
	*last = v
	return v, core.StateOK, true
}

// measure adds gaussian sensor noise and rounds to the sensor resolution.
func measure(s *signalSpec, i int, v float64, rn *rand.Rand) float64 {
	v += s.noiseSD * rn.NormFloat64()
	if s.nonNegative && v < 0 {
		v = 0
	}
	res := measResolution[i]
	return math.Round(v*res) / res
}

// badState picks the state of a non-ok sample (or burst) and, for "bad", how
// its value is garbled.
func badState(ri *rand.Rand) (string, int) {
	if ri.Float64() < 0.4 {
		return StateUncertain, 0
	}
	return StateBad, ri.IntN(4)
}

// garbage is the value a non-ok sample carries: an uncertain sample is a
// much noisier reading; a bad one is 0, the frozen last good value, twice
// full scale, or the raw overflow code 32767.
func garbage(s *signalSpec, state string, mode int, clean, last float64, rn *rand.Rand) float64 {
	if state == StateUncertain {
		v := clean + uncertainNoiseFactor*s.noiseSD*rn.NormFloat64()
		if s.nonNegative && v < 0 {
			v = 0
		}
		return v
	}
	switch mode {
	case 0:
		return 0
	case 1:
		return last
	case 2:
		return 2 * s.max
	default:
		return 32767
	}
}
