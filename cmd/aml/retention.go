package main

import (
	"fmt"
	"io"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/retention"
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
	}, "retention.apply", "", &req, nil, printRetention)
	fl := run.Flags()
	fl.Var(&req.DatasetAge, "dataset-age", "remove unreferenced datasets older than this (0 = never)")
	fl.Var(&req.ModelAge, "model-age", "remove artifacts of models retired longer ago than this (0 = never)")
	fl.Var(&req.JobAge, "job-age", "remove files of failed/cancelled/timed-out/interrupted jobs older than this (0 = never)")
	fl.BoolVar(&req.DryRun, "dry-run", false, "only report")
	cmd.AddCommand(run)
	return cmd
}

func printRetention(w io.Writer, rep retention.Report) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s %d dataset(s), %d retired model artifact set(s), %d job dir(s): %.1f MiB\n", verb, len(rep.Datasets), len(rep.ModelArtifacts), len(rep.JobDirs), float64(rep.Bytes)/(1<<20))
	if len(rep.SkippedInUse) > 0 {
		fmt.Fprintf(w, "kept %d old dataset(s) still used by jobs or models\n", len(rep.SkippedInUse))
	}
	if c := rep.SharedCollected; c != nil {
		fmt.Fprintf(w, "shared artifact store: collected %d unreferenced file(s), %d chunk(s), %.1f MiB\n", c.Blobs, c.Chunks, float64(c.Bytes)/(1<<20))
	}
}
