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
		Use:   "shadow --model ID [--scene ID] [--max-runs N] [--dry-run]",
		Short: "Compare a model with what the line did on runs that ended after it was made (shadow evidence)",
		Args:  argsExact(0),
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
	cmd.Flags().StringVar(&req.Scene, "scene", "", "scene whose declared unmeasured disturbances correct the predictions")
	return cmd
}

// newTwinCalibrateCmd is "aml twin calibrate": signals, decision, and
// optionally one worker step; "list" shows the requests.
func newTwinCalibrateCmd(a *app) *cobra.Command {
	var req amlapp.CalibrateRequest
	cmd := &cobra.Command{
		Use:   "calibrate --model ID [--scene ID] [--by PERSON] [--run]",
		Short: "Measure a model's recalibration signals and queue a recalibration when the policy says so",
		Args:  argsExact(0),
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
