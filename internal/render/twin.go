package render

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

func printScenes(w io.Writer, l []app.SceneSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENE\tVERSION\tLINE\tSTATUS\tHASH")
	for _, s := range l {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.16s…\n", s.SceneID, s.SceneVersion, s.LineID, s.Status, s.Hash)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d scene(s)\n", len(l))
}

func printSceneFrozen(w io.Writer, r app.SceneSummary) {
	fmt.Fprintf(w, "scene %s version %s frozen by %s at %s\nhash %s\n", r.SceneID, r.SceneVersion, r.FrozenBy, r.FrozenAt, r.Hash)
}

func printScene(w io.Writer, r app.SceneShowResponse) {
	if r.Scene == nil {
		return
	}
	c := r.Scene
	fmt.Fprintf(w, "scene %s version %s  line %s", c.SceneID, c.SceneVersion, c.LineID)
	if c.ProductID != "" {
		fmt.Fprintf(w, "  product %s", c.ProductID)
	}
	if c.RecipeID != "" {
		fmt.Fprintf(w, "  recipe %s", c.RecipeID)
	}
	fmt.Fprintf(w, "\nstatus %s", c.Status)
	if c.Status == contract.SceneFrozen {
		fmt.Fprintf(w, " (by %s at %s)", c.FrozenBy, c.FrozenAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "\nhash %s\ncreated %s by %s\n", r.Hash, c.CreatedAt.UTC().Format(time.RFC3339), c.CreatedBy)
	fmt.Fprintf(w, "phases: %s\nphysics profile: %s\n", strings.Join(c.Phases, ", "), c.PhysicsProfileID)
	if len(c.ObjectiveProfileIDs) > 0 {
		fmt.Fprintf(w, "objective profiles: %s\n", strings.Join(c.ObjectiveProfileIDs, ", "))
	}
	fmt.Fprintf(w, "controls (%d):\n", len(c.Controls))
	for _, v := range c.Controls {
		fmt.Fprintf(w, "  %-24s [%s, %s] %s  maxStep %s  %s\n", v.ID, fmtOpt(v.Min), fmtOpt(v.Max), v.Unit, fmtOpt(v.MaxStep), v.PhysicalMeaning)
	}
	vars := func(title string, vs []contract.SceneVariable) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(w, "%s (%d):\n", title, len(vs))
		for _, v := range vs {
			fmt.Fprintf(w, "  %-24s %-11s [%s, %s] %s  %s\n", v.ID, v.Role, fmtOpt(v.Min), fmtOpt(v.Max), v.Unit, v.PhysicalMeaning)
		}
	}
	vars("observations", c.Observations)
	vars("states", c.States)
	vars("disturbances", c.Disturbances)
	vars("guards", c.Guards)
	if len(c.Constraints) > 0 {
		fmt.Fprintf(w, "constraints (%d):\n", len(c.Constraints))
		for _, k := range c.Constraints {
			var lim string
			switch k.Kind {
			case contract.KindHardRange:
				lim = fmt.Sprintf("[%s, %s]", fmtOpt(k.Min), fmtOpt(k.Max))
			case contract.KindMaxDelta:
				lim = "maxDelta " + fmtOpt(k.MaxDelta)
			case contract.KindRate:
				lim = "maxRatePerSec " + fmtOpt(k.MaxRatePerSec)
			case contract.KindCustom:
				lim = k.Expression
			}
			fmt.Fprintf(w, "  %-24s %-10s %-20s %s\n", k.ID, k.Kind, k.Variable, lim)
		}
	}
	p := c.WritePolicy
	fmt.Fprintf(w, "write policy: min node interval %gs, min line action interval %gs, max actions per run %d\n",
		p.MinNodeIntervalSec, p.MinLineActionIntervalSec, p.MaxActionsPerRun)
	for _, v := range c.Controls {
		if d, ok := p.MaxDeltaPerAction[v.ID]; ok {
			fmt.Fprintf(w, "  max delta per action %-24s %g\n", v.ID, d)
		}
	}
}

func printScenePut(w io.Writer, r app.SceneSummary) {
	fmt.Fprintf(w, "scene %s version %s stored as draft (line %s)\nhash %s\n", r.SceneID, r.SceneVersion, r.LineID, r.Hash)
	if r.Objective != "" {
		fmt.Fprintf(w, "objective %s stored with it (hash %s)\n", r.Objective, r.ObjectiveHash)
	}
}

// printSceneDraft writes the drafted scene file as YAML, its notes as the
// header comments: what `aml twin scene init` prints, to edit and store.
func printSceneDraft(w io.Writer, r app.SceneDraftResponse) {
	if r.File.Scene == nil {
		return
	}
	header := []string{fmt.Sprintf("Scene file drafted from model %s (docs/scene-file.md). Review every value, then:", r.Model),
		"  aml twin scene check FILE && aml twin scene put FILE && aml twin scene freeze ID --version V --expect-hash H"}
	if len(r.Notes) > 0 {
		header = append(header, "", "To decide before freezing:")
		for _, n := range r.Notes {
			header = append(header, "- "+n)
		}
	}
	b, err := contract.MarshalSceneFile(&r.File, header)
	if err != nil {
		fmt.Fprintf(w, "# the draft cannot be written as YAML: %v\n", err)
		return
	}
	_, _ = w.Write(b)
}

func printSceneCheck(w io.Writer, r app.SceneCheckResponse) {
	fmt.Fprintf(w, "scene %s version %s: no problem found\n", r.SceneID, r.SceneVersion)
	for _, c := range r.Checked {
		fmt.Fprintf(w, "  checked: %s\n", c)
	}
	if r.Model == "" {
		fmt.Fprintln(w, "  not checked against a model (give --model, or twinModelId in the objective)")
	}
}

func printGate(w io.Writer, r *gate.Result) {
	if r == nil {
		return
	}
	verdict := "FAILED"
	if r.Report.Passed {
		verdict = "PASSED"
	}
	fmt.Fprintf(w, "twin gate %s for model %s: %s (profile %s, stage %s, tuning mode %s)\n", r.GateEvalID, r.ModelID, verdict, r.Report.Profile, r.Report.Stage, r.TuningMode)
	for _, c := range r.Report.Checks {
		fmt.Fprintf(w, "  %s %-20s %s\n", okMark(c.Passed), c.ID, c.Detail)
	}
	fmt.Fprintf(w, "%d gate trials", len(r.Trials))
	if n := len(r.NoRecommendation); n > 0 {
		fmt.Fprintf(w, ", %d points without a passing candidate (not trials)", n)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, ", %d snapshots could not be taken (first: %s)", len(r.Failures), r.Failures[0].Error)
	}
	fmt.Fprintln(w)
}

func fmtControls(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%.4g", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// okMark is the mark of a check in the printers.
func okMark(ok bool) string {
	if ok {
		return "ok  "
	}
	return "FAIL"
}

func printTrial(w io.Writer, rec contract.TrialRecord, d *engine.TrialDetail) {
	if rec.Trial == nil {
		return
	}
	t := rec.Trial
	verdict := "PASSED"
	if !rec.Passed {
		verdict = "REJECTED " + rec.RejectCode
	}
	fmt.Fprintf(w, "trial %s  %s  (model %s, snapshot %s; never executed)\n", t.TrialID, verdict, t.ModelID, t.SnapshotID)
	if len(t.CandidateControlTrajectory) > 0 {
		fmt.Fprintf(w, "candidate (step 0): %s\n", fmtControls(t.CandidateControlTrajectory[0]))
	}
	bc := t.BaselineComparison
	fmt.Fprintf(w, "cost %.4g vs holding %.4g: improvement %.4g\n", bc.CandidateCost, bc.BaselineCost, bc.Improvement)
	fmt.Fprintf(w, "uncertainty: coverage %.3f, max std %.4g, %d ensemble members; OOD distance %.3g accepted %v %s\n",
		t.Uncertainty.Coverage, t.Uncertainty.MaxStd, t.Uncertainty.EnsembleSize, t.OutOfDistribution.Distance, t.OutOfDistribution.Accepted, t.OutOfDistribution.RejectCode)
	for _, c := range t.ConstraintResults {
		fmt.Fprintf(w, "  %s %-14s %s\n", okMark(c.Passed), c.ID, c.Detail)
	}
	for i, r := range t.Rejections {
		if i == 5 {
			fmt.Fprintf(w, "  … %d more findings (--json lists them all)\n", len(t.Rejections)-i)
			break
		}
		fmt.Fprintf(w, "  rejected at step %d: %s: %s\n", r.Step, r.Field, r.Message)
	}
	if d != nil {
		for _, tr := range d.Traces {
			if tr.Kind != "output" || len(tr.Mean) == 0 {
				continue
			}
			n := len(tr.Mean) - 1
			fmt.Fprintf(w, "  %-12s end of horizon %.4g [%.4g, %.4g]  (holding: %.4g)%s\n", tr.ID, tr.Mean[n], tr.Lower[n], tr.Upper[n], tr.Baseline[n],
				map[bool]string{true: "", false: "  physics only"}[tr.Calibrated])
		}
	}
}

func fnum(v shadow.Num, format string) string {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return "-"
	}
	return fmt.Sprintf(format, float64(v))
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printShadow(w io.Writer, ev *shadow.Evidence) {
	if ev == nil {
		return
	}
	fmt.Fprintf(w, "model %s (dataset %s, created %s): %d eligible run(s), %d evaluated", ev.ModelID, ev.DatasetID, ev.ModelCreatedAt.UTC().Format(time.RFC3339), ev.Eligible, len(ev.Runs))
	if !ev.Stored {
		fmt.Fprint(w, " (dry run: not stored)")
	}
	fmt.Fprintln(w)
	if len(ev.Runs) == 0 {
		fmt.Fprintln(w, "no run ended after the model outside its dataset: no shadow evidence yet")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\twindows\tNRMSE\tcoverage\tOOD rejected\tfree-run NRMSE\tspread/width\tnote")
	for _, r := range ev.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Windows, fnum(r.NRMSE, "%.4f"), fnum(r.Coverage, "%.3f"), fnum(r.OODRejected, "%.3f"),
			fnum(r.FreeRunNRMSE, "%.4f"), fnum(r.SpreadRatio, "%.3f"), r.Skipped)
	}
	tw.Flush()
	s := ev.Summary
	fmt.Fprintf(w, "summary: %d scored run(s), %d windows; coverage %s (target %s); OOD rejected %s; mean run NRMSE %s; window RMSE",
		s.Scored, s.Windows, fnum(s.Coverage, "%.3f"), fnum(s.CoverageTarget, "%.2f"), fnum(s.OODRejected, "%.3f"), fnum(s.NRMSE, "%.4f"))
	for k, v := range s.WindowRMSE {
		if k < len(ev.Targets) {
			fmt.Fprintf(w, " %s=%s", ev.Targets[k], fnum(v, "%.4g"))
		}
	}
	fmt.Fprintln(w)
}

func printCalibrate(w io.Writer, res app.CalibrateResponse) {
	if res.Decision == nil {
		return
	}
	d := res.Decision
	s := d.Signal
	f := func(p *float64, max float64) string {
		if p == nil {
			return "undefined"
		}
		return fmt.Sprintf("%.3f (threshold > %.2f)", *p, max)
	}
	fmt.Fprintf(w, "model %s, line %s, recipe %s, scene %s\n", s.ModelID, s.LineID, s.RecipeID, s.SceneID)
	fmt.Fprintf(w, "new runs    %d (threshold %d) %v\n", s.NewRuns, res.Policy.MinNewRuns, s.NewRunIDs)
	fmt.Fprintf(w, "new rows    %d (threshold %d)\n", s.NewRows, res.Policy.MinNewRows)
	fmt.Fprintf(w, "drift       %s over %d window(s)\n", f(s.DriftScore, res.Policy.DriftScoreMax), s.DriftWindows)
	fmt.Fprintf(w, "error       %s over %d shadow run(s)\n", f(s.ErrorScore, res.Policy.ErrorScoreMax), s.ShadowRuns)
	fmt.Fprintf(w, "decision    %s", d.Reason)
	if d.RequestID != "" {
		fmt.Fprintf(w, " (request %s, %s", d.RequestID, d.State)
		if d.CooldownUntil != nil {
			fmt.Fprintf(w, " until %s", d.CooldownUntil.Format(time.RFC3339))
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintf(w, "; key %s\n", d.DedupKey)
	if st := res.Step; st != nil {
		for _, r := range st.Settled {
			fmt.Fprintf(w, "settled     %s → %s %s\n", r.RequestID, r.State, r.Error)
		}
		if c := st.Claimed; c != nil {
			fmt.Fprintf(w, "processed   %s → %s; dataset %s, job %s, new candidate %s %s\n", c.RequestID, c.State, dash(c.DatasetID), dash(c.JobID), dash(c.NewModelID), c.Error)
		} else {
			fmt.Fprintf(w, "processed   nothing (%d running, max %d)\n", st.Running, res.Policy.MaxConcurrentRuns)
		}
	}
}

func printCalibrations(w io.Writer, rs []contract.CalibrationRequest) {
	if len(rs) == 0 {
		fmt.Fprintln(w, "no recalibration requests")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "request\tstate\tmodel\tnew model\tjob\tcreated\tcooldown until\terror")
	for _, r := range rs {
		cd := "-"
		if r.CooldownUntil != nil {
			cd = r.CooldownUntil.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RequestID, r.State, r.ModelID, dash(r.NewModelID), dash(r.JobID), r.CreatedAt.Format(time.RFC3339), cd, r.Error)
	}
	tw.Flush()
}

func printSnapshots(w io.Writer, l []contract.SnapshotInfo) {
	if len(l) == 0 {
		fmt.Fprintln(w, "no snapshots")
		return
	}
	fmt.Fprintf(w, "%-40s %-28s %-20s %-24s %s\n", "SNAPSHOT", "SCENE", "LINE", "CAPTURED", "STRICT")
	for _, i := range l {
		fmt.Fprintf(w, "%-40s %-28s %-20s %-24s %v\n", i.SnapshotID, twinstore.SceneSubject(i.SceneID, i.SceneVersion), i.LineID,
			i.CapturedAt.Format(time.RFC3339), i.Strict)
	}
}

func printSnapshot(w io.Writer, s *contract.TwinSnapshot, strict bool) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "snapshot %s  scene %s@%s  line %s\n", s.SnapshotID, s.SceneID, s.SceneVersion, s.LineID)
	fmt.Fprintf(w, "captured %s  phase %s  strict %v\n", s.CapturedAt.UTC().Format(time.RFC3339Nano), s.Phase, strict)
	if s.DAQWatermark > 0 {
		fmt.Fprintf(w, "newest sample %s\n", time.UnixMilli(s.DAQWatermark).UTC().Format(time.RFC3339Nano))
	}
	q := s.DataQuality
	fmt.Fprintf(w, "fresh %v  completeness %.3f", q.Fresh, q.Completeness)
	if len(q.StaleNodeIDs) > 0 {
		fmt.Fprintf(w, "  stale/missing: %s", strings.Join(q.StaleNodeIDs, ", "))
	}
	fmt.Fprintf(w, "\nestimator %s\n", s.EstimatorVersion)
	if s.Window != nil {
		fmt.Fprintf(w, "window %d × %d ms ending %s, %d node(s)", s.Window.Steps, s.Window.BeatMs,
			time.UnixMilli(s.Window.EndMs).UTC().Format(time.RFC3339), len(s.Window.Values))
		if s.Window.RunID != "" {
			fmt.Fprintf(w, ", run %s", s.Window.RunID)
		}
		fmt.Fprintln(w)
	}
	if s.BindingSnapshotHash != "" {
		fmt.Fprintf(w, "binding %s\n", s.BindingSnapshotHash)
	}
	fmt.Fprintf(w, "hash %s\n", s.SnapshotHash)
}

func printSnapshotValues(w io.Writer, s *contract.TwinSnapshot) {
	group := func(title string, m map[string]float64) {
		if len(m) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(w, "  %-28s %.6g\n", k, m[k])
		}
	}
	group("controls", s.ControlValues)
	group("states", s.StateEstimate)
	group("disturbances", s.Disturbances)
}

func printSnapshotVars(w io.Writer, r *snapshot.Report) {
	fmt.Fprintf(w, "%-28s %-12s %-26s %14s %10s  %s\n", "VARIABLE", "ROLE", "NODE", "VALUE", "AGE", "STATUS")
	for _, v := range r.Variables {
		val, age, node := "-", "-", dash(v.NodeID)
		if v.Value != nil {
			val = fmt.Sprintf("%.6g", *v.Value)
		}
		if v.TsMs != 0 {
			age = (time.Duration(v.AgeMs) * time.Millisecond).String()
		}
		status := v.Status
		var extra []string
		if v.HeldBack > 0 {
			extra = append(extra, fmt.Sprintf("%d held back", v.HeldBack))
		}
		if d := v.Clean.State + v.Clean.Range + v.Clean.Hampel; d > 0 {
			extra = append(extra, fmt.Sprintf("%d cleaned", d))
		}
		if v.Future > 0 {
			extra = append(extra, fmt.Sprintf("%d future", v.Future))
		}
		if len(extra) > 0 {
			status += " (" + strings.Join(extra, ", ") + ")"
		}
		fmt.Fprintf(w, "%-28s %-12s %-26s %14s %10s  %s\n", v.VariableID, v.Role, node, val, age, status)
	}
	fmt.Fprintf(w, "bound %d, fresh %d; window %d/%d cells filled; future samples %d\n", r.Bound, r.Fresh, r.WindowFilled, r.WindowCells, r.FutureSamples)
}

func printTrials(w io.Writer, l []contract.TrialRecord) {
	table(w, "TRIAL\tLINE\tPURPOSE\tMODEL\tSNAPSHOT\tPASSED\tREJECT\tIMPROVEMENT", len(l), "trial(s)", func(row func(...any)) {
		for _, r := range l {
			t := r.Trial
			if t == nil {
				t = &contract.VirtualTrial{}
			}
			row(t.TrialID, r.LineID, r.Purpose, t.ModelID, t.SnapshotID, r.Passed, dash(r.RejectCode), fmt.Sprintf("%.4g", r.Improvement))
		}
	})
}

func printShadowRuns(w io.Writer, resp app.ShadowListResponse) {
	l := resp.Items
	table(w, "MODEL\tRUN\tSTEPS\tNRMSE\tCOVERAGE\tSTORED", len(l), "shadow run(s)", func(row func(...any)) {
		for _, r := range l {
			row(r.ModelID, r.RunID, r.Steps, fmt.Sprintf("%.4f", r.NRMSE), fmt.Sprintf("%.3f", r.Coverage), r.CreatedAt.UTC().Format(time.RFC3339))
		}
	})
}

func printGateLatest(w io.Writer, r app.GateLatestResponse) {
	verdict := "FAILED " + strings.Join(r.Report.RejectCodes, ",")
	if r.Passed {
		verdict = "passed"
	}
	fmt.Fprintf(w, "twin gate %s for model %s: %s (profile %s, stage %s, tuning mode %s; by %s at %s)\n",
		r.GateEvalID, r.ModelID, verdict, r.Report.Profile, r.Report.Stage, r.TuningMode, r.CreatedBy, r.CreatedAt.UTC().Format(time.RFC3339))
	for _, c := range r.Report.Checks {
		fmt.Fprintf(w, "  %s %-20s %s\n", okMark(c.Passed), c.ID, c.Detail)
	}
}

func printReference(w io.Writer, r app.ModelReferenceResponse) {
	fmt.Fprintf(w, "model %s (%s) on run %s from %s, %d step(s) of %d ms; targets %s\n",
		r.Model, r.Stage, r.Run, fmtMs(r.From), len(r.Steps), r.BeatMs, strings.Join(r.Targets, ", "))
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	if len(r.Steps) == 0 {
		return
	}
	last := r.Steps[len(r.Steps)-1]
	for i, t := range r.Targets {
		fmt.Fprintf(w, "  %-24s end of horizon: baseline %.4g", t, last.Baseline[i])
		if i < len(last.Proposed) {
			fmt.Fprintf(w, ", proposed %.4g", last.Proposed[i])
		}
		if i < len(last.Lo) && i < len(last.Hi) {
			fmt.Fprintf(w, " [%.4g, %.4g]", last.Lo[i], last.Hi[i])
		}
		if i < len(last.Measured) && last.Measured[i] != nil {
			fmt.Fprintf(w, ", measured %.4g", *last.Measured[i])
		}
		fmt.Fprintln(w)
	}
}

func printReplay(w io.Writer, r app.ModelReplayResponse) {
	rp := &r.Replay
	split := "not in the model's test split: it may have been fitted or calibrated on it"
	if r.IsTest {
		split = "test split: never used for fitting or calibration"
	}
	fmt.Fprintf(w, "model %s on run %s (%s): %d windows; %s\n", r.ModelID, rp.RunID, split, rp.Windows, rp.Method)
	band := "no conformal band"
	if !math.IsNaN(rp.Level) {
		band = fmt.Sprintf("%.0f%% split-conformal band", 100*rp.Level)
	}
	for k, t := range rp.Targets {
		var se float64
		n := 0
		for st := 0; k < len(rp.Actual) && k < len(rp.Predicted) && st < min(len(rp.Actual[k]), len(rp.Predicted[k])); st++ {
			if d := rp.Predicted[k][st] - rp.Actual[k][st]; !math.IsNaN(d) && !math.IsInf(d, 0) {
				se += d * d
				n++
			}
		}
		unit := ""
		if k < len(rp.Units) && rp.Units[k] != "" {
			unit = " " + rp.Units[k]
		}
		rmse, cov := "–", "–"
		if n > 0 {
			rmse = fmt.Sprintf("%.4g%s", math.Sqrt(se/float64(n)), unit)
		}
		if k < len(rp.Coverage) && !math.IsNaN(rp.Coverage[k]) {
			cov = fmt.Sprintf("%.1f %%", 100*rp.Coverage[k])
		}
		fmt.Fprintf(w, "  %-24s RMSE %s over %d steps; %s of actual values inside the %s\n", t, rmse, n, cov, band)
	}
}
