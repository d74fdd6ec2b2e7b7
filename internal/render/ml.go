package render

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

func printBuild(w io.Writer, out app.DatasetBuildResponse) {
	d := out.Dataset
	fmt.Fprintf(w, "built dataset %s in %.2fs\n", d.ID, out.Seconds)
	fmt.Fprintf(w, "  sha256   %s\n  windows  train %d, val %d, test %d (from %d runs)\n  size     %.1f MiB at %s\n",
		d.SHA256, d.TrainWindows, d.ValWindows, d.TestWindows, d.Runs, float64(d.Bytes)/(1<<20), d.Path)
	fmt.Fprintf(w, "  lineage  %s\n", lineageText(out.Lineage))
	for _, r := range out.Dropped {
		fmt.Fprintf(w, "  dropped  %s: %s\n", r.RunID, r.Reason)
	}
}

func lineageText(l dataset.Lineage) string {
	s := fmt.Sprintf("verified=%v (%d verified, %d unknown, %d mismatched, %d excluded)", l.LineageVerified, len(l.Verified), len(l.Unknown), len(l.Mismatched), len(l.Excluded))
	if !l.LineageVerified {
		s += ": models from this dataset may not drive optimisation"
	}
	return s
}

func printDatasets(w io.Writer, ds []core.Dataset) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECIPE\tPURPOSE\tTRAIN\tVAL\tTEST\tRUNS\tLINEAGE\tSHA256\tCREATED")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\t%.12s\t%s\n", d.ID, d.RecipeID, d.Purpose, d.TrainWindows, d.ValWindows, d.TestWindows, d.Runs, d.LineageVerified, d.SHA256, d.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d dataset(s)\n", len(ds))
}

func printDatasetVerify(w io.Writer, res dataset.VerifyResult) {
	fmt.Fprintf(w, "dataset %s verified: %d artifact(s), %.1f MiB, sha256 %s\n", res.ID, res.Artifacts, float64(res.Bytes)/(1<<20), res.SHA256)
}

func printReport(w io.Writer, id string, r *dataset.Report) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "dataset %s (%s): windows train %d, val %d, test %d; lineage verified %v\n\n", id, r.Kind, r.Windows.Train, r.Windows.Val, r.Windows.Test, r.LineageVerified)
	fmt.Fprintln(w, "per node, over all train runs (model units):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NODE\tROLE\tUNIT\tCOUNT\tMEAN\tSTD\tMIN\tP05\tP50\tP95\tMAX\t")
	for _, n := range r.Nodes {
		s := n.Summary
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.5g\t%.4g\t%.5g\t%.5g\t%.5g\t%.5g\t%.5g\t\n", n.NodeID, n.Role, n.ModelUnit, s.Count, s.Mean, s.Std, s.Min, s.P05, s.P50, s.P95, s.Max)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncleaning, summed over every used run (samples dropped by rule; grid steps interpolated/missing):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NODE\tRAW\tSTATE\tRANGE\tHAMPEL\tKEPT\tCLEANED%\tINTERP\tMISSING\tMISSING%\t")
	for _, n := range r.Nodes {
		c, al := n.Cleaning, n.Align
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%.2f\t\n", n.NodeID, c.Raw, c.State, c.Range, c.Hampel, c.Kept, 100*n.CleanedRatio, al.Interpolated, al.Missing, 100*n.MissingRatio)
	}
	tw.Flush()
	if len(r.Lags) > 0 {
		fmt.Fprintln(w, "\nlag cross-correlation input → target over train runs (best lag in beats; + = target follows):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "INPUT\tTARGET\tBEST LAG\tCORR\t")
		for _, l := range r.Lags {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t\n", l.Input, l.Target, l.BestLag, l.BestCorr)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nruns:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RUN\tSPLIT\tSTEPS\tMISSING%\tTARGET MEANS")
	for _, run := range r.Runs {
		var tm []string
		for _, t := range run.Targets {
			tm = append(tm, fmt.Sprintf("%s=%.4g", t.NodeID, t.Summary.Mean))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%.2f\t%s\n", run.RunID, run.Split, run.Steps, 100*run.MissingRatio, strings.Join(tm, " "))
	}
	tw.Flush()
	if len(r.Dropped) > 0 {
		fmt.Fprintln(w, "\ndropped runs:")
		for _, x := range r.Dropped {
			fmt.Fprintf(w, "  %s: %s\n", x.RunID, x.Reason)
		}
	}
}

func printDatasetDetail(w io.Writer, out app.DatasetShowResponse) {
	if out.Manifest == nil {
		return
	}
	d, m, refs := out.Dataset, out.Manifest, out.References
	fmt.Fprintf(w, "dataset  %s (%s, %s)\nrecipe   %s / %s / %s\nsha256   %s\ncreated  %s by %s\n", d.ID, m.Kind, d.Purpose, d.LineID, d.ProductID, d.RecipeID, d.SHA256, d.CreatedAt.Format(time.RFC3339), d.CreatedBy)
	if d.Note != "" {
		fmt.Fprintf(w, "note     %s\n", d.Note)
	}
	fmt.Fprintf(w, "beat     %d ms, history %d, horizon %d, stride %d\n", m.BeatMs, m.HistorySteps, m.HorizonSteps, m.Stride)
	fmt.Fprintf(w, "columns  %s\n", strings.Join(m.AllNodes, ", "))
	fmt.Fprintf(w, "controls %s\ntargets  %s\n", strings.Join(m.Controls, ", "), strings.Join(m.Targets, ", "))
	for _, k := range []string{"x", "u", "y", "timestamps", "mask", "grid"} {
		if sh, ok := m.Shapes[k]; ok {
			fmt.Fprintf(w, "  %-10s %v\n", k, sh)
		}
	}
	fmt.Fprintf(w, "split    %s (seed %d): train %d [%s]  val %d [%s]  test %d [%s]\n", m.Split.Mode, m.Split.Seed,
		m.Split.Train.Count, strings.Join(m.Split.Train.RunIDs, " "), m.Split.Val.Count, strings.Join(m.Split.Val.RunIDs, " "), m.Split.Test.Count, strings.Join(m.Split.Test.RunIDs, " "))
	fmt.Fprintf(w, "lineage  %s\n", lineageText(m.Lineage))
	fmt.Fprintf(w, "norm     %s\n", m.Norm.Rule)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  COLUMN\tROLE\tUNIT\tMEAN\tSTD")
	for j, n := range m.Nodes {
		if j < len(m.Norm.X.Mean) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%.6g\t%.6g\n", n.NodeID, n.Role, n.ModelUnit, m.Norm.X.Mean[j], m.Norm.X.Std[j])
		}
	}
	tw.Flush()
	if len(refs) > 0 {
		fmt.Fprintf(w, "used by  %d reference(s)\n", len(refs))
	}
}

func printJob(w io.Writer, j core.Job) {
	fmt.Fprintf(w, "job       %s\nstatus    %s", j.ID, j.Status)
	if j.Stage != "" && j.Stage != string(j.Status) {
		fmt.Fprintf(w, " (%s)", j.Stage)
	}
	fmt.Fprintf(w, "  progress %.0f%%\ndataset   %s (sha256 %.12s…)\ntrainer   %s\nseed      %d\nparams    %s\n", 100*j.Progress, j.DatasetID, j.DatasetSHA256, j.TrainerRef, j.Seed, string(j.Params))
	if j.ParentID != "" {
		fmt.Fprintf(w, "parent    %s\n", j.ParentID)
	}
	if j.ChangeNote != "" {
		fmt.Fprintf(w, "note      %s\n", j.ChangeNote)
	}
	fmt.Fprintf(w, "attempt   %d (retries %d of %d)  timeout %ds  stall %ds\n", j.Attempt, j.RetryCount, j.MaxRetries, j.TimeoutSec, j.StallSec)
	if j.ModelID != "" {
		fmt.Fprintf(w, "model     %s (gates passed: %v)\n", j.ModelID, j.GatePassed)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error     %s: %s\n", j.ErrorCode, j.Error)
	}
	if len(j.Metrics) > 0 {
		var m struct {
			Test struct {
				MeanNRMSE        float64 `json:"meanNrmse"`
				MeanOneStepNRMSE float64 `json:"meanOneStepNrmse"`
			} `json:"test"`
		}
		if json.Unmarshal(j.Metrics, &m) == nil {
			fmt.Fprintf(w, "test      mean NRMSE %.4f (one-step %.4f), computed by the platform\n", m.Test.MeanNRMSE, m.Test.MeanOneStepNRMSE)
		}
	}
}

func printMoved(w io.Writer, m core.Model) { fmt.Fprintf(w, "model %s is now %s\n", m.ID, m.Stage) }

func printJobs(w io.Writer, js []core.Job) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tPROGRESS\tTRAINER\tDATASET\tMODEL\tCREATED")
	for _, j := range js {
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%s\t%s\t%s\t%s\n", j.ID, j.Status, 100*j.Progress, j.TrainerRef, j.DatasetID, j.ModelID, j.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d job(s)\n", len(js))
}

func printModel(w io.Writer, sh app.ModelShowResponse) {
	m, h := sh.Model, sh.History
	fmt.Fprintf(w, "model     %s (%s)\nstage     %s\ntrainer   %s (job %s)\ndataset   %s\nrecipe    %s / %s / %s, purpose %s\n", m.ID, m.ArtifactKind, m.Stage, m.TrainerRef, m.JobID, m.DatasetID, m.LineID, m.ProductID, m.RecipeID, m.Purpose)
	fmt.Fprintf(w, "artifact  %s (sha256 %.16s…)\nlineage   verified=%v", m.ArtifactPath, m.ArtifactHash, m.LineageVerified)
	if !m.LineageVerified {
		fmt.Fprint(w, " — may not drive optimisation")
	}
	fmt.Fprintln(w)
	var met struct {
		Val, Test struct {
			Targets []struct {
				Target                                     string
				RMSE, NRMSE, OneStepRMSE, OneStepNRMSE, R2 float64
			} `json:"targets"`
			MeanNRMSE float64 `json:"meanNrmse"`
		}
		ValTestGap float64 `json:"valTestGap"`
	}
	if json.Unmarshal(m.Metrics, &met) == nil && len(met.Test.Targets) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "test target\tRMSE\tNRMSE\tone-step RMSE\tone-step NRMSE\tR²\t")
		for _, t := range met.Test.Targets {
			fmt.Fprintf(tw, "%s\t%.5g\t%.4f\t%.5g\t%.4f\t%.4f\t\n", t.Target, t.RMSE, t.NRMSE, t.OneStepRMSE, t.OneStepNRMSE, t.R2)
		}
		tw.Flush()
		fmt.Fprintf(w, "mean NRMSE val %.4f test %.4f (gap %.3f)\n", met.Val.MeanNRMSE, met.Test.MeanNRMSE, met.ValTestGap)
	}
	var unc struct {
		Conformal *struct {
			Coverage           float64 `json:"coverage"`
			CalibrationWindows int     `json:"calibrationWindows"`
		} `json:"conformal"`
		Coverage *struct {
			Measured    float64 `json:"measured"`
			TestWindows int     `json:"testWindows"`
		} `json:"coverage"`
		ConformalSkipped string `json:"conformalSkipped"`
		OOD              *struct {
			Threshold float64 `json:"threshold"`
			Shrinkage float64 `json:"shrinkage"`
		} `json:"ood"`
	}
	if json.Unmarshal(m.Metrics, &unc) == nil {
		if unc.Conformal != nil && unc.Coverage != nil {
			fmt.Fprintf(w, "intervals split conformal, target coverage %.2f from %d val windows; measured on %d test windows: %.4f\n", unc.Conformal.Coverage, unc.Conformal.CalibrationWindows, unc.Coverage.TestWindows, unc.Coverage.Measured)
		} else if unc.ConformalSkipped != "" {
			fmt.Fprintf(w, "intervals not calibrated: %s\n", unc.ConformalSkipped)
		}
		if unc.OOD != nil {
			fmt.Fprintf(w, "OOD       Mahalanobis (Ledoit–Wolf shrinkage %.3g), threshold %.3g from the train windows\n", unc.OOD.Shrinkage, unc.OOD.Threshold)
		}
	}
	printStability(w, m.Metrics)
	var g struct {
		Profile string
		Version int
		Passed  bool
		Checks  []struct {
			ID, Name, Op, Detail string
			Value, Threshold     float64
			Passed               bool
		}
	}
	if json.Unmarshal(m.Gates, &g) == nil && g.Profile != "" {
		fmt.Fprintf(w, "gates     %s v%d: passed=%v\n", g.Profile, g.Version, g.Passed)
		for _, c := range g.Checks {
			mark := "pass"
			if !c.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "  %-4s %-4s %-40s %.4g %s %.4g %s\n", mark, c.ID, c.Name, c.Value, c.Op, c.Threshold, c.Detail)
		}
	}
	printTraining(w, sh.Training)
	for _, c := range h {
		fmt.Fprintf(w, "history   %s %s → %s by %s %s\n", c.At.Format(time.RFC3339), c.From, c.To, c.By, strings.TrimSpace(c.Reason))
	}
}

// printStability prints the free run and the poles of the metrics'
// stability evidence (eval.Stability), when present.
func printStability(w io.Writer, metrics json.RawMessage) {
	var st struct {
		Stability *struct {
			FreeRun *struct {
				Split            string   `json:"split"`
				MeanNRMSE        *float64 `json:"meanNrmse"`
				InitSteps        int      `json:"initSteps"`
				Segments         int      `json:"segments"`
				SkippedSegments  int      `json:"skippedSegments"`
				NotScored        int      `json:"notScored"`
				Diverged         bool     `json:"diverged"`
				DivergedSegments int      `json:"divergedSegments"`
				Divergence       *struct {
					RunID   string `json:"runId"`
					Segment int    `json:"segment"`
					Step    int    `json:"step"`
					Target  string `json:"target"`
					Reason  string `json:"reason"`
				} `json:"divergence"`
			} `json:"freeRun"`
			FreeRunError   string   `json:"freeRunError"`
			Linear         bool     `json:"linear"`
			Poles          int      `json:"poles"`
			MaxPoleModulus *float64 `json:"maxPoleModulus"`
		} `json:"stability"`
	}
	if json.Unmarshal(metrics, &st) != nil || st.Stability == nil {
		return
	}
	s := st.Stability
	switch fr := s.FreeRun; {
	case s.FreeRunError != "":
		fmt.Fprintf(w, "free run  failed: %s\n", s.FreeRunError)
	case fr != nil:
		nr := "-"
		if fr.MeanNRMSE != nil {
			nr = fmt.Sprintf("%.4f", *fr.MeanNRMSE)
		}
		fmt.Fprintf(w, "free run  %s NRMSE %s, free run over %d segment(s) (%d skipped, %d samples not scored; %d initialisation steps each)\n",
			fr.Split, nr, fr.Segments, fr.SkippedSegments, fr.NotScored, fr.InitSteps)
		if fr.Diverged && fr.Divergence != nil {
			d := fr.Divergence
			fmt.Fprintf(w, "          DIVERGED in %d segment(s), first run %s, segment %d, step %d, target %s: %s\n", fr.DivergedSegments, d.RunID, d.Segment, d.Step, d.Target, d.Reason)
		}
	}
	if s.Linear && s.MaxPoleModulus != nil {
		verdict := "stable"
		if *s.MaxPoleModulus >= 1 {
			verdict = "UNSTABLE"
		}
		fmt.Fprintf(w, "poles     %d, largest |pole| %.4f (%s)\n", s.Poles, *s.MaxPoleModulus, verdict)
	}
}

// printTraining prints the structure selection of a linear model's
// artifact (one_step@1, linear_state_space@1): how it was chosen, the
// chosen structure, every candidate with its score (skipped ones with the
// reason) and the estimated input delays with the score of every
// candidate delay.
func printTraining(w io.Writer, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var t struct {
		Selection string `json:"selection"`
		Chosen    string `json:"chosen"`
		Scores    []struct {
			NA        *int            `json:"na"`
			NB        json.RawMessage `json:"nb"`
			NK        json.RawMessage `json:"nk"`
			Lambda    *float64        `json:"lambda"`
			Order     int             `json:"order"`
			BlockRows int             `json:"blockRows"`
			Folds     int             `json:"folds"`
			Value     *float64        `json:"meanNrmse"`
			Error     string          `json:"error"`
			Skipped   string          `json:"skipped"`
		} `json:"scores"`
		Delays *struct {
			Method    string   `json:"method"`
			Inputs    []string `json:"inputs"`
			Estimated []int    `json:"estimated"`
			Scores    []struct {
				Input string   `json:"input"`
				NK    int      `json:"nk"`
				Value *float64 `json:"meanNrmse"`
			} `json:"scores"`
		} `json:"delays"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return
	}
	if d := t.Delays; d != nil {
		parts := make([]string, 0, len(d.Estimated))
		for i, v := range d.Estimated {
			name := fmt.Sprint(i)
			if i < len(d.Inputs) {
				name = d.Inputs[i]
			}
			parts = append(parts, fmt.Sprintf("%s %d", name, v))
		}
		fmt.Fprintf(w, "delays    %s (estimated: %s)\n", strings.Join(parts, ", "), d.Method)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "input\tnk\tmean NRMSE\t")
		for _, s := range d.Scores {
			fmt.Fprintf(tw, "%s\t%d\t%s\t\n", s.Input, s.NK, fmt4(s.Value))
		}
		tw.Flush()
	}
	if t.Selection == "" && len(t.Scores) == 0 {
		return
	}
	if t.Selection != "" {
		fmt.Fprintf(w, "selection %s\n", t.Selection)
	}
	if t.Chosen != "" {
		fmt.Fprintf(w, "chosen    %s\n", t.Chosen)
	}
	if len(t.Scores) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "candidate\tmean NRMSE\tnote")
	for _, s := range t.Scores {
		var c string
		if s.NA != nil {
			lam := 0.0
			if s.Lambda != nil {
				lam = *s.Lambda
			}
			c = fmt.Sprintf("na=%d nb=%s nk=%s λ=%g", *s.NA, s.NB, s.NK, lam)
		} else {
			c = fmt.Sprintf("order %d", s.Order)
			if s.BlockRows > 0 {
				c += fmt.Sprintf(" (i=%d)", s.BlockRows)
			}
		}
		note := ""
		switch {
		case s.Skipped != "":
			note = "skipped: " + s.Skipped
		case s.Error != "":
			note = "error: " + s.Error
		case s.Folds > 0:
			note = fmt.Sprintf("%d-fold CV", s.Folds)
		}
		v := fmt4(s.Value)
		if s.Skipped != "" {
			v = "–"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c, v, note)
	}
	tw.Flush()
}

func fmt4(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g", *p)
}

func printQueued(w io.Writer, j core.Job) {
	fmt.Fprintf(w, "queued job %s (%s on %s)\nrun 'aml worker' (or 'aml serve') to execute it, or submit with --wait\n", j.ID, j.TrainerRef, j.DatasetID)
}

func printCancel(w io.Writer, j core.Job) {
	if j.Status == core.JobCancelled {
		fmt.Fprintf(w, "cancelled job %s\n", j.ID)
	} else {
		fmt.Fprintf(w, "cancel requested for running job %s; its worker stops it within a second\n", j.ID)
	}
}

func printModels(w io.Writer, ms []core.Model) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSTAGE\tGATES\tTRAINER\tRECIPE\tPURPOSE\tLINEAGE\tCREATED")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%v\t%s\n", m.ID, m.Stage, m.GatePassed, m.TrainerRef, m.RecipeID, m.Purpose, m.LineageVerified, m.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d model(s)\n", len(ms))
}

func printCompare(w io.Writer, r app.ModelCompareResponse) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tMODEL\tTRAINER\tSTAGE\tGATES\tTEST NRMSE\tONE-STEP\tCOVERAGE\tNOTE")
	for _, e := range r.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\n", e.Rank, e.ModelID, e.Trainer, e.Stage, e.GatePassed, fmt4(e.TestNRMSE), fmt4(e.TestOneStep), fmt4(e.Coverage), e.ChangeNote)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d of %d model(s), ranked by %s\n", len(r.Entries), r.Total, r.RankedBy)
	if len(r.Validation) == 0 {
		return
	}
	fmt.Fprintf(w, "\nfit %% on run %s (100 = perfect, 0 = the run's mean):\n", validationRun(r.Validation))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tTRAINER\tTARGET\tFREE RUN\tK-STEP\tSEGMENTS")
	for _, v := range r.Validation {
		if v.Fit == nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t%s\n", v.ModelID, v.Trainer, v.Error)
			continue
		}
		f := v.Fit
		for k, kt := range f.KStep {
			free := "-"
			if k < len(f.FreeRun) {
				free = pct(f.FreeRun[k].FitPct)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s (k=%d)\t%d (%d skipped)\n", v.ModelID, v.Trainer, kt.Target, free, pct(kt.FitPct), f.K, f.Segments, f.Skipped)
		}
	}
	_ = tw.Flush()
	for _, v := range r.Validation {
		if v.Fit == nil || (len(v.Fit.Residuals) == 0 && len(v.Fit.Steps) == 0) {
			continue
		}
		fmt.Fprintf(w, "\nmodel %s:\n", v.ModelID)
		for _, rv := range v.Fit.Residuals {
			verdict := "not white"
			if rv.White {
				verdict = "white"
			}
			var dep []string
			for i, ok := range rv.Independent {
				if !ok && i < len(rv.CrossOutside) {
					dep = append(dep, fmt.Sprintf("control %d (%.0f %% of lags)", i+1, 100*rv.CrossOutside[i]))
				}
			}
			indep := "independent of every control"
			if len(dep) > 0 {
				indep = "correlated with " + strings.Join(dep, ", ")
			}
			fmt.Fprintf(w, "  residuals of %s (one step ahead, %d values): %s (%.0f %% of lags 1..%d outside the 99 %% bound), %s\n", rv.Target, rv.N, verdict, 100*rv.AutoOutside, rv.MaxLag, indep)
		}
		if len(v.Fit.Steps) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  STEP\tGAIN\tDEAD TIME\tTIME CONSTANT\tSETTLING")
			for _, st := range v.Fit.Steps {
				fmt.Fprintf(tw, "  %s → %s\t%.4g\t%s\t%s\t%s\n", st.Control, st.Target, st.Gain, secs(st.DeadTime), secs(st.TimeConstant), secs(st.SettlingTime))
			}
			_ = tw.Flush()
		}
	}
}

func secs(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.4g s", v)
}

func validationRun(vs []app.ModelFit) string {
	for _, v := range vs {
		if v.Fit != nil {
			return v.Fit.RunID
		}
	}
	return "?"
}

func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", v)
}

func printPrediction(wr io.Writer, res app.ModelPredictResponse) {
	fmt.Fprintf(wr, "model %s on run %s from %s (%s)\n", res.Model, res.Run, fmtMs(res.From), time.Duration(res.BeatMs)*time.Millisecond)
	tw := tabwriter.NewWriter(wr, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "time\t")
	for _, t := range res.Targets {
		fmt.Fprintf(tw, "%s\tinterval\tmeasured\t", t)
	}
	fmt.Fprintln(tw)
	for _, pr := range res.Steps {
		fmt.Fprintf(tw, "%s\t", fmtMs(pr.TsMs))
		for k := range res.Targets {
			iv := "-"
			if len(pr.Lo) > k {
				iv = fmt.Sprintf("[%.4g, %.4g]", pr.Lo[k], pr.Hi[k])
			}
			ms := "-"
			if pr.Measured[k] != nil {
				ms = fmt.Sprintf("%.5g", *pr.Measured[k])
			}
			fmt.Fprintf(tw, "%.5g\t%s\t%s\t", pr.Pred[k], iv, ms)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
