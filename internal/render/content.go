package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/trainer"
)

func printPhysics(w io.Writer, m core.PhysicsModel) {
	fmt.Fprintf(w, "physics  %s\nmodel    %s (%s)\nsha256   %s\nsize     %d bytes\nby       %s at %s\n", m.ID, m.Name, m.FileName, m.SHA256, m.Size, m.CreatedBy, m.CreatedAt.Format(time.RFC3339))
}

func printPhysicsSource(w io.Writer, m core.PhysicsModel) {
	printPhysics(w, m)
	fmt.Fprintln(w)
	fmt.Fprint(w, m.Source)
}

func printPhysicsList(w io.Writer, items []core.PhysicsModel) {
	table(w, "ID\tMODEL\tFILE\tSIZE\tCREATED", len(items), "physics model(s)", func(row func(...any)) {
		for _, m := range items {
			row(m.ID, m.Name, m.FileName, m.Size, m.CreatedAt.Format(time.RFC3339))
		}
	})
}

func printTrainer(w io.Writer, t core.ExtTrainer) {
	fmt.Fprintf(w, "trainer ext:%s → %s (env %s), registered by %s\n", t.Name, t.Command, strings.Join(t.Env, ","), t.RegisteredBy)
}

func printTrainers(w io.Writer, out app.TrainerListResponse) {
	for _, n := range out.Native {
		if ps := out.NativeParams[n]; len(ps) > 0 {
			fmt.Fprintf(w, "%s\tnative (params: %s)\n", n, strings.Join(ps, ", "))
			continue
		}
		fmt.Fprintf(w, "%s\tnative\n", n)
	}
	for _, t := range out.External {
		fmt.Fprintf(w, "ext:%s\t%s (env %s; registered by %s at %s)\n", t.Name, t.Command, strings.Join(t.Env, ","), t.RegisteredBy, t.RegisteredAt.Format(time.RFC3339))
	}
}

// printTrainerShow is a trainer with a table of its params.
func printTrainerShow(w io.Writer, t app.TrainerShowResponse) {
	fmt.Fprintf(w, "trainer  %s (%s)\n", t.Name, t.Kind)
	if t.Summary != "" {
		fmt.Fprintf(w, "         %s\n", t.Summary)
	}
	if len(t.Formats) > 0 {
		fmt.Fprintf(w, "formats  %s\n", strings.Join(t.Formats, ", "))
	}
	if e := t.External; e != nil {
		fmt.Fprintf(w, "exec     %s (env %s), registered by %s\n", e.Command, strings.Join(e.Env, ","), e.RegisteredBy)
		fmt.Fprintln(w, "params   defined by the program; not validated at submit")
		return
	}
	ps := t.Params
	if ps != nil && len(t.ParamNames) == len(ps.Properties) {
		c := *ps // a decoded schema has lost the declared order
		c.PropertyOrder = t.ParamNames
		ps = &c
	}
	rows := trainer.ParamRows(ps)
	if len(rows) == 0 {
		fmt.Fprintln(w, "params   none published")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARAM\tTYPE\tDEFAULT\tRANGE\tDESCRIPTION")
	for _, r := range rows {
		def := r.Default
		if r.Required {
			def = "(required)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Type, dash(def), dash(r.Range), r.Description)
	}
	_ = tw.Flush()
}
