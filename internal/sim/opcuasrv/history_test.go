package opcuasrv_test

import (
	"context"
	"testing"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
)

// historyClient starts a manually stepped injection line and a client.
func historyClient(t *testing.T, o opcuasrv.Options) (*opcuasrv.Server, *gopcua.Client) {
	t.Helper()
	ctx := context.Background()
	o.Addr, o.Manual, o.StartMs = "127.0.0.1:0", true, t0.UnixMilli()
	srv, err := opcuasrv.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cl, err := gopcua.NewClient(srv.Endpoint(), gopcua.SecurityMode(ua.MessageSecurityModeNone), gopcua.AutoReconnect(false), gopcua.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	return srv, cl
}

// TestHistoryRead: the server answers HistoryRead (raw values) for its
// line variables and tags from the steps it keeps: each node's values in
// [StartTime, EndTime) oldest first on the line's clock, the run tag and
// the cycle counter as they were at each step, NumValuesPerNode honoured;
// only the steps kept (HistorySteps) are served; an unknown node and a
// read of modified values are refused; a server without history answers
// BadServiceUnsupported.
func TestHistoryRead(t *testing.T) {
	srv, cl := historyClient(t, opcuasrv.Options{RunSteps: 4, Seed: 9, HistorySteps: 8})
	srv.Step(11) // 12 steps taken, the last 8 kept: steps 5..12
	ctx := context.Background()
	ids := []*ua.HistoryReadValueID{}
	for _, n := range []string{sim.NodePartWeight, opcuasrv.TagCycle, opcuasrv.TagRunID} {
		ids = append(ids, &ua.HistoryReadValueID{NodeID: ua.MustParseNodeID(srv.NodeID(n)), DataEncoding: &ua.QualifiedName{}})
	}
	ids = append(ids, &ua.HistoryReadValueID{NodeID: ua.NewStringNodeID(1, "no_such_node"), DataEncoding: &ua.QualifiedName{}})
	at := func(step int) time.Time { return t0.Add(time.Duration(step-1) * time.Second) }
	read := func(d *ua.ReadRawModifiedDetails) *ua.HistoryReadResponse {
		t.Helper()
		res, err := cl.HistoryReadRawModified(ctx, ids, d)
		if err != nil {
			t.Fatal(err)
		}
		if res.ResponseHeader.ServiceResult != ua.StatusOK || len(res.Results) != len(ids) {
			t.Fatalf("answer %v with %d results", res.ResponseHeader.ServiceResult, len(res.Results))
		}
		return res
	}
	values := func(r *ua.HistoryReadResult) []*ua.DataValue {
		t.Helper()
		if r.StatusCode != ua.StatusOK {
			t.Fatalf("status %v", r.StatusCode)
		}
		hd, ok := r.HistoryData.Value.(*ua.HistoryData)
		if !ok {
			t.Fatalf("history data %T", r.HistoryData.Value)
		}
		return hd.DataValues
	}

	// Steps 7..10 (end exclusive).
	res := read(&ua.ReadRawModifiedDetails{StartTime: at(7), EndTime: at(11)})
	pw, cyc, run := values(res.Results[0]), values(res.Results[1]), values(res.Results[2])
	if len(pw) != 4 || len(cyc) != 4 || len(run) != 4 {
		t.Fatalf("%d part weights, %d cycles, %d run ids for steps 7..10", len(pw), len(cyc), len(run))
	}
	for i, dv := range cyc {
		step := 7 + i
		if !dv.SourceTimestamp.Equal(at(step)) || dv.Value.Value().(uint32) != uint32(step) || !pw[i].SourceTimestamp.Equal(at(step)) {
			t.Fatalf("value %d: cycle %v at %v, part weight at %v; want step %d at %v", i, dv.Value.Value(), dv.SourceTimestamp, pw[i].SourceTimestamp, step, at(step))
		}
		if w := pw[i].Value.Value().(float64); !(w > 25 && w < 40) {
			t.Fatalf("part weight %v", w)
		}
		// Runs of 4 steps (FirstRun 0): steps 1..4 the first, 5..8 the
		// second, 9..12 the third.
		want := sim.RunID(sim.DefaultRecipeID, (step-1)/4)
		if got := run[i].Value.Value().(string); got != want {
			t.Fatalf("step %d: run %q, want %q", step, got, want)
		}
	}
	if res.Results[3].StatusCode != ua.StatusBadNodeIDUnknown {
		t.Fatalf("unknown node: %v", res.Results[3].StatusCode)
	}
	// The newest value is the line's current one.
	last := values(read(&ua.ReadRawModifiedDetails{StartTime: at(12)}).Results[0])
	if len(last) != 1 || last[0].Value.Value().(float64) != srv.Values()[sim.NodePartWeight] {
		t.Fatalf("step 12: %v, the line reports %v", last, srv.Values()[sim.NodePartWeight])
	}
	// Only the kept steps; NumValuesPerNode caps each node's answer.
	if all := values(read(&ua.ReadRawModifiedDetails{}).Results[1]); len(all) != 8 || all[0].Value.Value().(uint32) != 5 {
		t.Fatalf("open interval: %d values from cycle %v, want 8 from 5", len(all), all[0].Value.Value())
	}
	if two := values(read(&ua.ReadRawModifiedDetails{NumValuesPerNode: 2}).Results[1]); len(two) != 2 || two[1].Value.Value().(uint32) != 6 {
		t.Fatalf("NumValuesPerNode 2: %v", two)
	}
	res, err := cl.HistoryReadRawModified(ctx, ids, &ua.ReadRawModifiedDetails{IsReadModified: true})
	if err == nil && res.ResponseHeader.ServiceResult != ua.StatusBadHistoryOperationUnsupported {
		t.Fatalf("modified values: %v", res.ResponseHeader.ServiceResult)
	}

	// Without history.
	_, cl2 := historyClient(t, opcuasrv.Options{Seed: 9, HistorySteps: -1})
	if res, err := cl2.HistoryReadRawModified(ctx, ids[:1], &ua.ReadRawModifiedDetails{}); err == nil && res.ResponseHeader.ServiceResult == ua.StatusOK {
		t.Fatal("a server without history answered HistoryRead")
	}
}
