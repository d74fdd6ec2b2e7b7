package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/recal"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/spf13/cobra"
)

// newTwinShadowCmd is "aml twin shadow --model ID": collect and store the
// model's shadow evidence.
func newTwinShadowCmd(a *app) *cobra.Command {
	var modelID string
	var maxRuns int
	var dry bool
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelID == "" {
				return usagef("--model is required")
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			ev, err := shadow.Collect(cmd.Context(), s, a.dataDir, modelID, shadow.Options{MaxRuns: maxRuns, DryRun: dry})
			if err != nil {
				return err
			}
			return a.emit(ev, func(w io.Writer) { printShadow(w, ev) })
		},
	}
	cmd.Flags().StringVar(&modelID, "model", "", "model id (required)")
	cmd.Flags().IntVar(&maxRuns, "max-runs", 0, "evaluate at most the N most recent eligible runs (default 20)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "compute without storing")
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

// calibrateResult is the --json output of "aml twin calibrate".
type calibrateResult struct {
	Decision *recal.Decision `json:"decision"`
	Policy   recal.Policy    `json:"policy"`
	Step     *recal.Step     `json:"step,omitempty"`
}

// newTwinCalibrateCmd is "aml twin calibrate": signals, decision, and
// optionally one worker step; "list" shows the requests.
func newTwinCalibrateCmd(a *app) *cobra.Command {
	var modelID, scene, by string
	var runNow bool
	cmd := &cobra.Command{
		Use:   "calibrate --model ID [--scene ID] [--by PERSON] [--run]",
		Short: "Measure a model's recalibration signals and queue a recalibration when the policy says so",
		Long: `Compute the recalibration signals of the model from the store (new ended runs
and rows outside its dataset, drift of recent windows against the training
envelope, recent prediction error from refreshed shadow evidence), print them
and the decision of policy twin-calibration-v1 (QUEUED,
TRIGGER_THRESHOLD_NOT_REACHED or ACTIVE_OR_COOLDOWN). With --run, one worker
step follows in this process: settle finished requests, claim the oldest
queued one, rebuild the dataset with the new runs and train a new candidate
with the model's trainer and params (never promoted).`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelID == "" {
				return usagef("--model is required")
			}
			if by == "" {
				by = os.Getenv("USER")
			}
			if by == "" {
				by = "cli"
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			p := recal.DefaultPolicy()
			sig, err := recal.ComputeSignals(ctx, s, a.dataDir, modelID, scene, recal.SignalOptions{})
			if err != nil {
				return err
			}
			d, err := recal.Request(ctx, s, *sig, p, by)
			if err != nil {
				return err
			}
			res := calibrateResult{Decision: d, Policy: p}
			if runNow {
				r, _, _, err := a.services(ctx, false, 1)
				if err != nil {
					return err
				}
				if res.Step, err = recal.RunNext(ctx, s, r, recal.RunOptions{DataDir: a.dataDir, MaxConcurrent: p.MaxConcurrentRuns, RunJob: true}); err != nil {
					return err
				}
			}
			return a.emit(res, func(w io.Writer) { printCalibrate(w, res) })
		},
	}
	cmd.Flags().StringVar(&modelID, "model", "", "model id (required)")
	cmd.Flags().StringVar(&scene, "scene", "", "scene id (part of the dedup key; default none)")
	cmd.Flags().StringVar(&by, "by", "", "who requests (default $USER)")
	cmd.Flags().BoolVar(&runNow, "run", false, "process the queue now (one worker step; trains in this process)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List recalibration requests, newest first",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			rs, err := recal.List(cmd.Context(), s, time.Now())
			if err != nil {
				return err
			}
			if rs == nil {
				rs = []twinstore.CalibrationRequest{}
			}
			return a.emit(rs, func(w io.Writer) { printCalibrations(w, rs) })
		},
	}
	cmd.AddCommand(list)
	return cmd
}

func recalDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printCalibrate(w io.Writer, res calibrateResult) {
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
			fmt.Fprintf(w, "processed   %s → %s; dataset %s, job %s, new candidate %s %s\n", c.RequestID, c.State, recalDash(c.DatasetID), recalDash(c.JobID), recalDash(c.NewModelID), c.Error)
		} else {
			fmt.Fprintf(w, "processed   nothing (%d running, max %d)\n", st.Running, res.Policy.MaxConcurrentRuns)
		}
	}
}

func printCalibrations(w io.Writer, rs []twinstore.CalibrationRequest) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RequestID, r.State, r.ModelID, recalDash(r.NewModelID), recalDash(r.JobID), r.CreatedAt.Format(time.RFC3339), cd, r.Error)
	}
	tw.Flush()
}
