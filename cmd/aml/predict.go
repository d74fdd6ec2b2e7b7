package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

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
	}, printPrediction)
	cmd.Flags().StringVar(&req.Run, "run", "", "run id (required)")
	cmd.Flags().Var(&req.From, "from", "time of the first predicted step (epoch ms or RFC 3339; required)")
	cmd.Flags().IntVar(&req.Steps, "steps", 1, "steps to predict (≤ the dataset's horizon)")
	_ = cmd.MarkFlagRequired("run")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func printPrediction(wr io.Writer, res amlapp.ModelPredictResponse) {
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
