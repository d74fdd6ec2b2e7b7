package dataset

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// BenchmarkBuild builds the bench/dataset-spec.json dataset over 24
// simulated runs × 2 h at 1 s (≈1.7 M samples). bench/dataset.sh runs the
// same build through the CLI beside the raw read of the same samples.
func BenchmarkBuild(b *testing.B) {
	dir := b.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	}()
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.RunDuration, cfg.Seed = 24, 2*time.Hour, 1
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := out.Write(context.Background(), st, nil); err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("../../bench/dataset-spec.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spec, err := ParseSpec(raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Build(context.Background(), st, spec, Options{DataDir: dir}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(out.SampleCount()*b.N)/b.Elapsed().Seconds(), "samples/s")
}
