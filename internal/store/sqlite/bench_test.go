package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/samples"
	"github.com/aml-project/aml/internal/store/storetest"
)

// Benchmarks of the hot paths next to the raw SQLite limit on the same
// settings (bench/ingest.sh prints them side by side):
//
//	BenchmarkWriteSamples     API batch ingest through core.TimeSeries
//	BenchmarkRawInsert        a plain one-row prepared INSERT loop of the same rows
//	BenchmarkQueryPage        paged per-node reads through core.TimeSeries
//	BenchmarkQueryPageDatabaseSQL  the same through database/sql's Scan (no samples.PointQuerier)
//	BenchmarkRawSelect        a plain prepared SELECT of the same rows

// The data of every benchmark here is storetest.BenchSamples (200k
// samples per iteration, written in batches of storetest.BenchBatch).

func BenchmarkWriteSamples(b *testing.B) {
	storetest.BenchWriteSamples(b, storetest.BenchSamples(), func(b *testing.B) storetest.BenchStore {
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

func BenchmarkRawInsert(b *testing.B) {
	samples := storetest.BenchSamples()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		// Node and context keys exist up front: the raw loop measures only
		// SQLite inserting the rows.
		if _, err := s.WriteSamples(ctx, samples[:storetest.BenchNodes]); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for j := 0; j < len(samples); j += storetest.BenchBatch {
			tx, err := s.w.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			st, err := tx.Prepare(`INSERT INTO samples(node, ts, value, state, ctx) VALUES (?,?,?,?,?) ON CONFLICT(node, ts) DO UPDATE SET value=excluded.value, state=excluded.state, ctx=excluded.ctx`)
			if err != nil {
				b.Fatal(err)
			}
			for k := j; k < min(j+storetest.BenchBatch, len(samples)); k++ {
				sm := &samples[k]
				if _, err := st.Exec(int64(k%storetest.BenchNodes+1), sm.TsUs, sm.Value, nil, int64(1)); err != nil {
					b.Fatal(err)
				}
			}
			st.Close()
			if err := tx.Commit(); err != nil {
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

// benchStore is a store holding storetest.BenchSamples, closed at the
// end of the benchmark.
func benchStore(b *testing.B) *Store {
	s := recordStore(b)
	if _, err := s.WriteSamples(context.Background(), storetest.BenchSamples()); err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkQueryPage(b *testing.B) {
	s := benchStore(b)
	benchPages(b, s)
}

// genericDB hides readDB's samples.PointQuerier: pages go through
// database/sql's rows and Scan, the path before issue 22's third pass.
type genericDB struct{ samples.DB }

// BenchmarkQueryPageDatabaseSQL is BenchmarkQueryPage through database/sql
// (genericDB): the comparison for the driver-level page read.
func BenchmarkQueryPageDatabaseSQL(b *testing.B) {
	s := benchStore(b)
	s.Reader = &samples.Reader{DB: genericDB{readDB{s.r}}, Nodes: s.nodes}
	benchPages(b, s)
}

func benchPages(b *testing.B, s *Store) {
	ctx := context.Background()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		for node := 0; node < storetest.BenchNodes; node++ {
			var after *int64
			for {
				p, err := s.QueryPage(ctx, core.PageQuery{Node: fmt.Sprintf("node%02d", node), Filter: core.ContextFilter{Run: "r1"}, AfterTs: after, Limit: 10_000})
				if err != nil {
					b.Fatal(err)
				}
				n += len(p.Points)
				if !p.HasMore {
					break
				}
				after = &p.NextAfterTs
			}
		}
	}
	if n != b.N*storetest.BenchNodes*storetest.BenchSteps {
		b.Fatalf("read %d samples", n)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
}

func BenchmarkRawSelect(b *testing.B) {
	s := benchStore(b)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		st, err := s.r.Prepare(`SELECT ts, value, state FROM samples WHERE node = ? ORDER BY ts`)
		if err != nil {
			b.Fatal(err)
		}
		for node := 1; node <= storetest.BenchNodes; node++ {
			rows, err := st.Query(int64(node))
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
				var ts int64
				var v float64
				var state sql.NullString
				if err := rows.Scan(&ts, &v, &state); err != nil {
					b.Fatal(err)
				}
				n++
			}
			rows.Close()
		}
		st.Close()
	}
	if n != b.N*storetest.BenchNodes*storetest.BenchSteps {
		b.Fatalf("read %d samples", n)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
}

// The record paths (internal/store/storetest's benchmarks, the same ones
// internal/store/postgres runs).
func BenchmarkJobCycle(b *testing.B)  { storetest.BenchJobCycle(b, recordStore(b)) }
func BenchmarkJobClaims(b *testing.B) { storetest.BenchJobClaims(b, recordStore(b)) }
func BenchmarkMeta(b *testing.B)      { storetest.BenchMeta(b, recordStore(b)) }

// recordStore is an empty store closed at the end of the benchmark.
func recordStore(b *testing.B) *Store {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// BenchmarkQueries is storetest.BenchQueries on SQLite.
func BenchmarkQueries(b *testing.B) {
	s, _ := openTest(b)
	defer func() { _ = s.Close() }()
	storetest.BenchQueries(b, s)
}
