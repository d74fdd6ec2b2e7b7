package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A plant's own line, as its exports look: not the injection simulator but
// a two-input, one-output first-order-plus-dead-time process (a heated,
// fed tank whose level is the quality variable), written the way a plant
// historian exports it — one CSV per run with local wall-clock times,
// ';' as the delimiter and decimal commas — with the line file, the
// recipe and the batch records that go with it. examples/own-line and the
// own-line end-to-end test start from these files.

// PlantConfig configures [WritePlantExports].
type PlantConfig struct {
	Runs       int            // history runs (default 5)
	ShadowRuns int            // runs after the history runs (shadow-00.csv …): the line kept running after a model was made
	RunMinutes int            // length of each run (default 180)
	StepSec    int            // sampling period (default 5)
	Seed       uint64         // noise and input sequence
	Zone       *time.Location // the plant's zone (default Europe/Berlin)
	// First is the first run's local start (default 2026-11-02 06:00);
	// run r starts r days later.
	First time.Time
	// LiveMinutes, when > 0, also writes the current run, started the day
	// after the last history or shadow run: live-1.csv with its first LiveMinutes
	// and live-2.csv with the LiveMinutes after them (the line kept
	// running while a person approved).
	LiveMinutes int
}

// The process (true values; AML never sees them): level' = (y0 + K1·(heat
// − 50) + K2·(feed − 15) − level)/τ with dead times θ1, θ2 and a per-run
// offset of y0.
const (
	plantTauSec  = 90.0
	plantK1      = 0.9  // cm per degC of the heater setpoint
	plantK2      = -0.6 // cm per l/min of the feed setpoint
	plantTheta1  = 15.0 // s
	plantTheta2  = 5.0  // s
	plantLevel0  = 50.0 // cm
	plantNoiseSD = 0.05 // cm
)

// PlantExports are the files WritePlantExports wrote (absolute paths).
type PlantExports struct {
	Runs      []string // run CSVs, one per history run (run id = file name)
	Shadow    []string // the runs after them
	Live      []string // live-1.csv, live-2.csv (the run "live")
	LineFile  string   // line.yaml
	Recipe    string   // recipe.yaml
	Batch     string   // batch.csv: the history runs' records
	LiveEnd   []time.Time
	StartsUTC []time.Time
}

// WritePlantExports writes a plant's exports to dir.
func WritePlantExports(dir string, cfg PlantConfig) (*PlantExports, error) {
	if cfg.Runs == 0 {
		cfg.Runs = 5
	}
	if cfg.RunMinutes == 0 {
		cfg.RunMinutes = 180
	}
	if cfg.StepSec == 0 {
		cfg.StepSec = 5
	}
	if cfg.Zone == nil {
		z, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			return nil, err
		}
		cfg.Zone = z
	}
	if cfg.First.IsZero() {
		cfg.First = time.Date(2026, 11, 2, 6, 0, 0, 0, cfg.Zone)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6f776e6c696e65))
	out := &PlantExports{}
	var batch strings.Builder
	batch.WriteString("run,recipe,recipe_version,start,end,confirmed_by\n")
	steps := cfg.RunMinutes * 60 / cfg.StepSec
	for r := 0; r < cfg.Runs; r++ {
		start := cfg.First.AddDate(0, 0, r)
		name := fmt.Sprintf("run-%02d", r+1)
		p := newPlantRun(rng, cfg.StepSec, 0.1*float64(r-cfg.Runs/2))
		f := filepath.Join(dir, name+".csv")
		end, err := p.write(f, start, steps)
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, f)
		out.StartsUTC = append(out.StartsUTC, start.UTC())
		fmt.Fprintf(&batch, "%s,tank-level,1,%s,%s,shift lead Kim\n", name, start.Format(time.RFC3339), end.Add(time.Duration(cfg.StepSec)*time.Second).Format(time.RFC3339))
	}
	for r := 0; r < cfg.ShadowRuns; r++ {
		f := filepath.Join(dir, fmt.Sprintf("shadow-%02d.csv", r+1))
		if _, err := newPlantRun(rng, cfg.StepSec, 0.05*float64(r-1)).write(f, cfg.First.AddDate(0, 0, cfg.Runs+r), steps); err != nil {
			return nil, err
		}
		out.Shadow = append(out.Shadow, f)
	}
	if cfg.LiveMinutes > 0 {
		start := cfg.First.AddDate(0, 0, cfg.Runs+cfg.ShadowRuns)
		p := newPlantRun(rng, cfg.StepSec, 0.2)
		p.u1, p.u2, p.hold = 47, 16, math.MaxInt // the line holds its setpoints while it waits for a recommendation
		n := cfg.LiveMinutes * 60 / cfg.StepSec
		for i, part := range []string{"live-1.csv", "live-2.csv"} {
			f := filepath.Join(dir, part)
			end, err := p.write(f, start.Add(time.Duration(i*n*cfg.StepSec)*time.Second), n)
			if err != nil {
				return nil, err
			}
			out.Live, out.LiveEnd = append(out.Live, f), append(out.LiveEnd, end.UTC())
		}
	}
	files := map[string]string{
		"batch.csv":   batch.String(),
		"recipe.yaml": "# the tank-level recipe as the plant runs it\nlevelTarget: 52.0\nheaterSetpoint: 50.0\nfeedSetpoint: 15.0\n",
		"line.yaml": `# the tank line: two setpoints the twin may move, one measured level
line: tank-line
nodes:
  - id: heater_sp
    writable: true
    unit: degC
    min: 40
    max: 60
    physicalMeaning: heater temperature setpoint
  - id: feed_sp
    writable: true
    unit: l/min
    min: 10
    max: 20
    physicalMeaning: feed flow setpoint
  - id: level
    writable: false
    unit: cm
    min: 30
    max: 70
    physicalMeaning: tank level
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	out.Batch, out.Recipe, out.LineFile = filepath.Join(dir, "batch.csv"), filepath.Join(dir, "recipe.yaml"), filepath.Join(dir, "line.yaml")
	return out, nil
}

// plantRun is one run's process state: the level, the input histories for
// the dead times and the current input levels.
type plantRun struct {
	rng    *rand.Rand
	dt     float64
	offset float64
	y      float64
	u1, u2 float64
	hold   int
	hist1  []float64
	hist2  []float64
	d1, d2 int
}

func newPlantRun(rng *rand.Rand, stepSec int, offset float64) *plantRun {
	dt := float64(stepSec)
	p := &plantRun{rng: rng, dt: dt, offset: offset, u1: 50, u2: 15, d1: int(math.Round(plantTheta1 / dt)), d2: int(math.Round(plantTheta2 / dt))}
	p.y = plantLevel0 + offset
	return p
}

// step advances one sampling period and returns the inputs applied and
// the measured level.
func (p *plantRun) step() (u1, u2, y float64) {
	if p.hold <= 0 { // a new operating point every 2–6 minutes
		p.u1 = 42 + 16*p.rng.Float64()
		p.u2 = 11 + 8*p.rng.Float64()
		p.hold = int((120 + 240*p.rng.Float64()) / p.dt)
	}
	p.hold--
	p.hist1 = append(p.hist1, p.u1)
	p.hist2 = append(p.hist2, p.u2)
	// Keep only the inputs the dead times still need (a live line runs
	// for days): once a history holds more than d+1 values, h[0] is never
	// read again, so cutting it to its last d+1 changes nothing.
	if keep := max(p.d1, p.d2) + 1; len(p.hist1) > 4*keep+256 {
		p.hist1 = append(p.hist1[:0:0], p.hist1[len(p.hist1)-keep:]...)
		p.hist2 = append(p.hist2[:0:0], p.hist2[len(p.hist2)-keep:]...)
	}
	delayed := func(h []float64, d int) float64 {
		if len(h) > d {
			return h[len(h)-1-d]
		}
		return h[0]
	}
	a := math.Exp(-p.dt / plantTauSec)
	ss := plantLevel0 + p.offset + plantK1*(delayed(p.hist1, p.d1)-50) + plantK2*(delayed(p.hist2, p.d2)-15)
	p.y = a*p.y + (1-a)*ss
	return p.u1, p.u2, p.y + plantNoiseSD*p.rng.NormFloat64()
}

// write writes n rows from local time start and returns the last row's
// time.
func (p *plantRun) write(file string, start time.Time, n int) (time.Time, error) {
	var b strings.Builder
	b.WriteString("time;heater_sp;feed_sp;level\n")
	comma := func(v float64, prec int) string { return strings.Replace(fmt.Sprintf("%.*f", prec, v), ".", ",", 1) }
	var at time.Time
	for k := 0; k < n; k++ {
		u1, u2, y := p.step()
		at = start.Add(time.Duration(k) * time.Duration(p.dt) * time.Second)
		fmt.Fprintf(&b, "%s;%s;%s;%s\n", at.Format("2006-01-02 15:04:05"), comma(u1, 2), comma(u2, 2), comma(y, 3))
	}
	return at, os.WriteFile(file, []byte(b.String()), 0o644)
}
