package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/spf13/cobra"
)

// parseTime accepts epoch milliseconds or RFC 3339.
func parseTime(flag, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return &v, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, usagef("--%s: %q is neither epoch milliseconds nor RFC 3339 (2026-01-05T06:00:00Z)", flag, s)
	}
	v := t.UnixMilli()
	return &v, nil
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

func fmtOpt(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func newRunsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "List and show batch runs"}
	var f core.RunFilter
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs (filter by line, product, recipe, status)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			runs, err := s.ListRuns(cmd.Context(), f)
			if err != nil {
				return err
			}
			if runs == nil {
				runs = []core.Run{}
			}
			return a.emit(runs, func(w io.Writer) { printRuns(w, runs) })
		},
	}
	list.Flags().StringVar(&f.Line, "line", "", "only runs of this line")
	list.Flags().StringVar(&f.Product, "product", "", "only runs of this product")
	list.Flags().StringVar(&f.Recipe, "recipe", "", "only runs of this recipe")
	list.Flags().StringVar(&f.Status, "status", "", "only runs with this status (active, ended, aborted)")
	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run with its context segments and sample counts per node",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			r, err := s.GetRun(ctx, args[0])
			if err != nil {
				return err
			}
			segs, err := s.ListContextSegments(ctx, r.ID)
			if err != nil {
				return err
			}
			if segs == nil {
				segs = []core.ContextSegment{}
			}
			counts, err := s.CountRunSamples(ctx, r.ID)
			if err != nil {
				return err
			}
			out := runDetail{r, segs, counts}
			return a.emit(out, func(w io.Writer) { printRunDetail(w, out) })
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

func newNodesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "nodes", Short: "List signals (nodes)"}
	var line string
	list := &cobra.Command{
		Use:   "list",
		Short: "List nodes with unit, range and kind",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			nodes, err := s.ListNodes(cmd.Context(), line)
			if err != nil {
				return err
			}
			if nodes == nil {
				nodes = []core.Node{}
			}
			return a.emit(nodes, func(w io.Writer) { printNodes(w, nodes) })
		},
	}
	list.Flags().StringVar(&line, "line", "", "only nodes of this line")
	cmd.AddCommand(list)
	return cmd
}

func newTSCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "ts", Short: "Query time series"}
	var (
		node, from, to, after, bucket string
		f                             core.ContextFilter
		limit                         int
	)
	query := &cobra.Command{
		Use:   "query --node N [--run R] [--from T] [--to T] [--bucket 1s]",
		Short: "Read one node's samples (all pages, or --limit of them) or bucketed aggregates",
		Long: `Read one node's samples in time order, state included. Without --limit every
sample in the range is returned (read page by page; nothing is dropped). With
--limit N at most N samples are returned and, if more exist, the result says so
and gives the cursor to continue with --after.

Times (--from, --to, --after) are epoch milliseconds or RFC 3339.
With --bucket (a Go duration such as 1s, 5m) the ok samples are aggregated into
buckets of avg/min/max/count (non-ok samples are counted in "bad").`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usagef("--node is required")
			}
			fromMs, err := parseTime("from", from)
			if err != nil {
				return err
			}
			toMs, err := parseTime("to", to)
			if err != nil {
				return err
			}
			afterMs, err := parseTime("after", after)
			if err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit must be ≥ 0")
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if bucket != "" {
				d, err := time.ParseDuration(bucket)
				if err != nil || d < time.Millisecond {
					return usagef("--bucket: %q is not a duration of at least 1ms (e.g. 1s, 5m)", bucket)
				}
				bs, err := s.Buckets(ctx, core.BucketQuery{Node: node, Filter: f, FromMs: fromMs, ToMs: toMs, BucketMs: d.Milliseconds()})
				if err != nil {
					return err
				}
				if bs == nil {
					bs = []core.Bucket{}
				}
				out := bucketResult{node, d.Milliseconds(), bs}
				return a.emit(out, func(w io.Writer) { printBuckets(w, bs) })
			}
			out := core.Page{Node: node, Points: []core.Point{}}
			cursor := afterMs
			for {
				pl := 10_000
				if limit > 0 {
					pl = min(pl, limit-len(out.Points))
				}
				p, err := s.QueryPage(ctx, core.PageQuery{Node: node, Filter: f, AfterTs: cursor, FromMs: fromMs, ToMs: toMs, Limit: pl})
				if err != nil {
					return err
				}
				out.Points = append(out.Points, p.Points...)
				out.HasMore, out.NextAfterTs = p.HasMore, p.NextAfterTs
				if !p.HasMore || (limit > 0 && len(out.Points) >= limit) {
					break
				}
				cursor = &p.NextAfterTs
			}
			if !out.HasMore {
				out.NextAfterTs = 0
			}
			return a.emit(out, func(w io.Writer) { printPage(w, out) })
		},
	}
	fl := query.Flags()
	fl.StringVar(&node, "node", "", "node id (required)")
	fl.StringVar(&f.Run, "run", "", "only samples of this run")
	fl.StringVar(&f.Line, "line", "", "only samples of this line")
	fl.StringVar(&f.Product, "product", "", "only samples of this product")
	fl.StringVar(&f.Recipe, "recipe", "", "only samples of this recipe")
	fl.StringVar(&from, "from", "", "start time, inclusive (epoch ms or RFC 3339)")
	fl.StringVar(&to, "to", "", "end time, inclusive (epoch ms or RFC 3339)")
	fl.StringVar(&after, "after", "", "cursor: only samples strictly after this time")
	fl.IntVar(&limit, "limit", 0, "at most this many samples (0 = all)")
	fl.StringVar(&bucket, "bucket", "", "aggregate into buckets of this width (e.g. 1s, 1m)")
	cmd.AddCommand(query)
	return cmd
}

func newDBCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "db", Short: "Data directory and schema"}
	info := &cobra.Command{
		Use:   "info",
		Short: "Show the data directory, database file and schema version",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			v, err := s.SchemaVersion(cmd.Context())
			if err != nil {
				return err
			}
			out := dbInfo{DataDir: a.dataDir, Database: s.Location(), SchemaVersion: v, Version: version}
			return a.emit(out, func(w io.Writer) { printDBInfo(w, out) })
		},
	}
	cmd.AddCommand(info)
	return cmd
}

// The printers below are shared by the local commands and their --server
// forms (client_routes.go), so both print the same thing.

// runDetail is what "aml runs show" prints (and GET /runs/{id} returns).
type runDetail struct {
	core.Run
	Segments []core.ContextSegment `json:"contextSegments"`
	Samples  map[string]int64      `json:"samplesByNode"`
}

// bucketResult is what "aml ts query --bucket" prints.
type bucketResult struct {
	Node     string        `json:"node"`
	BucketMs int64         `json:"bucketMs"`
	Buckets  []core.Bucket `json:"buckets"`
}

// dbInfo is what "aml db info" prints.
type dbInfo struct {
	DataDir       string `json:"dataDir"`
	Database      string `json:"database"`
	SchemaVersion int    `json:"schemaVersion"`
	Version       string `json:"version"`
}

func printRuns(w io.Writer, runs []core.Run) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tLINE\tPRODUCT\tRECIPE\tVER\tSTARTED\tENDED\tSTATUS")
	for _, r := range runs {
		ver, end := "-", "-"
		if r.RecipeVersion != nil {
			ver = strconv.Itoa(*r.RecipeVersion)
		}
		if r.EndedMs != nil {
			end = fmtMs(*r.EndedMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.LineID, r.ProductID, r.RecipeID, ver, fmtMs(r.StartedMs), end, r.Status)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d run(s)\n", len(runs))
}

func printRunDetail(w io.Writer, d runDetail) {
	r, segs, counts := d.Run, d.Segments, d.Samples
	fmt.Fprintf(w, "run       %s (%s)\nline      %s\nproduct   %s\nrecipe    %s", r.ID, r.Status, r.LineID, r.ProductID, r.RecipeID)
	if r.RecipeVersion != nil {
		fmt.Fprintf(w, " v%d", *r.RecipeVersion)
	}
	fmt.Fprintf(w, "\nstarted   %s\n", fmtMs(r.StartedMs))
	if r.EndedMs != nil {
		fmt.Fprintf(w, "ended     %s (%s)\n", fmtMs(*r.EndedMs), time.Duration(*r.EndedMs-r.StartedMs)*time.Millisecond)
	}
	fmt.Fprintf(w, "context segments: %d\n", len(segs))
	for _, sg := range segs {
		fmt.Fprintf(w, "  #%d recipe %s v%d hash %.12s… confirmed by %s at %s\n", sg.ID, sg.RecipeID, sg.RecipeVersion, sg.ContentHash, sg.ConfirmedBy, sg.ConfirmedAt.Format(time.RFC3339))
	}
	names := make([]string, 0, len(counts))
	var total int64
	for n, c := range counts {
		names = append(names, n)
		total += c
	}
	sort.Strings(names)
	fmt.Fprintf(w, "samples: %d over %d node(s)\n", total, len(names))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%d\n", n, counts[n])
	}
	tw.Flush()
}

func printNodes(w io.Writer, nodes []core.Node) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLINE\tKIND\tUNIT\tMIN\tMAX\tMEANING")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.LineID, n.Kind, n.Unit, fmtOpt(n.Min), fmtOpt(n.Max), n.Meaning)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d node(s)\n", len(nodes))
}

func printBuckets(w io.Writer, bs []core.Bucket) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tAVG\tMIN\tMAX\tCOUNT\tBAD")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%.6g\t%.6g\t%.6g\t%d\t%d\n", fmtMs(b.StartMs), b.Avg, b.Min, b.Max, b.Count, b.Bad)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d bucket(s)\n", len(bs))
}

func printPage(w io.Writer, out core.Page) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTS_MS\tVALUE\tSTATE")
	for _, p := range out.Points {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", fmtMs(p.TsMs), p.TsMs, strconv.FormatFloat(p.Value, 'g', -1, 64), p.State)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d sample(s)", len(out.Points))
	if out.HasMore {
		fmt.Fprintf(w, "; more exist: continue with --after %d", out.NextAfterTs)
	}
	fmt.Fprintln(w)
}

func printDBInfo(w io.Writer, i dbInfo) {
	fmt.Fprintf(w, "data dir        %s\ndatabase        %s\nschema version  %d\naml version     %s\n", i.DataDir, i.Database, i.SchemaVersion, i.Version)
}
