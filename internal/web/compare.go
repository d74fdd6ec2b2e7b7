package web

import (
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/web/plot"
)

// The models table and the comparison on a run: adapters over the
// application's model.compare (the leaderboard, and with a run and models
// its validation view: each model's free-run fit on that run) and
// dataset.list / dataset.report (which runs a dataset's models can be
// compared on).

// modelsPage is every model in the caller's scope with its platform
// metrics (model.compare, ranked), optionally those of one dataset or
// stage, in a table the browser sorts (static/sorttable.js); with a
// dataset, a checkbox per model picks the ones to compare on a run.
func (s *server) modelsPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	q := r.URL.Query()
	dsID, stage := q.Get("dataset"), q.Get("stage")
	res, err := s.app.ModelCompare(ctx, p, app.ModelCompareRequest{Dataset: dsID, Stage: stage, Limit: app.MaxCompareLimit})
	if err != nil {
		return err
	}
	ds, err := s.app.DatasetList(ctx, p, app.DatasetListRequest{})
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Models", "Models": res.Entries, "Total": res.Total, "RankedBy": res.RankedBy, "Datasets": ds.Items, "Dataset": dsID, "Stage": stage}
	if dsID != "" {
		runs, err := s.datasetRuns(r, p, dsID)
		if err != nil {
			return err
		}
		data["Runs"] = runs
		data["Title"] = "Models of dataset " + dsID
	}
	s.render(w, r, http.StatusOK, "models", &p, data)
	return nil
}

// splitRun is a dataset run with its split, test runs first.
type splitRun struct{ ID, Split string }

func (s *server) datasetRuns(r *http.Request, p auth.Principal, id string) ([]splitRun, error) {
	rep, err := s.app.DatasetReport(r.Context(), p, app.DatasetRequest{ID: id})
	if err != nil {
		return nil, err
	}
	order := map[string]int{"test": 0, "val": 1, "train": 2}
	var out []splitRun
	for _, run := range rep.Runs {
		out = append(out, splitRun{run.RunID, run.Split})
	}
	slices.SortStableFunc(out, func(a, b splitRun) int { return order[a.Split] - order[b.Split] })
	return out, nil
}

// compareFit is one model's row of the comparison: fit % per target.
type compareFit struct {
	app.ModelFit
	FreeRun, KStep map[string]float64
}

// comparePage overlays the chosen models of a dataset on one run: the
// application's validation view (model.compare with run and models), the
// free-run fit % and k-step fit % per target, and per target the measured
// series with every model's free-run simulation.
func (s *server) comparePage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	q := r.URL.Query()
	dsID, runID := q.Get("dataset"), q.Get("run")
	models := compactVals(q["model"])
	if dsID == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "dataset", "choose a dataset")
	}
	if len(models) < 1 {
		return core.FieldErrorf(core.CodeInvalidArgument, "model", "tick at least one model to compare")
	}
	if runID == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "run", "choose a run to compare the models on")
	}
	res, err := s.app.ModelCompare(ctx, p, app.ModelCompareRequest{Dataset: dsID, Run: runID, Models: models, Limit: app.MaxCompareLimit})
	if err != nil {
		return err
	}
	var targets []string
	var rows []compareFit
	charts := map[string]*plot.Chart{}
	for _, f := range res.Validation {
		row := compareFit{ModelFit: f, FreeRun: map[string]float64{}, KStep: map[string]float64{}}
		if f.Fit != nil {
			for _, t := range f.Fit.FreeRun {
				row.FreeRun[t.Target] = t.FitPct
				if !slices.Contains(targets, t.Target) {
					targets = append(targets, t.Target)
				}
			}
			for _, t := range f.Fit.KStep {
				row.KStep[t.Target] = t.FitPct
				if !slices.Contains(targets, t.Target) {
					targets = append(targets, t.Target)
				}
			}
			for k, sim := range f.Fit.Simulated {
				if k >= len(f.Fit.FreeRun) {
					break
				}
				tgt := f.Fit.FreeRun[k].Target
				c := charts[tgt]
				if c == nil {
					c = &plot.Chart{Title: tgt + " on " + runID + ": measured and free-run simulations", XLabel: "time since run start", XUnit: "min", YLabel: tgt}
					charts[tgt] = c
					if k < len(f.Fit.Measured) {
						c.Series = append(c.Series, plot.Series{Name: "measured", X: beatX(len(f.Fit.Measured[k]), f.Fit.BeatUs), Y: f.Fit.Measured[k], Color: "#000000"})
					}
				}
				c.Series = append(c.Series, plot.Series{Name: fmt.Sprintf("%s·%s fit %.1f%%", f.Trainer, f.ModelID[max(0, len(f.ModelID)-6):], row.FreeRun[tgt]), X: beatX(len(sim), f.Fit.BeatUs), Y: sim})
			}
		}
		rows = append(rows, row)
	}
	var plots []*plot.Chart
	for _, t := range targets {
		if c := charts[t]; c != nil {
			plots = append(plots, c)
		}
	}
	runs, err := s.datasetRuns(r, p, dsID)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "compare", &p, map[string]any{"Title": "Compare models on " + runID, "Dataset": dsID, "Run": runID, "Runs": runs,
		"Rows": rows, "Targets": targets, "Charts": plots, "Models": models})
	return nil
}

// beatX is the x of n grid steps beatMs apart, in minutes.
func beatX(n int, beatUs int64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(int64(i)*beatUs) / 6e7
	}
	return x
}

// fitCell is a fit % for a table cell ("–" when not measured).
func fitCell(m map[string]float64, t string) string {
	v, ok := m[t]
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", v)
}
