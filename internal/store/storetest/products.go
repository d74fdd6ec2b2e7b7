package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// testProductOwnedByFirstLine: a product id belongs to the first line that
// used it — through EnsureProduct, a recipe, a run or a sample's context —
// and every later use from another line is refused with AML_CONFLICT,
// whose message names the caller's line only (the caller may be scoped to
// its own line and must not learn the owner's name), and writes nothing.
func testProductOwnedByFirstLine(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	must(t, s.EnsureProduct(ctx, core.Product{ID: "P1", LineID: "owner-line"}))
	must(t, s.EnsureProduct(ctx, core.Product{ID: "P1", LineID: "owner-line"}))
	must(t, s.EnsureRecipe(ctx, core.Recipe{ID: "R1", LineID: "owner-line", ProductID: "P1"}))
	must(t, s.CreateRun(ctx, core.Run{ID: "run-a", LineID: "owner-line", ProductID: "P1", RecipeID: "R1", StartedMs: 1, Status: core.RunActive}))
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("a", 1, 1, "", core.ContextFilter{Line: "owner-line", Product: "P1", Recipe: "R1", Run: "run-a"})}); err != nil {
		t.Fatal(err)
	}

	other := func(run string) core.ContextFilter {
		return core.ContextFilter{Line: "L2", Product: "P1", Recipe: "R2", Run: run}
	}
	refused := func(what string, err error) {
		t.Helper()
		wantCode(t, what, err, core.CodeConflict)
		if strings.Contains(err.Error(), "owner-line") {
			t.Fatalf("%s: the refusal names the product's line: %v", what, err)
		}
		var e *core.Error
		if !errors.As(err, &e) || e.Field != "product" {
			t.Fatalf("%s: %#v, want field product", what, err)
		}
	}
	refused("EnsureProduct from another line", s.EnsureProduct(ctx, core.Product{ID: "P1", LineID: "L2"}))
	refused("EnsureRecipe from another line", s.EnsureRecipe(ctx, core.Recipe{ID: "R2", LineID: "L2", ProductID: "P1"}))
	refused("CreateRun from another line", s.CreateRun(ctx, core.Run{ID: "run-b", LineID: "L2", ProductID: "P1", RecipeID: "R2", StartedMs: 1, Status: core.RunActive}))
	refused("IngestTx.EnsureRun from another line", s.Ingest(ctx, func(tx core.IngestTx) error {
		_, err := tx.EnsureRun(core.Run{ID: "run-c", LineID: "L2", ProductID: "P1", RecipeID: "R2", StartedMs: 1, Status: core.RunActive})
		return err
	}))
	_, err := s.WriteSamples(ctx, []core.Sample{mk("b", 5, 1, "", other("")), mk("a", 9, 1, "", other("run-d"))})
	refused("samples of another line", err)

	for _, id := range []string{"run-b", "run-c", "run-d"} {
		if _, err := s.GetRun(ctx, id); core.CodeOf(err) != core.CodeNotFound {
			t.Fatalf("refused use left run %s: %v", id, err)
		}
	}
	if _, err := s.GetNode(ctx, "b"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("refused samples left their node: %v", err)
	}
	if p, _ := s.QueryPage(ctx, core.PageQuery{Node: "a"}); len(p.Points) != 1 {
		t.Fatalf("refused samples were written: %+v", p.Points)
	}
	if p, _ := s.QueryPage(ctx, core.PageQuery{Node: "a", Filter: core.ContextFilter{Product: "P1"}}); len(p.Points) != 1 {
		t.Fatalf("product P1's history: %+v", p.Points)
	}
	if runs, _ := s.ListRuns(ctx, core.RunFilter{Product: "P1"}); len(runs) != 1 || runs[0].LineID != "owner-line" {
		t.Fatalf("runs of product P1: %+v", runs)
	}

	// Samples are a use too: the first line to write a product's samples
	// owns it, and the owner keeps using it.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("c", 1, 1, "", core.ContextFilter{Line: "L3", Product: "P3", Recipe: "R3"})}); err != nil {
		t.Fatal(err)
	}
	refused("EnsureProduct of a product first used by samples", s.EnsureProduct(ctx, core.Product{ID: "P3", LineID: "L4"}))
	must(t, s.EnsureRecipe(ctx, core.Recipe{ID: "R3", LineID: "L3", ProductID: "P3"}))
	// Samples without a line or a product claim nothing.
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("d", 1, 1, "", core.ContextFilter{Product: "P5"}), mk("e", 1, 1, "", core.ContextFilter{Line: "L5"})}); err != nil {
		t.Fatal(err)
	}
	must(t, s.EnsureProduct(ctx, core.Product{ID: "P5", LineID: "L6"}))

	// A sample's recipe is a use of the recipe: without a run, samples of
	// line L2's own product P2 naming owner-line's recipe R1 are refused
	// (field recipe, naming neither owner-line nor P1) and write nothing;
	// a new recipe id in a sample's context belongs to its line and product.
	_, err = s.WriteSamples(ctx, []core.Sample{mk("f", 1, 1, "", core.ContextFilter{Line: "L2", Product: "P2", Recipe: "R1"})})
	wantCode(t, "samples naming another line's recipe", err, core.CodeConflict)
	var e *core.Error
	if !errors.As(err, &e) || e.Field != "recipe" || strings.Contains(err.Error(), "owner-line") || strings.Contains(err.Error(), "P1") {
		t.Fatalf("samples naming another line's recipe: %#v, want field recipe naming neither its line nor its product", err)
	}
	if _, err := s.GetNode(ctx, "f"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("refused samples left their node: %v", err)
	}
	if _, err := s.WriteSamples(ctx, []core.Sample{mk("g", 1, 1, "", core.ContextFilter{Line: "L2", Product: "P2", Recipe: "R7"})}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "EnsureRecipe of a recipe first used by samples", s.EnsureRecipe(ctx, core.Recipe{ID: "R7", LineID: "L8", ProductID: "P8"}), core.CodeConflict)
	must(t, s.EnsureRecipe(ctx, core.Recipe{ID: "R7", LineID: "L2", ProductID: "P2"}))
}

// testProductClaimRace: two handles using one new product id from two
// lines at once: exactly one line gets it, the other is refused.
func testProductClaimRace(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	for k := 0; k < 20; k++ {
		id := fmt.Sprintf("P-%d", k)
		var wg sync.WaitGroup
		wins := make(chan string, 2)
		for i, st := range []core.Store{s, s2} {
			line := fmt.Sprintf("L%d", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := st.CreateRun(ctx, core.Run{ID: id + "-" + line, LineID: line, ProductID: id, RecipeID: id + "-" + line, StartedMs: 1, Status: core.RunActive})
				switch core.CodeOf(err) {
				case "":
					wins <- line
				case core.CodeConflict:
				default:
					t.Errorf("run of %s on %s: %v", id, line, err)
				}
			}()
		}
		wg.Wait()
		close(wins)
		if len(wins) != 1 {
			t.Fatalf("%d lines got product %s", len(wins), id)
		}
		winner := <-wins
		runs, err := s.ListRuns(ctx, core.RunFilter{Product: id})
		if err != nil || len(runs) != 1 || runs[0].LineID != winner {
			t.Fatalf("runs of %s: %+v %v (winner %s)", id, runs, err, winner)
		}
	}
}
