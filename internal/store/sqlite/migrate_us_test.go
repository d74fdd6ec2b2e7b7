package sqlite

import (
	"context"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// A store written before migration 0014 (sample times in epoch ms) is read
// back after it with every time in µs, each sample kept, and its context
// span moved with it so run-filtered and ms-bounded queries still find it.
func TestMigrationToMicroseconds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var at int
	for i, m := range ms {
		if m.Name == "samples_us" {
			at = i
		}
	}
	if at == 0 {
		t.Fatal("no samples_us migration")
	}
	old, err := OpenWith(dir, Options{Migrations: ms[:at]})
	if err != nil {
		t.Fatal(err)
	}
	c := core.ContextFilter{Line: "L", Product: "P", Recipe: "R", Run: "r1"}
	var b []core.Sample
	for _, ts := range []int64{-1500, 0, 1, 2, 999, 1000, 60_000} { // ms, as the old schema stored them
		b = append(b, core.Sample{Node: "n", TsUs: ts, Value: float64(ts), Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run})
	}
	if _, err := old.WriteSamples(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: core.ContextFilter{Run: "r1"}})
	if err != nil || len(p.Points) != len(b) {
		t.Fatalf("after migration: %+v %v", p.Points, err)
	}
	for i, pt := range p.Points {
		if pt.TsUs != b[i].TsUs*1000 || pt.Value != b[i].Value {
			t.Fatalf("point %d = %+v, want ts %d µs", i, pt, b[i].TsUs*1000)
		}
	}
	from, to := int64(1), int64(999)
	p, err = s.QueryPage(ctx, core.PageQuery{Node: "n", Filter: core.ContextFilter{Run: "r1"}, FromMs: &from, ToMs: &to})
	if err != nil || len(p.Points) != 3 || p.Points[0].TsUs != 1000 || p.Points[2].TsUs != 999_000 {
		t.Fatalf("ms range after migration: %+v %v", p.Points, err)
	}
}
