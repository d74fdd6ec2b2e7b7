package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/render"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/spf13/cobra"
)

func newIngestCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "ingest", Short: "Ingest samples with their batch-run context"}
	var (
		req        amlapp.IngestCSVRequest
		sequential bool
	)
	csvCmd := routed(&cobra.Command{
		Use:   "csv FILE... --line L --product P --recipe R [--run RUN]",
		Short: "Ingest wide or long CSV files (see docs/csv-ingest.md)",
		Args:  argsMin(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ingestGC(a.dbURL != "")
			run := req.Run
			check := req
			check.Run, check.Body = "-", strings.NewReader("")
			if err := prepare(cmd, &check, nil, args); err != nil {
				return err
			}
			var total int64
			for _, f := range args {
				st, err := os.Stat(f)
				if err != nil {
					return usagef("%v", err)
				}
				total += st.Size()
			}
			bar := a.newProgress(total, "ingesting", true)
			defer bar.finish()
			t0 := time.Now()
			out := ingestOutput{Files: []ingest.FileReport{}}
			var done int64
			for i, p := range args {
				if sequential && i > 0 {
					// Lay the files end to end: each starts one hour after the
					// previous file's last sample (files with relative times).
					o := req.Options()
					first, err := firstTime(p, o)
					if err != nil {
						return err
					}
					next := out.Files[i-1].LastTs + 3_600_000
					if req.Period > 0 && !hasTimeCol(p, o) {
						s := amlapp.Instant(next)
						req.Start = &s
					} else {
						// Each file's own placement (not added to the last one's).
						req.TimeOffset = amlapp.Duration(time.Duration(next-first) * time.Millisecond)
					}
				}
				f, err := os.Open(p)
				if err != nil {
					return usagef("%v", err)
				}
				r := req
				if r.Run = run; r.Run == "" {
					r.Run = ingest.RunIDFromFile(p)
				}
				base := done
				bar.describe("ingesting " + p)
				r.Name, r.Body, r.Progress = p, f, func(n int64) { bar.set(base + n) }
				var rep ingest.FileReport
				err = a.invoke(cmd, "ingest.csv", "", &r, &rep)
				_ = f.Close()
				if err != nil {
					if len(args) > 1 && !a.jsonOut {
						fmt.Fprintf(a.stderr, "%s failed; %d file(s) before it were ingested\n", p, i)
					}
					return err
				}
				rep.File = p // the server names an upload by its run
				out.Files = append(out.Files, rep)
				out.Samples += rep.Samples
				if st, err := os.Stat(p); err == nil {
					done += st.Size()
				}
			}
			out.Seconds = time.Since(t0).Seconds()
			return a.emit(out, func(w io.Writer) { printIngest(w, out) })
		},
	}, "ingest.csv")
	fl := csvCmd.Flags()
	fl.StringVar(&req.Line, "line", "", "line id (required)")
	fl.StringVar(&req.Product, "product", "", "product id (required)")
	fl.StringVar(&req.Recipe, "recipe", "", "recipe id (required)")
	fl.StringVar(&req.Run, "run", "", "run id (default: each file's name without extension)")
	fl.StringVar(&req.TimeCol, "time-col", "", "name of the time column (default: auto-detect)")
	fl.StringVar(&req.TimeUnit, "time-unit", "", "time unit: ms, s, min, h or rfc3339 (default: auto-detect)")
	fl.StringVar(&req.TZ, "tz", "", "IANA zone of times written without an offset, e.g. Europe/Berlin (a time in a DST change's repeated or skipped hour is refused)")
	fl.StringVar(&req.Delimiter, "delimiter", "", "cell delimiter: , (default), ';', tab or '|'")
	fl.BoolVar(&req.DecimalComma, "decimal-comma", false, "read 12,5 as 12.5 (with --delimiter ';' or tab)")
	fl.Var(&req.Period, "period", "sample period for wide files without a time column (e.g. 100ms)")
	instantFlag(fl, &req.Start, "start", "time of the first row with --period (epoch ms or RFC 3339; default epoch 0)")
	fl.Var(&req.TimeOffset, "time-offset", "add this to every time read from the time column (files with relative times)")
	fl.BoolVar(&sequential, "sequential", false, "lay the files end to end, each one hour after the previous file's last sample (files with relative times)")
	fl.StringArrayVar(&req.Unit, "unit", nil, "unit of a created node, node=unit (repeatable)")
	fl.StringArrayVar(&req.IgnoreCol, "ignore-col", nil, "wide-file column not to ingest (repeatable)")
	fl.BoolVar(&req.SkipBad, "skip-bad", false, "skip bad rows (reported with reasons) instead of failing the file")
	cmd.AddCommand(csvCmd)
	return cmd
}

// ingestGCPercent and ingestMemLimit set the collector during "aml ingest
// csv" unless GOGC is set. An ingest keeps a few batches of samples live
// and allocates little once they are made; paced collections mark those
// pointer-laden batches while the parser and the store wait
// (GODEBUG=gctrace=1): at the default pace (100) three or four in the
// first ≈ 100 ms, at ingestGCPercent (400) one or two (bench/RESULTS.md,
// issue 22 fourth and fifth passes). Into PostgreSQL (pg) the parser's
// batches are small and reused and the store keeps the samples as 24-byte
// rows (≈ 7 MiB for its 262 144-sample buffer): next to no garbage, so
// the pace is off and the heap bounded by a memory limit of
// ingestMemLimit instead (peak RSS 37 MB for 200 000 samples, 69 MB for
// 1 000 000: bench/RESULTS.md, issue 22 sixth pass; at pace 400 the
// 200 000-sample bench file met no collection either). Into
// SQLite, whose writes make garbage, the pace stays (the live heap then
// bounds the process: ≈ 5× it), as it does with GOMEMLIMIT set.
const (
	ingestGCPercent = 400
	ingestMemLimit  = 256 << 20
)

func ingestGC(pg bool) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if !pg || os.Getenv("GOMEMLIMIT") != "" {
		debug.SetGCPercent(ingestGCPercent)
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(ingestMemLimit)
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

// ingestOutput is what "aml ingest csv" prints: one ingest.csv report per
// file.
type ingestOutput struct {
	Files   []ingest.FileReport `json:"files"`
	Samples int                 `json:"samples"`
	Seconds float64             `json:"seconds"`
}

func printIngest(w io.Writer, out ingestOutput) {
	for _, r := range out.Files {
		render.PrintFileReport(w, r)
	}
	rate := 0.0
	if out.Seconds > 0 {
		rate = float64(out.Samples) / out.Seconds
	}
	fmt.Fprintf(w, "ingested %d samples from %d file(s) in %.2fs (%.0f samples/s)\n", out.Samples, len(out.Files), out.Seconds, rate)
}
