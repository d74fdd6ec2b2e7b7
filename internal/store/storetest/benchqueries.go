package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// BenchQueries times the read path on a store holding 10 runs × 10 nodes
// × 5 000 steps (500 000 samples): a page of one node in one run (the
// query a dataset build and a trend plot make), its 1-minute buckets, and
// the latest sample of every node in a run (a twin snapshot). Both
// back-ends run it (BenchmarkQueries in internal/store/sqlite and
// internal/store/postgres).
func BenchQueries(b *testing.B, s core.TimeSeries) {
	ctx := context.Background()
	const runs, nodes, steps = 10, 10, 5_000
	batch := make([]core.Sample, 0, nodes*steps)
	for r := 0; r < runs; r++ {
		batch = batch[:0]
		for k := 0; k < steps; k++ {
			for n := 0; n < nodes; n++ {
				batch = append(batch, core.Sample{Node: fmt.Sprintf("n%02d", n), TsUs: int64(r*steps+k) * 1_000_000, Value: float64(k + n),
					Line: "L1", Product: "P1", Recipe: "R1", Run: fmt.Sprintf("run%02d", r)})
			}
		}
		if _, err := s.WriteSamples(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, nodes)
	for n := range names {
		names[n] = fmt.Sprintf("n%02d", n)
	}
	run := core.ContextFilter{Run: "run07"}
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			p, err := s.QueryPage(ctx, core.PageQuery{Node: "n03", Filter: run, Limit: 10_000})
			if err != nil || len(p.Points) != steps {
				b.Fatalf("%d points, %v", len(p.Points), err)
			}
		}
	})
	b.Run("buckets", func(b *testing.B) {
		for b.Loop() {
			bs, err := s.Buckets(ctx, core.BucketQuery{Node: "n03", Filter: run, BucketMs: 60_000})
			if err != nil || len(bs) == 0 {
				b.Fatalf("%d buckets, %v", len(bs), err)
			}
		}
	})
	b.Run("latest", func(b *testing.B) {
		for b.Loop() {
			l, err := s.Latest(ctx, names, run)
			if err != nil || len(l) != nodes {
				b.Fatalf("%d latest, %v", len(l), err)
			}
		}
	})
}
