package shadow

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/registry"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Store is what Collect reads and writes.
type Store interface {
	core.Meta
	core.TimeSeries
	core.Datasets
	core.Jobs
	PutShadow(ctx context.Context, r contract.ShadowRecord) error
	ListShadow(ctx context.Context, modelID string) ([]contract.ShadowRecord, error)
}

// Defaults of Options.
const (
	DefaultMaxRuns = 20
	// batch is the number of windows predicted per PredictBatch call.
	batch = 256
)

// Options tune Collect; the zero value is the default.
type Options struct {
	// MaxRuns is how many of the most recent eligible runs are evaluated
	// (default DefaultMaxRuns).
	MaxRuns int
	// NInit is the number of measured steps that initialise a free-run
	// simulation (default the dataset's history length H).
	NInit int
	// WindowStride is the step between window positions (default the
	// horizon F: windows whose futures tile the run).
	WindowStride int
	// DryRun computes the evidence without storing it.
	DryRun bool
	// Now is the clock of the rows' creation time (default time.Now).
	Now func() time.Time
	// Disturbances declares unmeasured disturbances by dataset target
	// (node id): each such target's window predictions are corrected by
	// the disturbance filter (disturb.go) and its figures are the
	// corrected ones, the raw model's kept in its Drift. Empty: no
	// correction (the evidence as before).
	Disturbances map[string]contract.UnmeasuredDisturbance
}

// TargetEvidence is one target's figures on one run (see the package doc).
type TargetEvidence struct {
	Target       string `json:"target"`
	WindowRMSE   Num    `json:"windowRmse"`
	WindowNRMSE  Num    `json:"windowNrmse"`
	Coverage     Num    `json:"coverage"`
	FreeRunRMSE  Num    `json:"freeRunRmse"`
	FreeRunNRMSE Num    `json:"freeRunNrmse"`
	MeanSpread   Num    `json:"meanSpread"`
	SpreadRatio  Num    `json:"spreadRatio"`
	// Drift is the target's declared disturbance's estimate (omitted
	// without one).
	Drift *DriftEvidence `json:"drift,omitempty"`
}

// RunEvidence is a model's shadow evidence on one run.
type RunEvidence struct {
	ModelID string `json:"modelId"`
	RunID   string `json:"runId"`
	EndedMs int64  `json:"endedMs"`
	// GridSteps is the run's grid length after cleaning and alignment.
	GridSteps int `json:"gridSteps"`
	// Windows is W, the windows predicted; Steps = W·F scored values per
	// target.
	Windows int `json:"windows"`
	Steps   int `json:"steps"`
	// Free run: every NaN-free segment of the grid longer than NInit is
	// simulated on its own (Segments, in grid order; SkippedSegments the
	// shorter ones); Offset is the first simulated segment's start,
	// SimSteps the simulated steps over all segments, NInit the
	// initialisation steps of each segment, FreeRunSteps the scored steps
	// (0 when the model cannot simulate runs). Diverged and Divergence
	// flag a run-away simulation (eval.DivergenceRangeFactor).
	Offset          int                   `json:"offset"`
	SimSteps        int                   `json:"simSteps"`
	NInit           int                   `json:"nInit"`
	FreeRunSteps    int                   `json:"freeRunSteps"`
	Segments        []eval.FreeRunSegment `json:"segments,omitempty"`
	SkippedSegments int                   `json:"skippedSegments"`
	Diverged        bool                  `json:"diverged"`
	Divergence      *eval.Divergence      `json:"divergence,omitempty"`
	// Headline figures: NRMSE = mean over targets of WindowNRMSE;
	// Coverage = pooled window coverage of the conformal band at level
	// CoverageTarget; OODRejected = share of windows outside the training
	// envelope; FreeRunNRMSE and SpreadRatio = means over targets.
	NRMSE          Num              `json:"nrmse"`
	Coverage       Num              `json:"coverage"`
	CoverageTarget Num              `json:"coverageTarget"`
	OODRejected    Num              `json:"oodRejected"`
	FreeRunNRMSE   Num              `json:"freeRunNrmse"`
	SpreadRatio    Num              `json:"spreadRatio"`
	Targets        []TargetEvidence `json:"targets"`
	// Skipped says why the run was not scored ("" when it was).
	Skipped   string    `json:"skipped,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Inside of Values window values were inside the conformal band;
	// Rejected of Windows windows were outside the training envelope (the
	// counts Summary pools).
	Inside   int `json:"inside"`
	Values   int `json:"values"`
	Rejected int `json:"rejected"`
}

// Summary pools the scored runs of an Evidence.
type Summary struct {
	Runs   int `json:"runs"`   // runs evaluated
	Scored int `json:"scored"` // runs with at least one window
	// NRMSE is the mean of the scored runs' NRMSE; FreeRunNRMSE likewise
	// over the runs that were simulated.
	NRMSE        Num `json:"nrmse"`
	FreeRunNRMSE Num `json:"freeRunNrmse"`
	// Coverage pools every scored window value; OODRejected every window.
	Coverage       Num `json:"coverage"`
	CoverageTarget Num `json:"coverageTarget"`
	OODRejected    Num `json:"oodRejected"`
	SpreadRatio    Num `json:"spreadRatio"`
	Windows        int `json:"windows"`
	// WindowRMSE[k] pools target k's window errors over the scored runs:
	// sqrt(Σ_runs RMSE² · Steps / Σ_runs Steps), in model units.
	WindowRMSE []Num `json:"windowRmse"`
	// Drift is, per target with a declared disturbance, the estimate on
	// the most recent scored run (omitted without any).
	Drift map[string]DriftEvidence `json:"drift,omitempty"`
}

// Evidence is the result of Collect.
type Evidence struct {
	ModelID        string        `json:"modelId"`
	DatasetID      string        `json:"datasetId"`
	ModelCreatedAt time.Time     `json:"modelCreatedAt"`
	Targets        []string      `json:"targets"`
	Eligible       int           `json:"eligible"` // eligible runs before the MaxRuns cut
	Runs           []RunEvidence `json:"runs"`
	Summary        Summary       `json:"summary"`
	Stored         bool          `json:"stored"`
}

// runSpreader is a simulator that also reports its ensemble's spread (the
// hybrid predictor).
type runSpreader interface {
	SimulateRunSpread(inputs, outputs [][]float64, nInit int) (mean, spread [][]float64, err error)
}

// Loaded is a model with what shadow evaluation needs, loaded once.
type Loaded struct {
	Model     core.Model
	Dataset   core.Dataset
	Manifest  *dataset.Manifest
	Predictor model.Predictor
	Conformal *eval.Conformal
	OOD       *eval.OOD
	// TestNRMSE is the model's test rollout NRMSE (metrics test.meanNrmse)
	// and TestRMSE its test RMSE per target (metrics test.targets[k].rmse),
	// NaN when not recorded.
	TestNRMSE float64
	TestRMSE  []float64
	// Known are the runs of its dataset (used or excluded by the build).
	Known map[string]bool
}

// Load reads model id, verifies its artifact's hash, and loads its
// predictor, dataset manifest and the uncertainty figures the platform
// stored in its metrics.
func Load(ctx context.Context, st Store, dataDir, id string) (*Loaded, error) {
	m, err := st.GetModel(ctx, id)
	if err != nil {
		return nil, err
	}
	reg := registry.New(st, dataDir, nil)
	if err := reg.VerifyArtifact(ctx, m); err != nil {
		return nil, err
	}
	d, err := st.GetDataset(ctx, m.DatasetID)
	if err != nil {
		return nil, err
	}
	man, err := dataset.FetchManifest(ctx, st, dataDir, d)
	if err != nil {
		return nil, err
	}
	if man.Kind != dataset.KindDynamic && man.Kind != dataset.KindStatic {
		return nil, core.Errorf(core.CodeInvalidArgument, "model %s was trained on a %s dataset; shadow evidence needs a dynamic (time-windowed) or static (one row per step) model", id, man.Kind)
	}
	p, err := model.Load(reg.ArtifactDir(m), man, model.LoadOptions{ExecPredict: extrun.Predict, Formats: trainers.Formats()})
	if err != nil {
		return nil, err
	}
	l := &Loaded{Model: m, Dataset: d, Manifest: man, Predictor: p, TestNRMSE: math.NaN(), Known: map[string]bool{}}
	var met struct {
		Conformal *eval.Conformal `json:"conformal"`
		OOD       *eval.OOD       `json:"ood"`
		Test      struct {
			MeanNRMSE *Num `json:"meanNrmse"`
			Targets   []struct {
				Target string `json:"target"`
				RMSE   *Num   `json:"rmse"`
			} `json:"targets"`
		} `json:"test"`
	}
	if len(m.Metrics) > 0 {
		if err := json.Unmarshal(m.Metrics, &met); err != nil {
			return nil, core.Wrap(core.CodeModelInvalid, err, "model %s metrics", id)
		}
	}
	dm := man.Dims() // a static dataset: H = F = 1, the inputs' columns
	if c := met.Conformal; c != nil && len(c.Widths) == dm.F && len(c.Widths[0]) == len(man.Targets) {
		l.Conformal = c
	}
	if o := met.OOD; o != nil && o.H == dm.H && o.Cols == dm.XCols {
		l.OOD = o
	}
	if met.Test.MeanNRMSE != nil {
		l.TestNRMSE = float64(*met.Test.MeanNRMSE)
	}
	l.TestRMSE = make([]float64, len(man.Targets))
	for k, tg := range man.Targets {
		l.TestRMSE[k] = math.NaN()
		for _, tm := range met.Test.Targets {
			if tm.Target == tg && tm.RMSE != nil {
				l.TestRMSE[k] = float64(*tm.RMSE)
			}
		}
	}
	for _, r := range man.Provenance.RunIDs {
		l.Known[r] = true
	}
	for _, r := range man.Runs {
		l.Known[r.RunID] = true
	}
	for _, r := range man.Lineage.Excluded {
		l.Known[r.RunID] = true
	}
	return l, nil
}

// NewRuns returns the ended runs of the model's line, product and recipe
// that are not in its dataset, oldest (by end time) first. With
// afterModel, only those that ended after the model was created.
func (l *Loaded) NewRuns(ctx context.Context, st core.Meta, afterModel bool) ([]core.Run, error) {
	runs, err := st.ListRuns(ctx, core.RunFilter{Line: l.Model.LineID, Product: l.Model.ProductID, Recipe: l.Model.RecipeID, Status: core.RunEnded})
	if err != nil {
		return nil, err
	}
	created := l.Model.CreatedAt.UnixMilli()
	var out []core.Run
	for _, r := range runs {
		if r.EndedMs == nil || l.Known[r.ID] {
			continue
		}
		if afterModel && *r.EndedMs <= created {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if *out[i].EndedMs != *out[j].EndedMs {
			return *out[i].EndedMs < *out[j].EndedMs
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Collect computes model modelID's shadow evidence on its eligible runs
// (see the package doc) and, unless opts.DryRun, stores one twin_shadow
// row per run (replacing an earlier row for the same model and run).
func Collect(ctx context.Context, st Store, dataDir, modelID string, opts Options) (*Evidence, error) {
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l, err := Load(ctx, st, dataDir, modelID)
	if err != nil {
		return nil, err
	}
	runs, err := l.NewRuns(ctx, st, true)
	if err != nil {
		return nil, err
	}
	ev := &Evidence{ModelID: l.Model.ID, DatasetID: l.Dataset.ID, ModelCreatedAt: l.Model.CreatedAt, Targets: l.Manifest.Targets,
		Eligible: len(runs), Runs: []RunEvidence{}, Stored: !opts.DryRun}
	if len(runs) > opts.MaxRuns {
		runs = runs[len(runs)-opts.MaxRuns:]
	}
	for _, r := range runs {
		re, err := l.EvaluateRun(ctx, st, r, opts)
		if err != nil {
			return nil, err
		}
		re.CreatedAt = opts.Now().UTC()
		ev.Runs = append(ev.Runs, *re)
	}
	ev.Summary = Summarize(ev.Runs)
	if opts.DryRun {
		return ev, nil
	}
	for _, re := range ev.Runs {
		js, err := json.Marshal(re)
		if err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "encode shadow evidence")
		}
		if err := st.PutShadow(ctx, contract.ShadowRecord{ModelID: re.ModelID, RunID: re.RunID, CreatedAt: re.CreatedAt, Steps: re.Steps,
			NRMSE: float64(re.NRMSE), Coverage: float64(re.Coverage), Evidence: js}); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// Summarize pools run evidence (see Summary).
func Summarize(runs []RunEvidence) Summary {
	nan := Num(math.NaN())
	s := Summary{Runs: len(runs), NRMSE: nan, FreeRunNRMSE: nan, Coverage: nan, CoverageTarget: nan, OODRejected: nan, SpreadRatio: nan}
	var nr, fr, sr []float64
	inside, values, rejected, oodWindows := 0, 0, 0, 0
	for _, r := range runs {
		if r.Windows == 0 {
			continue
		}
		s.Scored++
		s.Windows += r.Windows
		nr = append(nr, float64(r.NRMSE))
		if r.FreeRunSteps > 0 {
			fr = append(fr, float64(r.FreeRunNRMSE))
		}
		if finite(float64(r.SpreadRatio)) {
			sr = append(sr, float64(r.SpreadRatio))
		}
		if finite(float64(r.Coverage)) {
			inside += r.Inside
			values += r.Values
			s.CoverageTarget = r.CoverageTarget
		}
		if finite(float64(r.OODRejected)) {
			rejected += r.Rejected
			oodWindows += r.Windows
		}
	}
	s.NRMSE, s.FreeRunNRMSE, s.SpreadRatio = Num(mean(nr)), Num(mean(fr)), Num(mean(sr))
	var sse []float64
	steps := 0
	for _, r := range runs {
		if r.Windows == 0 {
			continue
		}
		if sse == nil {
			sse = make([]float64, len(r.Targets))
		}
		steps += r.Steps
		for k, t := range r.Targets {
			if k < len(sse) {
				sse[k] += float64(t.WindowRMSE) * float64(t.WindowRMSE) * float64(r.Steps)
			}
		}
	}
	for _, r := range runs {
		if r.Windows == 0 {
			continue
		}
		for _, t := range r.Targets {
			if t.Drift != nil {
				if s.Drift == nil {
					s.Drift = map[string]DriftEvidence{}
				}
				s.Drift[t.Target] = *t.Drift // runs are oldest first: the last one wins
			}
		}
	}
	s.WindowRMSE = []Num{}
	for _, v := range sse {
		s.WindowRMSE = append(s.WindowRMSE, Num(math.Sqrt(v/float64(steps))))
	}
	if values > 0 {
		s.Coverage = Num(float64(inside) / float64(values))
	}
	if oodWindows > 0 {
		s.OODRejected = Num(float64(rejected) / float64(oodWindows))
	}
	return s
}

// EvaluateRun computes the evidence of the loaded model on run r (it is
// not stored). The run must be of the model's line, product and recipe.
func (l *Loaded) EvaluateRun(ctx context.Context, st interface {
	core.Meta
	core.TimeSeries
}, r core.Run, opts Options) (*RunEvidence, error) {
	man := l.Manifest
	d := man.Dims()
	nAll, nT := d.NAll, d.YCols
	nan := Num(math.NaN())
	re := &RunEvidence{ModelID: l.Model.ID, RunID: r.ID, NRMSE: nan, Coverage: nan, CoverageTarget: nan, OODRejected: nan, FreeRunNRMSE: nan, SpreadRatio: nan}
	if r.EndedMs != nil {
		re.EndedMs = *r.EndedMs
	}
	if l.Conformal != nil {
		re.CoverageTarget = Num(l.Conformal.Coverage)
	}
	for _, t := range man.Targets {
		re.Targets = append(re.Targets, TargetEvidence{Target: t, WindowRMSE: nan, WindowNRMSE: nan, Coverage: nan, FreeRunRMSE: nan, FreeRunNRMSE: nan, MeanSpread: nan, SpreadRatio: nan})
	}
	g, err := dataset.BuildServeGrid(ctx, st, l.Dataset, r.ID)
	if core.CodeOf(err) == core.CodeDatasetEmpty {
		re.Skipped = err.Error()
		return re, nil
	}
	if err != nil {
		return nil, err
	}
	if len(g.Nodes) != nAll {
		return nil, core.Errorf(core.CodeDatasetTampered, "dataset %s: the spec resolves %d nodes, the manifest has %d", l.Dataset.ID, len(g.Nodes), nAll)
	}
	for j, n := range g.Nodes {
		if man.AllNodes[j] != n {
			return nil, core.Errorf(core.CodeDatasetTampered, "dataset %s: column %d is %s in the spec, %s in the manifest", l.Dataset.ID, j, n, man.AllNodes[j])
		}
	}
	re.GridSteps = g.Steps
	col := map[string]int{}
	for j, n := range man.AllNodes {
		col[n] = j
	}
	ci := make([]int, len(man.Controls))
	for i, n := range man.Controls {
		ci[i] = col[n]
	}
	ti := make([]int, nT)
	for i, n := range man.Targets {
		ti[i] = col[n]
	}
	rowOK := make([]bool, g.Steps)
	for k := range rowOK {
		ok := true
		for _, v := range g.Vals[k*nAll : (k+1)*nAll] {
			if !finite(float64(v)) {
				ok = false
				break
			}
		}
		rowOK[k] = ok
	}
	if man.Kind == dataset.KindStatic {
		if err := l.rows(ctx, g, re, rowOK, col, ti); err != nil {
			return nil, err
		}
		if re.Windows == 0 && re.Skipped == "" {
			re.Skipped = "no complete row (every input and target measured)"
		}
		return re, nil
	}
	if err := l.windows(ctx, g, re, rowOK, ci, ti, opts); err != nil {
		return nil, err
	}
	if err := l.freeRun(g, re, ci, ti, opts); err != nil {
		return nil, err
	}
	if re.Windows == 0 && re.Skipped == "" {
		re.Skipped = "no complete window (H history and F future steps without a missing value)"
	}
	return re, nil
}

// windows predicts every complete window of the grid and scores it.
func (l *Loaded) windows(ctx context.Context, g *dataset.ServeGrid, re *RunEvidence, rowOK []bool, ci, ti []int, opts Options) error {
	d := l.Manifest.Dims()
	H, F, nAll, nT, uc := d.H, d.F, d.NAll, d.YCols, d.UCols
	stride := opts.WindowStride
	if stride <= 0 {
		stride = F
	}
	// prefix count of bad rows, to test a window's rows in O(1)
	bad := make([]int, g.Steps+1)
	for k, ok := range rowOK {
		bad[k+1] = bad[k]
		if !ok {
			bad[k+1]++
		}
	}
	var starts []int
	for k := H; k+F <= g.Steps; k += stride {
		if bad[k+F]-bad[k-H] == 0 {
			starts = append(starts, k)
		}
	}
	re.Windows = len(starts)
	re.Steps = len(starts) * F
	if len(starts) == 0 {
		return nil
	}
	sc, err := l.predictAll(ctx, re, len(starts), F, H*nAll, "window", func(lo, hi int) (x, u, y []float32) {
		n := hi - lo
		x = make([]float32, 0, n*H*nAll)
		u = make([]float32, 0, n*F*uc)
		y = make([]float32, 0, n*F*nT)
		for _, k := range starts[lo:hi] {
			x = append(x, g.Vals[(k-H)*nAll:k*nAll]...)
			for f := 0; f < F; f++ {
				row := g.Vals[(k+f)*nAll : (k+f+1)*nAll]
				if len(ci) == 0 {
					u = append(u, 0)
				}
				for _, j := range ci {
					u = append(u, row[j])
				}
				for _, j := range ti {
					y = append(y, row[j])
				}
			}
		}
		return x, u, y
	})
	if err != nil {
		return err
	}
	truth, pred, inT := sc.truth, sc.pred, sc.inT
	drift := make([]*DriftEvidence, nT)
	for k := 0; k < nT && len(opts.Disturbances) > 0; k++ {
		d, ok := opts.Disturbances[l.Manifest.Targets[k]]
		if !ok {
			continue
		}
		corr, add, ev := l.correct(d, k, starts, F, pred[k], truth[k])
		rawRMSE, _ := rmseNRMSE(truth[k], pred[k])
		ev.RawWindowRMSE, ev.RawCoverage = Num(rawRMSE), Num(math.NaN())
		if l.Conformal != nil {
			ev.RawCoverage = Num(float64(inT[k]) / float64(len(truth[k])))
			inT[k] = 0
			for v := range corr {
				if math.Abs(corr[v]-truth[k][v]) <= l.Conformal.Widths[v%F][k]+add[v] {
					inT[k]++
				}
			}
		}
		pred[k], drift[k] = corr, &ev
	}
	l.score(re, sc, drift)
	return nil
}

// RequireDynamic refuses a static model (one row per step) where a view
// needs time windows.
func (l *Loaded) RequireDynamic() error {
	if l.Manifest.Kind != dataset.KindDynamic {
		return core.Errorf(core.CodeInvalidArgument, "model %s was trained on a %s dataset; this needs a dynamic (time-windowed) model", l.Model.ID, l.Manifest.Kind)
	}
	return nil
}

// rows predicts every complete row of a static model's run grid (every
// column measured) from its inputs and scores it: a row is a window with
// H = F = 1 (Windows = Steps = rows), against the one calibrated width
// and the OOD envelope over the input row. A static model has no free run.
func (l *Loaded) rows(ctx context.Context, g *dataset.ServeGrid, re *RunEvidence, rowOK []bool, col map[string]int, ti []int) error {
	man := l.Manifest
	nAll, nT, nIn := len(man.AllNodes), len(man.Targets), len(man.Inputs)
	in := make([]int, nIn)
	for i, n := range man.Inputs {
		j, ok := col[n]
		if !ok {
			return core.Errorf(core.CodeDatasetTampered, "dataset %s: input %s is not a column", l.Dataset.ID, n)
		}
		in[i] = j
	}
	var ks []int
	for k, ok := range rowOK {
		if ok {
			ks = append(ks, k)
		}
	}
	re.Windows, re.Steps = len(ks), len(ks)
	if len(ks) == 0 {
		return nil
	}
	sc, err := l.predictAll(ctx, re, len(ks), 1, nIn, "row", func(lo, hi int) (x, u, y []float32) {
		n := hi - lo
		x = make([]float32, 0, n*nIn)
		y = make([]float32, 0, n*nT)
		for _, k := range ks[lo:hi] {
			row := g.Vals[k*nAll : (k+1)*nAll]
			for _, j := range in {
				x = append(x, row[j])
			}
			for _, j := range ti {
				y = append(y, row[j])
			}
		}
		return x, nil, y
	})
	if err != nil {
		return err
	}
	l.score(re, sc, nil)
	return nil
}

// scored is what predictAll collects per target: the true and predicted
// values and how many fell inside the calibrated width.
type scored struct {
	truth, pred [][]float64
	inT         []int
}

// predictAll predicts count windows of F steps (a static model's rows:
// F = 1) in batches and collects them per target. fill builds windows
// [lo, hi): their inputs x (xw values each, what the OOD envelope
// checks), controls u (nil for a row) and true values y; what names a
// window in errors ("window", "row").
func (l *Loaded) predictAll(ctx context.Context, re *RunEvidence, count, F, xw int, what string, fill func(lo, hi int) (x, u, y []float32)) (scored, error) {
	nT := len(l.Manifest.Targets)
	sc := scored{truth: make([][]float64, nT), pred: make([][]float64, nT), inT: make([]int, nT)}
	for lo := 0; lo < count; lo += batch {
		if err := ctx.Err(); err != nil {
			return sc, core.Wrap(core.CodeInternal, err, "shadow evaluation cancelled")
		}
		hi := min(count, lo+batch)
		n := hi - lo
		x, u, y := fill(lo, hi)
		if l.OOD != nil {
			for w := 0; w < n; w++ {
				if _, ok := l.OOD.Check(x[w*xw : (w+1)*xw]); !ok {
					re.Rejected++
				}
			}
		}
		p, err := l.Predictor.PredictBatch(ctx, x, u, n)
		if err != nil {
			return sc, err
		}
		if len(p) != n*F*nT {
			return sc, model.Invalidf("prediction", "the model returned %d values for %d %ss, need %d", len(p), n, what, n*F*nT)
		}
		for i, v := range p {
			if !finite(float64(v)) {
				return sc, model.Invalidf("prediction", "the model predicted %v for a %s of run %s", v, what, re.RunID)
			}
			f, k := (i/nT)%F, i%nT
			sc.truth[k] = append(sc.truth[k], float64(y[i]))
			sc.pred[k] = append(sc.pred[k], float64(v))
			if l.Conformal != nil && math.Abs(float64(v)-float64(y[i])) <= l.Conformal.Widths[f][k] {
				sc.inT[k]++
			}
		}
	}
	return sc, nil
}

// score sets the window scores of re from sc: per target RMSE, NRMSE,
// coverage and drift evidence (drift nil: none), and the run's mean
// NRMSE, coverage and OOD rejection rate.
func (l *Loaded) score(re *RunEvidence, sc scored, drift []*DriftEvidence) {
	var nrs []float64
	for k := range sc.truth {
		rmse, nrmse := rmseNRMSE(sc.truth[k], sc.pred[k])
		t := &re.Targets[k]
		t.WindowRMSE, t.WindowNRMSE = Num(rmse), Num(nrmse)
		if drift != nil {
			t.Drift = drift[k]
		}
		nrs = append(nrs, nrmse)
		if l.Conformal != nil {
			t.Coverage = Num(float64(sc.inT[k]) / float64(len(sc.truth[k])))
			re.Inside += sc.inT[k]
			re.Values += len(sc.truth[k])
		}
	}
	re.NRMSE = Num(mean(nrs))
	if re.Values > 0 {
		re.Coverage = Num(float64(re.Inside) / float64(re.Values))
	}
	if l.OOD != nil {
		re.OODRejected = Num(float64(re.Rejected) / float64(re.Windows))
	}
}

// freeRun simulates every NaN-free segment of the run when the model can
// (eval.FreeRunGrid: the model re-initialised after each gap).
func (l *Loaded) freeRun(g *dataset.ServeGrid, re *RunEvidence, ci, ti []int, opts Options) error {
	sim, ok := l.Predictor.(eval.RunSimulator)
	if !ok {
		return nil
	}
	d := l.Manifest.Dims()
	nAll, nT := d.NAll, d.YCols
	nInit := opts.NInit
	if nInit <= 0 {
		nInit = d.H
	}
	re.NInit = nInit
	sp, spreads := sim.(runSpreader)
	sum := make([]float64, nT) // spread summed over the scored steps
	rr, truth, pred, err := eval.FreeRunGrid(re.RunID, g.Vals[:g.Steps*nAll], nAll, ci, ti, l.Manifest.Targets, nInit, func(in, init [][]float64) ([][]float64, error) {
		if !spreads {
			return sim.SimulateRun(in, init, nInit)
		}
		y, spread, err := sp.SimulateRunSpread(in, init, nInit)
		for k := nInit; err == nil && k < len(spread); k++ {
			for i := 0; i < nT && i < len(spread[k]); i++ {
				sum[i] += spread[k][i]
			}
		}
		return y, err
	})
	if err != nil {
		if model.IsModelInvalid(err) {
			return err
		}
		return core.Wrap(core.CodeModelInvalid, err, "simulate run %s", re.RunID)
	}
	re.Segments, re.Divergence = rr.Segments, rr.Divergence
	re.Diverged = rr.Divergence != nil
	for _, s := range rr.Segments {
		if s.Skipped {
			re.SkippedSegments++
			continue
		}
		if re.SimSteps == 0 {
			re.Offset = s.Offset
		}
		re.SimSteps += s.Steps
	}
	re.FreeRunSteps = rr.N
	if rr.N == 0 {
		return nil
	}
	var nrs, srs []float64
	for i := 0; i < nT; i++ {
		rmse, nrmse := rmseNRMSE(truth[i], pred[i])
		t := &re.Targets[i]
		t.FreeRunRMSE, t.FreeRunNRMSE = Num(rmse), Num(nrmse)
		nrs = append(nrs, nrmse)
		if spreads {
			ms := sum[i] / float64(rr.N)
			t.MeanSpread = Num(ms)
			if l.Conformal != nil {
				w := l.Conformal.Widths[len(l.Conformal.Widths)-1][i]
				t.SpreadRatio = Num(ratio(ms, w))
				srs = append(srs, float64(t.SpreadRatio))
			}
		}
	}
	re.FreeRunNRMSE = Num(mean(nrs))
	if len(srs) > 0 {
		re.SpreadRatio = Num(mean(srs))
	}
	return nil
}

// rmseNRMSE is the RMSE and RMSE / population std of the true values (0
// when exact on a constant series, +Inf when not exact on one).
func rmseNRMSE(truth, pred []float64) (float64, float64) {
	n := float64(len(truth))
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	var sse, m, sst float64
	for i, v := range truth {
		e := pred[i] - v
		sse += e * e
		m += v
	}
	m /= n
	for _, v := range truth {
		sst += (v - m) * (v - m)
	}
	rmse := math.Sqrt(sse / n)
	return rmse, ratio(rmse, math.Sqrt(sst/n))
}

func ratio(a, b float64) float64 {
	switch {
	case b > 0:
		return a / b
	case a == 0:
		return 0
	default:
		return math.Inf(1)
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Num is a float64 whose JSON form is null when it is not finite (NaN:
// undefined, e.g. no conformal band to cover); null reads back as NaN.
type Num float64

// MarshalJSON writes a non-finite value as null.
func (n Num) MarshalJSON() ([]byte, error) {
	if !finite(float64(n)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

// UnmarshalJSON reads null as NaN.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}
