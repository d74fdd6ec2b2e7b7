package render

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/aml-project/aml/internal/app"
)

// printBenefitStudy is a benefit study: its status and progress, then
// the report `aml demo --benefit` prints.
func printBenefitStudy(w io.Writer, s app.BenefitStudy) {
	fmt.Fprintf(w, "benefit study %s of line %s: %s (%d runs per mode, seed %d, wear %v, material lots %v; requested by %s)\n",
		s.ID, dash(s.Line), s.Status, s.Runs, s.Seed, s.Wear, s.MaterialLots, s.RequestedBy)
	if s.Status == app.BenefitRunning {
		fmt.Fprintf(w, "  %.0f %% · %s\n", 100*s.Progress, s.Stage)
	}
	if s.Error != nil {
		fmt.Fprintf(w, "  error: %s: %s\n", s.Error.Code, s.Error.Message)
	}
	if s.Report != nil {
		s.Report.Report(w)
	}
}

func printBenefitStudies(w io.Writer, items []app.BenefitStudy) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no benefit studies")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLINE\tSTATUS\tRUNS\tSEED\tWEAR\tLOTS\tENVELOPE SHARE\tREQUESTED BY")
	for _, s := range items {
		share := "–"
		if s.Report != nil {
			share = fmt.Sprintf("%.0f %%", 100*s.Report.EnvelopeShare)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%v\t%v\t%s\t%s\n", s.ID, dash(s.Line), s.Status, s.Runs, s.Seed, s.Wear, s.MaterialLots, share, s.RequestedBy)
	}
	_ = tw.Flush()
}
