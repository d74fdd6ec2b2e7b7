package main

import (
	amlapp "github.com/aml-project/aml/internal/app"
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
	})
	cmd.Flags().StringVar(&req.Model, "model", "", "model id (required)")
	cmd.Flags().IntVar(&req.MaxRuns, "max-runs", 0, "evaluate at most the N most recent eligible runs (default 20)")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "compute without storing")
	return cmd
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
	opCommand(a, cmd, "calibrate", "as", &req, func([]string) error {
		if req.Model == "" {
			return usagef("--model is required")
		}
		req.InProcess = req.Run // in this process (not sent to a server)
		return nil
	})
	cmd.Flags().StringVar(&req.Model, "model", "", "model id (required)")
	cmd.Flags().StringVar(&req.Scene, "scene", "", "scene id (part of the dedup key; default none)")
	asFlag(cmd.Flags(), "who requests (default $USER)")
	cmd.Flags().BoolVar(&req.Run, "run", false, "process the queue now (one worker step)")
	var lr amlapp.CalibrationListRequest
	list := opCommand(a, &cobra.Command{Use: "list [--line L]", Short: "List recalibration requests, newest first", Args: argsExact(0)},
		"calibration.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only requests of this line")
	cmd.AddCommand(list)
	return cmd
}
