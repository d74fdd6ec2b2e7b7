package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/govern"
)

// TestLineOverview: each node's newest value with its alarm (above max,
// below min, stale on the app's clock, no data, normal), setpoints first;
// the line's connectors; the newest governed writes (executed and failed)
// with their readback, newest first and bounded; line scope enforced.
func TestLineOverview(t *testing.T) {
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	now := fixed
	a := New(&service.Deps{Store: st, DataDir: dir}, Options{Now: func() time.Time { return now }})
	line := "ov-line"
	t0 := now.Add(-time.Hour).UnixMilli()
	samples := []IngestSample{
		{Node: "temp", TsMs: t0, Value: 20}, {Node: "temp", TsMs: now.Add(-10 * time.Second).UnixMilli(), Value: 95}, // high
		{Node: "press", TsMs: now.Add(-5 * time.Second).UnixMilli(), Value: 1},   // low
		{Node: "speed", TsMs: now.Add(-20 * time.Minute).UnixMilli(), Value: 50}, // stale
		{Node: "sp", TsMs: now.Add(-time.Second).UnixMilli(), Value: 60},         // normal setpoint
	}
	if _, err := a.IngestSamples(ctx, engineer, IngestSamplesRequest{Line: line, Product: "p", Recipe: "r", Run: "ov-run", Samples: samples}); err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	yes := true
	if _, err := a.LineApply(ctx, engineer, LineApplyRequest{Line: line, Nodes: []NodeSpec{
		{ID: "temp", Min: f(0), Max: f(90)}, {ID: "press", Min: f(5), Max: f(10)}, {ID: "speed", Min: f(0), Max: f(100)},
		{ID: "sp", Writable: &yes, Min: f(50), Max: f(70)}, {ID: "idle", Min: f(0)}}}); err != nil {
		t.Fatal(err)
	}
	if err := connect.NewStatusStore(st.SQL()).Put(ctx, connect.Status{ID: "opc-1", Line: line, Kind: "opcua", State: connect.StateConnected, IntervalMs: 1000,
		StartedAt: now.Add(-time.Hour), UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for i, action := range []string{twinstore.AuditWriteExecuted, twinstore.AuditWriteFailed, twinstore.AuditWriteExecuted} {
		pl := map[string]any{"status": "readback-verified", "writes": []govern.MoveResult{{NodeID: "sp", From: 60, To: 61 + float64(i), Written: true, Readback: 61 + float64(i), Verified: true}}}
		if _, err := st.AppendAudit(ctx, "olga", action, "cert-"+string(rune('a'+i)), line, pl); err != nil {
			t.Fatal(err)
		}
	}
	// Another line's write is not this line's.
	if _, err := st.AppendAudit(ctx, "olga", twinstore.AuditWriteExecuted, "cert-other", "other-line", map[string]any{"status": "readback-verified"}); err != nil {
		t.Fatal(err)
	}

	ov, err := a.LineOverview(ctx, viewer, LineOverviewRequest{Line: line, Writes: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, alarm string }{{"sp", ""}, {"idle", AlarmNoData}, {"press", AlarmLow}, {"speed", AlarmStale}, {"temp", AlarmHigh}}
	if len(ov.Nodes) != len(want) {
		t.Fatalf("%d nodes: %+v", len(ov.Nodes), ov.Nodes)
	}
	for i, w := range want {
		n := ov.Nodes[i]
		if n.ID != w.id || n.Alarm != w.alarm {
			t.Errorf("node %d: %s alarm %q, want %s %q", i, n.ID, n.Alarm, w.id, w.alarm)
		}
	}
	if !ov.Nodes[0].Setpoint || ov.Nodes[2].Setpoint || *ov.Nodes[4].Value != 95 || *ov.Nodes[4].AgeMs != 10_000 || ov.Nodes[4].RunID != "ov-run" {
		t.Errorf("values: %+v %+v", ov.Nodes[0], ov.Nodes[4])
	}
	if ov.Alarms != 4 || ov.Run == nil || ov.Run.ID != "ov-run" || !ov.At.Equal(now) {
		t.Errorf("alarms %d run %v at %v", ov.Alarms, ov.Run, ov.At)
	}
	if len(ov.Connectors) != 1 || ov.Connectors[0].ID != "opc-1" {
		t.Errorf("connectors %+v", ov.Connectors)
	}
	if len(ov.Writes) != 2 || ov.Writes[0].CertificateID != "cert-c" || !ov.Writes[0].Executed || ov.Writes[1].Executed ||
		len(ov.Writes[0].Moves) != 1 || ov.Writes[0].Moves[0].Readback != 63 {
		t.Errorf("writes %+v", ov.Writes)
	}
	if len(ov.Pending) != 0 {
		t.Errorf("pending %+v", ov.Pending)
	}
	// A tighter staleness makes the setpoint stale too; a looser one not the speed.
	ov, _ = a.LineOverview(ctx, viewer, LineOverviewRequest{Line: line, StaleAfter: Duration(500 * time.Millisecond)})
	if ov.Nodes[0].Alarm != AlarmStale {
		t.Errorf("stale after 500ms: %+v", ov.Nodes[0])
	}
	ov, _ = a.LineOverview(ctx, viewer, LineOverviewRequest{Line: line, StaleAfter: Duration(time.Hour)})
	if ov.Nodes[3].Alarm != "" || ov.Alarms != 3 {
		t.Errorf("stale after 1h: %+v (%d alarms)", ov.Nodes[3], ov.Alarms)
	}

	// Scope, validation, an unknown line.
	scoped := Principal{Name: "sam", Role: auth.RoleViewer, Lines: []string{"other-line"}}
	for name, c := range map[string]struct {
		p    Principal
		req  LineOverviewRequest
		code string
	}{
		"other line":    {scoped, LineOverviewRequest{Line: line}, core.CodeForbidden},
		"no line":       {viewer, LineOverviewRequest{}, core.CodeInvalidArgument},
		"writes 101":    {viewer, LineOverviewRequest{Line: line, Writes: 101}, core.CodeInvalidArgument},
		"negative age":  {viewer, LineOverviewRequest{Line: line, StaleAfter: -1}, core.CodeInvalidArgument},
		"unknown line":  {viewer, LineOverviewRequest{Line: "nope"}, core.CodeNotFound},
		"no read role?": {Principal{Name: "x", Role: "nobody"}, LineOverviewRequest{Line: line}, core.CodeForbidden},
	} {
		if _, err := a.LineOverview(ctx, c.p, c.req); core.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
}

// TestDatasetCheck: a valid spec is ok with its normalised form; what
// the strict parser refuses and what validation refuses are answers with
// problems, not failures; the work budget is the server's; nothing is
// stored; a spec of a line outside the caller's scope is refused.
func TestDatasetCheck(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, Options{MaxDatasetCells: 1000})
	good := `{"spec": {"lineId": "L1", "productId": "p", "recipeId": "r", "beat": "1s", "historySteps": 4, "horizonSteps": 2, "purpose": "mpc_surrogate",
		"split": {"valRatio": 0.2, "testRatio": 0.2, "seed": 1}, "nodes": [{"nodeId": "u", "role": "control"}, {"nodeId": "y", "role": "target"}]}}`
	dec := func(s string) DatasetCheckRequest {
		t.Helper()
		var r DatasetCheckRequest
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("decode %s: %v", s, err)
		}
		return r
	}
	res, err := a.DatasetCheck(ctx, viewer, dec(good))
	if err != nil || !res.OK || res.Spec == nil || res.Spec.LineID != "L1" || len(res.Problems) != 0 {
		t.Fatalf("good: %+v %v", res, err)
	}
	for name, c := range map[string]struct{ body, field string }{
		"unknown spec field": {`{"spec": {"lineId": "L1", "bogus": 1}}`, ""},
		"no nodes":           {`{"spec": {"lineId": "L1", "productId": "p", "recipeId": "r", "beat": "1s", "historySteps": 4, "horizonSteps": 2, "split": {"valRatio": 0.2, "testRatio": 0.2}}}`, ""},
		"over the budget":    {strings.Replace(good, `{"spec"`, `{"maxCells": 5000, "spec"`, 1), "maxCells"},
	} {
		res, err := a.DatasetCheck(ctx, viewer, dec(c.body))
		if err != nil || res.OK || len(res.Problems) == 0 || res.Code == "" {
			t.Errorf("%s: %+v %v", name, res, err)
		}
		if c.field != "" && res.Problems[0].Field != c.field {
			t.Errorf("%s: problems %+v", name, res.Problems)
		}
		// dataset.build refuses the same request with the same code.
		var br DatasetBuildRequest
		berr := json.Unmarshal([]byte(c.body), &br)
		if berr == nil {
			_, berr = a.DatasetBuild(ctx, engineer, br)
		}
		if core.CodeOf(berr) != res.Code {
			t.Errorf("%s: check says %s, build %v", name, res.Code, berr)
		}
	}
	scoped := Principal{Name: "sam", Role: auth.RoleViewer, Lines: []string{"L2"}}
	if _, err := a.DatasetCheck(ctx, scoped, dec(good)); core.CodeOf(err) != core.CodeForbidden {
		t.Errorf("other line: %v", err)
	}
	if ds, _ := a.DatasetList(ctx, admin, DatasetListRequest{}); ds.Count != 0 {
		t.Errorf("a check stored %d datasets", ds.Count)
	}
}
