package api

import (
	"net/http"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
)

// route is one row of the route table: the router, the OpenAPI document
// and the CLI's --server client are all built from these. A route names the
// app op it calls (internal/app); the op carries the summary, the action
// the caller needs, the heavy flag and the request and response types.
// Request fields travel in the path ("{id}" is the field whose json name is
// id), in the query string (GET, DELETE) or in the JSON body (POST, PUT).
type route struct {
	Method, Path string
	// Op is the app op the route calls.
	Op  string
	Tag string
	// Status is the success status (default 200).
	Status int
	// Raw routes stream a body or an answer that is not JSON (a CSV
	// upload, a log, an event stream); raw builds the request itself.
	// InType and OutType are their media types.
	raw             func(*call, *app.Op) (any, error)
	InType, OutType string
	// ErrResult: a failed call still answers with the op's result beside
	// the error (which check failed).
	ErrResult bool
}

// Route is one row of the public route table (for clients).
type Route struct {
	Method, Path, Op string
	Status           int
	// Raw is true for routes whose body or answer is not JSON.
	Raw bool
}

// RouteTable lists every API route with the app op it calls.
func RouteTable() []Route {
	rs := table()
	out := make([]Route, len(rs))
	for i, r := range rs {
		out[i] = Route{Method: r.Method, Path: r.Path, Op: r.Op, Status: r.status(), Raw: r.raw != nil}
	}
	return out
}

func (r route) status() int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// table is every API route.
func table() []route {
	G, P, U, D := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	C := http.StatusCreated
	return []route{
		// Data: lines, runs, nodes, time series, ingest, connectors.
		{Method: G, Path: "/info", Op: "info", Tag: "data"},
		{Method: G, Path: "/lines", Op: "line.list", Tag: "data"},
		{Method: G, Path: "/runs", Op: "run.list", Tag: "data"},
		{Method: G, Path: "/runs/{id}", Op: "run.show", Tag: "data"},
		{Method: G, Path: "/nodes", Op: "node.list", Tag: "data"},
		{Method: U, Path: "/nodes/{id}", Op: "node.set", Tag: "data"},
		{Method: P, Path: "/lines/{line}/nodes", Op: "line.apply", Tag: "data"},
		{Method: P, Path: "/recipes", Op: "recipe.put", Tag: "data", Status: C},
		{Method: P, Path: "/lines/{line}/run-events", Op: "run.events", Tag: "data"},
		{Method: G, Path: "/ts", Op: "ts.query", Tag: "data"},
		{Method: G, Path: "/ts/latest", Op: "ts.latest", Tag: "data"},
		{Method: P, Path: "/ingest/samples", Op: "ingest.samples", Tag: "data"},
		{Method: P, Path: "/ingest/csv", Op: "ingest.csv", Tag: "data", raw: rawIngestCSV, InType: "text/csv"},
		{Method: G, Path: "/connectors", Op: "connector.list", Tag: "data"},
		{Method: G, Path: "/lines/{line}/overview", Op: "line.overview", Tag: "data"},
		{Method: G, Path: "/gate-profiles", Op: "gate.profiles", Tag: "models"},

		// Datasets.
		{Method: P, Path: "/datasets", Op: "dataset.build", Tag: "datasets", Status: C},
		{Method: G, Path: "/datasets", Op: "dataset.list", Tag: "datasets"},
		{Method: P, Path: "/dataset-checks", Op: "dataset.check", Tag: "datasets"},
		{Method: G, Path: "/datasets/{id}", Op: "dataset.show", Tag: "datasets"},
		{Method: G, Path: "/datasets/{id}/verify", Op: "dataset.verify", Tag: "datasets"},
		{Method: G, Path: "/datasets/{id}/report", Op: "dataset.report", Tag: "datasets"},
		{Method: D, Path: "/datasets/{id}", Op: "dataset.delete", Tag: "datasets"},

		// Jobs.
		{Method: P, Path: "/jobs", Op: "job.submit", Tag: "jobs", Status: C},
		{Method: G, Path: "/jobs", Op: "job.list", Tag: "jobs"},
		{Method: G, Path: "/jobs/{id}", Op: "job.show", Tag: "jobs"},
		{Method: G, Path: "/jobs/{id}/logs", Op: "job.logs", Tag: "jobs"},
		{Method: P, Path: "/jobs/{id}/cancel", Op: "job.cancel", Tag: "jobs"},
		{Method: P, Path: "/jobs/{id}/retry", Op: "job.retry", Tag: "jobs", Status: C},
		{Method: P, Path: "/physics", Op: "physics.put", Tag: "jobs", Status: C},
		{Method: G, Path: "/physics", Op: "physics.list", Tag: "jobs"},
		{Method: G, Path: "/physics/{id}", Op: "physics.show", Tag: "jobs"},
		{Method: P, Path: "/trainers", Op: "trainer.register", Tag: "jobs", Status: C},
		{Method: G, Path: "/trainers", Op: "trainer.list", Tag: "jobs"},
		{Method: G, Path: "/trainers/{name}", Op: "trainer.show", Tag: "jobs"},

		// Models.
		{Method: G, Path: "/models", Op: "model.list", Tag: "models"},
		{Method: G, Path: "/models/compare", Op: "model.compare", Tag: "models"},
		{Method: P, Path: "/models/reference", Op: "model.reference", Tag: "models"},
		{Method: G, Path: "/models/{id}", Op: "model.show", Tag: "models"},
		{Method: P, Path: "/models/{id}/promote", Op: "model.promote", Tag: "models"},
		{Method: P, Path: "/models/{id}/retire", Op: "model.retire", Tag: "models"},
		{Method: P, Path: "/models/{id}/predict", Op: "model.predict", Tag: "models"},
		{Method: G, Path: "/models/{id}/replay", Op: "model.replay", Tag: "models"},

		// Scenes and objectives.
		{Method: G, Path: "/scenes", Op: "scene.list", Tag: "twin"},
		{Method: P, Path: "/scenes", Op: "scene.put", Tag: "twin", Status: C},
		{Method: G, Path: "/scenes/{id}", Op: "scene.show", Tag: "twin"},
		{Method: P, Path: "/scene-drafts", Op: "scene.draft", Tag: "twin"},
		{Method: P, Path: "/scene-checks", Op: "scene.check", Tag: "twin"},
		{Method: P, Path: "/scenes/{id}/freeze", Op: "scene.freeze", Tag: "twin"},
		{Method: P, Path: "/objectives", Op: "objective.put", Tag: "twin", Status: C},
		{Method: G, Path: "/objectives/{id}", Op: "objective.show", Tag: "twin"},

		// Snapshots, trials, optimisation, gate, shadow, recalibration.
		{Method: P, Path: "/snapshots", Op: "snapshot.take", Tag: "twin", Status: C},
		{Method: G, Path: "/snapshots", Op: "snapshot.list", Tag: "twin"},
		{Method: G, Path: "/snapshots/{id}", Op: "snapshot.show", Tag: "twin"},
		{Method: P, Path: "/trials", Op: "trial.run", Tag: "twin", Status: C},
		{Method: G, Path: "/trials", Op: "trial.list", Tag: "twin"},
		{Method: G, Path: "/trials/{id}", Op: "trial.show", Tag: "twin"},
		{Method: G, Path: "/trials/{id}/recompute", Op: "trial.recompute", Tag: "twin"},
		{Method: P, Path: "/optimize", Op: "optimize", Tag: "twin"},
		{Method: P, Path: "/gate", Op: "gate.evaluate", Tag: "twin"},
		{Method: G, Path: "/gate/{model}", Op: "gate.latest", Tag: "twin"},
		{Method: P, Path: "/shadow", Op: "shadow.collect", Tag: "twin"},
		{Method: G, Path: "/shadow/{model}", Op: "shadow.list", Tag: "twin"},
		{Method: P, Path: "/calibrate", Op: "calibrate", Tag: "twin"},
		{Method: P, Path: "/steptests/plan", Op: "steptest.plan", Tag: "twin"},
		{Method: P, Path: "/steptests", Op: "steptest.issue", Tag: "governance", Status: C},
		{Method: G, Path: "/steptests", Op: "steptest.list", Tag: "governance"},
		{Method: G, Path: "/steptests/{id}", Op: "steptest.show", Tag: "governance"},
		{Method: P, Path: "/steptests/{id}/approve", Op: "steptest.approve", Tag: "governance"},
		{Method: P, Path: "/steptests/{id}/revoke", Op: "steptest.revoke", Tag: "governance"},
		{Method: P, Path: "/steptests/{id}/execute", Op: "steptest.execute", Tag: "governance", ErrResult: true}, // refused unless the server's operator configured the line's writer (aml serve --line-writers)
		{Method: G, Path: "/calibrations", Op: "calibration.list", Tag: "twin"},
		{Method: P, Path: "/benefit-studies", Op: "benefit.run", Tag: "twin", Status: C},
		{Method: G, Path: "/benefit-studies", Op: "benefit.list", Tag: "twin"},
		{Method: G, Path: "/benefit-studies/{id}", Op: "benefit.show", Tag: "twin"},

		// Certificates and channels.
		{Method: G, Path: "/certificates", Op: "cert.list", Tag: "governance"},
		{Method: G, Path: "/certificates/key", Op: "cert.key", Tag: "governance"},
		{Method: P, Path: "/certificates/key/rotate", Op: "cert.key.rotate", Tag: "admin"}, // refused: only the local CLI rotates
		{Method: P, Path: "/certificates", Op: "cert.issue", Tag: "governance", Status: C},
		{Method: G, Path: "/certificates/{id}", Op: "cert.show", Tag: "governance"},
		{Method: P, Path: "/certificates/{id}/approve", Op: "cert.approve", Tag: "governance"},
		{Method: P, Path: "/certificates/{id}/revoke", Op: "cert.revoke", Tag: "governance"},
		{Method: G, Path: "/certificates/{id}/moves", Op: "cert.moves", Tag: "governance"},
		{Method: G, Path: "/certificates/{id}/verify", Op: "cert.verify", Tag: "governance", ErrResult: true},
		{Method: P, Path: "/certificates/{id}/execute", Op: "cert.execute", Tag: "governance", ErrResult: true},
		{Method: G, Path: "/envelopes", Op: "envelope.list", Tag: "governance"},
		{Method: P, Path: "/envelopes", Op: "envelope.issue", Tag: "governance", Status: C},
		{Method: G, Path: "/envelopes/{id}", Op: "envelope.show", Tag: "governance"},
		{Method: P, Path: "/envelopes/{id}/approve", Op: "envelope.approve", Tag: "governance"},
		{Method: P, Path: "/envelopes/{id}/revoke", Op: "envelope.revoke", Tag: "governance"},
		{Method: P, Path: "/envelopes/{id}/cycle", Op: "envelope.cycle", Tag: "governance", ErrResult: true},
		{Method: G, Path: "/channels/{line}", Op: "channel.show", Tag: "governance"},
		{Method: U, Path: "/channels/{line}", Op: "channel.set", Tag: "governance"},

		// Audit.
		{Method: G, Path: "/audit", Op: "audit.list", Tag: "audit"},
		{Method: G, Path: "/audit/verify", Op: "audit.verify", Tag: "audit"},

		// Administration.
		{Method: G, Path: "/tokens", Op: "token.list", Tag: "admin"},
		{Method: P, Path: "/tokens", Op: "token.create", Tag: "admin", Status: C},
		{Method: D, Path: "/tokens/{id}", Op: "token.revoke", Tag: "admin"},
		{Method: P, Path: "/retention", Op: "retention.apply", Tag: "admin"},

		// Live events: the one route that is transport only (a stream of
		// what the use cases publish).
		{Method: G, Path: "/events", Tag: "events", raw: rawEvents, OutType: "text/event-stream"},
	}
}

// eventsAct is the action the event stream needs.
const eventsAct = auth.ActRead
