package main

import (
	"fmt"
	"io"
	"time"

	"github.com/aml-project/aml/internal/retention"
	"github.com/spf13/cobra"
)

func newRetentionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "retention", Short: "Remove old unreferenced datasets, retired models' artifacts and failed jobs' files"}
	var p retention.Policy
	run := &cobra.Command{
		Use:   "run",
		Short: "Apply the retention policy (oldest items first; use --dry-run to see what would go)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			rep, err := retention.Run(cmd.Context(), s, a.dataDir, p, time.Now())
			if err != nil {
				return err
			}
			return a.emit(rep, func(w io.Writer) { printRetention(w, rep) })
		},
	}
	fl := run.Flags()
	fl.DurationVar(&p.DatasetAge, "dataset-age", 90*24*time.Hour, "remove unreferenced datasets older than this (0 = never)")
	fl.DurationVar(&p.ModelAge, "model-age", 30*24*time.Hour, "remove artifacts of models retired longer ago than this (0 = never)")
	fl.DurationVar(&p.JobAge, "job-age", 14*24*time.Hour, "remove files of failed/cancelled/timed-out/interrupted jobs older than this (0 = never)")
	fl.BoolVar(&p.DryRun, "dry-run", false, "only report")
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
