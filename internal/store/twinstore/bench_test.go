package twinstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// BenchmarkAuditAppend measures the shared stores' write path: one write
// transaction (SQLite: BEGIN IMMEDIATE on the single writer; PostgreSQL:
// BEGIN + the advisory write lock) that reads the chain head and appends
// one hash-chained entry — what every twin record change costs on top of
// its own rows. "parallel" runs GOMAXPROCS goroutines over two handles on
// one database (two processes), all serialised by the lock.
func BenchmarkAuditAppend(b *testing.B) {
	ctx := context.Background()
	// two handles on one database, closed at the end of the benchmark
	two := func(b *testing.B, open func() (store.Store, error)) (store.Store, store.Store) {
		s1, err := open()
		if err != nil {
			b.Fatal(err)
		}
		s2, err := open()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := errors.Join(s1.Close(), s2.Close()); err != nil {
				b.Error(err)
			}
		})
		return s1, s2
	}
	open := map[string]func(b *testing.B) (store.Store, store.Store){
		"sqlite": func(b *testing.B) (store.Store, store.Store) {
			dir := b.TempDir()
			return two(b, func() (store.Store, error) { return sqlite.Open(dir) })
		},
		"postgres": func(b *testing.B) (store.Store, store.Store) {
			u := pgtest.Schema(b)
			return two(b, func() (store.Store, error) { return postgres.Open(ctx, u) })
		},
	}
	payload := map[string]any{"trialId": "trial-1", "improvement": 0.42, "hash": "c0ffee"}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name+"/serial", func(b *testing.B) {
			s1, _ := open[name](b)
			l := audit.New(s1.SQL())
			b.ResetTimer()
			for b.Loop() {
				if _, err := l.Append(ctx, "bench", "trial.put", "trial-1", "L1", payload); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			s1, s2 := open[name](b)
			logs := []*audit.Log{audit.New(s1.SQL()), audit.New(s2.SQL())}
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := logs[next.Add(1)%2]
				for pb.Next() {
					if _, err := l.Append(ctx, "bench", "trial.put", "trial-1", "L1", payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
