package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// A store written before migration 0014 (sample times in epoch ms, monthly
// partitions with ms bounds) is read back after it with every time in µs,
// each sample kept, in a partition of its month with µs bounds, and the
// context span moved so run-filtered and ms-bounded queries still find it;
// new samples of those months go to the same partitions.
func TestMigrationToMicroseconds(t *testing.T) {
	ctx := context.Background()
	u := schemaURL(t)
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
	old, err := OpenWith(ctx, u, Options{Migrations: ms[:at]})
	if err != nil {
		t.Fatal(err)
	}
	c := core.ContextFilter{Line: "L", Product: "P", Recipe: "R", Run: "r1"}
	jan := time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC).UnixMilli()
	var b []core.Sample
	for _, ts := range []int64{-1500, 1, 999, jan, jan + 1000, jan + 2000} { // ms, as the old schema stored them
		b = append(b, core.Sample{Node: "n", TsUs: ts, Value: float64(ts % 10_000), Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run})
	}
	// The old layout: monthly partitions with bounds in epoch ms (made by
	// hand, as this binary's partitioning is in µs; its cache is told they
	// exist so that it makes none).
	for _, m := range []time.Time{time.Date(1969, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)} {
		lo, hi := m.UnixMilli(), m.AddDate(0, 1, 0).UnixMilli()
		if _, err := old.pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE samples_%04d%02d PARTITION OF samples FOR VALUES FROM (%d) TO (%d)`, m.Year(), int(m.Month()), lo, hi)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sm := range b {
		lo, _ := monthBounds(sm.TsUs)
		old.parts[lo] = partitionName(lo)
	}
	if _, err := old.WriteSamples(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := openURL(t, u)
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
	if err != nil || len(p.Points) != 2 {
		t.Fatalf("ms range after migration: %+v %v", p.Points, err)
	}
	for table, want := range map[string]int{"samples_202601": 1, "samples_202602": 2, "samples_196912": 1, "samples_197001": 2, "samples_default": 0} {
		if got := countIn(t, s, table); got != want {
			t.Fatalf("%s holds %d rows, want %d", table, got, want)
		}
	}
	// A new sample of a migrated month lands in that month's partition.
	if _, err := s.WriteSamples(ctx, []core.Sample{{Node: "n", TsUs: (jan + 3000) * 1000, Value: 1, Line: c.Line, Product: c.Product, Recipe: c.Recipe, Run: c.Run}}); err != nil {
		t.Fatal(err)
	}
	if d, f := countIn(t, s, "samples_default"), countIn(t, s, "samples_202602"); d != 0 || f != 3 {
		t.Fatalf("after a new write: default %d, samples_202602 %d", d, f)
	}
}
