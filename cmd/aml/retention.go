package main

import (
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

func newRetentionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "retention", Short: "Remove old unreferenced datasets, retired models' artifacts and failed jobs' files"}
	day := amlapp.Duration(24 * time.Hour)
	req := amlapp.RetentionRequest{DatasetAge: 90 * day, ModelAge: 30 * day, JobAge: 14 * day}
	run := opCommand(a, &cobra.Command{
		Use:   "run",
		Short: "Apply the retention policy (oldest items first; use --dry-run to see what would go)",
		Args:  argsExact(0),
	}, "retention.apply", "", &req, nil)
	fl := run.Flags()
	fl.Var(&req.DatasetAge, "dataset-age", "remove unreferenced datasets older than this (0 = never)")
	fl.Var(&req.ModelAge, "model-age", "remove artifacts of models retired longer ago than this (0 = never)")
	fl.Var(&req.JobAge, "job-age", "remove files of failed/cancelled/timed-out/interrupted jobs older than this (0 = never)")
	fl.BoolVar(&req.DryRun, "dry-run", false, "only report")
	cmd.AddCommand(run)
	return cmd
}
