package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// The record-path benchmarks, run by each back-end's bench_test.go against
// its own store (so the figures of both are measured the same way):
//
//	BenchJobCycle     one job through a worker's whole path, serially
//	BenchJobClaims    several workers claiming and heartbeating at once
//	BenchMeta         recipe versions, runs, segments and nodes

// BenchJobCycle drives one job per iteration through what a worker does to
// it: create, claim, 10 heartbeats, 4 progress reports, provisioning →
// training → evaluating, finish with its model, and one read back.
func BenchJobCycle(b *testing.B, s core.Store) {
	ctx := context.Background()
	seed(b, s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("cycle-%d", i)
		jobCycle(b, ctx, s, id, "w")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func jobCycle(b *testing.B, ctx context.Context, s core.Store, id, worker string) {
	fail := func(err error) {
		if err != nil {
			b.Error(err)
		}
	}
	if err := s.CreateJob(ctx, newJob(id), core.JobLimits{MaxQueued: 1 << 20, MaxPerDataset: 1 << 20}); err != nil {
		b.Error(err)
		return
	}
	if _, err := s.ClaimJob(ctx, id, worker); err != nil {
		b.Error(err)
		return
	}
	for k := 0; k < 10; k++ {
		fail(s.Heartbeat(ctx, id, worker))
	}
	fail(s.TransitionJob(ctx, id, worker, core.JobProvisioning, core.JobTraining, "training"))
	for k := 0; k < 4; k++ {
		fail(s.ReportProgress(ctx, id, worker, float64(k)/4, ""))
	}
	fail(s.TransitionJob(ctx, id, worker, core.JobTraining, core.JobEvaluating, "evaluating"))
	fail(s.FinishJob(ctx, id, worker, core.JobEvaluating, rawJSON(`{"rmse":1}`), nil, true, "p", testModel("m-"+id, id)))
	if j, err := s.GetJob(ctx, id); err != nil || j.Status != core.JobDone {
		b.Errorf("job %s: %v %v", id, j.Status, err)
	}
}

// BenchJobClaims is BenchJobCycle from 4 workers at once, each on a store
// handle of its own where the back-end has one per process (stores[i%n]):
// the claims, heartbeats and compare-and-set transitions of concurrent
// workers.
func BenchJobClaims(b *testing.B, stores ...core.Store) {
	ctx := context.Background()
	seed(b, stores[0])
	const workers = 4
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := stores[w%len(stores)]
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				jobCycle(b, ctx, s, fmt.Sprintf("claim-%d", i), fmt.Sprintf("w%d", w))
			}
		}(w)
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchMeta is one iteration of the metadata a production line's ingest
// writes and reads: a recipe with a new version, a run with a context
// segment, a node upsert, and the reads of each.
func BenchMeta(b *testing.B, s core.Store) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rid, run := fmt.Sprintf("R%d", i%16), fmt.Sprintf("run-%d", i)
		must(b, s.EnsureRecipe(ctx, core.Recipe{ID: rid, LineID: "L1", ProductID: "P1"}))
		v, err := s.PutRecipeVersion(ctx, rid, map[string]any{"i": i})
		must(b, err)
		must(b, s.CreateRun(ctx, core.Run{ID: run, LineID: "L1", ProductID: "P1", RecipeID: rid, StartedMs: int64(i), Status: core.RunActive}))
		_, err = s.AddContextSegment(ctx, core.ContextSegment{RunID: run, RecipeID: rid, RecipeVersion: v.Version, FromMs: int64(i), ConfirmedBy: "bench"})
		must(b, err)
		must(b, s.UpsertNode(ctx, core.Node{ID: fmt.Sprintf("n%d", i%32), LineID: "L1", Kind: core.NodeDAQ}))
		must(b, s.EndRun(ctx, run, int64(i)+1))
		_, err = s.GetRun(ctx, run)
		must(b, err)
		_, err = s.GetRecipeVersion(ctx, rid, v.Version)
		must(b, err)
		_, err = s.GetNode(ctx, fmt.Sprintf("n%d", i%32))
		must(b, err)
		_, err = s.ListContextSegments(ctx, run)
		must(b, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rounds/s")
}

func seed(b *testing.B, s core.Store) {
	b.Helper()
	seedDataset(b, s, "ds")
}
