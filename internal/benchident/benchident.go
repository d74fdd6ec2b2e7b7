// Package benchident is the identification benchmark harness behind
// `aml bench ident CONFIG.json`: it ingests a benchmark's CSV files as runs,
// builds a dataset whose split puts each file where the benchmark says
// (explicit split), trains the named trainers through the job system,
// evaluates with the platform's own metrics — free-run simulation over each
// whole test run after InitSteps measured samples, one-step prediction, R²
// for static data — and prints the figures beside the published ones the
// config carries. The config format is documented in docs/bench-config.md.
package benchident

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/store/sqlite"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
)

// File is one CSV of the benchmark.
type File struct {
	Path string `json:"file"`
	// Name labels a test file's own figures (e.g. "multisine", "arrow
	// full"): a benchmark with several test records reports each beside
	// the pooled figure. A named train file gets its own free-run figure
	// too (Result.Train set), for a published result that was measured
	// on the estimation record; it never enters the pooled test figure.
	Name       string   `json:"name,omitempty"`
	TimeCol    string   `json:"timeCol,omitempty"`
	TimeUnit   string   `json:"timeUnit,omitempty"`
	Period     string   `json:"period,omitempty"` // e.g. "100ms" or "1638us" for files without a time column
	IgnoreCols []string `json:"ignoreCols,omitempty"`
	// Rows, if set, keeps only data rows [Rows[0], Rows[1]) (0-based,
	// header excluded), e.g. the estimation part of a single-file benchmark.
	Rows []int `json:"rows,omitempty"`
}

// TrainerConfig names a trainer and its parameters.
type TrainerConfig struct {
	Ref    string          `json:"ref"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Published is a reference result quoted from the data set's SOURCE.md.
type Published struct {
	Method       string   `json:"method"`
	Output       string   `json:"output,omitempty"`
	Test         string   `json:"test,omitempty"` // a named test (or train) file's figure
	FreeRunRMSE  *float64 `json:"freeRunRmse,omitempty"`
	FreeRunNRMSE *float64 `json:"freeRunNrmse,omitempty"`
	OneStepRMSE  *float64 `json:"oneStepRmse,omitempty"`
	R2           *float64 `json:"r2,omitempty"`
	Accuracy     *float64 `json:"accuracy,omitempty"`
	Source       string   `json:"source,omitempty"`
}

// Config is one benchmark.
type Config struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Kind        string `json:"kind,omitempty"` // dynamic (default) | static
	BeatMs      int64  `json:"beatMs,omitempty"`
	// Beat is the sampling period as a duration instead of BeatMs, down to
	// 1 µs ("1638us" for a 610.35 Hz record); one of the two is given.
	Beat         string          `json:"beat,omitempty"`
	Train        []File          `json:"train"`
	Val          []File          `json:"val,omitempty"`
	Test         []File          `json:"test"`
	Inputs       []string        `json:"inputs"`
	Outputs      []string        `json:"outputs"`
	InitSteps    int             `json:"initSteps"`
	HistorySteps int             `json:"historySteps,omitempty"`
	HorizonSteps int             `json:"horizonSteps,omitempty"`
	Trainers     []TrainerConfig `json:"trainers"`
	Physics      string          `json:"physics,omitempty"`
	Published    []Published     `json:"published,omitempty"`
	Seed         int64           `json:"seed,omitempty"`
	// StaticCV configures kind "static" benchmarks (cross-validation on the
	// raw table per group).
	StaticCV *StaticCV `json:"staticCV,omitempty"`
}

// Result is one trainer's figure for one output.
type Result struct {
	Trainer string `json:"trainer"`
	Output  string `json:"output"`
	// Test names the test file of a per-file figure (File.Name); empty
	// for the figure pooled over every test file.
	Test string `json:"test,omitempty"`
	// Train marks a figure on a named train file (the estimation
	// record), not on held-out data.
	Train        bool     `json:"train,omitempty"`
	FreeRunRMSE  *float64 `json:"freeRunRmse,omitempty"`
	FreeRunNRMSE *float64 `json:"freeRunNrmse,omitempty"`
	OneStepRMSE  *float64 `json:"oneStepRmse,omitempty"`
	R2           *float64 `json:"r2,omitempty"`
	Accuracy     *float64 `json:"accuracy,omitempty"`
	// FreeRun describes the free run's segments ("free run over 2
	// segment(s) (0 skipped, 12 samples not scored)", eval.FreeRunMetrics
	// Summary) and FreeRunDiverged flags a run-away simulation; its RMSE
	// figures are then absent when not finite.
	FreeRun         string `json:"freeRun,omitempty"`
	FreeRunDiverged bool   `json:"freeRunDiverged,omitempty"`
	// Chosen is, for a static CV with tuning, what each fold's tuning
	// chose on its training rows (forest.Forest.Knobs), fold by fold.
	Chosen  []string `json:"chosen,omitempty"`
	Seconds float64  `json:"seconds"`
	JobID   string   `json:"jobId,omitempty"`
	ModelID string   `json:"modelId,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Label is the output, with the test file's name for a per-file figure
// ("V2 @ multisine").
func (r Result) Label() string {
	switch {
	case r.Test == "":
		return r.Output
	case r.Train:
		return r.Output + " @ " + r.Test + " (train)"
	}
	return r.Output + " @ " + r.Test
}

// Report is the harness's output.
type Report struct {
	Name      string      `json:"name"`
	DatasetID string      `json:"datasetId"`
	Results   []Result    `json:"results"`
	Published []Published `json:"published"`
}

// Load reads and checks a config; relative file paths are relative to the
// config file's directory.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "config", "%v", err)
	}
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, core.FieldErrorf(core.CodeSpecInvalid, "config", "%s: %v", path, err)
	}
	base := filepath.Dir(path)
	for _, fs := range [][]File{c.Train, c.Val, c.Test} {
		for i := range fs {
			if !filepath.IsAbs(fs[i].Path) {
				fs[i].Path = filepath.Join(base, fs[i].Path)
			}
		}
	}
	if c.Physics != "" && !filepath.IsAbs(c.Physics) {
		c.Physics = filepath.Join(base, c.Physics)
	}
	// A trainer's own physics file is relative to the config file too.
	for i, tc := range c.Trainers {
		var pm map[string]any
		if len(tc.Params) == 0 || json.Unmarshal(tc.Params, &pm) != nil {
			continue
		}
		if p, ok := pm["physics"].(string); ok && p != "" && !filepath.IsAbs(p) {
			pm["physics"] = filepath.Join(base, p)
			c.Trainers[i].Params, _ = json.Marshal(pm)
		}
	}
	var ps []core.Problem
	if c.Name == "" {
		ps = append(ps, core.Problem{Field: "name", Message: "required"})
	}
	if c.Kind == "" {
		c.Kind = dataset.KindDynamic
	}
	if len(c.Train) == 0 || (len(c.Test) == 0 && c.Kind == dataset.KindDynamic) {
		ps = append(ps, core.Problem{Field: "train", Message: "at least one train file (and, for dynamic benchmarks, one test file) is required"})
	}
	if len(c.Inputs) == 0 || len(c.Outputs) == 0 {
		ps = append(ps, core.Problem{Field: "inputs", Message: "inputs and outputs are required"})
	}
	if len(c.Trainers) == 0 {
		ps = append(ps, core.Problem{Field: "trainers", Message: "at least one trainer"})
	}
	switch {
	case c.Beat != "" && c.BeatMs != 0:
		ps = append(ps, core.Problem{Field: "beat", Message: "give the sampling period once: beat or beatMs"})
	case c.Beat != "":
		if _, err := core.ParsePeriod(c.Beat); err != nil {
			ps = append(ps, core.Problem{Field: "beat", Message: core.MessageOf(err)})
		}
	case c.BeatMs <= 0 && c.Kind == dataset.KindDynamic:
		ps = append(ps, core.Problem{Field: "beatMs", Message: "must be positive (the sampling period), or give beat (e.g. \"1638us\")"})
	}
	for _, fs := range [][]File{c.Train, c.Val, c.Test} {
		for _, f := range fs {
			if f.Period != "" {
				if _, err := core.ParsePeriod(f.Period); err != nil {
					ps = append(ps, core.Problem{Field: "period", Message: f.Path + ": " + core.MessageOf(err)})
				}
			}
		}
	}
	if c.InitSteps <= 0 && c.Kind == dataset.KindDynamic {
		c.InitSteps = 5
	}
	if c.HistorySteps == 0 {
		c.HistorySteps = max(c.InitSteps, 10)
	}
	if c.HorizonSteps == 0 {
		c.HorizonSteps = 10
	}
	if err := core.Invalid(core.CodeSpecInvalid, ps); err != nil {
		return nil, err
	}
	return &c, nil
}

// subsetRows writes rows [lo, hi) of a CSV (header kept) to a temp file.
func subsetRows(src, dstDir string, lo, hi int) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	dst := filepath.Join(dstDir, fmt.Sprintf("%s.rows-%d-%d.csv", strings.TrimSuffix(filepath.Base(src), filepath.Ext(src)), lo, hi))
	out, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	defer out.Close() // error paths; the result's Close is checked below
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	w := bufio.NewWriter(out)
	row := -1
	for sc.Scan() {
		if row < 0 || (row >= lo && row < hi) {
			w.WriteString(sc.Text())
			w.WriteByte('\n')
		}
		row++
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return dst, out.Close()
}

// Run executes the benchmark in dataDir (a fresh data directory).
func Run(ctx context.Context, c *Config, dataDir string, progress func(string)) (_ *Report, err error) {
	if progress == nil {
		progress = func(string) {}
	}
	st, err := sqlite.Open(dataDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	tmp := filepath.Join(dataDir, "bench-input")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", tmp)
	}
	recipe := c.Name
	var split dataset.Split
	split.Mode = dataset.SplitModeExplicit
	if c.Kind == dataset.KindStatic {
		return runStatic(ctx, c, progress)
	}
	// Benchmark records often all start at t = 0; each file is placed in
	// its own stretch of time so no two runs share an instant.
	slot := int64(0)
	testNames := map[string]string{}  // test run → File.Name
	trainNames := map[string]string{} // train run → File.Name
	for _, part := range []struct {
		name  string
		files []File
		ids   *[]string
	}{{"train", c.Train, &split.TrainRunIDs}, {"val", c.Val, &split.ValRunIDs}, {"test", c.Test, &split.TestRunIDs}} {
		for i, f := range part.files {
			path := f.Path
			if len(f.Rows) == 2 {
				if path, err = subsetRows(f.Path, tmp, f.Rows[0], f.Rows[1]); err != nil {
					return nil, core.Wrap(core.CodeInvalidArgument, err, "subset %s", f.Path)
				}
			}
			var period time.Duration
			if f.Period != "" {
				if period, err = core.ParsePeriod(f.Period); err != nil {
					return nil, core.FieldErrorf(core.CodeSpecInvalid, part.name+".period", "%v", err)
				}
			}
			run := fmt.Sprintf("%s-%s-%d", c.Name, part.name, i)
			progress("ingest " + filepath.Base(path))
			offset := slot * 10_000_000_000 // 10^10 ms ≈ 116 days apart
			slot++
			if _, err := ingest.IngestFiles(ctx, st, []string{path}, ingest.CSVOptions{Line: "bench", Product: c.Name, Recipe: recipe, Run: run,
				TimeCol: f.TimeCol, TimeUnit: f.TimeUnit, Period: period, StartMs: offset, TimeOffsetMs: offset, IgnoreCols: f.IgnoreCols}, nil); err != nil {
				return nil, err
			}
			*part.ids = append(*part.ids, run)
			if f.Name != "" {
				switch part.name {
				case "test":
					testNames[run] = f.Name
				case "train":
					trainNames[run] = f.Name
				}
			}
		}
	}
	off, zero := false, int64(0)
	spec := &dataset.Spec{LineID: "bench", ProductID: c.Name, RecipeID: recipe, BeatMs: c.BeatMs, Beat: c.Beat, HistorySteps: c.HistorySteps, HorizonSteps: c.HorizonSteps,
		Purpose: dataset.PurposeMPCSurrogate, Split: split, Note: "bench ident " + c.Name}
	for _, in := range c.Inputs {
		spec.Nodes = append(spec.Nodes, dataset.NodeSpec{NodeID: in, Role: dataset.RoleControl})
	}
	for _, out := range c.Outputs {
		spec.Nodes = append(spec.Nodes, dataset.NodeSpec{NodeID: out, Role: dataset.RoleTarget})
	}
	// Benchmark data are used as published: no outlier or range cleaning,
	// no interpolation.
	spec.Cleaning.Range = &off
	spec.Cleaning.Hampel = &dataset.Hampel{WindowMs: max(1, c.BeatMs), Threshold: 0}
	spec.Cleaning.MaxInterpMs = &zero
	progress("build dataset")
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dataDir, MaxWindows: 10_000_000})
	if err != nil {
		return nil, err
	}
	rep := &Report{Name: c.Name, DatasetID: ds.Dataset.ID, Published: c.Published}
	if rep.Published == nil {
		rep.Published = []Published{}
	}
	r := jobs.NewRunner(st, jobs.Options{DataDir: dataDir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New(),
		Limits: core.JobLimits{MaxQueued: 1000, MaxPerDataset: 1000}})
	bundle, err := dataset.OpenBundle(filepath.Join(dataDir, ds.Dataset.Path))
	if err != nil {
		return nil, err
	}
	for _, tcfg := range c.Trainers {
		progress("train " + tcfg.Ref)
		t0 := time.Now()
		params := tcfg.Params
		if c.Physics != "" && len(params) > 0 {
			var pm map[string]any
			if err := json.Unmarshal(params, &pm); err != nil || pm == nil {
				return nil, core.FieldErrorf(core.CodeSpecInvalid, "trainers.params", "trainer %s: params must be a JSON object", tcfg.Ref)
			}
			if _, ok := pm["physics"]; !ok {
				pm["physics"] = c.Physics
				params, _ = json.Marshal(pm)
			}
		}
		fail := func(msg string) {
			for _, out := range c.Outputs {
				rep.Results = append(rep.Results, Result{Trainer: tcfg.Ref, Output: out, Error: msg, Seconds: time.Since(t0).Seconds()})
			}
		}
		j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: tcfg.Ref, Params: params, Seed: c.Seed, CreatedBy: "bench"})
		if err != nil {
			fail(err.Error())
			continue
		}
		if err := r.Run(ctx, j.ID, 0); err != nil {
			return nil, err
		}
		j, _ = st.GetJob(ctx, j.ID)
		secs := time.Since(t0).Seconds()
		if j.Status != core.JobDone {
			fail(fmt.Sprintf("job %s: %s %s", j.Status, j.ErrorCode, j.Error))
			continue
		}
		var wm eval.Metrics
		if err := json.Unmarshal(j.Metrics, &wm); err != nil {
			fail(fmt.Sprintf("job %s metrics: %v", j.ID, err))
			continue
		}
		p, err := model.Load(r.JobDir(j.ID)+"/artifacts", bundle.Manifest, model.LoadOptions{ExecPredict: extrun.Predict, Formats: trainers.Formats()})
		if err != nil {
			fail(err.Error())
			continue
		}
		var fr *eval.FreeRunMetrics
		if sim, ok := p.(eval.RunSimulator); ok {
			if fr, err = eval.FreeRun(ctx, bundle, sim, "test", c.InitSteps); err != nil {
				fail(err.Error())
				continue
			}
		}
		for k, out := range c.Outputs {
			res := Result{Trainer: tcfg.Ref, Output: out, Seconds: secs, JobID: j.ID, ModelID: j.ModelID}
			if fr != nil && k < len(fr.Targets) {
				res.FreeRunRMSE, res.FreeRunNRMSE = finitePtr(fr.Targets[k].RMSE), finitePtr(fr.Targets[k].NRMSE)
				res.FreeRun, res.FreeRunDiverged = fr.Summary(), fr.Diverged
			}
			if k < len(wm.Test.Targets) {
				res.OneStepRMSE = ptr(wm.Test.Targets[k].OneStepRMSE)
			}
			rep.Results = append(rep.Results, res)
		}
		if fr != nil {
			rep.Results = append(rep.Results, perTest(fr, c.Outputs, testNames, tcfg.Ref, secs, j.ID, j.ModelID)...)
			if len(trainNames) > 0 {
				// the same free run from the same number of measured
				// samples, on the named estimation records
				ft, err := eval.FreeRun(ctx, bundle, p.(eval.RunSimulator), dataset.SplitTrain, c.InitSteps)
				if err != nil {
					fail(err.Error())
					continue
				}
				for _, res := range perTest(ft, c.Outputs, trainNames, tcfg.Ref, secs, j.ID, j.ModelID) {
					res.Train = true
					rep.Results = append(rep.Results, res)
				}
			}
		}
	}
	return rep, nil
}

// perTest is the free-run figure of each named test file, per output.
func perTest(fr *eval.FreeRunMetrics, outputs []string, names map[string]string, ref string, secs float64, jobID, modelID string) []Result {
	var out []Result
	for _, rr := range fr.Runs {
		name, ok := names[rr.RunID]
		if !ok {
			continue
		}
		for k, o := range outputs {
			res := Result{Trainer: ref, Output: o, Test: name, Seconds: secs, JobID: jobID, ModelID: modelID}
			switch {
			case rr.N == 0:
				res.Error = "not scored: " + rr.Skipped
			case k < len(rr.RMSE):
				res.FreeRunRMSE, res.FreeRunNRMSE = finitePtr(rr.RMSE[k]), finitePtr(rr.NRMSE[k])
				res.FreeRunDiverged = rr.Divergence != nil
				res.FreeRun = fmt.Sprintf("free run over %d segment(s) of %s, %d scored steps", len(rr.Segments), name, rr.N)
			}
			out = append(out, res)
		}
	}
	return out
}

func ptr(v float64) *float64 { return &v }

// finitePtr is ptr for a finite v, nil otherwise (JSON cannot hold it).
func finitePtr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
