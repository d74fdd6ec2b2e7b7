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
	for name, open := range bothBackends() {
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

// TestProductIDsStayOnTheirLine (attack): an engineer of line B who uses
// a product id of line A — in a CSV, a samples batch with or without a
// run, a recipe version — would mix B's runs and samples into A's product
// history. Each is refused with AML_CONFLICT naming neither line A nor
// anything of it, and writes nothing, on both back-ends; line A keeps
// using its product.
func TestProductIDsStayOnTheirLine(t *testing.T) {
	for name, open := range bothBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			a := New(&service.Deps{Store: st, DataDir: t.TempDir()}, Options{Now: func() time.Time { return fixed }})
			const owner = "plant-north-7"
			csv := func(p Principal, line, run, node string) error {
				_, err := a.IngestCSV(ctx, p, IngestCSVRequest{Line: line, Product: "gear-x", Recipe: "rec-" + line, Run: run,
					Body: strings.NewReader("time_ms," + node + "\n1764547200000,1\n1764547201000,2\n")})
				return err
			}
			if err := csv(scoped(owner), owner, "run-a", "a1"); err != nil {
				t.Fatal(err)
			}
			bob := scoped("B")
			for what, err := range map[string]error{
				"csv": csv(bob, "B", "run-b", "b1"),
				"samples with a run": func() error {
					_, err := a.IngestSamples(ctx, bob, IngestSamplesRequest{Line: "B", Product: "gear-x", Recipe: "rec-B", Run: "run-b2", Samples: []IngestSample{{Node: "b2", TsMs: 1}}})
					return err
				}(),
				"samples without a run": func() error {
					_, err := a.IngestSamples(ctx, bob, IngestSamplesRequest{Line: "B", Product: "gear-x", Samples: []IngestSample{{Node: "b3", TsMs: 1}}})
					return err
				}(),
				"recipe version": func() error {
					_, err := a.RecipePut(ctx, bob, RecipePutRequest{Line: "B", Product: "gear-x", Recipe: "rec-B", Params: map[string]any{"p": 1}})
					return err
				}(),
			} {
				if core.CodeOf(err) != core.CodeConflict || strings.Contains(err.Error(), owner) || strings.Contains(err.Error(), "run-a") {
					t.Fatalf("%s: %v, want AML_CONFLICT naming nothing of line %s", what, err, owner)
				}
			}
			for _, n := range []string{"b1", "b2", "b3"} {
				if _, err := st.GetNode(ctx, n); core.CodeOf(err) != core.CodeNotFound {
					t.Fatalf("refused node %s exists: %v", n, err)
				}
			}
			runs, err := st.ListRuns(ctx, core.RunFilter{Product: "gear-x"})
			if err != nil || len(runs) != 1 || runs[0].ID != "run-a" {
				t.Fatalf("runs of gear-x: %+v %v", runs, err)
			}
			if _, err := st.GetRecipeVersion(ctx, "rec-B", 1); core.CodeOf(err) != core.CodeNotFound {
				t.Fatalf("refused recipe version exists: %v", err)
			}
			// Line B with a product of its own, and line A again: taken.
			if _, err := a.IngestSamples(ctx, bob, IngestSamplesRequest{Line: "B", Product: "gear-y", Recipe: "rec-B", Run: "run-b", Samples: []IngestSample{{Node: "b1", TsMs: 1}}}); err != nil {
				t.Fatal(err)
			}
			if err := csv(scoped(owner), owner, "run-a2", "a9"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// scoped is an engineer scoped to line.
func scoped(line string) Principal {
	return Principal{Name: "eng-" + line, Role: engineer.Role, Lines: []string{line}}
}

// bothBackends opens a fresh store on each back-end (PostgreSQL through
// pgtest, which skips or fails as its doc says when there is no server).
func bothBackends() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
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
}
