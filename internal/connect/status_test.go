package connect

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/sqlite"
)

func statusStore(t *testing.T) *StatusStore {
	t.Helper()
	s, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return NewStatusStore(s.SQL())
}

func TestStatusPutListStale(t *testing.T) {
	ctx := context.Background()
	st := statusStore(t)
	t0 := time.UnixMilli(1_800_000_000_000).UTC()
	rows := []Status{
		{ID: "opcua:opc.tcp://a:4840", Line: "l1", Kind: KindOPCUA, Endpoint: "opc.tcp://a:4840", State: StateConnected, Received: 10, Stored: 9, LastSampleMs: 42, IntervalMs: 2000, UpdatedAt: t0},
		{ID: "mqtt:tcp://b:1883", Line: "l1", Kind: KindMQTT, Endpoint: "tcp://b:1883", State: StateStopped, IntervalMs: 2000, UpdatedAt: t0},
		{ID: "opcua:opc.tcp://a:4840", Line: "l2", Kind: KindOPCUA, Endpoint: "opc.tcp://a:4840", State: StateReconnecting, LastError: "EOF", IntervalMs: 1000, UpdatedAt: t0},
	}
	for _, r := range rows {
		if err := st.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// An update replaces the counters and keeps one row per (id, line).
	rows[0].Received, rows[0].Gaps, rows[0].UpdatedAt = 20, 1, t0.Add(time.Second)
	if err := st.Put(ctx, rows[0]); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		line  string
		at    time.Time
		want  int
		stale map[string]bool // line/id → stale
	}{
		{"all fresh", "", t0.Add(2 * time.Second), 3, map[string]bool{}},
		{"one line", "l1", t0.Add(2 * time.Second), 2, map[string]bool{}},
		// l2 reports every 1 s: stale after 3 s; l1's OPC UA after 6 s
		// from its last write; a stopped connector is never stale.
		{"l2 stale", "", t0.Add(3500 * time.Millisecond), 3, map[string]bool{"l2/opcua:opc.tcp://a:4840": true}},
		{"both running stale", "", t0.Add(8 * time.Second), 3, map[string]bool{"l2/opcua:opc.tcp://a:4840": true, "l1/opcua:opc.tcp://a:4840": true}},
		{"unknown line", "l3", t0, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.List(ctx, tc.line, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d rows, want %d: %+v", len(got), tc.want, got)
			}
			for _, s := range got {
				if s.Stale != tc.stale[s.Line+"/"+s.ID] {
					t.Errorf("%s/%s stale=%v", s.Line, s.ID, s.Stale)
				}
				if s.Stale && s.Shown() != "stale" {
					t.Errorf("shown %q", s.Shown())
				}
				if s.Line == "l1" && s.Kind == KindOPCUA && (s.Received != 20 || s.Gaps != 1 || s.LastSampleMs != 42 || !s.StartedAt.Equal(t0) && !s.StartedAt.Equal(t0.Add(time.Second))) {
					t.Errorf("updated row %+v", s)
				}
			}
		})
	}
	bad := []Status{
		{Line: "l", Kind: KindOPCUA, State: StateConnected, IntervalMs: 1},
		{ID: "x", Kind: KindOPCUA, State: StateConnected, IntervalMs: 1},
		{ID: "x", Line: "l", Kind: "modbus", State: StateConnected, IntervalMs: 1},
		{ID: "x", Line: "l", Kind: KindMQTT, State: "dancing", IntervalMs: 1},
		{ID: "x", Line: "l", Kind: KindMQTT, State: StateConnected},
	}
	for i, b := range bad {
		if err := st.Put(ctx, b); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Errorf("bad row %d: %v", i, err)
		}
	}
}

// fakeConn is a connector whose state the test drives.
type fakeConn struct {
	mu sync.Mutex
	s  Status
}

func (f *fakeConn) set(fn func(*Status)) { f.mu.Lock(); fn(&f.s); f.mu.Unlock() }
func (f *fakeConn) get() Status          { f.mu.Lock(); defer f.mu.Unlock(); return f.s }

// reporterClock stamps the reporter's rows and is the "now" they are
// listed at: never stale, whatever the wall clock says.
var reporterClock = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func waitRow(t *testing.T, st *StatusStore, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := st.List(context.Background(), "l1", reporterClock)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && cond(got[0]) {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReporterWritesStateChanges: with an interval far longer than the
// test, every row after the first is there because the state, run or gap
// count changed; Stop writes the outcome.
func TestReporterWritesStateChanges(t *testing.T) {
	st := statusStore(t)
	fc := &fakeConn{s: Status{State: StateConnecting}}
	r, err := NewReporter(st, ReporterOptions{ID: "opcua:opc.tcp://x:1", Line: "l1", Kind: KindOPCUA, Endpoint: "opc.tcp://x:1", Interval: time.Hour, Sample: fc.get,
		Now: func() time.Time { return reporterClock }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	waitRow(t, st, "first row", func(s Status) bool { return s.State == StateConnecting && s.IntervalMs == 3_600_000 && s.PID > 0 })
	fc.set(func(s *Status) { s.State, s.RunID, s.Received, s.Stored = StateConnected, "run-1", 5, 5 })
	waitRow(t, st, "connected", func(s Status) bool { return s.State == StateConnected && s.RunID == "run-1" && s.Stored == 5 })
	fc.set(func(s *Status) { s.State, s.Gaps = StateReconnecting, 1 })
	waitRow(t, st, "reconnecting", func(s Status) bool { return s.State == StateReconnecting && s.Gaps == 1 })
	cancel()
	<-done
	if err := r.Stop(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	waitRow(t, st, "stopped", func(s Status) bool { return s.State == StateStopped && !s.Stale })
	if err := r.Stop(context.Background(), errors.New("connect: refused")); err != nil {
		t.Fatal(err)
	}
	got := waitRow(t, st, "failed", func(s Status) bool { return s.State == StateFailed })
	if got.LastError != "connect: refused" || r.Last().State != StateFailed {
		t.Errorf("failed row %+v", got)
	}
}

func TestStatusEvents(t *testing.T) {
	seen := map[string]Status{}
	a := Status{ID: "opcua:x", Line: "l1", Kind: KindOPCUA, State: StateConnected}
	steps := []struct {
		name  string
		list  []Status
		kinds []string
	}{
		{"appears", []Status{a}, []string{EventState}},
		{"unchanged", []Status{a}, nil},
		{"counters only", []Status{func() Status { s := a; s.Stored = 100; return s }()}, nil},
		{"gap", []Status{func() Status { s := a; s.Gaps = 2; return s }()}, []string{EventGap}},
		{"stale", []Status{func() Status { s := a; s.Gaps = 2; s.Stale = true; return s }()}, []string{EventState}},
		{"stopped, new run, another gap", []Status{func() Status { s := a; s.Gaps, s.State, s.RunID = 3, StateStopped, "r2"; return s }()}, []string{EventState, EventGap}},
	}
	bus := events.New()
	sub := bus.Subscribe(16, nil)
	defer sub.Close()
	for _, st := range steps {
		evs := statusEvents(seen, st.list)
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
			if e.Line != "l1" || e.ID != "opcua:x" {
				t.Errorf("%s: event %+v", st.name, e)
			}
		}
		if len(kinds) != len(st.kinds) {
			t.Fatalf("%s: events %v, want %v", st.name, kinds, st.kinds)
		}
		for i := range kinds {
			if kinds[i] != st.kinds[i] {
				t.Errorf("%s: events %v, want %v", st.name, kinds, st.kinds)
			}
		}
	}
}

// TestWatchStatusPublishes: a row written by "another process" (the
// status store) reaches the bus as a connector.state event.
func TestWatchStatusPublishes(t *testing.T) {
	st := statusStore(t)
	bus := events.New()
	sub := bus.Subscribe(16, nil)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchStatus(ctx, st, bus, 20*time.Millisecond, nil)
	if err := st.Put(context.Background(), Status{ID: "mqtt:tcp://b:1", Line: "l1", Kind: KindMQTT, Endpoint: "tcp://b:1", State: StateConnected, IntervalMs: 2000}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-sub.C:
		if e.Kind != EventState || e.ID != "mqtt:tcp://b:1" || e.Data["state"] != StateConnected {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no connector.state event")
	}
}
