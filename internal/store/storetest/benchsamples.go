package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// The sample-path benchmarks' data, the same on both back-ends (their
// BenchmarkWriteSamples figures are compared):
// BenchNodes nodes × BenchSteps steps, written in batches of BenchBatch.
const BenchNodes, BenchSteps, BenchBatch = 10, 20_000, 10_000

// BenchSamples is the 200 000 samples of the ingest benchmarks: nodes
// "node00" … "node09" at every second k = 0 … BenchSteps−1, value
// k + n/10, all in run r1 of line L1, product P1, recipe R1; instant by
// instant.
func BenchSamples() []core.Sample {
	out := make([]core.Sample, 0, BenchNodes*BenchSteps)
	for k := 0; k < BenchSteps; k++ {
		for n := 0; n < BenchNodes; n++ {
			out = append(out, core.Sample{Node: fmt.Sprintf("node%02d", n), TsUs: int64(k) * 1_000_000, Value: float64(k) + float64(n)/10,
				Line: "L1", Product: "P1", Recipe: "R1", Run: "r1"})
		}
	}
	return out
}

// WriteBatches writes samples through s in batches of BenchBatch, in
// order.
func WriteBatches(b *testing.B, s core.TimeSeries, samples []core.Sample) {
	ctx := context.Background()
	for j := 0; j < len(samples); j += BenchBatch {
		if _, err := s.WriteSamples(ctx, samples[j:min(j+BenchBatch, len(samples))]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchStore is a store the sample-path benchmarks open and close per
// iteration.
type BenchStore interface {
	core.TimeSeries
	Close() error
}

// BenchWriteSamples times writing samples (WriteBatches) into an empty
// store per iteration; opening and closing it (open) are not timed. It
// reports samples/s. Whatever the caller did before (making samples) is
// timed unless it reset the timer.
func BenchWriteSamples(b *testing.B, samples []core.Sample, open func(b *testing.B) BenchStore) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := open(b)
		b.StartTimer()
		WriteBatches(b, s, samples)
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(len(samples)*b.N)/b.Elapsed().Seconds(), "samples/s")
}
