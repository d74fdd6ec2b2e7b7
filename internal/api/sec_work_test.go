package api

import (
	"testing"

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
