package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// TestRemoteCertificateFlow is the certificate flow over real HTTP on a
// trained twin (what "aml demo" leaves in a data dir), served by api.New:
// a fresh snapshot and optimisation, a certificate requested by an
// engineer, refused approvals (the engineer's role, an agent, and an
// admin who requested one itself), the approval by an approver through
// "aml cert approve --server", the channel set by an admin, the governed
// write by the approver (written and read back), verification, and an SSE
// client seeing every certificate.status change.
func TestRemoteCertificateFlow(t *testing.T) {
	dir, out := sharedDemo(t)
	var demo struct {
		ModelID    string    `json:"modelId"`
		SnapshotID string    `json:"snapshotId"`
		DemoClock  time.Time `json:"demoClock"`
	}
	mustJSON(t, out, &demo)
	// The server's clock runs on the demo's line clock, from 70 s after
	// its recommendation (the demo's write itself is in the history at
	// the wall clock, two minutes back: see sharedDemo).
	base, start := demo.DemoClock.Add(70*time.Second), time.Now()
	srv := startServer(t, dir, api.Options{Now: func() time.Time { return base.Add(time.Since(start)) }})

	call := func(role, method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		r, _ := http.NewRequest(method, srv.url+"/api/v1"+path, rd)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+srv.tok[role])
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	want := func(status int, b []byte, wantStatus int, code string, v any) {
		t.Helper()
		if status != wantStatus {
			t.Fatalf("status %d, want %d: %s", status, wantStatus, b)
		}
		if code != "" {
			var eb auth.ErrorBody
			if json.Unmarshal(b, &eb) != nil || eb.Code != code || eb.Message == "" {
				t.Fatalf("error body %s, want code %s", b, code)
			}
		}
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
		}
	}

	// An SSE client following certificate changes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	er, _ := http.NewRequestWithContext(ctx, "GET", srv.url+"/api/v1/events?kinds=certificate.status", nil)
	er.Header.Set("Authorization", "Bearer "+srv.tok["viewer"])
	eres, err := http.DefaultClient.Do(er)
	if err != nil || eres.StatusCode != 200 {
		t.Fatalf("events: %v %v", err, eres)
	}
	var mu sync.Mutex
	seen := map[string][]string{} // certificate → statuses in order
	got := make(chan struct{}, 64)
	go func() {
		defer eres.Body.Close()
		sc := bufio.NewScanner(eres.Body)
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct {
				ID   string         `json:"id"`
				Data map[string]any `json:"data"`
			}
			// Only status changes count; any other event on the stream
			// (one without a status) is not a certificate transition.
			if json.Unmarshal([]byte(d), &e) == nil {
				status, ok := e.Data["status"].(string)
				if !ok {
					continue
				}
				mu.Lock()
				seen[e.ID] = append(seen[e.ID], status)
				mu.Unlock()
				got <- struct{}{}
			}
		}
	}()

	// A fresh snapshot on the demo's last run, and the optimiser's best move.
	var prev struct {
		Snapshot struct {
			SceneID string `json:"sceneId"`
			LineID  string `json:"lineId"`
			Window  struct {
				RunID string `json:"runId"`
			} `json:"window"`
		} `json:"snapshot"`
	}
	st, b := call("viewer", "GET", "/snapshots/"+demo.SnapshotID, nil)
	want(st, b, 200, "", &prev)
	line := prev.Snapshot.LineID
	var snap struct {
		Snapshot struct {
			SnapshotID string `json:"snapshotId"`
		} `json:"snapshot"`
	}
	st, b = call("engineer", "POST", "/snapshots", map[string]any{"scene": prev.Snapshot.SceneID, "model": demo.ModelID, "run": prev.Snapshot.Window.RunID,
		"at": base.Add(-5 * time.Second).UnixMilli(), "maxAge": "120s", "phase": "holding"})
	want(st, b, 201, "", &snap)
	optimize := func(role string) string {
		t.Helper()
		var opt struct {
			Record *struct {
				Passed bool `json:"passed"`
				Trial  struct {
					TrialID string `json:"trialId"`
				} `json:"trial"`
			} `json:"record"`
		}
		st, b := call(role, "POST", "/optimize", map[string]any{"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID})
		want(st, b, 200, "", &opt)
		if opt.Record == nil || !opt.Record.Passed {
			t.Fatalf("no passing trial: %s", b)
		}
		return opt.Record.Trial.TrialID
	}
	trial := optimize("engineer")

	// Issue as the engineer.
	type certRec struct {
		Cert struct {
			ID         string `json:"recommendationId"`
			Status     string `json:"status"`
			CreatedBy  string `json:"createdBy"`
			ApprovedBy string `json:"approvedBy"`
		} `json:"certificate"`
	}
	var c1 certRec
	st, b = call("engineer", "POST", "/certificates", map[string]any{"trial": trial})
	want(st, b, 201, "", &c1)
	id := c1.Cert.ID
	if c1.Cert.Status != "ISSUED" || c1.Cert.CreatedBy != "erin" {
		t.Fatalf("issued %+v", c1.Cert)
	}
	// What the approver reviews: the first step's moves, from the
	// snapshot's values to the certificate's.
	var mv struct {
		Items []struct {
			NodeID string   `json:"nodeId"`
			From   *float64 `json:"from"`
			To     float64  `json:"to"`
			Delta  *float64 `json:"delta"`
		} `json:"items"`
	}
	st, b = call("viewer", "GET", "/certificates/"+id+"/moves", nil)
	want(st, b, 200, "", &mv)
	if len(mv.Items) == 0 {
		t.Fatalf("no moves: %s", b)
	}
	for _, m := range mv.Items {
		if m.NodeID == "" || m.From == nil || m.Delta == nil || *m.Delta != m.To-*m.From {
			t.Fatalf("move %+v", m)
		}
	}
	// Refused: the engineer (role), an agent (role, never approves).
	st, b = call("engineer", "POST", "/certificates/"+id+"/approve", nil)
	want(st, b, 403, core.CodeForbidden, nil)
	st, b = call("agent", "POST", "/certificates/"+id+"/approve", nil)
	want(st, b, 403, core.CodeForbidden, nil)
	_, errs, code := srv.as(t, "agent", "cert", "approve", id)
	if code != 1 || !strings.Contains(errs, "error: AML_FORBIDDEN:") {
		t.Fatalf("agent approve over the CLI: %d %q", code, errs)
	}
	// The requester cannot approve even with the right to approve: an
	// admin requests a second certificate and is refused approving it.
	var c2 certRec
	st, b = call("admin", "POST", "/certificates", map[string]any{"trial": optimize("admin")})
	want(st, b, 201, "", &c2)
	st, b = call("admin", "POST", "/certificates/"+c2.Cert.ID+"/approve", nil)
	want(st, b, 403, core.CodeForbidden, nil)
	if !strings.Contains(string(b), "cannot approve") {
		t.Fatalf("requester refusal: %s", b)
	}

	// Approve as the approver, through the CLI client.
	out, errs, code = srv.as(t, "approver", "cert", "approve", id, "--json")
	if code != 0 {
		t.Fatalf("approve: %d %s", code, errs)
	}
	var ap certRec
	mustJSON(t, out, &ap)
	if ap.Cert.Status != "APPROVED" || ap.Cert.ApprovedBy != "ada" {
		t.Fatalf("approved %+v", ap.Cert)
	}

	// The channel, as admin (an approver may too; an agent never writes).
	st, b = call("agent", "PUT", "/channels/"+line, map[string]any{"profile": "hybrid_twin", "controlPolicy": "hitl_governed"})
	want(st, b, 403, core.CodeForbidden, nil)
	var ch struct{ UpdatedBy string }
	st, b = call("admin", "PUT", "/channels/"+line, map[string]any{"profile": "hybrid_twin", "controlPolicy": "hitl_governed"})
	want(st, b, 200, "", &ch)
	if ch.UpdatedBy != "root" {
		t.Fatalf("channel set by %q", ch.UpdatedBy)
	}

	// Execute: refused to the agent and the engineer, done by the approver.
	st, b = call("agent", "POST", "/certificates/"+id+"/execute", map[string]any{})
	want(st, b, 403, core.CodeForbidden, nil)
	st, b = call("engineer", "POST", "/certificates/"+id+"/execute", map[string]any{})
	want(st, b, 403, core.CodeForbidden, nil)
	var x struct {
		Allowed, Executed bool
		Status, Detail    string
		Writes            []struct {
			NodeID            string
			To, Readback      float64
			Written, Verified bool
		}
	}
	st, b = call("approver", "POST", "/certificates/"+id+"/execute", map[string]any{})
	want(st, b, 200, "", &x)
	if !x.Allowed || !x.Executed || len(x.Writes) == 0 {
		t.Fatalf("execute: %s", b)
	}
	for _, w := range x.Writes {
		if !w.Written || !w.Verified || w.Readback != w.To {
			t.Fatalf("write %+v not read back", w)
		}
	}
	// A second execution of the same certificate is refused, with the
	// guard's report in the error body.
	st, b = call("approver", "POST", "/certificates/"+id+"/execute", map[string]any{})
	if st < 400 || st >= 500 || !strings.Contains(string(b), `"result"`) {
		t.Fatalf("second execute: %d %s", st, b)
	}

	// Verify over HTTP and through the CLI; local and --server agree.
	var v struct {
		OK     bool   `json:"ok"`
		Status string `json:"status"`
	}
	st, b = call("viewer", "GET", "/certificates/"+id+"/verify", nil)
	want(st, b, 200, "", &v)
	if !v.OK || v.Status != "EXECUTED" {
		t.Fatalf("verify: %s", b)
	}
	for _, args := range [][]string{{"cert", "verify", id}, {"cert", "show", id}, {"cert", "list"}, {"audit", "verify"}, {"channel", "show", "--line", line}} {
		lo, le, lc := aml(t, append(args, "--data", dir, "--json")...)
		ro, re, rc := srv.as(t, "viewer", append(args, "--json")...)
		if lc != 0 || rc != 0 || lo != ro {
			t.Fatalf("%v: local (%d %s) and --server (%d %s) differ:\n%s", args, lc, le, rc, re, firstDiff(lo, ro))
		}
	}

	// The event stream saw the certificate move ISSUED → APPROVED → EXECUTED.
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		s := strings.Join(seen[id], ",")
		mu.Unlock()
		if strings.HasPrefix(s, "ISSUED,APPROVED,EXECUTED") {
			break
		}
		select {
		case <-got:
		case <-deadline:
			t.Fatalf("certificate.status events for %s: %q", id, s)
		}
	}
}

// TestRemoteEnvelopeFlow is the operating-envelope flow through
// "aml twin envelope --server" on the demo's data: refused while the line
// is hitl_governed, proposed by an engineer once an admin sets
// bounded_auto, approval refused to the engineer and an agent, approved
// by an approver, listed and shown, one supervised cycle, and revoked,
// after which a cycle is refused.
func TestRemoteEnvelopeFlow(t *testing.T) {
	dir, out := sharedDemo(t)
	var demo struct {
		ModelID    string    `json:"modelId"`
		SnapshotID string    `json:"snapshotId"`
		DemoClock  time.Time `json:"demoClock"`
	}
	mustJSON(t, out, &demo)
	base, start := demo.DemoClock.Add(70*time.Second), time.Now()
	srv := startServer(t, dir, api.Options{Now: func() time.Time { return base.Add(time.Since(start)) }})
	var snap struct {
		Snapshot struct {
			SceneID, SceneVersion, LineID string
		} `json:"snapshot"`
	}
	o, errs, code := srv.as(t, "viewer", "twin", "snapshot", "show", demo.SnapshotID, "--json")
	if code != 0 {
		t.Fatalf("snapshot show: %s", errs)
	}
	mustJSON(t, o, &snap)
	scene := snap.Snapshot.SceneID + "@" + snap.Snapshot.SceneVersion
	issue := []string{"twin", "envelope", "issue", "--scene", scene, "--model", demo.ModelID, "--bound", "hold_pressure=55:75",
		"--bound", "hold_time=5:12", "--bound", "melt_temperature_setpoint=238:255", "--max-moves-per-hour", "12", "--json"}
	if _, errs, code := srv.as(t, "engineer", issue...); code == 0 || !strings.Contains(errs, "AML_CERT_REFUSED") || !strings.Contains(errs, "hitl_governed") {
		t.Fatalf("envelope on a hitl_governed line: exit %d %s", code, errs)
	}
	if _, errs, code := srv.as(t, "admin", "channel", "set", "--line", snap.Snapshot.LineID, "--profile", "hybrid_twin", "--policy", "bounded_auto",
		"--bound", "hold_pressure=50:90", "--bound", "hold_time=4:14", "--bound", "melt_temperature_setpoint=235:260"); code != 0 {
		t.Fatalf("channel set: %s", errs)
	}
	o, errs, code = srv.as(t, "engineer", issue...)
	if code != 0 {
		t.Fatalf("issue: %s", errs)
	}
	var rec struct {
		Envelope struct {
			ID         string `json:"envelopeId"`
			Status     string `json:"status"`
			CreatedBy  string `json:"createdBy"`
			ApprovedBy string `json:"approvedBy"`
		} `json:"envelope"`
		Stop string `json:"stop"`
	}
	mustJSON(t, o, &rec)
	id := rec.Envelope.ID
	if rec.Envelope.Status != "ISSUED" || rec.Envelope.CreatedBy != "erin" {
		t.Fatalf("issued: %s", o)
	}
	for _, role := range []string{"engineer", "agent"} {
		if _, errs, code := srv.as(t, role, "twin", "envelope", "approve", id); code == 0 || !strings.Contains(errs, "AML_FORBIDDEN") {
			t.Fatalf("%s approved: exit %d %s", role, code, errs)
		}
	}
	o, errs, code = srv.as(t, "approver", "twin", "envelope", "approve", id, "--json")
	if code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	mustJSON(t, o, &rec)
	if rec.Envelope.Status != "APPROVED" || rec.Envelope.ApprovedBy == "" {
		t.Fatalf("approved: %s", o)
	}
	o, errs, code = srv.as(t, "viewer", "twin", "envelope", "list", "--json")
	if code != 0 || !strings.Contains(o, id) || !strings.HasPrefix(strings.TrimSpace(o), "[") {
		t.Fatalf("list: %s %s", o, errs)
	}
	if o, errs, code := srv.as(t, "viewer", "twin", "envelope", "show", id); code != 0 || !strings.Contains(o, "APPROVED") || !strings.Contains(o, "hold_time") {
		t.Fatalf("show: %s %s", o, errs)
	}
	// One supervised cycle: whatever the line's state, it writes, holds
	// or stops with a reason — never an unexplained failure.
	o, errs, code = srv.as(t, "approver", "twin", "envelope", "cycle", id, "--json")
	var cyc struct {
		Status, Reason, Detail string
	}
	mustJSON(t, o, &cyc)
	switch {
	case cyc.Status == "written" || cyc.Status == "held":
		if code != 0 {
			t.Fatalf("cycle %s exit %d: %s", cyc.Status, code, errs)
		}
	case cyc.Status == "stopped":
		if code == 0 || !strings.Contains(errs, "AML_WRITE_DENIED") || cyc.Reason == "" {
			t.Fatalf("stop: exit %d %s %+v", code, errs, cyc)
		}
	default:
		t.Fatalf("cycle: exit %d %s: %s", code, errs, o)
	}
	t.Logf("cycle: %s %s %s", cyc.Status, cyc.Reason, cyc.Detail)
	if cyc.Status != "stopped" {
		if _, errs, code := srv.as(t, "approver", "twin", "envelope", "revoke", id, "--reason", "mould change"); code != 0 {
			t.Fatalf("revoke: %s", errs)
		}
	}
	o, _, code = srv.as(t, "approver", "twin", "envelope", "cycle", id, "--json")
	mustJSON(t, o, &cyc)
	if code == 0 || cyc.Status != "refused" || cyc.Reason != "CERT_REVOKED" {
		t.Fatalf("cycle after revoke/stop: exit %d %s", code, o)
	}
}
