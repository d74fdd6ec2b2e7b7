package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/aml-project/aml/internal/benchident"
	"github.com/spf13/cobra"
)

func newBenchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks against published results"}
	var keep bool
	ident := &cobra.Command{
		Use:   "ident CONFIG.json",
		Short: "Run an identification benchmark (docs/bench-config.md) and print our figures beside the published ones",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := benchident.Load(args[0])
			if err != nil {
				return err
			}
			dir := a.dataDir
			if !keep {
				if dir, err = os.MkdirTemp("", "aml-bench-"); err != nil {
					return err
				}
				defer func() { _ = os.RemoveAll(dir) }() // best effort: a temporary directory
			}
			rep, err := benchident.Run(cmd.Context(), c, dir, func(s string) {
				if !a.jsonOut {
					fmt.Fprintln(a.stderr, s)
				}
			})
			if err != nil {
				return err
			}
			return a.emit(rep, func(w io.Writer) {
				fmt.Fprintf(w, "%s (dataset %s)\n", rep.Name, rep.DatasetID)
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "trainer\toutput\tfree-run RMSE\tfree-run NRMSE\tone-step RMSE\tR²\taccuracy\tseconds\t")
				for _, r := range rep.Results {
					if r.Error != "" {
						fmt.Fprintf(tw, "%s\t%s\terror: %s\t\t\t\t\t%.1f\t\n", r.Trainer, r.Label(), r.Error, r.Seconds)
						continue
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t\n", r.Trainer, r.Label(), f4(r.FreeRunRMSE), f4(r.FreeRunNRMSE), f4(r.OneStepRMSE), f4(r.R2), f4(r.Accuracy), r.Seconds)
				}
				tw.Flush()
				for _, r := range rep.Results {
					if r.FreeRun != "" {
						fmt.Fprintf(w, "%s %s: %s\n", r.Trainer, r.Label(), r.FreeRun)
					}
				}
				if len(rep.Published) > 0 {
					fmt.Fprintln(w, "published:")
					tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					for _, p := range rep.Published {
						fmt.Fprintf(tw, "  %s\t%s\tfree-run RMSE %s\tNRMSE %s\tone-step RMSE %s\tR² %s\taccuracy %s\t%s\n", p.Method, p.Test, f4(p.FreeRunRMSE), f4(p.FreeRunNRMSE), f4(p.OneStepRMSE), f4(p.R2), f4(p.Accuracy), p.Source)
					}
					tw.Flush()
				}
			})
		},
	}
	ident.Flags().BoolVar(&keep, "keep", false, "use --data (not a temporary directory) and keep it")
	cmd.AddCommand(ident)
	return cmd
}

func f4(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f", *p)
}
