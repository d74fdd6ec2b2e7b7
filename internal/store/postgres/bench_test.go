package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aml-project/aml/internal/store/storetest"
)

// BenchmarkWriteSamples is the PostgreSQL twin of sqlite's
// BenchmarkWriteSamples: the same 200 000 samples (storetest.BenchSamples:
// 10 nodes × 20 000 steps, one run) written through core.TimeSeries in
// batches of 10 000 into an empty store — new instants, so each batch
// takes the append-only path (one overlap check, one binary COPY into
// samples). bench/pg_ingest.sh runs both in one go and prints the ratio.
func BenchmarkWriteSamples(b *testing.B) {
	samples := storetest.BenchSamples()
	b.ResetTimer()
	storetest.BenchWriteSamples(b, samples, func(b *testing.B) storetest.BenchStore {
		s, _ := openTest(b)
		return s
	})
}

// BenchmarkRewriteSamples writes the same instants a second time with new
// values (a corrected file ingested again): every instant is stored
// already, in the same context, so each batch takes the upsert path — COPY
// into the staging table, one INSERT … ON CONFLICT DO UPDATE replacing
// every row. Only the second pass is timed.
func BenchmarkRewriteSamples(b *testing.B) { benchSecondPass(b, 1) }

// BenchmarkReingestSamples is BenchmarkRewriteSamples with the very same
// values (the same file ingested twice).
func BenchmarkReingestSamples(b *testing.B) { benchSecondPass(b, 0) }

func benchSecondPass(b *testing.B, delta float64) {
	samples := storetest.BenchSamples()
	again := slices.Clone(samples)
	for i := range again {
		again[i].Value += delta
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, _ := openTest(b)
		storetest.WriteBatches(b, s, samples)
		b.StartTimer()
		storetest.WriteBatches(b, s, again)
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(len(samples)*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkRawCopy is the reference: the same rows COPYed straight into
// the samples table with pgx's CopyFrom (keys known, no overlap check, no
// conflict rule), in batch order.
func BenchmarkRawCopy(b *testing.B) {
	samples := storetest.BenchSamples()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, _ := openTest(b)
		if _, err := s.WriteSamples(ctx, samples[:storetest.BenchNodes]); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, `DELETE FROM samples`); err != nil {
			b.Fatal(err)
		}
		pks := map[string]int64{}
		for n := 0; n < storetest.BenchNodes; n++ {
			id := fmt.Sprintf("node%02d", n)
			pk, err := s.Node(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			pks[id] = pk
		}
		var ctxPK int64
		if err := s.pool.QueryRow(ctx, `SELECT pk FROM sample_ctx`).Scan(&ctxPK); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for j := 0; j < len(samples); j += storetest.BenchBatch {
			rows := make([][]any, 0, storetest.BenchBatch)
			for _, sm := range samples[j:min(j+storetest.BenchBatch, len(samples))] {
				rows = append(rows, []any{pks[sm.Node], sm.TsUs, sm.Value, nil, ctxPK})
			}
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.CopyFrom(ctx, []string{"samples"}, []string{"node", "ts", "value", "state", "ctx"}, copyRows(rows)); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(len(samples)*b.N)/b.Elapsed().Seconds(), "samples/s")
}

func copyRows(rows [][]any) *pgxCopySource { return &pgxCopySource{rows: rows, i: -1} }

type pgxCopySource struct {
	rows [][]any
	i    int
}

func (c *pgxCopySource) Next() bool             { c.i++; return c.i < len(c.rows) }
func (c *pgxCopySource) Values() ([]any, error) { return c.rows[c.i], nil }
func (c *pgxCopySource) Err() error             { return nil }

// The record paths (internal/store/storetest's benchmarks, the same ones
// internal/store/sqlite runs). BenchmarkJobClaims spreads its workers over
// two Stores on one database, as worker processes would be.
func BenchmarkJobCycle(b *testing.B) {
	s, _ := openTest(b)
	storetest.BenchJobCycle(b, s)
}

func BenchmarkJobClaims(b *testing.B) {
	s, u := openTest(b)
	storetest.BenchJobClaims(b, s, openURL(b, u))
}

func BenchmarkMeta(b *testing.B) {
	s, _ := openTest(b)
	storetest.BenchMeta(b, s)
}

// BenchmarkQueries is storetest.BenchQueries on PostgreSQL.
func BenchmarkQueries(b *testing.B) {
	s, _ := openTest(b)
	defer func() { _ = s.Close() }()
	storetest.BenchQueries(b, s)
}
