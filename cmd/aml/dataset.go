package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/spf13/cobra"
)

func newDatasetCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "dataset", Short: "Build, inspect, verify and delete training datasets"}
	var (
		br       = amlapp.DatasetBuildRequest{MaxWindows: dataset.DefaultMaxWindows, MaxBytesMiB: int(dataset.DefaultMaxBytes >> 20)}
		specPath string
	)
	build := opCommand(a, &cobra.Command{
		Use:   "build --spec FILE",
		Short: "Build a dataset from a spec (see docs/dataset-format.md)",
		Long: `Read the spec's runs from the store, clean (state filter, range filter,
time-windowed Hampel), align to the beat grid, window, split and normalise
them, write the files, hash them and register the dataset. Nothing is
registered unless every file was written. Quotas: --max-windows and
--max-bytes-mib (refused with AML_QUOTA_EXCEEDED before anything is written).`,
		Args: argsExact(0),
	}, "dataset.build", "", &br, func([]string) error {
		b, err := os.ReadFile(specPath)
		if err != nil {
			return usagef("--spec: %v", err)
		}
		spec, err := dataset.ParseSpec(b) // its errors name the spec's fields precisely
		if err != nil {
			return err
		}
		br.Spec = *spec
		return nil
	}, printBuild)
	build.Flags().StringVar(&specPath, "spec", "", "dataset spec JSON file (required)")
	_ = build.MarkFlagRequired("spec")
	build.Flags().IntVar(&br.MaxWindows, "max-windows", br.MaxWindows, "refuse to build more windows (rows) than this")
	build.Flags().IntVar(&br.MaxBytesMiB, "max-bytes-mib", br.MaxBytesMiB, "refuse to build a dataset larger than this many MiB")

	var lr amlapp.DatasetListRequest
	list := listCommand(a, &cobra.Command{Use: "list", Short: "List datasets", Args: argsExact(0)}, "dataset.list", &lr, nil, printDatasets)
	list.Flags().StringVar(&lr.Line, "line", "", "only datasets of this line")
	list.Flags().StringVar(&lr.Product, "product", "", "only datasets of this product")
	list.Flags().StringVar(&lr.Recipe, "recipe", "", "only datasets of this recipe")

	var r amlapp.DatasetRequest
	one := func(use, short string) *cobra.Command {
		return &cobra.Command{Use: use + " ID", Short: short, Args: argsExact(1)}
	}
	cmd.AddCommand(build, list,
		opCommand(a, one("show", "Show a dataset: shapes, split, normalisation, lineage"), "dataset.show", "", &r, arg0(&r.ID), printDatasetDetail),
		opCommand(a, one("verify", "Recompute a dataset's hash from its files (AML_DATASET_TAMPERED on any change)"), "dataset.verify", "", &r, arg0(&r.ID), printDatasetVerify),
		opCommand(a, one("report", "Print a dataset's report: per-node statistics, cleaning counts, lags, dropped runs"), "dataset.report", "", &r, arg0(&r.ID),
			func(w io.Writer, rep *dataset.Report) { printReport(w, r.ID, rep) }),
		opCommand(a, one("delete", "Delete a dataset (refused while a job or model references it)"), "dataset.delete", "", &r, arg0(&r.ID),
			func(w io.Writer, d amlapp.DeletedResponse) { fmt.Fprintf(w, "deleted dataset %s\n", d.Deleted) }))
	return cmd
}

func printDatasetDetail(w io.Writer, out amlapp.DatasetShowResponse) {
	d, m, refs := out.Dataset, out.Manifest, out.References
	fmt.Fprintf(w, "dataset  %s (%s, %s)\nrecipe   %s / %s / %s\nsha256   %s\ncreated  %s by %s\n", d.ID, m.Kind, d.Purpose, d.LineID, d.ProductID, d.RecipeID, d.SHA256, d.CreatedAt.Format(time.RFC3339), d.CreatedBy)
	if d.Note != "" {
		fmt.Fprintf(w, "note     %s\n", d.Note)
	}
	fmt.Fprintf(w, "beat     %d ms, history %d, horizon %d, stride %d\n", m.BeatMs, m.HistorySteps, m.HorizonSteps, m.Stride)
	fmt.Fprintf(w, "columns  %s\n", strings.Join(m.AllNodes, ", "))
	fmt.Fprintf(w, "controls %s\ntargets  %s\n", strings.Join(m.Controls, ", "), strings.Join(m.Targets, ", "))
	for _, k := range []string{"x", "u", "y", "timestamps", "mask", "grid"} {
		if sh, ok := m.Shapes[k]; ok {
			fmt.Fprintf(w, "  %-10s %v\n", k, sh)
		}
	}
	fmt.Fprintf(w, "split    %s (seed %d): train %d [%s]  val %d [%s]  test %d [%s]\n", m.Split.Mode, m.Split.Seed,
		m.Split.Train.Count, strings.Join(m.Split.Train.RunIDs, " "), m.Split.Val.Count, strings.Join(m.Split.Val.RunIDs, " "), m.Split.Test.Count, strings.Join(m.Split.Test.RunIDs, " "))
	fmt.Fprintf(w, "lineage  %s\n", lineageText(m.Lineage))
	fmt.Fprintf(w, "norm     %s\n", m.Norm.Rule)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  COLUMN\tROLE\tUNIT\tMEAN\tSTD")
	for j, n := range m.Nodes {
		if j < len(m.Norm.X.Mean) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%.6g\t%.6g\n", n.NodeID, n.Role, n.ModelUnit, m.Norm.X.Mean[j], m.Norm.X.Std[j])
		}
	}
	tw.Flush()
	if len(refs) > 0 {
		fmt.Fprintf(w, "used by  %d reference(s)\n", len(refs))
	}
}

func lineageText(l dataset.Lineage) string {
	s := fmt.Sprintf("verified=%v (%d verified, %d unknown, %d mismatched, %d excluded)", l.LineageVerified, len(l.Verified), len(l.Unknown), len(l.Mismatched), len(l.Excluded))
	if !l.LineageVerified {
		s += ": models from this dataset may not drive optimisation"
	}
	return s
}

func printReport(w io.Writer, id string, r *dataset.Report) {
	fmt.Fprintf(w, "dataset %s (%s): windows train %d, val %d, test %d; lineage verified %v\n\n", id, r.Kind, r.Windows.Train, r.Windows.Val, r.Windows.Test, r.LineageVerified)
	fmt.Fprintln(w, "per node, over all train runs (model units):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NODE\tROLE\tUNIT\tCOUNT\tMEAN\tSTD\tMIN\tP05\tP50\tP95\tMAX\t")
	for _, n := range r.Nodes {
		s := n.Summary
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.5g\t%.4g\t%.5g\t%.5g\t%.5g\t%.5g\t%.5g\t\n", n.NodeID, n.Role, n.ModelUnit, s.Count, s.Mean, s.Std, s.Min, s.P05, s.P50, s.P95, s.Max)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncleaning, summed over every used run (samples dropped by rule; grid steps interpolated/missing):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NODE\tRAW\tSTATE\tRANGE\tHAMPEL\tKEPT\tCLEANED%\tINTERP\tMISSING\tMISSING%\t")
	for _, n := range r.Nodes {
		c, al := n.Cleaning, n.Align
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%.2f\t\n", n.NodeID, c.Raw, c.State, c.Range, c.Hampel, c.Kept, 100*n.CleanedRatio, al.Interpolated, al.Missing, 100*n.MissingRatio)
	}
	tw.Flush()
	if len(r.Lags) > 0 {
		fmt.Fprintln(w, "\nlag cross-correlation input → target over train runs (best lag in beats; + = target follows):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "INPUT\tTARGET\tBEST LAG\tCORR\t")
		for _, l := range r.Lags {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t\n", l.Input, l.Target, l.BestLag, l.BestCorr)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nruns:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RUN\tSPLIT\tSTEPS\tMISSING%\tTARGET MEANS")
	for _, run := range r.Runs {
		var tm []string
		for _, t := range run.Targets {
			tm = append(tm, fmt.Sprintf("%s=%.4g", t.NodeID, t.Summary.Mean))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%.2f\t%s\n", run.RunID, run.Split, run.Steps, 100*run.MissingRatio, strings.Join(tm, " "))
	}
	tw.Flush()
	if len(r.Dropped) > 0 {
		fmt.Fprintln(w, "\ndropped runs:")
		for _, x := range r.Dropped {
			fmt.Fprintf(w, "  %s: %s\n", x.RunID, x.Reason)
		}
	}
}

func printBuild(w io.Writer, out amlapp.DatasetBuildResponse) {
	d := out.Dataset
	fmt.Fprintf(w, "built dataset %s in %.2fs\n", d.ID, out.Seconds)
	fmt.Fprintf(w, "  sha256   %s\n  windows  train %d, val %d, test %d (from %d runs)\n  size     %.1f MiB at %s\n",
		d.SHA256, d.TrainWindows, d.ValWindows, d.TestWindows, d.Runs, float64(d.Bytes)/(1<<20), d.Path)
	fmt.Fprintf(w, "  lineage  %s\n", lineageText(out.Lineage))
	for _, r := range out.Dropped {
		fmt.Fprintf(w, "  dropped  %s: %s\n", r.RunID, r.Reason)
	}
}

func printDatasets(w io.Writer, ds []core.Dataset) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECIPE\tPURPOSE\tTRAIN\tVAL\tTEST\tRUNS\tLINEAGE\tSHA256\tCREATED")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\t%.12s\t%s\n", d.ID, d.RecipeID, d.Purpose, d.TrainWindows, d.ValWindows, d.TestWindows, d.Runs, d.LineageVerified, d.SHA256, d.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d dataset(s)\n", len(ds))
}

func printDatasetVerify(w io.Writer, res dataset.VerifyResult) {
	fmt.Fprintf(w, "dataset %s verified: %d artifact(s), %.1f MiB, sha256 %s\n", res.ID, res.Artifacts, float64(res.Bytes)/(1<<20), res.SHA256)
}
