package main

import (
	"fmt"
	"io"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/spf13/cobra"
)

func newSimCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "Simulated production lines for demos and tests"}
	cfg := sim.DefaultInjectionConfig()
	var csvDir, start string
	inj := &cobra.Command{
		Use:   "injection --runs N --seed S [--csv DIR]",
		Short: "Simulate an injection-moulding line and write its runs to the store",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if start != "" {
				ms, err := parseTime("start", start)
				if err != nil {
					return err
				}
				cfg.StartMs = *ms
			}
			out, err := sim.NewStream(cfg) // validated before the store is opened
			if err != nil {
				return err
			}
			s, err := a.openBackend()
			if err != nil {
				return err
			}
			bar := a.newProgress(int64(cfg.Runs), "writing runs", false)
			t0 := time.Now()
			sum, files, err := out.Write(cmd.Context(), s, sim.StreamOptions{CSVDir: csvDir, Progress: func(done, total int) { bar.set(int64(done)) }})
			bar.finish()
			if err != nil {
				return err
			}
			runIDs := out.RunIDs()
			res := map[string]any{
				"line": out.Line.ID, "product": out.Product.ID, "recipe": out.Recipe.ID,
				"recipeVersion": sum.RecipeVersion, "contentHash": sum.ContentHash,
				"runs": runIDs, "runsCreated": sum.RunsCreated, "samples": sum.Samples, "nodes": sum.Nodes,
				"seed": cfg.Seed, "csvFiles": files, "seconds": time.Since(t0).Seconds(),
			}
			if files == nil {
				res["csvFiles"] = []string{}
			}
			return a.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "simulated %d run(s) of %s / %s / %s v%d (seed %d)\n", len(runIDs), out.Line.ID, out.Product.ID, out.Recipe.ID, sum.RecipeVersion, cfg.Seed)
				fmt.Fprintf(w, "wrote %d samples of %d nodes in %.2fs (%d new run(s))\n", sum.Samples, sum.Nodes, time.Since(t0).Seconds(), sum.RunsCreated)
				fmt.Fprintf(w, "runs: %s … %s\n", runIDs[0], runIDs[len(runIDs)-1])
				if len(files) > 0 {
					fmt.Fprintf(w, "exported %d CSV file(s) to %s\n", len(files), csvDir)
				}
			})
		},
	}
	fl := inj.Flags()
	fl.IntVar(&cfg.Runs, "runs", sim.DefaultRuns, "number of runs")
	fl.Uint64Var(&cfg.Seed, "seed", 1, "random seed (same seed, same data)")
	fl.Int64Var(&cfg.StepMs, "step-ms", sim.DefaultStepMs, "sample period in milliseconds")
	fl.DurationVar(&cfg.RunDuration, "duration", sim.DefaultRunDuration, "length of each run")
	fl.DurationVar(&cfg.GapBetweenRuns, "gap", sim.DefaultGap, "pause between runs")
	fl.StringVar(&start, "start", "", "start of the first run (RFC 3339 or epoch ms; default 2026-01-05T06:00:00Z)")
	fl.StringVar(&cfg.LineID, "line", sim.DefaultLineID, "line id")
	fl.StringVar(&cfg.ProductID, "product", "", "product id (default "+sim.DefaultProductID+" on line "+sim.DefaultLineID+", "+sim.DefaultProductID+"-LINE on another)")
	fl.StringVar(&cfg.RecipeID, "recipe", "", "recipe id (default "+sim.DefaultRecipeID+" on line "+sim.DefaultLineID+", "+sim.DefaultRecipeID+"-LINE on another)")
	fl.StringVar(&csvDir, "csv", "", "also export each run as CSV into this directory")
	cmd.AddCommand(inj, newSimServeOPCUACmd(a))
	return cmd
}
