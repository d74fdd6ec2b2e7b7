package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/testfix"
)

// TestIngestCSVRefusesAnotherLinesNode: a CSV of line B that names a node
// of line A is refused — AML_CONFLICT for a caller who may write line A,
// AML_FORBIDDEN for one scoped to line B — and writes nothing (neither
// its new node nor its run nor a sample), on both back-ends; a node of
// the file's own line, and a new one, are taken. On PostgreSQL the nodes
// are read inside the ingest transaction (ingest.Stream's lookup), on
// SQLite through the store.
func TestIngestCSVRefusesAnotherLinesNode(t *testing.T) {
	backends := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store { st, _ := testfix.SQLite(t); return st },
		"postgres": func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), pgtest.Schema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			a := New(&service.Deps{Store: st, DataDir: t.TempDir()}, Options{Now: func() time.Time { return fixed }})
			csv := func(line, run, body string, p Principal) error {
				_, err := a.IngestCSV(ctx, p, IngestCSVRequest{Line: line, Product: "P" + line, Recipe: "R" + line, Run: run, Body: strings.NewReader(body)})
				return err
			}
			if err := csv("A", "ra", "time_ms,a1,a2\n1764547200000,1,2\n1764547201000,3,4\n", admin); err != nil {
				t.Fatal(err)
			}
			// The other line's node comes after a new one.
			bad := "time_ms,b1,a2\n1764547300000,1,2\n1764547301000,3,4\n"
			lineB := Principal{Name: "bob", Role: engineer.Role, Lines: []string{"B"}}
			for _, c := range []struct {
				p    Principal
				code string
				msg  string
			}{
				{admin, core.CodeConflict, `node "a2" belongs to line "A", not "B"`},
				{lineB, core.CodeForbidden, `that line is outside the scope of bob (lines B)`},
			} {
				err := csv("B", "rb", bad, c.p)
				if core.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("%s: %v, want %s %q", c.p.Name, err, c.code, c.msg)
				}
				if _, err := st.GetNode(ctx, "b1"); core.CodeOf(err) != core.CodeNotFound {
					t.Fatalf("%s: the refused file's new node exists: %v", c.p.Name, err)
				}
				if _, err := st.GetRun(ctx, "rb"); core.CodeOf(err) != core.CodeNotFound {
					t.Fatalf("%s: the refused file's run exists: %v", c.p.Name, err)
				}
				n, err := st.CountRunSamples(ctx, "ra")
				if err != nil || n["a2"] != 2 || len(n) != 2 {
					t.Fatalf("%s: line A's run holds %v (%v)", c.p.Name, n, err)
				}
			}
			// Line A's own nodes and a new one: taken.
			if err := csv("A", "ra2", "time_ms,a2,a3\n1764547400000,1,2\n", scoped("A")); err != nil {
				t.Fatal(err)
			}
			if n, err := st.GetNode(ctx, "a3"); err != nil || n.LineID != "A" {
				t.Fatalf("a3: %+v %v", n, err)
			}
		})
	}
}

// scoped is an engineer scoped to line.
func scoped(line string) Principal {
	return Principal{Name: "eng-" + line, Role: engineer.Role, Lines: []string{line}}
}
