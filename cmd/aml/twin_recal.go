package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/spf13/cobra"
)

// newTwinShadowCmd is "aml twin shadow --model ID": collect and store the
// model's shadow evidence.
func newTwinShadowCmd(a *app) *cobra.Command {
	var req amlapp.ShadowCollectRequest
	cmd := &cobra.Command{
		Use:   "shadow --model ID [--max-runs N] [--dry-run]",
		Short: "Compare a model with what the line did on runs that ended after it was made (shadow evidence)",
		Long: `Find the ended runs of the model's line, product and recipe that ended after
the model was created and are not in its dataset; clean and align each with
the dataset's own spec; predict its windows (and simulate the whole run when
the model can) and compare with what the line actually did: NRMSE per
target, coverage of the model's conformal band, share of windows outside the
training envelope, ensemble spread. One row per model and run is stored
(unless --dry-run); promotion of a twin model to production requires it.`,
		Args: argsExact(0),
	}
	opCommand(a, cmd, "shadow.collect", "", &req, func([]string) error {
		if req.Model == "" {
			return usagef("--model is required")
		}
		return nil
	}, printShadow)
	cmd.Flags().StringVar(&req.Model, "model", "", "model id (required)")
	cmd.Flags().IntVar(&req.MaxRuns, "max-runs", 0, "evaluate at most the N most recent eligible runs (default 20)")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "compute without storing")
	return cmd
}

func fnum(v shadow.Num, format string) string {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return "-"
	}
	return fmt.Sprintf(format, float64(v))
}

func printShadow(w io.Writer, ev *shadow.Evidence) {
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

// newTwinCalibrateCmd is "aml twin calibrate": signals, decision, and
// optionally one worker step; "list" shows the requests.
func newTwinCalibrateCmd(a *app) *cobra.Command {
	var req amlapp.CalibrateRequest
	cmd := &cobra.Command{
		Use:   "calibrate --model ID [--scene ID] [--by PERSON] [--run]",
		Short: "Measure a model's recalibration signals and queue a recalibration when the policy says so",
		Long: `Compute the recalibration signals of the model from the store (new ended runs
and rows outside its dataset, drift of recent windows against the training
envelope, recent prediction error from refreshed shadow evidence), print them
and the decision of policy twin-calibration-v1 (QUEUED,
TRIGGER_THRESHOLD_NOT_REACHED or ACTIVE_OR_COOLDOWN). With --run, one worker
step follows: settle finished requests, claim the oldest queued one, rebuild
the dataset with the new runs and train a new candidate with the model's
trainer and params (never promoted) — in this process, or with --server by
the server's workers.`,
		Args: argsExact(0),
	}
	opCommand(a, cmd, "calibrate", "by", &req, func([]string) error {
		if req.Model == "" {
			return usagef("--model is required")
		}
		req.InProcess = req.Run // in this process (not sent to a server)
		return nil
	}, printCalibrate)
	cmd.Flags().StringVar(&req.Model, "model", "", "model id (required)")
	cmd.Flags().StringVar(&req.Scene, "scene", "", "scene id (part of the dedup key; default none)")
	cmd.Flags().String("by", "", "who requests (default $USER)")
	cmd.Flags().BoolVar(&req.Run, "run", false, "process the queue now (one worker step)")
	var lr amlapp.CalibrationListRequest
	list := listCommand(a, &cobra.Command{Use: "list [--line L]", Short: "List recalibration requests, newest first", Args: argsExact(0)},
		"calibration.list", &lr, nil, printCalibrations)
	list.Flags().StringVar(&lr.Line, "line", "", "only requests of this line")
	cmd.AddCommand(list)
	return cmd
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printCalibrate(w io.Writer, res amlapp.CalibrateResponse) {
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
