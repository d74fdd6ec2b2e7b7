package main

import (
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

// newBenefitCmd is "aml benefit": the benefit study as a platform use
// case (benefit.run, benefit.show, benefit.list), its report kept in the
// data directory for the UI's page (/ui/benefit). On a local data
// directory run waits for the study's end; with --server it starts the
// study on the server (--wait follows it to the end).
func newBenefitCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "benefit", Short: "Benefit studies: one simulated line under four controllers (fixed, per_move, envelope, oracle), kept for the UI"}
	var (
		rr amlapp.BenefitRunRequest
		sr amlapp.BenefitShowRequest
		lr amlapp.BenefitListRequest
	)
	runCmd := opCommand(a, &cobra.Command{Use: "run --line L [--runs N] [--seed S] [--wear] [--material-lots] [--wait]", Short: "Run a benefit study (simulation only; a local data dir waits for its end)", Args: argsExact(0)},
		"benefit.run", "", &rr, func([]string) error {
			if a.remote.server == "" {
				rr.Wait = true // the study lives in this process
			}
			return nil
		})
	f := runCmd.Flags()
	f.StringVar(&rr.Line, "line", "", "the line the study is for (required; it must exist)")
	f.IntVar(&rr.Runs, "runs", 60, "study runs per mode (1..200)")
	f.Uint64Var(&rr.Seed, "seed", 7, "seed of the simulated line")
	f.BoolVar(&rr.Wear, "wear", false, "the unmeasured mould wear keeps growing run by run")
	f.BoolVar(&rr.MaterialLots, "material-lots", false, "every run gets a new material lot")
	f.BoolVar(&rr.Wait, "wait", false, "with --server: answer when the study ends")
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show a benefit study: progress, or its report", Args: argsExact(1)},
		"benefit.show", "", &sr, func(x []string) error { sr.ID = x[0]; return nil })
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List the benefit studies kept, newest first", Args: argsExact(0)},
		"benefit.list", "", &lr, func([]string) error { return nil })
	list.Flags().StringVar(&lr.Line, "line", "", "only studies of this line")
	list.Flags().IntVar(&lr.Limit, "limit", 50, "at most this many (1..200)")
	cmd.AddCommand(runCmd, show, list)
	return cmd
}
