package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
)

// TestFlow walks every remaining route over HTTP in the order a user
// would: ingest and count back, query, build a dataset, train with a
// worker while an SSE client follows the job, models, the twin routes,
// governance, audit, metrics.
func TestFlow(t *testing.T) {
	e := newEnv(t, Options{})

	// Ingest a JSON batch and a CSV upload; count the samples back.
	var samples []any
	for i := 0; i < 500; i++ {
		samples = append(samples, map[string]any{"node": "flow_a", "ts": 1_000_000 + i*100, "value": float64(i)})
	}
	var ir app.IngestSamplesResponse
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", map[string]any{"line": "L-flow", "product": "P", "recipe": "R", "run": "run-flow",
		"units": map[string]string{"flow_a": "bar"}, "samples": samples}), 200, "").json(t, &ir)
	if ir.Samples != 500 || ir.NewNodes != 1 || !ir.RunCreated {
		t.Fatalf("ingest %+v", ir)
	}
	var page core.Page
	e.want(e.do("viewer", "GET", "/api/v1/ts?node=flow_a&run=run-flow&limit=100000", nil), 200, "").json(t, &page)
	if len(page.Points) != 500 || page.HasMore {
		t.Fatalf("counted back %d points", len(page.Points))
	}
	var bk struct{ Buckets []core.Bucket }
	e.want(e.do("viewer", "GET", "/api/v1/ts?node=flow_a&bucket=10s", nil), 200, "").json(t, &bk)
	if len(bk.Buckets) != 5 {
		t.Fatalf("buckets %d", len(bk.Buckets))
	}
	csv := "time_ms,c1,c2\n1000,1,2\n2000,3,4\n3000,5,6\n"
	var fr struct {
		Samples    int  `json:"samples"`
		RunCreated bool `json:"runCreated"`
	}
	e.want(e.do("engineer", "POST", "/api/v1/ingest/csv?line=L-flow&product=P&recipe=R&run=run-csv&unit=c1%3Dbar", strings.NewReader(csv)), 200, "").json(t, &fr)
	if fr.Samples != 6 || !fr.RunCreated {
		t.Fatalf("csv %+v", fr)
	}
	e.want(e.do("engineer", "POST", "/api/v1/ingest/csv?line=L-flow&product=P&recipe=R&run=run-bad", strings.NewReader("time_ms,c1\n1000,x\n")), 422, core.CodeIngestInvalid)
	e.want(e.do("viewer", "GET", "/api/v1/runs/run-csv", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/nodes?line=L-flow", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/runs?line="+simLine+"&status=ended", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/info", nil), 200, "")

	// Dataset.
	var built struct {
		Dataset core.Dataset `json:"dataset"`
	}
	e.want(e.do("agent", "POST", "/api/v1/datasets", map[string]any{"spec": json.RawMessage(spec(t))}), 201, "").json(t, &built)
	ds := built.Dataset.ID
	e.want(e.do("viewer", "GET", "/api/v1/datasets", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/datasets/"+ds, nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/datasets/"+ds+"/verify", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/datasets/"+ds+"/report", nil), 200, "")

	// A job, followed over SSE by a client (and not by a client of
	// another line).
	sc := e.sse("viewer", "?kinds=job.state,job.progress")
	other := e.sse("otherline", "")
	var j core.Job
	e.want(e.do("agent", "POST", "/api/v1/jobs", map[string]any{"datasetId": ds, "trainer": "test_mean@1", "params": map[string]any{"steps": 3, "stepMs": 20}}), 201, "").json(t, &j)
	progress, done := 0, false
	deadline := time.After(60 * time.Second)
	for !done {
		select {
		case ev, ok := <-sc.events:
			if !ok {
				t.Fatal("stream closed")
			}
			if ev.data["id"] != j.ID {
				continue
			}
			d, _ := ev.data["data"].(map[string]any)
			switch ev.kind {
			case "job.progress":
				progress++
			case "job.state":
				if d["status"] == "done" {
					done = true
				} else if st, _ := d["status"].(string); core.JobStatus(st).Terminal() {
					t.Fatalf("job ended %v", d)
				}
			}
		case <-deadline:
			t.Fatal("no job.state done event")
		}
	}
	if progress == 0 {
		t.Fatal("no job.progress event")
	}
	select {
	case ev := <-other.events:
		t.Fatalf("a client of another line got %+v", ev)
	default:
	}
	e.want(e.do("viewer", "GET", "/api/v1/jobs/"+j.ID, nil), 200, "").json(t, &j)
	if j.Status != core.JobDone || j.ModelID == "" {
		t.Fatalf("job %+v", j)
	}
	e.want(e.do("viewer", "GET", "/api/v1/jobs?status=done", nil), 200, "")
	var lr app.JobLogsResponse
	e.want(e.do("viewer", "GET", "/api/v1/jobs/"+j.ID+"/logs?maxBytes=100", nil), 200, "").json(t, &lr)
	if lr.JobID != j.ID || lr.NextOffset != min(100, lr.Size) || lr.More != (lr.Size > 100) || lr.Status != core.JobDone {
		t.Fatalf("log page %+v", lr)
	}
	e.want(e.do("engineer", "POST", "/api/v1/jobs/"+j.ID+"/cancel", nil), 409, "")
	var j2 core.Job
	e.want(e.do("engineer", "POST", "/api/v1/jobs/"+j.ID+"/retry", nil), 201, "").json(t, &j2)
	e.want(e.do("engineer", "POST", "/api/v1/jobs/"+j2.ID+"/cancel", nil), 200, "")
	e.want(e.do("engineer", "DELETE", "/api/v1/datasets/"+ds, nil), 409, core.CodeInUse)

	// Models.
	m := j.ModelID
	e.want(e.do("viewer", "GET", "/api/v1/models", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/models/"+m, nil), 200, "")
	var pred map[string]any
	pr := e.do("viewer", "POST", "/api/v1/models/"+m+"/predict", map[string]any{"run": e.runs[4], "from": 0, "steps": 2})
	if pr.status != 200 && pr.status != 422 && pr.status != 404 {
		t.Fatalf("predict: %d %s", pr.status, pr.body)
	}
	if pr.status == 200 {
		pr.json(t, &pred)
	}
	e.want(e.do("engineer", "POST", "/api/v1/models/"+m+"/promote", map[string]any{"to": "shadow"}), 200, "")
	e.want(e.do("engineer", "POST", "/api/v1/models/"+m+"/promote", map[string]any{"to": "production"}), 403, core.CodeForbidden)
	ap := e.do("approver", "POST", "/api/v1/models/"+m+"/promote", map[string]any{"to": "production", "expect": "candidate"})
	e.want(ap, 409, "") // the caller's expectation is stale: a stage race, not a role refusal
	e.want(e.do("engineer", "POST", "/api/v1/models/"+m+"/retire", map[string]any{"reason": "test"}), 200, "")

	// Twin: scene, objective, snapshot, trial, optimise, gate, shadow, calibrate.
	var sr app.SceneSummary
	e.want(e.do("engineer", "POST", "/api/v1/scenes", map[string]any{"preset": "default-injection"}), 201, "").json(t, &sr)
	e.want(e.do("viewer", "GET", "/api/v1/scenes", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/scenes/"+sr.SceneID, nil), 200, "")
	e.want(e.do("agent", "POST", "/api/v1/scenes/"+sr.SceneID+"/freeze", map[string]any{"version": sr.SceneVersion, "expectHash": sr.Hash}), 403, core.CodeForbidden)
	e.want(e.do("approver", "POST", "/api/v1/scenes/"+sr.SceneID+"/freeze", map[string]any{"version": sr.SceneVersion, "expectHash": strings.Repeat("0", 64)}), 409, "")
	var fz app.SceneSummary
	e.want(e.do("approver", "POST", "/api/v1/scenes/"+sr.SceneID+"/freeze", map[string]any{"version": sr.SceneVersion, "expectHash": sr.Hash}), 200, "").json(t, &fz)
	if fz.Status != "frozen" || fz.FrozenBy != "ada" {
		t.Fatalf("freeze %+v", fz)
	}
	var obj struct{ ObjectiveID string }
	e.want(e.do("engineer", "POST", "/api/v1/objectives", map[string]any{"preset": "default-injection"}), 201, "").json(t, &obj)
	e.want(e.do("viewer", "GET", "/api/v1/objectives/"+obj.ObjectiveID, nil), 200, "")
	var run core.Run
	e.want(e.do("viewer", "GET", "/api/v1/runs/"+e.runs[4], nil), 200, "").json(t, &run)
	var snap struct {
		Snapshot struct {
			SnapshotID string `json:"snapshotId"`
		} `json:"snapshot"`
	}
	e.want(e.do("agent", "POST", "/api/v1/snapshots", map[string]any{"scene": sr.SceneID, "run": run.ID, "at": *run.EndedMs - 1000,
		"bindings": map[string]string{"weight": "part_weight"}}), 201, "").json(t, &snap)
	sid := snap.Snapshot.SnapshotID
	e.want(e.do("viewer", "GET", "/api/v1/snapshots", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/snapshots/"+sid, nil), 200, "")
	// The test trainer's model is not a twin model: the engine refuses it
	// with a typed error, not a 500.
	for _, r := range []resp{
		e.do("agent", "POST", "/api/v1/trials", map[string]any{"model": m, "snapshot": sid, "set": map[string]float64{"hold_pressure": 600}}),
		e.do("agent", "POST", "/api/v1/optimize", map[string]any{"model": m, "snapshot": sid}),
		e.do("agent", "POST", "/api/v1/gate", map[string]any{"model": m, "scene": sr.SceneID, "snapshots": 1}),
	} {
		if r.status < 400 || r.status >= 500 {
			t.Fatalf("twin engine on a non-twin model: %d %s", r.status, r.body)
		}
		r.errBody(t)
	}
	e.want(e.do("agent", "POST", "/api/v1/trials", map[string]any{"model": m, "snapshot": sid, "set": map[string]float64{"nope": 1}}), 400, core.CodeInvalidArgument)
	e.want(e.do("viewer", "GET", "/api/v1/trials", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/trials/no-trial", nil), 404, core.CodeNotFound)
	e.want(e.do("viewer", "GET", "/api/v1/gate/"+m, nil), 404, "")
	sh := e.do("agent", "POST", "/api/v1/shadow", map[string]any{"model": m, "dryRun": true})
	if sh.status >= 500 {
		t.Fatalf("shadow: %d %s", sh.status, sh.body)
	}
	e.want(e.do("viewer", "GET", "/api/v1/shadow/"+m, nil), 200, "")
	cb := e.do("agent", "POST", "/api/v1/calibrate", map[string]any{"model": m})
	if cb.status >= 500 {
		t.Fatalf("calibrate: %d %s", cb.status, cb.body)
	}
	e.want(e.do("viewer", "GET", "/api/v1/calibrations", nil), 200, "")

	// Governance.
	e.want(e.do("viewer", "GET", "/api/v1/certificates", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/certificates/key", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/certificates/no-cert", nil), 404, core.CodeNotFound)
	e.want(e.do("viewer", "GET", "/api/v1/certificates/no-cert/verify", nil), 404, core.CodeNotFound)
	e.want(e.do("agent", "POST", "/api/v1/certificates", map[string]any{"trial": "no-trial"}), 404, core.CodeNotFound)
	var ch struct{ UpdatedBy string }
	e.want(e.do("approver", "PUT", "/api/v1/channels/"+simLine, map[string]any{"profile": "hybrid_twin", "controlPolicy": "hitl_governed"}), 200, "").json(t, &ch)
	if ch.UpdatedBy != "ada" {
		t.Fatalf("channel actor %q", ch.UpdatedBy)
	}
	e.want(e.do("viewer", "GET", "/api/v1/channels/"+simLine, nil), 200, "")

	// Audit: the API's actors are the token names; the chain verifies.
	var al struct {
		Items []struct{ Actor, Action string }
	}
	e.want(e.do("viewer", "GET", "/api/v1/audit?limit=1000", nil), 200, "").json(t, &al)
	actors := map[string]bool{}
	for _, it := range al.Items {
		actors[it.Actor+" "+it.Action] = true
	}
	for _, k := range []string{"ada scene.freeze", "ada channel.set", "erin scene.put"} {
		if !actors[k] {
			t.Errorf("audit lacks %q: %v", k, actors)
		}
	}
	var v struct{ OK bool }
	e.want(e.do("viewer", "GET", "/api/v1/audit/verify", nil), 200, "").json(t, &v)
	if !v.OK {
		t.Fatal("audit chain")
	}

	// Metrics.
	mr := e.want(e.do("viewer", "GET", "/metrics", nil), 200, "")
	for _, name := range []string{"aml_http_request_duration_seconds_bucket", `aml_jobs{state="done"}`, "aml_job_queue_depth", "aml_ingest_samples_total 506", "aml_twin_trial_duration_seconds"} {
		if !strings.Contains(string(mr.body), name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	// Dataset deletion once unreferenced is the dataset route's last use.
	_ = json.Valid
	_ = fmt.Sprint
}
