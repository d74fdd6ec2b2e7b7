package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/twin/shadow"
)

// The model comparison use cases: the leaderboard of a line's experiments
// and the reference prediction (baseline against proposed controls) an
// engineer or agent looks at before tuning.

var (
	opModelCompare   = Op{Name: "model.compare", Act: auth.ActRead, Summary: "Rank models by the platform's test metrics: gates passed first, then test NRMSE, with each experiment's parent and change note"}
	opModelReference = Op{Name: "model.reference", Act: auth.ActRead, Heavy: true, Summary: "Predict a run over the model's horizon with its own controls (baseline) and with proposed setpoints held, with the conformal interval; nothing is stored"}
	opModelReplay    = Op{Name: "model.replay", Act: auth.ActRead, Heavy: true, Summary: "Predict a run of the model's line the way the platform evaluated it: windows tiling the run, each from its measured history and its own controls, with the conformal band and its coverage on that run; nothing is stored"}
)

// compareOps lists the use cases of this file.
func compareOps() []*Op {
	return []*Op{
		bind(&opModelCompare, (*App).ModelCompare),
		bind(&opModelReference, (*App).ModelReference),
		bind(&opModelReplay, (*App).ModelReplay),
		bind(&opGateProfiles, (*App).GateProfiles),
	}
}

// ---- model.compare

// Leaderboard sizes of ModelCompareRequest.Limit.
const (
	DefaultCompareLimit = 20
	MaxCompareLimit     = 200
)

// ModelCompareRequest filters the models to rank.
type ModelCompareRequest struct {
	Line    string `json:"line,omitempty" jsonschema:"only models of this line (default: every line in your scope)"`
	Product string `json:"product,omitempty" jsonschema:"only models of this product"`
	Recipe  string `json:"recipe,omitempty" jsonschema:"only models of this recipe"`
	Purpose string `json:"purpose,omitempty" jsonschema:"only models of this purpose (mpc_surrogate, quality_predict, static_response)"`
	Dataset string `json:"dataset,omitempty" jsonschema:"only models trained on this dataset"`
	Stage   string `json:"stage,omitempty" jsonschema:"only models in this stage (candidate, shadow, production, retired)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many entries (default 20, at most 200)"`
	// Run, when given, adds the validation view: Models (default: the
	// first MaxValidateModels of the ranking) each fitted to that run.
	Run    string   `json:"run,omitempty" jsonschema:"validate the models on this run: free-run and k-step-ahead fit % per target, the series to overlay"`
	Models []string `json:"models,omitempty" jsonschema:"with run: the models to validate (default: the top of the ranking), at most 8"`
}

// MaxValidateModels bounds the models one validation view fits.
const MaxValidateModels = 8

// Validate bounds the limit and the models.
func (r *ModelCompareRequest) Validate() error {
	if len(r.Models) > MaxValidateModels {
		return core.FieldErrorf(core.CodeInvalidArgument, "models", "at most %d models in one validation view, got %d", MaxValidateModels, len(r.Models))
	}
	if len(r.Models) > 0 && r.Run == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "run", "models are validated on a run: give run")
	}
	return limitIn("limit", r.Limit, 1, MaxCompareLimit)
}

// ModelRank is one model of the leaderboard with the platform metrics it
// is ranked by.
type ModelRank struct {
	Rank            int       `json:"rank"`
	ModelID         string    `json:"modelId"`
	JobID           string    `json:"jobId"`
	ParentJobID     string    `json:"parentJobId,omitempty" jsonschema:"the experiment this one changed"`
	ChangeNote      string    `json:"changeNote,omitempty" jsonschema:"what the experiment changed"`
	DatasetID       string    `json:"datasetId"`
	Trainer         string    `json:"trainer"`
	Stage           string    `json:"stage"`
	GatePassed      bool      `json:"gatePassed"`
	TestNRMSE       *float64  `json:"testNrmse" jsonschema:"mean rollout NRMSE over the test runs (platform metric; lower is better)"`
	TestOneStep     *float64  `json:"testOneStepNrmse" jsonschema:"mean one-step NRMSE over the test runs"`
	ValNRMSE        *float64  `json:"valNrmse" jsonschema:"mean rollout NRMSE over the validation runs"`
	Coverage        *float64  `json:"coverage" jsonschema:"measured coverage of the conformal interval on test windows"`
	LineageVerified bool      `json:"lineageVerified"`
	Twin            bool      `json:"twin"`
	LineID          string    `json:"lineId"`
	ProductID       string    `json:"productId"`
	RecipeID        string    `json:"recipeId"`
	Purpose         string    `json:"purpose"`
	CreatedAt       time.Time `json:"createdAt"`
	// What a model table shows beside the ranking.
	Class          string   `json:"class" jsonschema:"the artifact's model class (its kind)"`
	SizeBytes      *int64   `json:"sizeBytes,omitempty" jsonschema:"bytes of the model's artifact files (absent when pruned or not on this machine)"`
	TrainingSec    *float64 `json:"trainingSec,omitempty" jsonschema:"seconds from the job's start to its end"`
	GateProfile    string   `json:"gateProfile,omitempty" jsonschema:"the model gate profile the model was checked against"`
	GatesFailed    []string `json:"gatesFailed,omitempty" jsonschema:"ids of the model gate checks that failed"`
	CoverageTarget *float64 `json:"coverageTarget,omitempty" jsonschema:"the conformal interval's nominal coverage"`
	// CoverageTolerance is the measurement's tolerance around the target
	// (eval.CoverageTolerance of the calibration and test windows);
	// CoverageOff is set when the measured coverage lies outside target ±
	// tolerance ("below" or "above").
	CoverageTolerance *float64 `json:"coverageTolerance,omitempty" jsonschema:"the coverage measurement's tolerance around the target"`
	CoverageOff       string   `json:"coverageOff,omitempty" jsonschema:"below or above: the measured coverage lies outside target ± tolerance"`
}

// ModelCompareResponse is the ranked list and, with a run, the
// validation view.
type ModelCompareResponse struct {
	RankedBy   string      `json:"rankedBy"`
	Total      int         `json:"total" jsonschema:"models matching the filter in your scope"`
	Entries    []ModelRank `json:"entries"`
	Validation []ModelFit  `json:"validation,omitempty" jsonschema:"with run: each model's fit on it"`
}

// ModelFit is one model's validation view on a run (docs/identification.md).
type ModelFit struct {
	ModelID string       `json:"modelId"`
	Trainer string       `json:"trainer"`
	Fit     *eval.RunFit `json:"fit,omitempty"`
	Error   string       `json:"error,omitempty" jsonschema:"why the model could not be fitted to the run"`
}

// RankedBy is the leaderboard's order.
const RankedBy = "gatePassed desc, testNrmse asc (missing last), createdAt desc"

// modelScores are the platform metrics a leaderboard ranks by.
type modelScores struct {
	Val struct {
		MeanNRMSE *float64 `json:"meanNrmse"`
	} `json:"val"`
	Test struct {
		MeanNRMSE        *float64 `json:"meanNrmse"`
		MeanOneStepNRMSE *float64 `json:"meanOneStepNrmse"`
	} `json:"test"`
	Coverage *struct {
		Measured    *float64 `json:"measured"`
		Target      *float64 `json:"target"`
		TestWindows int      `json:"testWindows"`
	} `json:"coverage"`
	Conformal *struct {
		CalibrationWindows int `json:"calibrationWindows"`
	} `json:"conformal"`
}

// coverageCheck fills the coverage target, tolerance and flag of e.
func (e *ModelRank) coverageCheck(sc modelScores) {
	if sc.Coverage == nil {
		return
	}
	e.Coverage = finite(sc.Coverage.Measured)
	e.CoverageTarget = finite(sc.Coverage.Target)
	if e.Coverage == nil || e.CoverageTarget == nil || sc.Conformal == nil || sc.Conformal.CalibrationWindows <= 0 || sc.Coverage.TestWindows <= 0 {
		return
	}
	tol, off := CoverageCheck(*e.CoverageTarget, *e.Coverage, sc.Conformal.CalibrationWindows, sc.Coverage.TestWindows)
	if math.IsNaN(tol) {
		return
	}
	e.CoverageTolerance, e.CoverageOff = &tol, off
}

// CoverageCheck is the tolerance of a coverage measured on testWindows
// test windows of an interval calibrated at target on calWindows windows
// (eval.CoverageTolerance, the one the gates use), and whether measured
// lies outside target ± tolerance: "below" (the interval claims more
// than it holds), "above" (wider than it needs to be) or "". The
// tolerance is NaN when it cannot be computed.
func CoverageCheck(target, measured float64, calWindows, testWindows int) (float64, string) {
	if calWindows <= 0 || testWindows <= 0 || math.IsNaN(target) || math.IsNaN(measured) {
		return math.NaN(), ""
	}
	tol := eval.CoverageTolerance(target, calWindows, testWindows)
	if math.IsNaN(tol) || math.IsInf(tol, 0) {
		return math.NaN(), ""
	}
	switch {
	case measured < target-tol:
		return tol, "below"
	case measured > target+tol:
		return tol, "above"
	}
	return tol, ""
}

// ShadowFlags says what is wrong with one shadow run's evidence under
// twin gate profile p: an NRMSE beyond the profile's rollout bound (the
// bound the gate puts on the test NRMSE), a coverage below its shadow
// coverage minimum. None when the figures are missing or within.
func ShadowFlags(nrmse, coverage float64, p eval.TwinProfile) []string {
	var out []string
	if p.RolloutTestNrmseMax > 0 && !math.IsNaN(nrmse) && nrmse > p.RolloutTestNrmseMax {
		out = append(out, fmt.Sprintf("NRMSE %.3g beyond the gate's %.3g (%s)", nrmse, p.RolloutTestNrmseMax, p.ID))
	}
	if p.ShadowCoverageMin > 0 && !math.IsNaN(coverage) && coverage < p.ShadowCoverageMin {
		out = append(out, fmt.Sprintf("coverage %.1f%% below the gate's %.0f%% (%s)", 100*coverage, 100*p.ShadowCoverageMin, p.ID))
	}
	return out
}

// tableFacts fills what a model table shows beside the ranking: class,
// artifact size, gate profile and failed checks.
func (a *App) tableFacts(e *ModelRank, m core.Model) {
	e.Class = m.ArtifactKind
	var g eval.GateReport
	if len(m.Gates) > 0 && json.Unmarshal(m.Gates, &g) == nil {
		e.GateProfile = g.Profile
		for _, c := range g.Checks {
			if !c.Passed {
				e.GatesFailed = append(e.GatesFailed, c.ID)
			}
		}
	}
	if m.ArtifactsPruned || m.ArtifactPath == "" {
		return
	}
	var size int64
	err := filepath.WalkDir(registry.New(a.d.Store, a.d.DataDir, nil).ArtifactDir(m), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	if err == nil {
		e.SizeBytes = &size
	}
}

func finite(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	return p
}

// ModelCompare ranks the models of p's lines: gates passed first, then
// test NRMSE (missing last), then newest.
func (a *App) ModelCompare(ctx context.Context, p Principal, req ModelCompareRequest) (ModelCompareResponse, error) {
	return run(ctx, a, p, &opModelCompare, req, func(ctx context.Context, p Principal, req ModelCompareRequest) (ModelCompareResponse, error) {
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return ModelCompareResponse{}, err
		}
		limit := req.Limit
		if limit == 0 {
			limit = DefaultCompareLimit
		}
		ms, err := a.d.Store.ListModels(ctx, core.ModelFilter{Line: req.Line, Product: req.Product, Recipe: req.Recipe, Purpose: req.Purpose, Stage: req.Stage, DatasetID: req.Dataset})
		if err != nil {
			return ModelCompareResponse{}, err
		}
		var es []ModelRank
		for _, m := range filter(p, ms, func(m core.Model) string { return m.LineID }) {
			var sc modelScores
			_ = json.Unmarshal(m.Metrics, &sc) // a model without metrics ranks last
			e := ModelRank{ModelID: m.ID, JobID: m.JobID, DatasetID: m.DatasetID, Trainer: m.TrainerRef, Stage: m.Stage, GatePassed: m.GatePassed,
				TestNRMSE: finite(sc.Test.MeanNRMSE), TestOneStep: finite(sc.Test.MeanOneStepNRMSE), ValNRMSE: finite(sc.Val.MeanNRMSE),
				LineageVerified: m.LineageVerified, Twin: m.Twin, LineID: m.LineID, ProductID: m.ProductID, RecipeID: m.RecipeID, Purpose: m.Purpose,
				CreatedAt: m.CreatedAt}
			e.coverageCheck(sc)
			a.tableFacts(&e, m)
			es = append(es, e)
		}
		sort.SliceStable(es, func(i, j int) bool {
			x, y := es[i], es[j]
			if x.GatePassed != y.GatePassed {
				return x.GatePassed
			}
			if (x.TestNRMSE == nil) != (y.TestNRMSE == nil) {
				return x.TestNRMSE != nil
			}
			if x.TestNRMSE != nil && *x.TestNRMSE != *y.TestNRMSE {
				return *x.TestNRMSE < *y.TestNRMSE
			}
			return x.CreatedAt.After(y.CreatedAt)
		})
		out := ModelCompareResponse{RankedBy: RankedBy, Total: len(es), Entries: []ModelRank{}}
		for i, e := range es[:min(len(es), limit)] {
			e.Rank = i + 1
			if j, err := a.d.Store.GetJob(ctx, e.JobID); err == nil {
				e.ParentJobID, e.ChangeNote = j.ParentID, j.ChangeNote
				if j.StartedAt != nil && j.EndedAt != nil {
					sec := j.EndedAt.Sub(*j.StartedAt).Seconds()
					e.TrainingSec = &sec
				}
			}
			out.Entries = append(out.Entries, e)
		}
		if req.Run != "" {
			ids := req.Models
			if len(ids) == 0 {
				for _, e := range out.Entries[:min(len(out.Entries), MaxValidateModels)] {
					ids = append(ids, e.ModelID)
				}
			}
			for _, id := range ids {
				f, err := a.fitRun(ctx, p, id, req.Run)
				if err != nil && core.KindOf(err) == core.KindForbidden {
					return ModelCompareResponse{}, err
				}
				out.Validation = append(out.Validation, f)
			}
		}
		return out, nil
	})
}

// fitRun is model id's validation view on run (an error that is the
// model's or the run's is reported in the entry, scope errors returned).
func (a *App) fitRun(ctx context.Context, p Principal, id, run string) (ModelFit, error) {
	m, err := a.model(ctx, p, auth.ActRead, id)
	if err != nil {
		return ModelFit{ModelID: id, Error: err.Error()}, err
	}
	out := ModelFit{ModelID: m.ID, Trainer: m.TrainerRef}
	// The run must be of a line in p's scope (its fit figures describe it).
	if r, err := a.d.Store.GetRun(ctx, run); err == nil {
		if err := p.Allow(auth.ActRead, r.LineID); err != nil {
			out.Error = err.Error()
			return out, err
		}
	}
	l, err := shadow.Load(ctx, a.d.Store, a.d.DataDir, m.ID)
	if err == nil {
		var g *dataset.ServeGrid
		if g, err = dataset.BuildServeGrid(ctx, a.d.Store, l.Dataset, run); err == nil {
			out.Fit, err = eval.FitRun(ctx, l.Predictor, l.Manifest, g, 0)
		}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, nil
}

// ---- model.reference

// ModelReferenceRequest predicts a run over the model's horizon with the
// run's own controls and, optionally, with proposed setpoints held.
type ModelReferenceRequest struct {
	ID       string             `json:"id,omitempty" jsonschema:"model id (default: the production model of line, product, recipe and purpose)"`
	Line     string             `json:"line,omitempty" jsonschema:"without id: the line whose production model is used"`
	Product  string             `json:"product,omitempty" jsonschema:"without id: the product whose production model is used"`
	Recipe   string             `json:"recipe,omitempty" jsonschema:"without id: the recipe whose production model is used"`
	Purpose  string             `json:"purpose,omitempty" jsonschema:"without id: the purpose of the production model (default mpc_surrogate)"`
	Run      string             `json:"run,omitempty" jsonschema:"run to predict (default: the newest run of the model's line, product and recipe)"`
	From     *Instant           `json:"from,omitempty" jsonschema:"time of the first predicted step, epoch ms or RFC 3339 (default: the latest instant with a full window in the run)"`
	Steps    int                `json:"steps,omitempty" jsonschema:"steps to predict, 1..the model's horizon (default: the horizon)"`
	Controls map[string]float64 `json:"controls,omitempty" jsonschema:"proposed setpoint per control node (model units), held over the horizon; controls not named keep the run's own values"`
}

// Validate requires a model (by id, or line, product and recipe),
// non-negative steps and finite controls.
func (r *ModelReferenceRequest) Validate() error {
	if r.ID == "" && (r.Line == "" || r.Product == "" || r.Recipe == "") {
		return core.FieldErrorf(core.CodeInvalidArgument, "id", "give id, or line, product and recipe to use their production model")
	}
	if r.Steps < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "steps", "steps must not be negative")
	}
	for c, v := range r.Controls {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return core.FieldErrorf(core.CodeNonFinite, "controls."+c, "not a finite number")
		}
	}
	return nil
}

// ReferenceStep is one predicted step.
type ReferenceStep struct {
	TsMs     int64      `json:"ts" jsonschema:"epoch ms"`
	Baseline []float64  `json:"baseline" jsonschema:"prediction with the run's own controls, per target"`
	Proposed []float64  `json:"proposed,omitempty" jsonschema:"prediction with the proposed controls, per target"`
	Lo       []float64  `json:"lo,omitempty" jsonschema:"lower edge of the conformal interval around proposed (else baseline)"`
	Hi       []float64  `json:"hi,omitempty" jsonschema:"upper edge of the conformal interval around proposed (else baseline)"`
	Measured []*float64 `json:"measured" jsonschema:"what the run measured, where it has it"`
}

// ModelReferenceResponse is the baseline and proposed prediction.
type ModelReferenceResponse struct {
	Model     string          `json:"model"`
	Stage     string          `json:"stage"`
	Run       string          `json:"run"`
	From      int64           `json:"from" jsonschema:"time of the first predicted step (epoch ms)"`
	BeatMs    int64           `json:"beatMs"`
	Targets   []string        `json:"targets"`
	Controls  []string        `json:"controls"`
	Proposed  bool            `json:"proposed" jsonschema:"whether proposed controls were given"`
	Intervals bool            `json:"intervals" jsonschema:"whether the model carries a calibrated conformal interval"`
	Steps     []ReferenceStep `json:"steps"`
	Warnings  []string        `json:"warnings" jsonschema:"proposed controls outside the range the model was trained on (the prediction extrapolates)"`
}

// referenceModel is the model named by id, or the production model of
// line, product, recipe and purpose.
func (a *App) referenceModel(ctx context.Context, p Principal, req ModelReferenceRequest) (core.Model, error) {
	if req.ID != "" {
		return a.model(ctx, p, auth.ActRead, req.ID)
	}
	if err := p.Allow(auth.ActRead, req.Line); err != nil {
		return core.Model{}, err
	}
	purpose := req.Purpose
	if purpose == "" {
		purpose = dataset.PurposeMPCSurrogate
	}
	ms, err := a.d.Store.ListModels(ctx, core.ModelFilter{Line: req.Line, Product: req.Product, Recipe: req.Recipe, Purpose: purpose, Stage: core.StageProduction})
	if err != nil {
		return core.Model{}, err
	}
	if len(ms) == 0 {
		return core.Model{}, core.FieldErrorf(core.CodeNotFound, "id", "no production model for %s/%s/%s (%s); a person promotes one, or pass id", req.Line, req.Product, req.Recipe, purpose)
	}
	return ms[0], nil
}

// ModelReference predicts a run's targets over the model's horizon with
// the run's own controls and with the proposed ones, through the model's
// own cleaning and alignment. Nothing is stored or written.
func (a *App) ModelReference(ctx context.Context, p Principal, req ModelReferenceRequest) (ModelReferenceResponse, error) {
	return run(ctx, a, p, &opModelReference, req, func(ctx context.Context, p Principal, req ModelReferenceRequest) (ModelReferenceResponse, error) {
		var zero ModelReferenceResponse
		m, err := a.referenceModel(ctx, p, req)
		if err != nil {
			return zero, err
		}
		d, man, load, err := a.servingModel(ctx, m)
		if err != nil {
			return zero, err
		}
		F, beat, beatUs := man.HorizonSteps, man.BeatMs, man.Period().Microseconds()
		steps := req.Steps
		if steps == 0 {
			steps = F
		}
		if steps < 1 || steps > F {
			return zero, core.FieldErrorf(core.CodeInvalidArgument, "steps", "steps must be 1..%d (the model's horizon)", F)
		}
		ctrlIdx := map[string]int{}
		for k, c := range man.Controls {
			ctrlIdx[c] = k
		}
		for c := range req.Controls {
			if _, ok := ctrlIdx[c]; !ok {
				return zero, core.FieldErrorf(core.CodeInvalidArgument, "controls."+c, "%s is not a control of model %s (controls: %s)", c, m.ID, strings.Join(man.Controls, ", "))
			}
		}
		// The model has only seen the controls within its train runs'
		// range; a proposal outside it is extrapolation, which the caller
		// must know.
		warnings := []string{}
		if len(req.Controls) > 0 {
			rep, err := dataset.FetchReport(ctx, a.d.Store, a.d.DataDir, d)
			if err != nil {
				return zero, err
			}
			for _, n := range rep.Nodes {
				if v, ok := req.Controls[n.NodeID]; ok && (v < n.Summary.Min || v > n.Summary.Max) {
					warnings = append(warnings, fmt.Sprintf("%s = %g is outside the trained range [%g, %g] %s: the prediction extrapolates", n.NodeID, v, n.Summary.Min, n.Summary.Max, n.ModelUnit))
				}
			}
			sort.Strings(warnings)
		}
		runID := req.Run
		if runID == "" {
			runs, err := a.d.Store.ListRuns(ctx, core.RunFilter{Line: m.LineID, Product: m.ProductID, Recipe: m.RecipeID})
			if err != nil {
				return zero, err
			}
			newest := int64(math.MinInt64)
			for _, r := range runs {
				if r.StartedMs > newest {
					runID, newest = r.ID, r.StartedMs
				}
			}
			if runID == "" {
				return zero, core.FieldErrorf(core.CodeNotFound, "run", "no run of %s/%s/%s", m.LineID, m.ProductID, m.RecipeID)
			}
		}
		r, err := a.d.Store.GetRun(ctx, runID)
		if err != nil {
			return zero, err
		}
		if err := p.Allow(auth.ActRead, r.LineID); err != nil {
			return zero, err
		}
		var at int64
		if req.From != nil {
			at = int64(*req.From)
		} else {
			end := a.o.Now().UnixMilli()
			if r.EndedMs != nil {
				end = *r.EndedMs
			} else if lat, err := a.d.Store.Latest(ctx, man.AllNodes[:1], core.ContextFilter{Run: runID}); err == nil && len(lat) > 0 {
				end = core.UsToMs(lat[0].TsUs)
			}
			// The last complete window: F beats of data after it, a beat
			// spare for the grid's alignment.
			at = end - (int64(F+1)*beatUs+999)/1000
		}
		pr, err := load()
		if err != nil {
			return zero, err
		}
		w, err := dataset.BuildServeWindow(ctx, a.d.Store, d, runID, at)
		if err != nil {
			return zero, err
		}
		if w.Missing > 0 {
			return zero, core.FieldErrorf(core.CodeDatasetEmpty, "from", "the history window before %d has %d missing value(s) after cleaning; pick another instant", w.AtMs, w.Missing)
		}
		base, err := pr.PredictBatch(ctx, w.X, w.U, 1)
		if err != nil {
			return zero, err
		}
		nT := len(man.Targets)
		nC := max(len(man.Controls), 1)
		var prop []float32
		if len(req.Controls) > 0 {
			u := append([]float32(nil), w.U...)
			for f := range F {
				for c, v := range req.Controls {
					u[f*nC+ctrlIdx[c]] = float32(v)
				}
			}
			if prop, err = pr.PredictBatch(ctx, w.X, u, 1); err != nil {
				return zero, err
			}
		}
		widths := ConformalWidths(m.Metrics)
		out := ModelReferenceResponse{Model: m.ID, Stage: m.Stage, Run: runID, From: w.AtMs, BeatMs: beat, Targets: man.Targets, Controls: man.Controls,
			Proposed: prop != nil, Intervals: widths != nil, Warnings: warnings, Steps: []ReferenceStep{}}
		H := man.HistorySteps
		for f := range steps {
			st := ReferenceStep{TsMs: w.TS[H+f], Measured: []*float64{}}
			for k := range nT {
				b := float64(base[f*nT+k])
				st.Baseline = append(st.Baseline, b)
				c := b
				if prop != nil {
					c = float64(prop[f*nT+k])
					st.Proposed = append(st.Proposed, c)
				}
				if widths != nil && f < len(widths) && k < len(widths[f]) {
					st.Lo, st.Hi = append(st.Lo, c-widths[f][k]), append(st.Hi, c+widths[f][k])
				}
				if y := float64(w.Y[f*nT+k]); !math.IsNaN(y) {
					st.Measured = append(st.Measured, &y)
				} else {
					st.Measured = append(st.Measured, nil)
				}
			}
			out.Steps = append(out.Steps, st)
		}
		return out, nil
	})
}

// ---- gate profiles

var opGateProfiles = Op{Name: "gate.profiles", Act: auth.ActRead, Summary: "The published acceptance profiles and their rules: the model gates (by dataset purpose) and the twin gates"}

// GateProfilesRequest has no fields.
type GateProfilesRequest struct{}

// GateProfilesResponse lists every published profile: the model gate
// profiles (each dataset purpose's default named in ByPurpose) and the
// twin acceptance profiles with their thresholds.
type GateProfilesResponse struct {
	Models    []eval.Profile     `json:"models"`
	ByPurpose map[string]string  `json:"byPurpose" jsonschema:"dataset purpose → its model gate profile"`
	Twin      []eval.TwinProfile `json:"twin"`
}

// GateProfiles lists the published profiles.
func (a *App) GateProfiles(ctx context.Context, p Principal, req GateProfilesRequest) (GateProfilesResponse, error) {
	return run(ctx, a, p, &opGateProfiles, req, func(ctx context.Context, p Principal, req GateProfilesRequest) (GateProfilesResponse, error) {
		out := GateProfilesResponse{Models: eval.Profiles(), ByPurpose: map[string]string{}, Twin: eval.TwinProfiles()}
		for _, m := range out.Models {
			if def, err := eval.ProfileFor(m.Purpose); err == nil && def.ID == m.ID {
				out.ByPurpose[m.Purpose] = m.ID
			}
		}
		return out, nil
	})
}

// modelRun reads run id for model m: a run of a line in p's scope (the
// refusal names no line) and of the model's line, product and recipe.
func (a *App) modelRun(ctx context.Context, p Principal, m core.Model, id string) (core.Run, error) {
	r, err := a.d.Store.GetRun(ctx, id)
	if err != nil {
		return r, err
	}
	if err := p.Allow(auth.ActRead, r.LineID); err != nil {
		return r, err
	}
	if r.LineID != m.LineID || r.ProductID != m.ProductID || r.RecipeID != m.RecipeID {
		return r, core.FieldErrorf(core.CodeInvalidArgument, "run", "run %s is not of model %s's line, product and recipe", id, m.ID)
	}
	return r, nil
}

// ---- model.replay

// ModelReplayRequest names a model and one of its line's runs.
type ModelReplayRequest struct {
	ID  string `json:"id" jsonschema:"model id"`
	Run string `json:"run,omitempty" jsonschema:"a run of the model's line, product and recipe (default: the first test run of its dataset)"`
}

// Validate requires the model.
func (r *ModelReplayRequest) Validate() error { return required("id", r.ID) }

// ModelReplayResponse is the replay with where the run sits in the
// model's dataset.
type ModelReplayResponse struct {
	ModelID string `json:"modelId"`
	// RunStartedMs is the run's start (epoch ms), the origin of a plot's
	// time axis; TestRuns the test runs of the model's dataset; IsTest
	// whether the replayed run is one of them (else the model may have
	// been fitted or calibrated on it).
	RunStartedMs int64          `json:"runStartedMs"`
	TestRuns     []string       `json:"testRuns"`
	IsTest       bool           `json:"isTest"`
	Replay       eval.RunReplay `json:"replay"`
}

// ModelReplay predicts run req.Run with model req.ID (eval.ReplayRun on
// the run's serve grid with the model's dataset spec and its conformal
// band). AML_INVALID_ARGUMENT for a run of another line, product or
// recipe, for a model of a static dataset or without artifacts.
func (a *App) ModelReplay(ctx context.Context, p Principal, req ModelReplayRequest) (ModelReplayResponse, error) {
	return run(ctx, a, p, &opModelReplay, req, func(ctx context.Context, p Principal, req ModelReplayRequest) (ModelReplayResponse, error) {
		m, err := a.model(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return ModelReplayResponse{}, err
		}
		// A named run is checked before anything is loaded.
		if req.Run != "" {
			if _, err := a.modelRun(ctx, p, m, req.Run); err != nil {
				return ModelReplayResponse{}, err
			}
		}
		if m.ArtifactsPruned {
			return ModelReplayResponse{}, core.Errorf(core.CodeInvalidArgument, "model %s's artifacts were pruned: it cannot predict", m.ID)
		}
		l, err := shadow.Load(ctx, a.d.Store, a.d.DataDir, m.ID)
		if err != nil {
			return ModelReplayResponse{}, err
		}
		if err := l.RequireDynamic(); err != nil {
			return ModelReplayResponse{}, err
		}
		out := ModelReplayResponse{ModelID: m.ID, TestRuns: []string{}}
		if l.Manifest != nil {
			out.TestRuns = append(out.TestRuns, l.Manifest.Split.Test.RunIDs...)
		}
		id := req.Run
		if id == "" {
			if len(out.TestRuns) == 0 {
				return ModelReplayResponse{}, core.FieldErrorf(core.CodeInvalidArgument, "run", "model %s's dataset has no test run: name a run", m.ID)
			}
			id = out.TestRuns[0]
		}
		r, err := a.modelRun(ctx, p, m, id)
		if err != nil {
			return ModelReplayResponse{}, err
		}
		g, err := dataset.BuildServeGrid(ctx, a.d.Store, l.Dataset, id)
		if err != nil {
			return ModelReplayResponse{}, err
		}
		rp, err := eval.ReplayRun(ctx, l.Predictor, l.Manifest, l.Conformal, g)
		if err != nil {
			return ModelReplayResponse{}, err
		}
		out.Replay = *rp
		out.RunStartedMs = r.StartedMs
		for _, t := range out.TestRuns {
			out.IsTest = out.IsTest || t == id
		}
		return out, nil
	})
}
