package render

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
)

func printConnectorStatus(w io.Writer, list []connect.Status) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no connector has reported to this data dir")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONNECTOR\tLINE\tSTATE\tRECEIVED\tSTORED\tMALFORMED\tGAPS\tLAST SAMPLE\tUPDATED\tLAST ERROR")
	for _, s := range list {
		last := "–"
		if s.LastSampleMs > 0 {
			last = time.UnixMilli(s.LastSampleMs).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", s.ID, s.Line, s.Shown(), s.Received, s.Stored, s.Malformed, s.Gaps,
			last, s.UpdatedAt.Format(time.RFC3339), s.LastError)
	}
	tw.Flush()
}

func printDBInfo(w io.Writer, i app.InfoResponse) {
	fmt.Fprintf(w, "data dir        %s\ndatabase        %s\nschema version  %d\naml version     %s\n", i.DataDir, i.Database, i.SchemaVersion, i.Version)
}

func fmtOpt(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func printRunDetail(w io.Writer, d app.RunShowResponse) {
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

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

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
	fmt.Fprintln(tw, "TIME\tTS_US\tVALUE\tSTATE")
	for _, p := range out.Points {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", time.UnixMicro(p.TsUs).UTC().Format("2006-01-02T15:04:05.000000Z"), p.TsUs, strconv.FormatFloat(p.Value, 'g', -1, 64), p.State)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d sample(s)", len(out.Points))
	if out.HasMore {
		fmt.Fprintf(w, "; more exist: continue with --after %d (epoch µs)", out.NextAfterTs)
	}
	fmt.Fprintln(w)
}
