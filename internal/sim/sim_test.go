package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// digest is a sha256 over every run and sample of o.
func digest(o *Output) [32]byte {
	h := sha256.New()
	var b [8]byte
	for _, rd := range o.Runs {
		h.Write([]byte(rd.Run.ID))
		binary.LittleEndian.PutUint64(b[:], uint64(rd.Run.StartedMs))
		h.Write(b[:])
		binary.LittleEndian.PutUint64(b[:], uint64(*rd.Run.EndedMs))
		h.Write(b[:])
		for _, s := range rd.Samples {
			h.Write([]byte(s.Node + "\x00" + s.State + "\x00" + s.Line + "\x00" + s.Product + "\x00" + s.Recipe + "\x00" + s.Run + "\x00"))
			binary.LittleEndian.PutUint64(b[:], uint64(s.TsUs))
			h.Write(b[:])
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(s.Value))
			h.Write(b[:])
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func mustGenerate(t testing.TB, cfg InjectionConfig) *Output {
	t.Helper()
	o, err := GenerateInjection(cfg)
	if err != nil {
		t.Fatalf("GenerateInjection: %v", err)
	}
	return o
}

func TestDeterminism(t *testing.T) {
	cfg := DefaultInjectionConfig()
	a := mustGenerate(t, cfg)
	b := mustGenerate(t, cfg)
	if digest(a) != digest(b) {
		t.Fatal("same config and seed gave different samples")
	}

	// Concurrency must not change the result.
	prev := runtime.GOMAXPROCS(1)
	c := mustGenerate(t, cfg)
	runtime.GOMAXPROCS(prev)
	if digest(a) != digest(c) {
		t.Fatal("GOMAXPROCS=1 gave different samples")
	}

	cfg.Seed = 2
	d := mustGenerate(t, cfg)
	if digest(a) == digest(d) {
		t.Fatal("different seeds gave identical samples")
	}
	// Not just the impairments: the process itself differs.
	if a.Runs[0].Samples[len(a.Runs[0].Samples)/2].Value == d.Runs[0].Samples[len(d.Runs[0].Samples)/2].Value &&
		a.Runs[5].Samples[1000].Value == d.Runs[5].Samples[1000].Value {
		t.Error("seeds 1 and 2 look alike")
	}
}

func TestShapeAndContext(t *testing.T) {
	cfg := DefaultInjectionConfig()
	o := mustGenerate(t, cfg)
	if len(o.Runs) != 12 || len(o.Nodes) != 10 {
		t.Fatalf("%d runs, %d nodes", len(o.Runs), len(o.Nodes))
	}
	if n := o.SampleCount(); n < 200_000 || n > 216_000 {
		t.Errorf("sample count %d, want about 216k", n)
	}
	for i, n := range o.Nodes {
		if i > 0 && o.Nodes[i-1].ID >= n.ID {
			t.Errorf("nodes not sorted: %s before %s", o.Nodes[i-1].ID, n.ID)
		}
		if n.LineID != cfg.LineID || n.Unit == "" || n.Meaning == "" || n.Min == nil || n.Max == nil || *n.Min >= *n.Max {
			t.Errorf("node %+v incomplete", n)
		}
		if n.ID == "fill_fraction" {
			t.Error("unmeasured fill_fraction emitted as a node")
		}
	}
	if got := len(NodesByRole(RoleControl)) + len(NodesByRole(RoleState)) + len(NodesByRole(RoleDisturbance)) + len(NodesByRole(RoleObservation)); got != 10 {
		t.Errorf("roles cover %d nodes", got)
	}
	kinds := map[string]string{}
	for _, n := range o.Nodes {
		kinds[n.ID] = n.Kind
	}
	for _, id := range NodesByRole(RoleControl) {
		if kinds[id] != core.NodeDCW {
			t.Errorf("control %s has kind %s", id, kinds[id])
		}
	}

	wantStart := time.Date(2026, 1, 5, 6, 0, 0, 0, time.UTC).UnixMilli()
	if DefaultStartMs != wantStart {
		t.Errorf("DefaultStartMs = %d, want %d", DefaultStartMs, wantStart)
	}
	if _, err := core.CanonicalHash(o.RecipeParams); err != nil {
		t.Errorf("recipe params not hashable: %v", err)
	}
	var prevEnd int64
	for r, rd := range o.Runs {
		run := rd.Run
		if run.ID != RunID(cfg.RecipeID, r) || r == 0 && run.ID != "recipe-injection-a-run-001" || r == 11 && run.ID != "recipe-injection-a-run-012" {
			t.Errorf("run %d id %s", r, run.ID)
		}
		if run.Status != core.RunEnded || run.RecipeVersion == nil || *run.RecipeVersion != 1 || run.EndedMs == nil {
			t.Errorf("run %s: %+v", run.ID, run)
			continue
		}
		if run.LineID != cfg.LineID || run.ProductID != cfg.ProductID || run.RecipeID != cfg.RecipeID {
			t.Errorf("run %s context %+v", run.ID, run)
		}
		if r == 0 && run.StartedMs != wantStart {
			t.Errorf("first run starts at %d", run.StartedMs)
		}
		if r > 0 && run.StartedMs-prevEnd != cfg.GapBetweenRuns.Milliseconds()+cfg.StepMs {
			t.Errorf("run %s starts %d ms after the previous run ended", run.ID, run.StartedMs-prevEnd)
		}
		prevEnd = *run.EndedMs
		if rd.Samples[0].TsUs != run.StartedMs*1000 || rd.Samples[len(rd.Samples)-1].TsUs != *run.EndedMs*1000 {
			t.Errorf("run %s span [%d,%d] ms but samples [%d,%d] µs", run.ID, run.StartedMs, *run.EndedMs, rd.Samples[0].TsUs, rd.Samples[len(rd.Samples)-1].TsUs)
		}
		for i, s := range rd.Samples {
			if i > 0 {
				p := rd.Samples[i-1]
				if p.TsUs > s.TsUs || p.TsUs == s.TsUs && p.Node >= s.Node {
					t.Fatalf("run %s samples not sorted by (ts, node) at %d", run.ID, i)
				}
			}
			if s.Line != cfg.LineID || s.Product != cfg.ProductID || s.Recipe != cfg.RecipeID || s.Run != run.ID {
				t.Fatalf("sample context %+v", s)
			}
			if s.TsUs%1000 != 0 || (s.TsUs/1000-run.StartedMs)%cfg.StepMs != 0 {
				t.Fatalf("sample off the step grid: %+v", s)
			}
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				t.Fatalf("non-finite sample %+v", s)
			}
			switch s.State {
			case core.StateOK, StateBad, StateUncertain:
			default:
				t.Fatalf("unexpected state %q", s.State)
			}
		}
	}
}

// impairmentStats counts what the impairments left in a data set, by
// comparing it with the generator's noise-free truth.
type impairmentStats struct {
	measured      int // measured (node, step) slots
	nonOK         int
	bursts        int // non-ok runs of >= 3 consecutive samples of a node
	outliers      int // ok samples more than 6 noise SDs off the truth
	dropouts      int // missing runs of 1..2 steps
	missingInGaps int // missing steps in runs of >= 10 steps
	gaps          int
	residSq       map[string]float64 // ok, non-outlier residual sums of squares
	residN        map[string]int
}

func impairments(t *testing.T, cfg InjectionConfig) (*Output, [][]float64, impairmentStats) {
	t.Helper()
	o, truth, err := generate(cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	st := impairmentStats{residSq: map[string]float64{}, residN: map[string]int{}}
	n := int(o.Config.steps())
	for r, rd := range o.Runs {
		// Index samples by node and step.
		type slot struct {
			v     float64
			state string
			ok    bool
		}
		grid := make([][len(signals)]slot, n)
		for _, s := range rd.Samples {
			k := int((s.TsUs/1000 - rd.Run.StartedMs) / cfg.StepMs)
			grid[k][signalIndex(s.Node)] = slot{s.Value, s.State, true}
		}
		for i, sig := range signals {
			if sig.kind == core.NodeDCW {
				for k := range n {
					g := grid[k][i]
					if !g.ok || g.state != core.StateOK || g.v != truth[r][k*len(signals)+i] {
						t.Fatalf("run %d control %s step %d: %+v", r, sig.id, k, g)
					}
				}
				continue
			}
			missingRun, badRun := 0, 0
			flush := func() {
				switch {
				case missingRun >= 10:
					st.gaps++
					st.missingInGaps += missingRun
				case missingRun > 0 && missingRun <= 2:
					st.dropouts += missingRun
				}
				missingRun = 0
			}
			for k := range n {
				st.measured++
				g := grid[k][i]
				if !g.ok {
					missingRun++
					continue
				}
				flush()
				if g.state != core.StateOK {
					st.nonOK++
					badRun++
					if badRun == 3 {
						st.bursts++
					}
					continue
				}
				badRun = 0
				d := g.v - truth[r][k*len(signals)+i]
				if math.Abs(d) > 6*sig.noiseSD {
					st.outliers++
					continue
				}
				st.residSq[sig.id] += d * d
				st.residN[sig.id]++
			}
			flush()
		}
	}
	return o, truth, st
}

func TestImpairmentsPresent(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		cfg := DefaultInjectionConfig()
		cfg.Seed = seed
		_, _, st := impairments(t, cfg)
		frac := func(x int) float64 { return float64(x) / float64(st.measured) }
		t.Logf("seed %d: measured %d nonOK %d (%.3f%%) bursts %d outliers %d (%.3f%%) dropouts %d (%.3f%%) gaps %d (%d steps)",
			seed, st.measured, st.nonOK, 100*frac(st.nonOK), st.bursts, st.outliers, 100*frac(st.outliers),
			st.dropouts, 100*frac(st.dropouts), st.gaps, st.missingInGaps)
		check := func(name string, x int, lo, hi float64) {
			if x == 0 || frac(x) < lo || frac(x) > hi {
				t.Errorf("seed %d: %s = %d (%.3f%%), want %.2f%%..%.2f%%", seed, name, x, 100*frac(x), 100*lo, 100*hi)
			}
		}
		check("non-ok samples", st.nonOK, 0.002, 0.012)
		check("outliers", st.outliers, 0.0008, 0.004)
		check("dropouts", st.dropouts, 0.002, 0.01)
		if st.bursts == 0 {
			t.Errorf("seed %d: no non-ok bursts", seed)
		}
		if st.gaps == 0 {
			t.Errorf("seed %d: no gaps of >= 10 s", seed)
		}
		// The remaining ok samples carry gaussian noise of the documented size.
		for id, sd := range SensorNoiseSD() {
			if id == NodeFlashRate || id == NodeSinkRate {
				continue // clamped at 0
			}
			got := math.Sqrt(st.residSq[id] / float64(st.residN[id]))
			if got < 0.9*sd || got > 1.15*sd {
				t.Errorf("seed %d: %s noise SD %.4f, want about %.4f", seed, id, got, sd)
			}
		}
	}
}

func TestRangesAndSchedule(t *testing.T) {
	for _, seed := range []uint64{1, 7} {
		cfg := DefaultInjectionConfig()
		cfg.Seed = seed
		o, truth, err := generate(cfg, true)
		if err != nil {
			t.Fatal(err)
		}
		n := int(o.Config.steps())
		nodeRange := map[string][2]float64{}
		for _, nd := range o.Nodes {
			nodeRange[nd.ID] = [2]float64{*nd.Min, *nd.Max}
		}
		weightOK, weightIn := 0, 0
		singleMoves, multiMoves := 0, 0
		batches := map[float64]bool{}
		midRunBatchChange := false
		for r, rd := range o.Runs {
			for _, s := range rd.Samples {
				rg := nodeRange[s.Node]
				if kindOf(s.Node) == core.NodeDCW && (s.Value < rg[0] || s.Value > rg[1]) {
					t.Fatalf("control out of range: %+v", s)
				}
				if s.Node == NodePartWeight && s.State == core.StateOK {
					weightOK++
					if s.Value >= 25 && s.Value <= 40 {
						weightIn++
					}
				}
			}
			// Truth stays physical.
			lastChange := 0
			for k := range n {
				row := truth[r][k*len(signals) : (k+1)*len(signals)]
				for i, sig := range signals {
					lo, hi := sig.min, sig.max
					if i == idxWeight && k < 10 {
						lo = 15 // start-up with an empty cavity
					}
					if row[i] < lo || row[i] > hi {
						t.Fatalf("seed %d run %d step %d: true %s = %v outside [%v, %v]", seed, r, k, sig.id, row[i], lo, hi)
					}
				}
				if k == 0 {
					batches[row[idxBatch]] = true
					continue
				}
				prev := truth[r][(k-1)*len(signals) : k*len(signals)]
				if row[idxBatch] != prev[idxBatch] {
					midRunBatchChange = true
				}
				moved := 0
				for _, cs := range controlSpecs {
					if row[cs.idx] != prev[cs.idx] {
						moved++
					}
				}
				if moved > 0 {
					if k-lastChange < 120 {
						t.Errorf("seed %d run %d: setpoints held only %d s", seed, r, k-lastChange)
					}
					lastChange = k
					if moved == 1 {
						singleMoves++
					} else {
						multiMoves++
					}
				}
			}
		}
		if float64(weightIn) < 0.995*float64(weightOK) {
			t.Errorf("seed %d: only %d of %d ok part weights within 25..40 g", seed, weightIn, weightOK)
		}
		// 30-minute runs with a step every 2..8 min: about 6 steps per run.
		if singleMoves+multiMoves < 3*len(o.Runs) || singleMoves == 0 || multiMoves == 0 {
			t.Errorf("seed %d: %d single-control and %d multi-control setpoint steps", seed, singleMoves, multiMoves)
		}
		if len(batches) < len(o.Runs)/2 {
			t.Errorf("seed %d: only %d distinct material batches over %d runs", seed, len(batches), len(o.Runs))
		}
		if !midRunBatchChange {
			t.Logf("seed %d: no mid-run batch change", seed)
		}
	}
}

func kindOf(id string) string { return signals[signalIndex(id)].kind }

func TestMidRunBatchChangeHappens(t *testing.T) {
	cfg := DefaultInjectionConfig()
	cfg.Runs = 40
	cfg.RunDuration = 5 * time.Minute
	o := mustGenerate(t, cfg)
	changed := 0
	for _, rd := range o.Runs {
		vals := map[float64]bool{}
		for _, s := range rd.Samples {
			if s.Node == NodeMaterialBatchFactor && s.State == core.StateOK {
				vals[math.Round(s.Value*100)/100] = true
			}
		}
		if len(vals) > 3 { // noise SD 0.002 spans at most ~3 hundredths
			changed++
		}
	}
	if changed == 0 {
		t.Error("no run has a mid-run material batch change")
	}
}

// Mould wear and ambient baseline drift up across runs.
func TestSlowDrift(t *testing.T) {
	if mouldWear(0) != 0 || ambientDrift(0) != 0 {
		t.Fatal("drift at run 0")
	}
	for r := 1; r < 1000; r++ {
		if mouldWear(float64(r)) < mouldWear(float64(r-1)) || ambientDrift(r) < ambientDrift(r-1) ||
			r < 100 && (mouldWear(float64(r)) == mouldWear(float64(r-1)) || ambientDrift(r) == ambientDrift(r-1)) {
			t.Fatalf("drift not increasing at run %d", r)
		}
	}
	if w := mouldWear(11); w < 0.1 || w > 0.14 {
		t.Errorf("mould wear after 11 runs = %v g", w)
	}
	if mouldWear(1e6) > mouldWearMaxG+1e-12 || ambientDrift(1e6) > ambientDriftMax+1e-12 {
		t.Error("drift unbounded")
	}

}

func TestOtherStepSizes(t *testing.T) {
	for _, tc := range []struct {
		step int64
		dur  time.Duration
	}{{100, 2 * time.Minute}, {60_000, 3 * time.Hour}, {3_600_000, 12 * time.Hour}} {
		cfg := DefaultInjectionConfig()
		cfg.Runs = 2
		cfg.StepMs = tc.step
		cfg.RunDuration = tc.dur
		o, truth, err := generate(cfg, true)
		if err != nil {
			t.Fatalf("step %d: %v", tc.step, err)
		}
		n := int(o.Config.steps())
		if n != int(tc.dur.Milliseconds()/tc.step) {
			t.Errorf("step %d: %d steps", tc.step, n)
		}
		for r := range truth {
			for k := n / 2; k < n; k++ {
				row := truth[r][k*len(signals) : (k+1)*len(signals)]
				if row[idxPressure] < 45 || row[idxPressure] > 95 || math.Abs(row[idxMelt]-row[idxMeltSP]) > 15 {
					t.Fatalf("step %d run %d k %d: pressure %v melt %v (sp %v)", tc.step, r, k, row[idxPressure], row[idxMelt], row[idxMeltSP])
				}
			}
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ok := DefaultInjectionConfig()
	cases := []struct {
		name  string
		edit  func(*InjectionConfig)
		field string
	}{
		{"zero runs", func(c *InjectionConfig) { c.Runs = 0 }, FieldRuns},
		{"too many runs", func(c *InjectionConfig) { c.Runs = 1001 }, FieldRuns},
		{"step too short", func(c *InjectionConfig) { c.StepMs = 5 }, FieldStepMs},
		{"step too long", func(c *InjectionConfig) { c.StepMs = 3_600_001 }, FieldStepMs},
		{"negative step", func(c *InjectionConfig) { c.StepMs = -1000 }, FieldStepMs},
		{"run shorter than 10 steps", func(c *InjectionConfig) { c.RunDuration = 9 * time.Second }, FieldDuration},
		{"negative duration", func(c *InjectionConfig) { c.RunDuration = -time.Minute }, FieldDuration},
		{"duration too long", func(c *InjectionConfig) { c.RunDuration = 8 * 24 * time.Hour }, FieldDuration},
		{"too many steps", func(c *InjectionConfig) { c.StepMs = 10; c.RunDuration = 3 * time.Hour }, FieldDuration},
		{"too many samples", func(c *InjectionConfig) { c.Runs = 1000; c.StepMs = 100; c.RunDuration = time.Hour }, FieldRuns},
		{"negative gap", func(c *InjectionConfig) { c.GapBetweenRuns = -time.Second }, FieldGap},
		{"gap too long", func(c *InjectionConfig) { c.GapBetweenRuns = 31 * 24 * time.Hour }, FieldGap},
		{"negative start", func(c *InjectionConfig) { c.StartMs = -1 }, FieldStartMs},
		{"line with space", func(c *InjectionConfig) { c.LineID = "line 1" }, FieldLine},
		{"product with slash", func(c *InjectionConfig) { c.ProductID = "../p" }, FieldProduct},
		{"recipe too long", func(c *InjectionConfig) { c.RecipeID = strings.Repeat("r", 101) }, FieldRecipe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			o, err := GenerateInjection(cfg)
			var ae *core.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (output %v), want *core.Error", err, o != nil)
			}
			if ae.Code != core.CodeInvalidArgument || ae.Field != tc.field || ae.Kind() != core.KindInvalid {
				t.Errorf("err = %+v, want code %s field %s", ae, core.CodeInvalidArgument, tc.field)
			}
			if o != nil {
				t.Error("output returned with an error")
			}
		})
	}

	// Zero values select the defaults.
	c, err := InjectionConfig{Runs: 3}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultInjectionConfig()
	want.Runs, want.Seed = 3, 0
	if c != want {
		t.Errorf("normalized %+v, want %+v", c, want)
	}
	// Another line gets a product and a recipe of its own (a product or
	// recipe id belongs to the first line that used it); explicit ids stay.
	c, err = InjectionConfig{Runs: 1, LineID: "press-2"}.Normalize()
	if err != nil || c.ProductID != "product-injection-a-press-2" || c.RecipeID != "recipe-injection-a-press-2" {
		t.Errorf("line press-2: product %q recipe %q (%v)", c.ProductID, c.RecipeID, err)
	}
	c, err = InjectionConfig{Runs: 1, LineID: "press-2", ProductID: "p", RecipeID: "r"}.Normalize()
	if err != nil || c.ProductID != "p" || c.RecipeID != "r" {
		t.Errorf("explicit ids: product %q recipe %q (%v)", c.ProductID, c.RecipeID, err)
	}
	_, err = InjectionConfig{Runs: 1, LineID: strings.Repeat("l", 100)}.Normalize()
	if ae := (*core.Error)(nil); !errors.As(err, &ae) || ae.Field != FieldProduct {
		t.Errorf("a line id too long for a derived product id: %v", err)
	}
	// Smallest and largest valid settings.
	for _, cfg := range []InjectionConfig{
		{Runs: 1, StepMs: 10, RunDuration: 100 * time.Millisecond},
		{Runs: 1, StepMs: 3_600_000, RunDuration: 7 * 24 * time.Hour, GapBetweenRuns: 30 * 24 * time.Hour},
	} {
		if _, err := GenerateInjection(cfg); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func BenchmarkGenerateInjection(b *testing.B) {
	cfg := DefaultInjectionConfig()
	b.ReportAllocs()
	for b.Loop() {
		o, err := GenerateInjection(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if o.SampleCount() == 0 {
			b.Fatal("no samples")
		}
	}
}

// FirstRun continues a line: ids number on from it, and the runs' control
// schedules are those of the same run numbers in one long batch.
func TestFirstRunContinuesIDs(t *testing.T) {
	cfg := DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 3, 7
	cfg.FirstRun = 24
	out, err := GenerateInjection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	long := DefaultInjectionConfig()
	long.Runs, long.Seed = 27, 7
	all, err := GenerateInjection(long)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out.Runs {
		if want := RunID(cfg.RecipeID, 24+i); r.Run.ID != want || all.Runs[24+i].Run.ID != want {
			t.Fatalf("run %d is %s, want %s", i, r.Run.ID, want)
		}
		// Same schedule stream: the hold-pressure setpoints agree.
		first := func(rd RunData) float64 {
			for _, s := range rd.Samples {
				if s.Node == "hold_pressure" {
					return s.Value
				}
			}
			return -1
		}
		if a, b := first(r), first(all.Runs[24+i]); a != b || a < 0 {
			t.Errorf("run %s: first hold pressure %v vs %v in one batch", r.Run.ID, a, b)
		}
	}
	if out.Runs[0].Run.StartedMs != cfg.StartMs && cfg.StartMs != 0 {
		t.Errorf("timing must start at StartMs")
	}
	bad := cfg
	bad.FirstRun = -1
	if _, err := GenerateInjection(bad); err == nil {
		t.Fatal("a negative first run is accepted")
	}
	bad = cfg
	bad.AgeRuns = -1
	if _, err := GenerateInjection(bad); err == nil {
		t.Fatal("a negative age is accepted")
	}
	// A worn line (AgeRuns) makes heavier parts than a new mould with the
	// same setpoints and noise (the wear bias is positive, saturating at 1 g).
	worn := cfg
	worn.AgeRuns = 200
	wout, err := GenerateInjection(worn)
	if err != nil {
		t.Fatal(err)
	}
	mean := func(rd RunData) float64 {
		sum, n := 0.0, 0
		for _, s := range rd.Samples {
			if s.Node == "part_weight" && s.State == "ok" {
				sum += s.Value
				n++
			}
		}
		return sum / float64(n)
	}
	if d := mean(wout.Runs[0]) - mean(out.Runs[0]); !(d > 0.3) {
		t.Fatalf("mould wear at age 200 adds %.3f g to part weight, want > 0.3", d)
	}
}
