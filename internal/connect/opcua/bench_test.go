package opcua

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// BenchmarkOPCUASubscriptionIngest: the simulated line at 200 steps/s of
// wall time (10 numeric nodes + run tag + cycle per step), subscribed with
// a 2 ms publishing interval, for 5 s; reports stored samples/s and the
// steps lost to the server's one-value-per-publish coalescing (cycle
// counter jumps), next to the store's direct batch ingest of the same
// samples (BenchmarkDirectBatchIngest).
func BenchmarkOPCUASubscriptionIngest(b *testing.B) {
	for range b.N {
		srv, err := opcuasrv.Start(context.Background(), opcuasrv.Options{Addr: "127.0.0.1:0", Speed: 200, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		st, err := sqlite.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		m := lineMapB(srv)
		m.PublishingIntervalMs = 2
		c, err := New(st, Options{Endpoint: srv.Endpoint(), Map: m})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t0 := time.Now()
		if err := c.Run(ctx); err != nil {
			b.Fatal(err)
		}
		secs := time.Since(t0).Seconds()
		cancel()
		s := c.Stats()
		lost := int64(0)
		for _, g := range s.Gaps {
			lost += g.LostCycles
		}
		b.ReportMetric(float64(s.Stored)/secs, "samples/s")
		b.ReportMetric(float64(lost), "lost-steps")
		b.ReportMetric(float64(srv.Stats().Steps), "steps")
		_ = srv.Close() // teardown of the simulated line
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDirectBatchIngest writes samples of the same shape straight
// into the store in 2000-sample transactions.
func BenchmarkDirectBatchIngest(b *testing.B) {
	st, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	}()
	nodes := sim.InjectionNodes(sim.DefaultLineID, time.Time{})
	batch := make([]core.Sample, 0, 2000)
	ts := int64(1_767_600_000_000)
	b.ResetTimer()
	t0 := time.Now()
	n := 0
	for range b.N {
		batch = batch[:0]
		for len(batch) < 2000 {
			for _, nd := range nodes {
				batch = append(batch, core.Sample{Node: nd.ID, TsUs: ts * 1000, Value: 1, State: core.StateOK, Line: sim.DefaultLineID, Product: "p", Recipe: "r", Run: "run-1"})
			}
			ts += 1000
		}
		if _, err := st.WriteSamples(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		n += len(batch)
	}
	b.ReportMetric(float64(n)/time.Since(t0).Seconds(), "samples/s")
}

func lineMapB(srv *opcuasrv.Server) *Map {
	m := &Map{Line: sim.DefaultLineID, Product: sim.DefaultProductID, Recipe: sim.DefaultRecipeID,
		RunTag: srv.NodeID(opcuasrv.TagRunID), CycleTag: srv.NodeID(opcuasrv.TagCycle)}
	for _, n := range sim.InjectionNodes(sim.DefaultLineID, time.Time{}) {
		m.Nodes = append(m.Nodes, MapEntry{OPCUA: srv.NodeID(n.ID), Node: n.ID})
	}
	return m
}
