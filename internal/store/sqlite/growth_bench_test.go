package sqlite

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// BenchmarkIngestGrowth ingests the same new samples (AML_BENCH_GROWTH_NEW,
// default 1.7 M: 10 nodes × 170 000 steps at 1 s, later than anything
// stored, in 10 000-sample batches as the CSV path writes them) into an
// empty store and into one already holding AML_BENCH_GROWTH_STORED samples
// (default 30 M, the same 10 nodes, earlier runs), in the same run: the
// ratio of the two is the cost of a growing store (issue 22: ≤ 1.1).
// Filling the large store takes a minute or two; run it alone:
//
//	go test -run '^$' -bench IngestGrowth -benchtime 1x ./internal/store/sqlite/
func BenchmarkIngestGrowth(b *testing.B) {
	stored, fresh := envInt("AML_BENCH_GROWTH_STORED", 30_000_000), envInt("AML_BENCH_GROWTH_NEW", 1_700_000)
	const nodes = 10
	batch := func(run string, from, n int) []core.Sample {
		c := sampleRun(run)
		out := make([]core.Sample, 0, n)
		for k := from; len(out) < n; k++ {
			for j := 0; j < nodes && len(out) < n; j++ {
				out = append(out, mk(fmt.Sprintf("node%02d", j), int64(k)*1_000_000, float64(k%1000)+float64(j)/10, "", c))
			}
		}
		return out
	}
	write := func(b *testing.B, s *Store, run string, from, n int) {
		for done := 0; done < n; done += 10_000 {
			if _, err := s.WriteSamples(context.Background(), batch(run, from+done/nodes, min(10_000, n-done))); err != nil {
				b.Fatal(err)
			}
		}
	}
	big := b.TempDir()
	s, err := Open(big)
	if err != nil {
		b.Fatal(err)
	}
	write(b, s, "old", 0, stored)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var secs [2]float64
	for i, dir := range []string{"", big} {
		name := "empty"
		if dir != "" {
			name = fmt.Sprintf("%.1fM", float64(stored)/1e6)
		}
		b.Run(name, func(b *testing.B) {
			iter := 0
			for b.Loop() {
				b.StopTimer()
				d := dir
				if d == "" {
					d = b.TempDir()
				}
				s, err := Open(d)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				// Each iteration adds new instants (a rewrite would cost less).
				write(b, s, "new"+strconv.Itoa(iter), stored/nodes+1+iter*(fresh/nodes+1), fresh)
				iter++
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			secs[i] = b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(fresh)/secs[i], "samples/s")
		})
	}
	if secs[0] > 0 {
		fmt.Printf("ingest into a %d-sample store / into an empty one: %.2f\n", stored, secs[1]/secs[0])
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
