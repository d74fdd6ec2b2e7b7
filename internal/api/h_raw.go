package api

import (
	"net/http"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
)

// Version is reported by /info (set by serve from the binary's version).
var Version = "dev"

// rawIngestCSV streams the request body into the ingest.csv op: the
// options come from the query string, nothing is buffered beyond a parser
// batch, and a body over the limit aborts the transaction (413).
func rawIngestCSV(c *call, op *app.Op) (any, error) {
	var req app.IngestCSVRequest
	for name, vals := range c.r.URL.Query() {
		if err := app.SetParam(&req, name, vals...); err != nil {
			return nil, err
		}
	}
	req.Body = http.MaxBytesReader(c.w, c.r.Body, c.s.o.MaxCSVBytes)
	c.invoked = true
	out, err := op.Invoke(c.ctx, c.s.app, c.p, &req)
	if err != nil {
		return nil, bodyError(err, c.s.o.MaxCSVBytes)
	}
	return out, nil
}

// rawEvents serves the Server-Sent Events stream.
func rawEvents(c *call, _ *app.Op) (any, error) {
	if err := c.p.Allow(eventsAct, ""); err != nil {
		return nil, err
	}
	if c.s.d.Bus == nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "this server has no event bus")
	}
	o, err := c.s.streams.open(c.p, c.s.o.MaxStreams)
	if err != nil {
		return nil, err
	}
	defer c.s.streams.close(o)
	c.wrote = true
	c.s.stream(c.w, c.r, c.p, EventBuffer, o)
	return nil, nil
}
