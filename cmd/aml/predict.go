package main

import (
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

func newPredictCmd(a *app) *cobra.Command {
	req := amlapp.ModelPredictRequest{Steps: 1}
	cmd := opCommand(a, &cobra.Command{
		Use:   "predict ID --run R --from T [--steps K]",
		Short: "Predict K steps of a run from time T with a model (same cleaning and alignment as training)",
		Args:  argsExact(1),
	}, "model.predict", "", &req, func(args []string) error {
		if req.ID = args[0]; req.Steps < 1 {
			return usagef("--steps must be ≥ 1")
		}
		return nil
	})
	cmd.Flags().StringVar(&req.Run, "run", "", "run id (required)")
	cmd.Flags().Var(&req.From, "from", "time of the first predicted step (epoch ms or RFC 3339; required)")
	cmd.Flags().IntVar(&req.Steps, "steps", 1, "steps to predict (≤ the dataset's horizon)")
	_ = cmd.MarkFlagRequired("run")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
