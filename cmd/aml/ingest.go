package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"

	"github.com/aml-project/aml/internal/ingest"
	"github.com/spf13/cobra"
)

func newIngestCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "ingest", Short: "Ingest samples with their batch-run context"}
	var (
		opts       ingest.CSVOptions
		units      []string
		start      string
		timeOffset time.Duration
		sequential bool
	)
	csvCmd := &cobra.Command{
		Use:   "csv FILE... --line L --product P --recipe R [--run RUN]",
		Short: "Ingest wide or long CSV files (see docs/csv-ingest.md)",
		Long: `Ingest CSV files. The shape is detected from the header:

  long   time,node,value[,state]          one sample per row
  wide   time,<node>,<node>,...           one column per node
         (or no time column with --period: row k is at --start + k*period)

Times are epoch milliseconds, epoch seconds or RFC 3339 (auto-detected, or
--time-unit). Unknown nodes are created (unit from --unit node=unit). The run
(--run, default: the file name without extension) is created from the first
and last sample unless it exists.

Each file is one transaction: a bad row (non-numeric value, bad time, wrong
column count) stops that file with AML_INGEST_INVALID naming file:line and the
column, and nothing of that file is written. With --skip-bad, bad rows are
skipped and counted by reason. Re-ingesting a file is idempotent.`,
		Args: argsMin(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for name, v := range map[string]string{"line": opts.Line, "product": opts.Product, "recipe": opts.Recipe} {
				if strings.TrimSpace(v) == "" {
					return usagef("--%s is required", name)
				}
			}
			opts.Units = map[string]string{}
			for _, u := range units {
				n, unit, ok := strings.Cut(u, "=")
				if !ok || n == "" {
					return usagef("--unit %q: want node=unit", u)
				}
				opts.Units[n] = unit
			}
			if start != "" {
				ms, err := parseTime("start", start)
				if err != nil {
					return err
				}
				opts.StartMs = *ms
			}
			var total int64
			for _, f := range args {
				st, err := os.Stat(f)
				if err != nil {
					return usagef("%v", err)
				}
				total += st.Size()
			}
			s, err := a.openBackend()
			if err != nil {
				return err
			}
			bar := a.newProgress(total, "ingesting", true)
			var doneBefore int64
			var curFile string
			var curDone int64
			t0 := time.Now()
			opts.TimeOffsetMs = timeOffset.Milliseconds()
			prog := func(file string, done, tot int64) {
				if file != curFile {
					doneBefore += curDone
					curFile, curDone = file, 0
					bar.describe("ingesting " + file)
				}
				curDone = done
				bar.set(doneBefore + done)
			}
			var reports []ingest.FileReport
			if !sequential {
				reports, err = ingest.IngestFiles(cmd.Context(), s, args, opts, prog)
			} else {
				// Lay the files end to end: each starts one hour after the
				// previous file's last sample (for files whose times are
				// relative, e.g. all starting at 0).
				o := opts
				for i, f := range args {
					if i > 0 {
						first, ferr := firstTime(f, o)
						if ferr != nil {
							err = ferr
							break
						}
						next := reports[len(reports)-1].LastTs + 3_600_000
						if opts.Period > 0 && !hasTimeCol(f, o) {
							o.StartMs = next
						} else {
							o.TimeOffsetMs += next - first
						}
					}
					var r []ingest.FileReport
					r, err = ingest.IngestFiles(cmd.Context(), s, []string{f}, o, prog)
					reports = append(reports, r...)
					if err != nil {
						break
					}
				}
			}
			bar.finish()
			secs := time.Since(t0).Seconds()
			samples := 0
			for _, r := range reports {
				samples += r.Samples
			}
			if err != nil {
				if len(reports) > 0 && !a.jsonOut {
					fmt.Fprintf(a.stderr, "%d file(s) before the failing one were ingested\n", len(reports))
				}
				return err
			}
			out := ingestOutput{Files: reports, Samples: samples, Seconds: secs}
			return a.emit(out, func(w io.Writer) { printIngest(w, out) })
		},
	}
	fl := csvCmd.Flags()
	fl.StringVar(&opts.Line, "line", "", "line id (required)")
	fl.StringVar(&opts.Product, "product", "", "product id (required)")
	fl.StringVar(&opts.Recipe, "recipe", "", "recipe id (required)")
	fl.StringVar(&opts.Run, "run", "", "run id (default: each file's name without extension)")
	fl.StringVar(&opts.TimeCol, "time-col", "", "name of the time column (default: auto-detect)")
	fl.StringVar(&opts.TimeUnit, "time-unit", "", "time unit: ms, s or rfc3339 (default: auto-detect)")
	fl.DurationVar(&opts.Period, "period", 0, "sample period for wide files without a time column (e.g. 100ms)")
	fl.StringVar(&start, "start", "", "time of the first row with --period (epoch ms or RFC 3339; default epoch 0)")
	fl.DurationVar(&timeOffset, "time-offset", 0, "add this to every time read from the time column (files with relative times)")
	fl.BoolVar(&sequential, "sequential", false, "lay the files end to end, each one hour after the previous file's last sample (files with relative times)")
	fl.StringArrayVar(&units, "unit", nil, "unit of a created node, node=unit (repeatable)")
	fl.StringArrayVar(&opts.IgnoreCols, "ignore-col", nil, "wide-file column not to ingest (repeatable)")
	fl.BoolVar(&opts.SkipBad, "skip-bad", false, "skip bad rows (reported with reasons) instead of failing the file")
	cmd.AddCommand(csvCmd)
	return cmd
}

// firstTime parses a file (without writing) and returns its first sample
// time under opts with no offset.
func firstTime(path string, opts ingest.CSVOptions) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	opts.TimeOffsetMs = 0
	rep, err := ingest.ParseCSV(f, path, opts, func([]core.Sample) error { return nil })
	if err != nil {
		return 0, err
	}
	if opts.Period > 0 {
		return rep.FirstTs - opts.StartMs, nil
	}
	return rep.FirstTs, nil
}

// hasTimeCol reports whether the file has a time column under opts (its
// times then move with --time-offset rather than --start).
func hasTimeCol(path string, opts ingest.CSVOptions) bool {
	_, err := firstTime(path, ingest.CSVOptions{Line: opts.Line, Product: opts.Product, Recipe: opts.Recipe, TimeCol: opts.TimeCol, TimeUnit: opts.TimeUnit, IgnoreCols: opts.IgnoreCols})
	return err == nil
}

// ingestOutput is what "aml ingest csv" prints.
type ingestOutput struct {
	Files   []ingest.FileReport `json:"files"`
	Samples int                 `json:"samples"`
	Seconds float64             `json:"seconds"`
}

func printIngest(w io.Writer, out ingestOutput) {
	for _, r := range out.Files {
		created := ""
		if r.RunCreated {
			created = " (created)"
		}
		fmt.Fprintf(w, "%s: %s CSV, %d rows, %d samples of %d node(s) (%d new) → run %s%s, %s … %s\n",
			r.File, r.Shape, r.Rows, r.Samples, len(r.Nodes), r.NewNodes, r.Run, created, fmtMs(r.FirstTs), fmtMs(r.LastTs))
		if r.Missing > 0 {
			fmt.Fprintf(w, "  %d empty/NaN cell(s) skipped\n", r.Missing)
		}
		if r.Skipped > 0 {
			fmt.Fprintf(w, "  skipped %d bad row(s):", r.Skipped)
			for reason, n := range r.SkipReasons {
				fmt.Fprintf(w, " %s %d;", reason, n)
			}
			fmt.Fprintln(w)
			for _, l := range r.FirstSkipped {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
	rate := 0.0
	if out.Seconds > 0 {
		rate = float64(out.Samples) / out.Seconds
	}
	fmt.Fprintf(w, "ingested %d samples from %d file(s) in %.2fs (%.0f samples/s)\n", out.Samples, len(out.Files), out.Seconds, rate)
}
