package mqtt

import (
	"log/slog"
	"time"

	"github.com/aml-project/aml/internal/connect"
)

// Reporter returns a status reporter for this connector (see
// connect.Reporter). The MQTT client reconnects by itself, so the state
// is derived from its counters: connecting before the first connection,
// connected, or reconnecting after a loss.
func (c *Connector) Reporter(st *connect.StatusStore, interval time.Duration, log *slog.Logger) (*connect.Reporter, error) {
	return connect.NewReporter(st, connect.ReporterOptions{ID: "mqtt:" + c.opts.Broker, Line: c.opts.Map.Line, Kind: connect.KindMQTT,
		Endpoint: c.opts.Broker, Interval: interval, Logger: log, Sample: func() connect.Status {
			s := c.Stats()
			state := connect.StateConnecting
			switch {
			case s.Connected:
				state = connect.StateConnected
			case s.Connects > 0:
				state = connect.StateReconnecting
			}
			return connect.FromStats(state, s.Stats, s.Connects)
		}})
}
