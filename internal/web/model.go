package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/web/plot"
)

type (
	sceneVar   = contract.SceneVariable
	auditEntry = audit.Entry
)

// modelMetrics is the part of a model's metrics JSON the card shows.
type modelMetrics struct {
	Test      *splitMetrics  `json:"test"`
	Val       *splitMetrics  `json:"val"`
	Conformal *app.Conformal `json:"conformal"`
	Coverage  *struct {
		Target   float64   `json:"target"`
		Measured float64   `json:"measured"`
		PerStep  []float64 `json:"perStep"`
		Windows  int       `json:"testWindows"`
	} `json:"coverage"`
	TrainRuns  int     `json:"trainRuns"`
	ValTestGap float64 `json:"valTestGap"`
}

type splitMetrics struct {
	Split   string `json:"split"`
	Windows int    `json:"windows"`
	Targets []struct {
		Target       string  `json:"target"`
		RMSE         float64 `json:"rmse"`
		NRMSE        float64 `json:"nrmse"`
		OneStepNRMSE float64 `json:"oneStepNrmse"`
		MAE          float64 `json:"mae"`
		R2           float64 `json:"r2"`
		N            int     `json:"n"`
	} `json:"targets"`
	MeanNRMSE float64 `json:"meanNrmse"`
}

// modelPage is the model card: identity and lineage, stage history,
// platform metrics, acceptance gates, the latest twin gate, shadow
// evidence and the predicted vs actual plot on a test run with the
// conformal band.
func (s *server) modelPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	shown, err := s.app.ModelShow(ctx, p, app.ModelRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	m, hist := shown.Model, shown.History
	var met modelMetrics
	if len(m.Metrics) > 0 {
		if err := json.Unmarshal(m.Metrics, &met); err != nil {
			return core.Wrap(core.CodeModelInvalid, err, "model %s metrics", m.ID)
		}
	}
	var gates app.GateReport
	hasGates := len(m.Gates) > 0 && json.Unmarshal(m.Gates, &gates) == nil
	var twinGate *app.TwinGateReport
	var twinGateRec app.GateLatestResponse
	if g, err := s.app.GateLatest(ctx, p, app.GateLatestRequest{Model: m.ID}); err == nil {
		twinGate, twinGateRec = &g.Report, g
	} else if core.CodeOf(err) != core.CodeNotFound {
		return err
	}
	shl, err := s.app.ShadowList(ctx, p, app.ShadowListRequest{Model: m.ID})
	if err != nil {
		return err
	}
	// Flags on bad evidence: shadow runs against the profile of the
	// latest twin gate (without one, the newest profile: shadow.list's
	// Flags and Profile), the measured coverage against its target ± the
	// measurement's tolerance.
	covTol, covOff := math.NaN(), ""
	if c := met.Coverage; c != nil && met.Conformal != nil {
		covTol, covOff = app.CoverageCheck(c.Target, c.Measured, met.Conformal.CalibrationWindows, c.Windows)
	}
	// Conformal half-width and test coverage per horizon step.
	var widths *plot.Chart
	if c := met.Conformal; c != nil && len(c.Widths) > 0 {
		widths = &plot.Chart{Title: fmt.Sprintf("conformal half-width per horizon step (%.0f%%, %s split)", 100*c.Coverage, c.Split), XLabel: "horizon step", YLabel: "half-width", Height: 240}
		for k, t := range c.Targets {
			x, y := make([]float64, len(c.Widths)), make([]float64, len(c.Widths))
			for f := range c.Widths {
				x[f], y[f] = float64(f+1), math.NaN()
				if k < len(c.Widths[f]) {
					y[f] = c.Widths[f][k]
				}
			}
			widths.Series = append(widths.Series, plot.Series{Name: t, X: x, Y: y, Markers: true})
		}
	}
	// Predicted vs actual on a test run.
	var testRuns []string
	var pva *predVsActual
	var pvaErr string
	if ds, err := s.app.DatasetShow(ctx, p, app.DatasetRequest{ID: m.DatasetID}); err == nil && ds.Manifest != nil {
		testRuns = ds.Manifest.Split.Test.RunIDs
	}
	run := r.URL.Query().Get("run")
	if run == "" && len(testRuns) > 0 {
		run = testRuns[0]
	}
	if run != "" && !m.ArtifactsPruned {
		if pva, err = s.predictedVsActual(ctx, &p, m, run); err != nil {
			pvaErr = err.Error()
		}
	}
	// The stage buttons, with the gate result they act on: the failed
	// checks are listed beside them, before the click.
	var failed []string
	for _, c := range gates.Checks {
		if !c.Passed {
			failed = append(failed, c.ID+" "+c.Name)
		}
	}
	status := http.StatusOK
	stageErr, _ := ctx.Value(stageErrKey{}).(*formError)
	if stageErr != nil {
		status = stageErr.Status
	}
	stage := map[string]any{"Can": auth.RoleAllows(p.Role, auth.ActModelStage), "CanProduction": auth.RoleAllows(p.Role, auth.ActPromoteProduction),
		"Failed": failed, "Err": stageErr, "Done": r.URL.Query().Get("done")}
	s.render(w, r, status, "model", &p, map[string]any{"Title": "Model " + m.ID, "M": m, "Stage": stage, "History": hist, "Met": met, "Gates": gates, "HasGates": hasGates,
		"TwinGate": twinGate, "TwinGateRec": twinGateRec, "Shadow": shl.Items, "ShadowProfile": shl.Profile, "CovTol": covTol, "CovOff": covOff, "Widths": widths, "TestRuns": testRuns, "Run": run, "PvA": pva, "PvAErr": pvaErr,
		"IsTest": slices.Contains(testRuns, run)})
	return nil
}

// predVsActual is the predicted vs actual figure of one run.
type predVsActual struct {
	RunID    string
	Charts   []*plot.Chart
	Windows  int
	Coverage []float64 // per target: share of actual values inside the band
	Targets  []string
	Level    float64
	Method   string
}

// predictedVsActual is the model.replay op drawn: one chart per target,
// actual and predicted with the conformal band (cached per model artifact
// and run: a replay is deterministic).
func (s *server) predictedVsActual(ctx context.Context, p *app.Principal, m core.Model, runID string) (*predVsActual, error) {
	key := "pva\x00" + p.Name + "\x00" + m.ID + "\x00" + m.ArtifactHash + "\x00" + runID
	if v, ok := s.cache.get(key); ok {
		return v.(*predVsActual), nil
	}
	resp, err := s.app.ModelReplay(ctx, *p, app.ModelReplayRequest{ID: m.ID, Run: runID})
	if err != nil {
		return nil, err
	}
	r := resp.Replay
	out := &predVsActual{RunID: r.RunID, Windows: r.Windows, Coverage: r.Coverage, Targets: r.Targets, Level: r.Level, Method: r.Method,
		Charts: ReplayCharts(resp)}
	s.cache.put(key, out)
	return out, nil
}

func nanSlice(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}
