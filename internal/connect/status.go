package connect

// Connector status: what a running connector tells other processes.
//
// A connector runs in its own process (aml connect opcua|mqtt) or inside
// aml demo --live; the API, the UI and the event stream run in aml serve.
// They share only the store, so the connector writes its state and
// counters into the connector_status table (migration 0008): every
// Interval and within a poll period of a state change. A process that dies
// cannot say so: a row not updated for StaleAfter intervals is shown as
// stale instead of trusting its last state. WatchStatus runs in aml serve
// and turns row changes into connector.state / connector.gap events.

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Connector states as stored. The OPC UA connector reports each; the MQTT
// connector reports connecting, connected, reconnecting and stopped.
const (
	StateIdle         = "idle"
	StateConnecting   = "connecting"
	StateConnected    = "connected"
	StateReconnecting = "reconnecting"
	StateStopped      = "stopped"
	StateFailed       = "failed"
)

// Connector kinds.
const (
	KindOPCUA = "opcua"
	KindMQTT  = "mqtt"
)

// DefaultStatusInterval is how often a running connector writes its row;
// StaleAfter intervals without a write make the row stale.
const (
	DefaultStatusInterval = 2 * time.Second
	StaleAfter            = 3
)

// statusPoll is how often the reporter looks at its connector for a
// state change (a cheap in-memory copy; the store is written only on a
// change or every interval).
const statusPoll = 250 * time.Millisecond

// Status is one connector's row.
type Status struct {
	ID        string `json:"id"`
	Line      string `json:"line"`
	Kind      string `json:"kind"`
	Endpoint  string `json:"endpoint"`
	State     string `json:"state"`
	RunID     string `json:"runId"`
	Received  int64  `json:"received"`
	Stored    int64  `json:"stored"`
	Malformed int64  `json:"malformed"`
	Gaps      int64  `json:"gaps"`
	Connects  int64  `json:"connects"`
	// LastSampleMs is the source time of the newest value (0: none yet).
	LastSampleMs int64     `json:"lastSampleMs,omitempty"`
	LastError    string    `json:"lastError,omitempty"`
	IntervalMs   int64     `json:"intervalMs"`
	Host         string    `json:"host,omitempty"`
	PID          int64     `json:"pid,omitempty"`
	StartedAt    time.Time `json:"startedAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	// Stale: a running state not updated for StaleAfter intervals (the
	// writing process is gone or stuck). Computed when read.
	Stale bool `json:"stale"`
}

// Shown is the state to display: "stale" for a stale row.
func (s Status) Shown() string {
	if s.Stale {
		return "stale"
	}
	return s.State
}

// Running reports a state in which the connector is expected to write
// its row again.
func Running(state string) bool {
	return state != StateStopped && state != StateFailed
}

// StatusStore reads and writes the connector_status table of either
// back-end (through internal/store/sqldb).
type StatusStore struct {
	db *sqldb.DB
}

// NewStatusStore uses the store's SQL handle (Store.SQL()).
func NewStatusStore(db *sqldb.DB) *StatusStore { return &StatusStore{db: db} }

func validStatus(s Status) error {
	var probs []core.Problem
	if s.ID == "" {
		probs = append(probs, core.Problem{Field: "id", Message: "connector id is required"})
	}
	if s.Line == "" {
		probs = append(probs, core.Problem{Field: "line", Message: "line is required"})
	}
	if s.Kind != KindOPCUA && s.Kind != KindMQTT {
		probs = append(probs, core.Problem{Field: "kind", Message: "kind must be opcua or mqtt, got " + s.Kind})
	}
	switch s.State {
	case StateIdle, StateConnecting, StateConnected, StateReconnecting, StateStopped, StateFailed:
	default:
		probs = append(probs, core.Problem{Field: "state", Message: "unknown connector state " + s.State})
	}
	if s.IntervalMs <= 0 {
		probs = append(probs, core.Problem{Field: "intervalMs", Message: "the reporting interval must be positive"})
	}
	if err := core.Invalid(core.CodeInvalidArgument, probs); err != nil {
		return err
	}
	return nil
}

// Put upserts s (one statement: atomic on its own). UpdatedAt is the
// caller's clock; a zero StartedAt keeps the stored one.
func (st *StatusStore) Put(ctx context.Context, s Status) error {
	if err := validStatus(s); err != nil {
		return err
	}
	var last any
	if s.LastSampleMs > 0 {
		last = s.LastSampleMs
	}
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = time.Now()
	}
	if s.StartedAt.IsZero() {
		s.StartedAt = s.UpdatedAt
	}
	_, err := st.db.ExecContext(ctx, `INSERT INTO connector_status(connector_id, line_id, kind, endpoint, state, run_id, received, stored, malformed, gaps, connects,
			last_sample_ms, last_error, interval_ms, host, pid, started_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(connector_id, line_id) DO UPDATE SET kind=excluded.kind, endpoint=excluded.endpoint, state=excluded.state, run_id=excluded.run_id,
			received=excluded.received, stored=excluded.stored, malformed=excluded.malformed, gaps=excluded.gaps, connects=excluded.connects,
			last_sample_ms=excluded.last_sample_ms, last_error=excluded.last_error, interval_ms=excluded.interval_ms, host=excluded.host, pid=excluded.pid,
			started_at=excluded.started_at, updated_at=excluded.updated_at`,
		s.ID, s.Line, s.Kind, s.Endpoint, s.State, s.RunID, s.Received, s.Stored, s.Malformed, s.Gaps, s.Connects,
		last, s.LastError, s.IntervalMs, s.Host, s.PID, s.StartedAt.UnixMilli(), s.UpdatedAt.UnixMilli())
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "write connector status %s", s.ID)
	}
	return nil
}

// List returns the connectors of line (every line when empty), ordered by
// line and id, with Stale computed at now.
func (st *StatusStore) List(ctx context.Context, line string, now time.Time) ([]Status, error) {
	q := `SELECT connector_id, line_id, kind, endpoint, state, run_id, received, stored, malformed, gaps, connects,
		last_sample_ms, last_error, interval_ms, host, pid, started_at, updated_at FROM connector_status`
	var args []any
	if line != "" {
		q += ` WHERE line_id = ?`
		args = append(args, line)
	}
	rows, err := st.db.QueryContext(ctx, q+` ORDER BY line_id, connector_id`, args...)
	if err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "list connector status")
	}
	defer rows.Close()
	out := []Status{}
	for rows.Next() {
		var s Status
		var last sql.NullInt64
		var started, updated int64
		if err := rows.Scan(&s.ID, &s.Line, &s.Kind, &s.Endpoint, &s.State, &s.RunID, &s.Received, &s.Stored, &s.Malformed, &s.Gaps, &s.Connects,
			&last, &s.LastError, &s.IntervalMs, &s.Host, &s.PID, &started, &updated); err != nil {
			return nil, core.Wrap(core.CodeStoreUnavailable, err, "read connector status")
		}
		s.LastSampleMs = last.Int64
		s.StartedAt, s.UpdatedAt = time.UnixMilli(started).UTC(), time.UnixMilli(updated).UTC()
		s.Stale = Running(s.State) && now.Sub(s.UpdatedAt) > time.Duration(StaleAfter*s.IntervalMs)*time.Millisecond
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "read connector status")
	}
	return out, nil
}

// Reporter writes one connector's row while it runs.
type Reporter struct {
	st       *StatusStore
	base     Status
	interval time.Duration
	sample   func() Status
	now      func() time.Time
	log      *slog.Logger

	mu   sync.Mutex
	last Status
	err  string
}

// ReporterOptions configure a Reporter.
type ReporterOptions struct {
	// ID, Line, Kind, Endpoint identify the connector (required).
	ID, Line, Kind, Endpoint string
	// Interval between writes (default DefaultStatusInterval).
	Interval time.Duration
	// Sample returns the connector's current state and counters (the
	// identifying fields are filled in by the reporter).
	Sample func() Status
	Now    func() time.Time
	Logger *slog.Logger
}

// NewReporter prepares a reporter; Run writes.
func NewReporter(st *StatusStore, o ReporterOptions) (*Reporter, error) {
	if o.Interval <= 0 {
		o.Interval = DefaultStatusInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sample == nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "sample", "a reporter needs the connector's counters")
	}
	host, _ := os.Hostname()
	base := Status{ID: o.ID, Line: o.Line, Kind: o.Kind, Endpoint: o.Endpoint, State: StateIdle, IntervalMs: o.Interval.Milliseconds(),
		Host: host, PID: int64(os.Getpid()), StartedAt: o.Now().UTC()}
	if err := validStatus(base); err != nil {
		return nil, err
	}
	return &Reporter{st: st, base: base, interval: o.Interval, sample: o.Sample, now: o.Now, log: o.Logger}, nil
}

// current merges the connector's sample into the identifying fields.
func (r *Reporter) current() Status {
	s := r.sample()
	out := r.base
	out.State, out.RunID = s.State, s.RunID
	if out.State == "" {
		out.State = StateIdle
	}
	out.Received, out.Stored, out.Malformed, out.Gaps, out.Connects = s.Received, s.Stored, s.Malformed, s.Gaps, s.Connects
	out.LastSampleMs, out.LastError = s.LastSampleMs, s.LastError
	r.mu.Lock()
	if out.LastError == "" {
		out.LastError = r.err
	}
	r.mu.Unlock()
	return out
}

// write stores s; a store error is logged (status is best effort: it must
// never stop ingestion) and returned.
func (r *Reporter) write(ctx context.Context, s Status) error {
	s.UpdatedAt = r.now().UTC()
	if err := r.st.Put(ctx, s); err != nil {
		r.log.Warn("connector status not written", "connector", s.ID, "err", err)
		return err
	}
	r.mu.Lock()
	r.last = s
	r.mu.Unlock()
	return nil
}

// Run writes the row at once, then every interval and within a poll
// period of a change of state, run or gap count, until ctx ends. It does
// not write the final state: call Stop with the connector's outcome.
func (r *Reporter) Run(ctx context.Context) {
	// write logs a failure itself and leaves r.last alone, so the next
	// poll sees a change and tries again.
	_ = r.write(ctx, r.current())
	poll := time.NewTicker(min(statusPoll, r.interval))
	defer poll.Stop()
	lastWrite := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			s := r.current()
			r.mu.Lock()
			prev := r.last
			r.mu.Unlock()
			changed := s.State != prev.State || s.RunID != prev.RunID || s.Gaps != prev.Gaps || s.LastError != prev.LastError
			if changed || time.Since(lastWrite) >= r.interval {
				_ = r.write(ctx, s)
				lastWrite = time.Now()
			}
		}
	}
}

// Stop writes the final row: stopped, or failed with runErr.
func (r *Reporter) Stop(ctx context.Context, runErr error) error {
	s := r.current()
	s.State = StateStopped
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		s.State = StateFailed
		s.LastError = runErr.Error()
	}
	return r.write(ctx, s)
}

// Last is the last row written.
func (r *Reporter) Last() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// SetError records a connection error to report until the connector
// reports one of its own.
func (r *Reporter) SetError(msg string) {
	r.mu.Lock()
	r.err = msg
	r.mu.Unlock()
}

// FromStats fills a status sample from a sink's counters.
func FromStats(state string, st Stats, connects int) Status {
	return Status{State: state, RunID: st.RunID, Received: st.Received, Stored: st.Stored, Malformed: st.Malformed,
		Gaps: int64(len(st.Gaps)), Connects: int64(connects), LastSampleMs: st.LastTsMs, LastError: st.LastError}
}

// WatchStatus polls the table every period until ctx ends and publishes
// on bus what changed since the previous poll: connector.state when a
// connector's shown state (stale included) or run changes or it appears,
// connector.gap when its gap count grows (the gaps themselves are in the
// audit log). It lets aml serve stream the state of connectors running in
// other processes.
func WatchStatus(ctx context.Context, st *StatusStore, bus *events.Bus, period time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if period <= 0 {
		period = DefaultStatusInterval
	}
	seen := map[string]Status{}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		list, err := st.List(ctx, "", time.Now())
		if err != nil && ctx.Err() == nil {
			log.Warn("watch connector status", "err", err)
		}
		for _, s := range statusEvents(seen, list) {
			bus.Publish(s)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// statusEvents diffs list against seen (updated in place) and returns
// the events to publish, in list order.
func statusEvents(seen map[string]Status, list []Status) []events.Event {
	var out []events.Event
	for _, s := range list {
		k := s.ID + "\x00" + s.Line
		prev, ok := seen[k]
		seen[k] = s
		data := map[string]any{"state": s.Shown(), "kind": s.Kind, "endpoint": s.Endpoint, "runId": s.RunID,
			"received": s.Received, "stored": s.Stored, "malformed": s.Malformed, "gaps": s.Gaps, "stale": s.Stale, "lastError": s.LastError}
		if !ok || prev.Shown() != s.Shown() || prev.RunID != s.RunID {
			out = append(out, events.Event{Kind: EventState, Line: s.Line, ID: s.ID, Data: data})
		}
		if ok && s.Gaps > prev.Gaps {
			gd := map[string]any{"gaps": s.Gaps, "newGaps": s.Gaps - prev.Gaps, "kind": s.Kind, "endpoint": s.Endpoint}
			out = append(out, events.Event{Kind: EventGap, Line: s.Line, ID: s.ID, Data: gd})
		}
	}
	return out
}

// RunReported runs a connector (run) with its status reporter: the row is
// written at once, every interval and on each change, and once more at the
// end (stopped, or failed with run's error) so aml serve never shows a
// finished connector as running.
func RunReported(ctx context.Context, rep *Reporter, run func(ctx context.Context) error, log *slog.Logger) error {
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rep.Run(rctx); close(done) }()
	err := run(ctx)
	stop()
	<-done
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := rep.Stop(fctx, err); serr != nil && log != nil {
		log.Warn("final connector status not written", "err", serr)
	}
	return err
}
