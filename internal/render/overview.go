package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
)

// printOverview is line.overview: the nodes with their values, limits and
// alarms, the connectors, the pending certificates and the last writes.
func printOverview(w io.Writer, o app.LineOverview) {
	run := "no run"
	if o.Run != nil {
		run = "newest run " + o.Run.ID + " (" + o.Run.Status + ")"
	}
	fmt.Fprintf(w, "line %s at %s: %s, %d alarm(s)\n", o.Line, o.At.Format(time.RFC3339), run, o.Alarms)
	if len(o.Nodes) > 0 {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tTYPE\tVALUE\tUNIT\tMIN\tMAX\tAT\tALARM")
		for _, n := range o.Nodes {
			typ, val, at := "PV", "-", "-"
			if n.Setpoint {
				typ = "SP"
			}
			if n.Value != nil {
				val = fmt.Sprintf("%g", *n.Value)
			}
			if n.At != nil {
				at = time.UnixMilli(*n.At).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, typ, val, n.Unit, fmtOpt(n.Min), fmtOpt(n.Max), at, strings.ToUpper(n.Alarm))
		}
		tw.Flush()
	}
	if len(o.Connectors) > 0 {
		fmt.Fprintln(w, "connectors:")
		printConnectorStatus(w, o.Connectors)
	}
	if len(o.Pending) == 0 {
		fmt.Fprintln(w, "no certificate awaiting approval or execution")
	} else {
		fmt.Fprintln(w, "certificates:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tREQUESTED BY\tAPPROVED BY\tEXECUTION")
		for _, c := range o.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.ID, c.Status, c.RequestedBy, c.ApprovedBy, c.Execution.State)
		}
		tw.Flush()
	}
	if len(o.Writes) == 0 {
		fmt.Fprintln(w, "no governed write yet")
		return
	}
	fmt.Fprintln(w, "last writes:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tCERTIFICATE\tBY\tSTATUS\tNODE\tFROM\tTO\tREADBACK\tVERIFIED")
	for _, x := range o.Writes {
		if len(x.Moves) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t–\t\t\t\t\n", x.At.Format(time.RFC3339), x.CertificateID, x.Actor, x.Status)
		}
		for _, m := range x.Moves {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%g\t%g\t%g\t%t\n", x.At.Format(time.RFC3339), x.CertificateID, x.Actor, x.Status, m.NodeID, m.From, m.To, m.Readback, m.Verified)
		}
	}
	tw.Flush()
}

// printDatasetCheck is dataset.check: valid, or every problem.
func printDatasetCheck(w io.Writer, c app.DatasetCheckResponse) {
	if c.OK {
		fmt.Fprintln(w, "the spec is valid")
		return
	}
	fmt.Fprintf(w, "the spec is not valid (%s): %s\n", c.Code, c.Message)
	for _, p := range c.Problems {
		if p.Field != "" {
			fmt.Fprintf(w, "  %s: %s\n", p.Field, p.Message)
		} else {
			fmt.Fprintf(w, "  %s\n", p.Message)
		}
	}
}
