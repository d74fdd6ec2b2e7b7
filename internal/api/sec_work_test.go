package api

import (
	"encoding/json"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
)

// Security finding 13a: an engineer's or agent's request chose how much
// work the server does with no ceiling. gate.evaluate took any number of
// replayed snapshots (each one a stored snapshot and an optimisation; the
// plan of 2×snapshots points was allocated up front, so 10^8 asked for
// gigabytes), optimize any number of candidates, and job.submit any wall
// timeout and stall limit (a job holding a worker for years). Each is now
// refused before any work starts (400 AML_INVALID_ARGUMENT naming the
// field, no heavy slot taken, nothing queued), whatever the model or
// dataset named — the ids here need not even exist.
func TestSec13_RequestedWorkIsBounded(t *testing.T) {
	e := newEnv(t, Options{})
	for _, c := range []struct {
		name, path, field string
		body              map[string]any
	}{
		{"gate snapshots", "/api/v1/gate", "snapshots", map[string]any{"model": "m-none", "scene": "s-none", "snapshots": 100_000_000}},
		{"optimize candidates", "/api/v1/optimize", "maxCandidates", map[string]any{"model": "m-none", "snapshot": "snap-none", "maxCandidates": 1_000_000_000}},
		{"job timeout", "/api/v1/jobs", "timeout", map[string]any{"datasetId": "d-none", "trainer": "test_mean@1", "timeout": "876000h"}},
		{"job stall", "/api/v1/jobs", "stall", map[string]any{"datasetId": "d-none", "trainer": "test_mean@1", "stall": "876000h"}},
	} {
		for _, role := range []string{"agent", "engineer"} {
			r := e.do(role, "POST", c.path, c.body)
			if r.status != 400 {
				t.Errorf("%s as %s: status %d, want 400: %.300s", c.name, role, r.status, r.body)
				continue
			}
			if b := r.errBody(t); b.Code != core.CodeInvalidArgument || b.Field != c.field {
				t.Errorf("%s as %s: %s on %q, want %s on %q: %s", c.name, role, b.Code, b.Field, core.CodeInvalidArgument, c.field, b.Message)
			}
		}
	}
	// The ceilings are generous: the defaults and the documented
	// maximum itself pass validation (and then fail on the ids that do
	// not exist).
	e.want(e.do("agent", "POST", "/api/v1/gate", map[string]any{"model": "m-none", "scene": "s-none", "snapshots": 200}), 404, core.CodeNotFound)
	e.want(e.do("agent", "POST", "/api/v1/optimize", map[string]any{"model": "m-none", "snapshot": "snap-none", "maxCandidates": 10_000}), 404, core.CodeNotFound)
	e.want(e.do("agent", "POST", "/api/v1/jobs", map[string]any{"datasetId": "d-none", "trainer": "test_mean@1", "timeout": "24h", "stall": "24h"}), 404, core.CodeNotFound)
}

// Security finding 13c: a dataset build's quotas — windows and bytes on
// disk — were the request's to raise: maxBytesMiB up to 1 TiB and
// maxWindows up to 2^31, so one agent request could fill the server's
// disk (a window is up to 2^20 values; the work budget bounds the grid,
// not the windows cut from it). Over the API or MCP a request may now ask
// for less than the server's quotas, never more (413 AML_QUOTA_EXCEEDED
// naming the field, nothing built), as with maxCells; dataset.check says
// the same.
func TestSec13_DatasetQuotasAreTheServers(t *testing.T) {
	e := newEnv(t, Options{})
	for _, c := range []struct {
		field string
		value int
	}{
		{"maxBytesMiB", 1 << 20},
		{"maxWindows", 1<<31 - 1},
	} {
		body := map[string]any{"spec": json.RawMessage(spec(t)), c.field: c.value}
		r := e.do("agent", "POST", "/api/v1/datasets", body)
		if r.status != 413 {
			t.Errorf("%s %d: status %d, want 413: %.300s", c.field, c.value, r.status, r.body)
		} else if b := r.errBody(t); b.Code != core.CodeQuotaExceeded || b.Field != c.field {
			t.Errorf("%s %d: %s on %q", c.field, c.value, b.Code, b.Field)
		}
		var chk app.DatasetCheckResponse
		e.want(e.do("agent", "POST", "/api/v1/dataset-checks", body), 200, "").json(t, &chk)
		if chk.OK || chk.Code != core.CodeQuotaExceeded {
			t.Errorf("dataset.check %s %d: %+v", c.field, c.value, chk)
		}
	}
	var dl struct{ Count int }
	e.want(e.do("viewer", "GET", "/api/v1/datasets", nil), 200, "").json(t, &dl)
	if dl.Count != 0 {
		t.Fatalf("%d datasets built over the server's quotas", dl.Count)
	}
	// Less than the server's quotas is the caller's choice.
	e.want(e.do("agent", "POST", "/api/v1/datasets", map[string]any{"spec": json.RawMessage(spec(t)), "maxWindows": 100_000, "maxBytesMiB": 512}), 201, "")
}
