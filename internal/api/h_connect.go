package api

import (
	"github.com/aml-project/aml/internal/connect"
)

// connectorList is the answer of GET /connectors (a named type so the
// OpenAPI schema gets a plain component name).
type connectorList struct {
	Items []connect.Status `json:"items"`
	Count int              `json:"count"`
}

// listConnectors lists the live connectors' status rows (written by the
// connector processes, see connect.Reporter) in the caller's lines, with
// staleness computed at the server's clock.
func (s *Server) listConnectors(c *call) (any, error) {
	line := c.q("line")
	if err := c.scopeLine(line); err != nil {
		return nil, err
	}
	all, err := connect.NewStatusStore(s.d.Store.SQL()).List(c.ctx, line, s.o.Now())
	if err != nil {
		return nil, err
	}
	out := []connect.Status{}
	for _, st := range all {
		if c.p.InScope(st.Line) {
			out = append(out, st)
		}
	}
	return connectorList{Items: out, Count: len(out)}, nil
}
