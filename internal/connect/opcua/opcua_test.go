package opcua

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// lineMap maps every node of the simulated line, its run and cycle tags.
func lineMap(t *testing.T, srv *opcuasrv.Server) *Map {
	t.Helper()
	m := map[string]any{"line": sim.DefaultLineID, "product": sim.DefaultProductID, "recipe": sim.DefaultRecipeID,
		"runTag": srv.NodeID(opcuasrv.TagRunID), "cycleTag": srv.NodeID(opcuasrv.TagCycle), "publishingIntervalMs": 5}
	var nodes []map[string]any
	for _, n := range sim.InjectionNodes(sim.DefaultLineID, time.Time{}) {
		nodes = append(nodes, map[string]any{"opcua": srv.NodeID(n.ID), "node": n.ID})
	}
	m["nodes"] = nodes
	raw, _ := json.Marshal(m)
	mp, err := ParseMap(raw)
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

func startLine(t *testing.T, opts opcuasrv.Options) *opcuasrv.Server {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	srv, err := opcuasrv.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() }) // teardown of the simulated line (Close is idempotent)
	return srv
}

// waitFor polls cond (bounded) — the connector works asynchronously.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countSamples(t *testing.T, st *sqlite.Store, node string) (n int, first, last int64) {
	t.Helper()
	var after *int64
	for {
		p, err := st.QueryPage(context.Background(), core.PageQuery{Node: node, AfterTs: after, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		for i, pt := range p.Points {
			if n == 0 && i == 0 {
				first = core.UsToMs(pt.TsUs)
			}
			last = core.UsToMs(pt.TsUs)
		}
		n += len(p.Points)
		if !p.HasMore {
			return
		}
		a := p.NextAfterTs
		after = &a
	}
}

// subscribe opens a store, runs a connector of srv's line on it (map mp,
// store as audit log, flushes every 50 ms; opts sets the rest) and waits
// for its first values. stop cancels the connector and fails the test if
// Run returned an error; the store closes at the end of the test.
func subscribe(t *testing.T, srv *opcuasrv.Server, mp *Map, opts Options) (c *Connector, st *sqlite.Store, stop func()) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	opts.Endpoint, opts.Map, opts.Audit, opts.FlushEvery = srv.Endpoint(), mp, st, 50*time.Millisecond
	c, err = New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "first values", 10*time.Second, func() bool { return c.Stats().Received >= 10 })
	return c, st, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A manually stepped line: every step the server takes while subscribed
// reaches the store, for every node — none lost, none invented — with the
// run context, units and ranges imported from the server.
func TestSubscriptionIngestNoLostSamples(t *testing.T) {
	srv := startLine(t, opcuasrv.Options{Manual: true, RunSteps: 40, Seed: 3})
	c, st, stop := subscribe(t, srv, lineMap(t, srv), Options{})

	// Step the line one step at a time, waiting until each step arrived,
	// then count: a bounded run of 100 steps, one per received cycle.
	const steps = 100
	startSteps := srv.Stats().Steps
	// The server keeps one queued value per item (gopcua's server), and it
	// notifies the cycle counter after the values: wait for the counter
	// too, or the next step could replace it before it is published and
	// the connector would rightly report a lost cycle.
	for i := range steps {
		want := c.Stats().Received + 10
		c.mu.Lock()
		cycle := c.lastCycle
		c.mu.Unlock()
		srv.Step(1)
		waitFor(t, fmt.Sprintf("step %d", i), 10*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.lastCycle > cycle
		})
		waitFor(t, fmt.Sprintf("step %d values", i), 10*time.Second, func() bool { return c.Stats().Received >= want })
	}
	stop()
	total := int(srv.Stats().Steps)
	for _, n := range sim.InjectionNodes(sim.DefaultLineID, time.Time{}) {
		got, first, last := countSamples(t, st, n.ID)
		if got != total {
			t.Errorf("%s: %d samples stored, the line took %d steps", n.ID, got, total)
		}
		if span := (last - first) / 1000; span != int64(total-1) {
			t.Errorf("%s: samples span %d s, want %d", n.ID, span, total-1)
		}
	}
	if startSteps != 1 {
		t.Fatalf("line had %d steps before subscribing", startSteps)
	}
	s := c.Stats()
	if len(s.Gaps) != 0 || s.Malformed != 0 {
		t.Fatalf("gaps %v malformed %d on a clean run", s.Gaps, s.Malformed)
	}
	// Units and ranges from EngineeringUnits / EURange; setpoints are dcw.
	pw, err := st.GetNode(context.Background(), sim.NodePartWeight)
	if err != nil {
		t.Fatal(err)
	}
	if pw.Unit != "g" || pw.Min == nil || *pw.Min != 25 || *pw.Max != 40 || pw.Kind != core.NodeDAQ {
		t.Fatalf("part_weight imported as %+v", pw)
	}
	hp, _ := st.GetNode(context.Background(), sim.NodeHoldPressure)
	if hp.Kind != core.NodeDCW || hp.Unit != "bar" {
		t.Fatalf("hold_pressure imported as %+v", hp)
	}
	// Runs of 40 steps from the run tag: 101 steps are runs 1, 2 (ended)
	// and 3 (active).
	runs, err := st.ListRuns(context.Background(), core.RunFilter{Line: sim.DefaultLineID})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].Status != core.RunEnded || runs[1].Status != core.RunEnded || runs[2].Status != core.RunActive {
		t.Fatalf("runs %+v", runs)
	}
	counts, _ := st.CountRunSamples(context.Background(), runs[1].ID)
	if counts[sim.NodePartWeight] != 40 {
		t.Fatalf("run %s holds %d part weights, want 40", runs[1].ID, counts[sim.NodePartWeight])
	}
}

// The server goes away and comes back on the same address: the connector
// reconnects with backoff, records the interval it missed as a gap (audit
// log), and stores nothing inside it.
func TestReconnectRecordsGap(t *testing.T) {
	srv := startLine(t, opcuasrv.Options{Manual: true, Seed: 4})
	addr := srv.Endpoint()[len("opc.tcp://"):]
	c, st, stop := subscribe(t, srv, lineMap(t, srv), Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, StallTimeout: 3 * time.Second})
	for range 5 {
		want := c.Stats().Received + 10
		srv.Step(1)
		waitFor(t, "step", 10*time.Second, func() bool { return c.Stats().Received >= want })
	}
	lastBefore := srv.Stats().NowMs
	// A loaded machine may have dropped and re-made the first connection
	// already (a gap without a last sample): the gap of this outage is the
	// next one.
	gaps0, connects0 := len(c.Stats().Gaps), c.Stats().Connects
	_ = srv.Close() // the wait below checks what matters: the connector saw it go
	waitFor(t, "disconnect", 15*time.Second, func() bool { return c.Stats().State == "reconnecting" })

	// The line went on while the server was down: a new server whose
	// clock starts 30 steps later, on the same address.
	srv2 := startLine(t, opcuasrv.Options{Manual: true, Seed: 4, Addr: addr, StartMs: lastBefore + 31_000, FirstRun: 0})
	waitFor(t, "reconnect and gap", 20*time.Second, func() bool {
		st := c.Stats()
		return len(st.Gaps) > gaps0 && st.Connects > connects0
	})
	for range 3 {
		want := c.Stats().Received + 10
		srv2.Step(1)
		waitFor(t, "step after reconnect", 10*time.Second, func() bool { return c.Stats().Received >= want })
	}
	stop()
	g := c.Stats().Gaps[gaps0]
	if g.FromMs != lastBefore || g.ToMs != lastBefore+31_000 || g.LostCycles < 0 {
		t.Fatalf("gap %+v, want %d..%d", g, lastBefore, lastBefore+31_000)
	}
	// Nothing stored inside the gap.
	from, to := g.FromMs+1, g.ToMs-1
	p, err := st.QueryPage(context.Background(), core.PageQuery{Node: sim.NodePartWeight, FromMs: &from, ToMs: &to, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Points) != 0 {
		t.Fatalf("%d samples inside the gap", len(p.Points))
	}
	entries, err := st.AuditLog().List(context.Background(), 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.Action == "connector.gap" {
			found = true
		}
	}
	if !found {
		t.Fatal("the gap is not in the audit log")
	}
}

// The server keeps one value per monitored item between two publishes
// (gopcua's server), so a line stepping faster than the connector's
// publishing interval loses steps on a live subscription. With a server
// that keeps history, the connector reads every lost step back
// (HistoryRead, raw values) on the cycle counter's jump: every step of
// every node is stored once, in its run (runs of 7 steps change inside
// the lost bursts), and no gap is recorded — a backfill is audited
// instead. Without history (HistorySteps -1) the same bursts are gaps.
func TestLostCyclesReadBackFromHistory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
	}{{"server keeps history", 0}, {"server without history", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startLine(t, opcuasrv.Options{Manual: true, RunSteps: 7, Seed: 5, HistorySteps: tc.history})
			mp := lineMap(t, srv)
			mp.PublishingIntervalMs = 50 // a burst of steps falls between two publishes
			c, st, stop := subscribe(t, srv, mp, Options{})
			for i := range 8 {
				srv.Step(5)
				want := int64(srv.Stats().Steps)
				waitFor(t, fmt.Sprintf("burst %d", i), 10*time.Second, func() bool {
					c.mu.Lock()
					defer c.mu.Unlock()
					return c.lastCycle >= want
				})
			}
			time.Sleep(400 * time.Millisecond) // the last publish of the burst's values
			stop()
			s := c.Stats()
			total := int(srv.Stats().Steps)
			lost := int64(0)
			for _, g := range s.Gaps {
				lost += g.LostCycles
			}
			t.Logf("%d steps; backfilled %d values of %d cycles; gaps %d (%d cycles)", total, s.Backfilled, s.BackfilledCycles, len(s.Gaps), lost)
			if tc.history < 0 {
				if len(s.Gaps) == 0 || lost == 0 || s.Backfilled != 0 {
					t.Fatalf("without history: gaps %v, backfilled %d", s.Gaps, s.Backfilled)
				}
				got, _, _ := countSamples(t, st, sim.NodePartWeight)
				if got >= total {
					t.Fatalf("without history %d part weights stored for %d steps", got, total)
				}
				return
			}
			if len(s.Gaps) != 0 || s.BackfilledCycles == 0 || s.Malformed != 0 {
				t.Fatalf("with history: gaps %v, backfilled cycles %d, malformed %d", s.Gaps, s.BackfilledCycles, s.Malformed)
			}
			for _, n := range sim.InjectionNodes(sim.DefaultLineID, time.Time{}) {
				got, first, last := countSamples(t, st, n.ID)
				if got != total || (last-first)/1000 != int64(total-1) {
					t.Errorf("%s: %d samples over %d s stored, the line took %d steps", n.ID, got, (last-first)/1000, total)
				}
			}
			// Every ended run holds its 7 steps: the run tag's changes
			// inside a lost burst were read back at their instants.
			runs, err := st.ListRuns(context.Background(), core.RunFilter{Line: sim.DefaultLineID})
			if err != nil {
				t.Fatal(err)
			}
			ended := 0
			for _, r := range runs {
				counts, _ := st.CountRunSamples(context.Background(), r.ID)
				if r.Status == core.RunEnded {
					ended++
					if counts[sim.NodePartWeight] != 7 {
						t.Errorf("run %s holds %d part weights, want 7", r.ID, counts[sim.NodePartWeight])
					}
				}
			}
			if ended < total/7-1 {
				t.Errorf("%d runs ended over %d steps", ended, total)
			}
			entries, err := st.AuditLog().List(context.Background(), 0, 500, "")
			if err != nil {
				t.Fatal(err)
			}
			backfills := 0
			for _, e := range entries {
				if e.Action == connect.AuditBackfill {
					backfills++
				}
			}
			if backfills == 0 {
				t.Fatal("no backfill in the audit log")
			}
		})
	}
}
