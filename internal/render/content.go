package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
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
		fmt.Fprintf(w, "%s\tnative\n", n)
	}
	for _, t := range out.External {
		fmt.Fprintf(w, "ext:%s\t%s (env %s; registered by %s at %s)\n", t.Name, t.Command, strings.Join(t.Env, ","), t.RegisteredBy, t.RegisteredAt.Format(time.RFC3339))
	}
}
