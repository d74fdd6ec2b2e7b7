package main

import (
	"fmt"
	"os"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

func newDatasetCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "dataset", Short: "Build, inspect, verify and delete training datasets"}
	var (
		br       amlapp.DatasetBuildRequest // quotas 0: the process's (with --server, the server's)
		specPath string
	)
	build := opCommand(a, &cobra.Command{
		Use:   "build --spec FILE",
		Short: "Build a dataset from a spec (see docs/dataset-format.md)",
		Args:  argsExact(0),
	}, "dataset.build", "", &br, func([]string) error {
		b, err := os.ReadFile(specPath)
		if err != nil {
			return usagef("--spec: %v", err)
		}
		return br.SetSpecJSON(b) // its errors name the spec's fields precisely
	})
	build.Flags().StringVar(&specPath, "spec", "", "dataset spec JSON file (required)")
	_ = build.MarkFlagRequired("spec")
	build.Flags().IntVar(&br.MaxWindows, "max-windows", 0, fmt.Sprintf("refuse to build more windows (rows) than this (0: the quota, %d unless AML_MAX_DATASET_WINDOWS; with --server at most the server's)", amlapp.DefaultDatasetMaxWindows))
	build.Flags().IntVar(&br.MaxBytesMiB, "max-bytes-mib", 0, fmt.Sprintf("refuse to build a dataset larger than this many MiB (0: the quota, %d unless AML_MAX_DATASET_MIB; with --server at most the server's)", amlapp.DefaultDatasetMaxBytesMiB))

	var lr amlapp.DatasetListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List datasets", Args: argsExact(0)}, "dataset.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only datasets of this line")
	list.Flags().StringVar(&lr.Product, "product", "", "only datasets of this product")
	list.Flags().StringVar(&lr.Recipe, "recipe", "", "only datasets of this recipe")

	var r amlapp.DatasetRequest
	one := func(use, short string) *cobra.Command {
		return &cobra.Command{Use: use + " ID", Short: short, Args: argsExact(1)}
	}
	cmd.AddCommand(build, list,
		opCommand(a, one("show", "Show a dataset: shapes, split, normalisation, lineage"), "dataset.show", "", &r, arg0(&r.ID)),
		opCommand(a, one("verify", "Recompute a dataset's hash from its files (AML_DATASET_TAMPERED on any change)"), "dataset.verify", "", &r, arg0(&r.ID)),
		opCommand(a, one("report", "Print a dataset's report: per-node statistics, cleaning counts, lags, dropped runs"), "dataset.report", "", &r, arg0(&r.ID)),
		opCommand(a, one("delete", "Delete a dataset (refused while a job or model references it)"), "dataset.delete", "", &r, arg0(&r.ID)))
	return cmd
}
