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
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/aml-project/aml/internal/web/plot"
)

type (
	sceneVar   = contract.SceneVariable
	auditEntry = audit.Entry
)

// modelMetrics is the part of a model's metrics JSON the card shows.
type modelMetrics struct {
	Test      *splitMetrics   `json:"test"`
	Val       *splitMetrics   `json:"val"`
	Conformal *eval.Conformal `json:"conformal"`
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
	var gates eval.GateReport
	hasGates := len(m.Gates) > 0 && json.Unmarshal(m.Gates, &gates) == nil
	var twinGate *eval.TwinGateReport
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
	sh := shl.Items
	// Flags on bad evidence: shadow runs against the profile of the
	// latest twin gate (without one, the newest profile), the measured
	// coverage against its target ± the measurement's tolerance.
	gp, err := s.app.GateProfiles(ctx, p, app.GateProfilesRequest{})
	if err != nil {
		return err
	}
	var prof eval.TwinProfile
	if n := len(gp.Twin); n > 0 {
		prof = gp.Twin[n-1]
	}
	for _, tp := range gp.Twin {
		if twinGate != nil && tp.ID == twinGate.Profile {
			prof = tp
		}
	}
	shadowRows := make([]shadowRow, 0, len(sh))
	for _, rec := range sh {
		shadowRows = append(shadowRows, shadowRow{rec, app.ShadowFlags(rec.NRMSE, rec.Coverage, prof)})
	}
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
		if pva, err = s.predictedVsActual(ctx, m, run); err != nil {
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
		"TwinGate": twinGate, "TwinGateRec": twinGateRec, "Shadow": shadowRows, "ShadowProfile": prof.ID, "CovTol": covTol, "CovOff": covOff, "Widths": widths, "TestRuns": testRuns, "Run": run, "PvA": pva, "PvAErr": pvaErr,
		"IsTest": slices.Contains(testRuns, run)})
	return nil
}

// shadowRow is one shadow run's evidence with what is wrong with it.
type shadowRow struct {
	contract.ShadowRecord
	Flags []string
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

// predictedVsActual predicts run runID the way the platform evaluated the
// model: consecutive windows of the run (stride F, so their futures tile
// the run), each predicted from its H measured history rows and its
// future controls, shown against what the line did, with the split-
// conformal band ŷ ± W[f][k] of each window's horizon step f. That is the
// band whose coverage the evaluation measured on the test split, so the
// plot shows the calibrated claim, not a free-run extrapolation.
func (s *server) predictedVsActual(ctx context.Context, m core.Model, runID string) (*predVsActual, error) {
	key := "pva\x00" + m.ID + "\x00" + m.ArtifactHash + "\x00" + runID
	if v, ok := s.cache.get(key); ok {
		return v.(*predVsActual), nil
	}
	l, err := shadow.Load(ctx, s.d.Store, s.d.DataDir, m.ID)
	if err != nil {
		return nil, err
	}
	if err := l.RequireDynamic(); err != nil {
		return nil, err
	}
	run, err := s.d.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if run.LineID != m.LineID || run.RecipeID != m.RecipeID || run.ProductID != m.ProductID {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "run %s is not of the model's line, product and recipe", runID)
	}
	g, err := dataset.BuildServeGrid(ctx, s.d.Store, l.Dataset, runID)
	if err != nil {
		return nil, err
	}
	man := l.Manifest
	dm := man.Dims()
	H, F, nAll, nT := dm.H, dm.F, dm.NAll, dm.YCols
	col := map[string]int{}
	for j, n := range g.Nodes {
		col[n] = j
	}
	ci, ti := make([]int, len(man.Controls)), make([]int, nT)
	for i, n := range man.Controls {
		ci[i] = col[n]
	}
	for i, n := range man.Targets {
		ti[i] = col[n]
	}
	bad := make([]int, g.Steps+1)
	for k := 0; k < g.Steps; k++ {
		bad[k+1] = bad[k]
		for _, v := range g.Vals[k*nAll : (k+1)*nAll] {
			if !finite(float64(v)) {
				bad[k+1]++
				break
			}
		}
	}
	var starts []int
	for k := H; k+F <= g.Steps; k += F {
		if bad[k+F]-bad[k-H] == 0 {
			starts = append(starts, k)
		}
	}
	out := &predVsActual{RunID: runID, Windows: len(starts), Targets: man.Targets, Level: math.NaN(),
		Method: fmt.Sprintf("windows of H=%d measured steps predict the next F=%d steps from their controls; consecutive windows tile the run", H, F)}
	pred := make([][]float64, nT)
	actual := make([][]float64, nT)
	lo := make([][]float64, nT)
	hi := make([][]float64, nT)
	for k := 0; k < nT; k++ {
		pred[k], actual[k], lo[k], hi[k] = nanSlice(g.Steps), nanSlice(g.Steps), nanSlice(g.Steps), nanSlice(g.Steps)
		for st := 0; st < g.Steps; st++ {
			actual[k][st] = float64(g.Vals[st*nAll+ti[k]])
		}
	}
	const batch = 256
	for b0 := 0; b0 < len(starts); b0 += batch {
		b1 := min(len(starts), b0+batch)
		n := b1 - b0
		x := make([]float32, 0, n*H*nAll)
		u := make([]float32, 0, n*F*max(1, len(ci)))
		for _, st := range starts[b0:b1] {
			x = append(x, g.Vals[(st-H)*nAll:st*nAll]...)
			for f := 0; f < F; f++ {
				row := g.Vals[(st+f)*nAll : (st+f+1)*nAll]
				if len(ci) == 0 {
					u = append(u, 0)
				}
				for _, j := range ci {
					u = append(u, row[j])
				}
			}
		}
		yp, err := l.Predictor.PredictBatch(ctx, x, u, n)
		if err != nil {
			return nil, err
		}
		if len(yp) != n*F*nT {
			return nil, core.Errorf(core.CodeModelInvalid, "the model returned %d values for %d windows, need %d", len(yp), n, n*F*nT)
		}
		for wi, st := range starts[b0:b1] {
			for f := 0; f < F; f++ {
				for k := 0; k < nT; k++ {
					v := float64(yp[(wi*F+f)*nT+k])
					pred[k][st+f] = v
					if l.Conformal != nil {
						wd := l.Conformal.Widths[f][k]
						lo[k][st+f], hi[k][st+f] = v-wd, v+wd
					}
				}
			}
		}
	}
	if l.Conformal != nil {
		out.Level = l.Conformal.Coverage
	}
	units := map[string]string{}
	for _, n := range man.Nodes {
		units[n.NodeID] = n.ModelUnit
	}
	xs := make([]float64, g.Steps)
	for st := range xs {
		xs[st] = float64(g.StartUs+int64(st)*g.BeatUs-run.StartedMs*1000) / 6e7
	}
	for k, t := range man.Targets {
		in, cnt := 0, 0
		for st := 0; st < g.Steps; st++ {
			if finite(pred[k][st]) && finite(actual[k][st]) && finite(lo[k][st]) {
				cnt++
				if actual[k][st] >= lo[k][st] && actual[k][st] <= hi[k][st] {
					in++
				}
			}
		}
		cov := math.NaN()
		if cnt > 0 {
			cov = float64(in) / float64(cnt)
		}
		out.Coverage = append(out.Coverage, cov)
		c := &plot.Chart{Title: fmt.Sprintf("%s on run %s: predicted vs actual", t, runID), XLabel: "time since run start", XUnit: "min", YLabel: t, YUnit: units[t],
			Series: []plot.Series{{Name: "actual", X: xs, Y: actual[k], Color: "#000000"}, {Name: "predicted", X: xs, Y: pred[k], Color: "#0072b2"}}}
		if l.Conformal != nil {
			c.Bands = []plot.Band{{Name: fmt.Sprintf("%.0f%% conformal band", 100*l.Conformal.Coverage), X: xs, Lo: lo[k], Hi: hi[k], Color: "#0072b2"}}
		}
		out.Charts = append(out.Charts, c)
	}
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
