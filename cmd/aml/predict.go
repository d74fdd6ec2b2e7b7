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
		Long: `Rebuild the model's input window at time T of run R with the exact code that
built its training data (the dataset's spec: unit contracts, state, range and
Hampel filters, grid alignment, interpolation), check the model artifact's
hash, and predict the next K steps (K ≤ the dataset's horizon) with the run's
actual future controls. Conformal intervals are shown when the model was
calibrated at evaluation; measured values are shown where the run has them.`,
		Args: argsExact(1),
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
