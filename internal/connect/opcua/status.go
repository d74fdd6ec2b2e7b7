package opcua

import (
	"log/slog"
	"time"

	"github.com/aml-project/aml/internal/connect"
)

// Reporter returns a status reporter for this connector (see
// connect.Reporter): its state, counters, gaps and connection error are
// written to st every interval and on each change while Reporter.Run
// runs.
func (c *Connector) Reporter(st *connect.StatusStore, interval time.Duration, log *slog.Logger) (*connect.Reporter, error) {
	return connect.NewReporter(st, connect.ReporterOptions{ID: "opcua:" + c.opts.Endpoint, Line: c.opts.Map.Line, Kind: connect.KindOPCUA,
		Endpoint: c.opts.Endpoint, Interval: interval, Logger: log, Sample: func() connect.Status {
			s := c.Stats()
			out := connect.FromStats(s.State, s.Stats, s.Connects)
			if out.LastError == "" {
				out.LastError = s.ConnError
			}
			return out
		}})
}
