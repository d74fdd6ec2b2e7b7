package api

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
)

// TestConnectors: the status rows connector processes write are listed
// per the caller's lines, stale ones flagged at the server's clock, and
// WatchStatus turns their changes into connector.state / connector.gap
// events on the stream, line scoped.
func TestConnectors(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000).UTC()
	e := newEnv(t, Options{Now: func() time.Time { return now }})
	e.want(e.do("viewer", "GET", "/api/v1/connectors", nil), 200, "")
	st := connect.NewStatusStore(e.d.Store.SQL())
	ctx := context.Background()
	put := func(s connect.Status) {
		t.Helper()
		if err := st.Put(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	put(connect.Status{ID: "opcua:opc.tcp://plc:4840", Line: simLine, Kind: connect.KindOPCUA, Endpoint: "opc.tcp://plc:4840", State: connect.StateConnected,
		Received: 100, Stored: 100, IntervalMs: 2000, UpdatedAt: now.Add(-time.Second)})
	put(connect.Status{ID: "mqtt:tcp://broker:1883", Line: "line-other", Kind: connect.KindMQTT, Endpoint: "tcp://broker:1883", State: connect.StateConnected,
		Malformed: 3, IntervalMs: 2000, UpdatedAt: now.Add(-10 * time.Second)})

	cases := []struct {
		role, query string
		status      int
		ids         []string
	}{
		{"viewer", "", 200, []string{"opcua:opc.tcp://plc:4840", "mqtt:tcp://broker:1883"}},
		{"viewer", "?line=" + simLine, 200, []string{"opcua:opc.tcp://plc:4840"}},
		{"otherline", "", 200, []string{"mqtt:tcp://broker:1883"}},
		{"otherline", "?line=" + simLine, 403, nil},
		{"", "", 401, nil},
	}
	for _, tc := range cases {
		r := e.do(tc.role, "GET", "/api/v1/connectors"+tc.query, nil)
		if r.status != tc.status {
			t.Fatalf("%s %s: %d %s", tc.role, tc.query, r.status, r.body)
		}
		if tc.status != 200 {
			continue
		}
		var l app.List[connect.Status]
		r.json(t, &l)
		got := map[string]connect.Status{}
		for _, s := range l.Items {
			got[s.ID] = s
		}
		if l.Count != len(tc.ids) {
			t.Fatalf("%s %s: %+v", tc.role, tc.query, l)
		}
		for _, id := range tc.ids {
			s, ok := got[id]
			if !ok {
				t.Fatalf("%s %s: %s missing", tc.role, tc.query, id)
			}
			// Written 10 s ago with a 2 s interval: stale.
			if s.Stale != (s.Kind == connect.KindMQTT) {
				t.Errorf("%s stale=%v", id, s.Stale)
			}
		}
	}
	if b := e.do("otherline", "GET", "/api/v1/connectors?line="+simLine, nil).errBody(t); b.Code != core.CodeForbidden {
		t.Errorf("out of scope: %+v", b)
	}

	// Events: the scoped caller sees its line's connector only.
	other := e.sse("otherline", "?kinds=connector.state,connector.gap")
	all := e.sse("viewer", "?kinds=connector.state,connector.gap")
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go connect.WatchStatus(wctx, st, e.d.Bus, 20*time.Millisecond, nil)
	want := map[string]bool{"opcua:opc.tcp://plc:4840": true, "mqtt:tcp://broker:1883": true}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case ev := <-all.events:
			if ev.kind == connect.EventState {
				delete(want, ev.data["id"].(string))
			}
		case <-deadline:
			t.Fatalf("no connector.state events for %v", want)
		}
	}
	// A gap reported by the OPC UA connector's process.
	put(connect.Status{ID: "opcua:opc.tcp://plc:4840", Line: simLine, Kind: connect.KindOPCUA, Endpoint: "opc.tcp://plc:4840", State: connect.StateConnected,
		Gaps: 1, IntervalMs: 2000, UpdatedAt: now})
	for got := false; !got; {
		select {
		case ev := <-all.events:
			got = ev.kind == connect.EventGap && ev.data["id"] == "opcua:opc.tcp://plc:4840"
		case <-time.After(10 * time.Second):
			t.Fatal("no connector.gap event")
		}
	}
	select {
	case ev := <-other.events:
		if ev.data["id"] != "mqtt:tcp://broker:1883" || ev.data["line"] != "line-other" {
			t.Fatalf("scoped stream got %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("scoped stream: no event of its own line")
	}
	for {
		select {
		case ev := <-other.events:
			if ev.data["line"] != "line-other" {
				t.Fatalf("scoped stream got another line's event %+v", ev)
			}
		default:
			return
		}
	}
}
