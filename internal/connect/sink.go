// Package connect holds what AML's live connectors (connect/opcua,
// connect/mqtt) share: the Sink that turns received values into stored
// samples with their run context, and the record of lost intervals.
//
// # Sink
//
// A connector hands every received value to [Sink.Add] (node, source
// time, value, state). The sink stamps it with the line, product and
// recipe of its options and the run active at that instant, buffers it
// and writes the buffer every FlushEvery (or when it holds FlushSamples)
// in one store transaction (core.TimeSeries.Ingest), ensuring the run
// (status active) in the same transaction. Re-delivered values (same node
// and instant) replace the stored one, so a reconnect that sends the last
// value again does not double-count it.
//
// Runs: [Sink.SetRun] is called when the connector's run tag changes. A
// new run starts at the instant the tag changed; buffered samples at or
// after that instant are moved into it (the tag and the values of one
// step may arrive in different notifications); the previous run ends at
// its last sample (core.Meta.EndRun). An empty run id means no run is
// active: samples then carry no run context.
//
// # Gaps
//
// A connector never invents values for an interval it did not receive.
// It reports the interval with [Sink.RecordGap]: the gap is appended to
// the audit log (action "connector.gap", subject the connector, with the
// interval, the lost cycle count when a cycle counter is mapped, and the
// reason), published on the event bus (kind "connector.gap") and kept in
// [Stats]. `aml audit list` shows it next to the twin's actions.
package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/twin/govern"
)

// Audit actions and event kinds of the connectors.
const (
	AuditGap = "connector.gap"
	// AuditBackfill: an interval the subscription lost was read back from
	// the server's history (no gap in the data).
	AuditBackfill = "connector.backfill"
	EventGap      = "connector.gap"
	EventState    = "connector.state"
	AuditAlarm    = govern.AuditAlarm
	EventAlarm    = govern.EventAlarm
	StateOK       = core.StateOK
	StateBad      = "bad"
	StateUncertn  = "uncertain"
)

// Store is what a sink needs of the store.
type Store interface {
	core.Meta
	core.TimeSeries
}

// AuditLog appends to the audit log (store.Store implements it).
type AuditLog interface {
	AppendAudit(ctx context.Context, actor, action, subject, lineID string, payload any) (audit.Entry, error)
}

// SinkOptions configure a Sink.
type SinkOptions struct {
	// Connector names the connector in gaps and events ("opcua:URL").
	Connector string
	// Line, Product, Recipe are the context of every sample (required).
	Line, Product, Recipe string
	// FlushEvery (default 200 ms) and FlushSamples (default 5000) bound
	// how long and how much the sink buffers.
	FlushEvery   time.Duration
	FlushSamples int
	// Audit records gaps (nil: gaps are only logged, published and counted).
	Audit AuditLog
	Bus   *events.Bus
	// Actor is the audit actor (default "connector").
	Actor  string
	Logger *slog.Logger
}

// Gap is an interval the connector did not receive.
type Gap struct {
	// FromMs is the last instant received before the loss, ToMs the first
	// one after it (source time); no sample lies strictly between them.
	FromMs int64 `json:"fromMs"`
	ToMs   int64 `json:"toMs"`
	// LostCycles is the number of line cycles (steps) not received, when
	// a cycle counter is mapped (-1 when unknown).
	LostCycles int64  `json:"lostCycles"`
	Reason     string `json:"reason"`
	// DownMs is how long the connection was down (wall clock), 0 when the
	// loss happened on a live connection.
	DownMs int64 `json:"downMs"`
}

// Stats are a sink's counters.
type Stats struct {
	Received  int64 `json:"received"`
	Stored    int64 `json:"stored"`
	Malformed int64 `json:"malformed"`
	// Rejected counts samples the store refused for good (e.g. another
	// run already holds the instant: AML_CONFLICT): they are dropped with
	// the error in LastError, not retried forever.
	Rejected int64 `json:"rejected"`
	Flushes  int64 `json:"flushes"`
	Runs     int64 `json:"runsStarted"`
	Gaps     []Gap `json:"gaps"`
	// Backfilled counts the samples read back from the server's history
	// for intervals the live feed lost, BackfilledCycles the line cycles
	// they filled (no gap is recorded for a fully read-back interval).
	Backfilled       int64  `json:"backfilled"`
	BackfilledCycles int64  `json:"backfilledCycles"`
	LastTsMs         int64  `json:"lastTsMs"`
	RunID            string `json:"runId"`
	LastError        string `json:"lastError,omitempty"`
}

// pastRun is a run (or an idle interval, id "") that ended: [start, end).
type pastRun struct {
	id         string
	start, end int64
}

// Sink buffers samples and writes them with their run context.
type Sink struct {
	st   Store
	opts SinkOptions

	mu        sync.Mutex
	buf       []core.Sample
	run       string
	runStart  int64
	runLast   map[string]int64 // last sample instant per run
	runsToEnd []string         // runs that ended, to close at the next flush
	past      []pastRun        // the latest runs before the active one, newest last
	stats     Stats
	flushMu   sync.Mutex
}

// NewSink returns a sink writing to st.
func NewSink(st Store, opts SinkOptions) (*Sink, error) {
	for _, f := range [...][2]string{{"line", opts.Line}, {"product", opts.Product}, {"recipe", opts.Recipe}} {
		if f[1] == "" {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, f[0], "the %s of the samples is required", f[0])
		}
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 200 * time.Millisecond
	}
	if opts.FlushSamples <= 0 {
		opts.FlushSamples = 5000
	}
	if opts.Actor == "" {
		opts.Actor = "connector"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{st: st, opts: opts, runLast: map[string]int64{}}, nil
}

// DeclareNode creates or updates a node's descriptive fields (unit,
// range, kind) before its samples arrive.
func (s *Sink) DeclareNode(ctx context.Context, n core.Node) error {
	if n.LineID == "" {
		n.LineID = s.opts.Line
	}
	if n.Kind == "" {
		n.Kind = core.NodeDAQ
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now().UTC()
	}
	return s.st.UpsertNode(ctx, n)
}

// Add buffers one received value. It flushes when the buffer is full.
func (s *Sink) Add(ctx context.Context, node string, tsMs int64, value float64, state string) error {
	st, err := core.CheckState("state", state)
	if err == nil {
		err = core.CheckNodeID("node", node)
	}
	if err == nil {
		err = core.CheckTs("ts", tsMs)
	}
	if err != nil {
		// What every other ingest path refuses is malformed here too: counted,
		// not stored.
		s.CountMalformed()
		return nil
	}
	state = st
	s.mu.Lock()
	smp := core.Sample{Node: node, TsUs: tsMs * 1000, Value: value, State: state, Line: s.opts.Line, Product: s.opts.Product, Recipe: s.opts.Recipe}
	run := s.run
	if tsMs < s.runStart {
		// A value older than the active run (read back from the server's
		// history): the run of its instant.
		run = ""
		for i := len(s.past) - 1; i >= 0; i-- {
			if p := s.past[i]; p.start <= tsMs && tsMs < p.end {
				run = p.id
				break
			}
		}
	}
	if run != "" {
		smp.Run = run
		if v, ok := s.runLast[run]; !ok || tsMs > v {
			s.runLast[run] = tsMs
		}
	}
	s.buf = append(s.buf, smp)
	s.stats.Received++
	if tsMs > s.stats.LastTsMs {
		s.stats.LastTsMs = tsMs
	}
	full := len(s.buf) >= s.opts.FlushSamples
	s.mu.Unlock()
	if full {
		return s.Flush(ctx)
	}
	return nil
}

// CountMalformed counts a value that was received but could not be
// stored (never written).
func (s *Sink) CountMalformed() {
	s.mu.Lock()
	s.stats.Malformed++
	s.mu.Unlock()
}

// SetRun switches the active run at atMs (see the package doc).
func (s *Sink) SetRun(runID string, atMs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if runID == s.run || atMs < s.runStart {
		// The same run, or a change before the active run started (read
		// back from history: the past runs already say it).
		return
	}
	if s.run != "" {
		s.runsToEnd = append(s.runsToEnd, s.run)
	}
	s.past = append(s.past, pastRun{id: s.run, start: s.runStart, end: atMs})
	if len(s.past) > 16 {
		s.past = s.past[len(s.past)-16:]
	}
	s.run, s.runStart = runID, atMs
	s.stats.RunID = runID
	if runID != "" {
		s.stats.Runs++
		if _, ok := s.runLast[runID]; !ok {
			s.runLast[runID] = atMs
		}
	}
	// Samples of this instant or later belong to the new run.
	for i := range s.buf {
		if ms := core.UsToMs(s.buf[i].TsUs); ms >= atMs {
			s.buf[i].Run = runID
			if runID != "" && ms > s.runLast[runID] {
				s.runLast[runID] = ms
			}
		}
	}
}

// SetRunOnArrival switches the active run for the samples added from now
// on, whatever their timestamps (a broker delivering the run message and
// the values in order, with the values' own times). The run starts at
// its first sample.
func (s *Sink) SetRunOnArrival(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if runID == s.run {
		return
	}
	if s.run != "" {
		s.runsToEnd = append(s.runsToEnd, s.run)
	}
	s.run, s.runStart = runID, math.MinInt64
	s.stats.RunID = runID
	if runID != "" {
		s.stats.Runs++
	}
}

// Flush writes the buffered samples in one transaction, then closes the
// runs that ended. On an error the samples stay buffered for the next
// flush.
func (s *Sink) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	batch := s.buf
	s.buf = nil
	ending := s.runsToEnd
	s.runsToEnd = nil
	runs := map[string]core.Run{}
	for _, smp := range batch {
		if smp.Run != "" {
			if _, ok := runs[smp.Run]; !ok {
				runs[smp.Run] = core.Run{ID: smp.Run, LineID: s.opts.Line, ProductID: s.opts.Product, RecipeID: s.opts.Recipe, StartedMs: s.startOf(smp.Run, batch), Status: core.RunActive}
			}
		}
	}
	last := map[string]int64{}
	for _, r := range ending {
		last[r] = s.runLast[r]
	}
	s.mu.Unlock()

	if len(batch) > 0 {
		err := s.st.Ingest(ctx, func(tx core.IngestTx) error {
			ids := make([]string, 0, len(runs))
			for id := range runs {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if _, err := tx.EnsureRun(runs[id]); err != nil {
					return err
				}
			}
			_, err := tx.Write(batch)
			return err
		})
		if err != nil {
			s.mu.Lock()
			s.stats.LastError = err.Error()
			if retryable(ctx, err) {
				// The store is unreachable or the flush was cut: keep
				// the batch for the next flush.
				s.buf = append(batch, s.buf...)
				s.runsToEnd = append(ending, s.runsToEnd...)
				s.mu.Unlock()
				return err
			}
			// A refusal the same batch would meet again: drop it (counted),
			// so one bad batch does not stall the connector for good.
			s.stats.Rejected += int64(len(batch))
			s.runsToEnd = append(ending, s.runsToEnd...)
			s.mu.Unlock()
			s.opts.Logger.Error("batch refused by the store; dropped", "samples", len(batch), "err", err)
			return err
		}
	}
	s.mu.Lock()
	s.stats.Stored += int64(len(batch))
	s.stats.Flushes++
	s.mu.Unlock()
	for _, r := range ending {
		if err := s.st.EndRun(ctx, r, last[r]); err != nil && core.CodeOf(err) != core.CodeConflict && core.CodeOf(err) != core.CodeNotFound {
			s.opts.Logger.Warn("end run", "run", r, "err", err)
		}
	}
	return nil
}

// retryable says whether a failed flush should be retried with the same
// batch: the store was unavailable, or the context ended mid-flush.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch core.CodeOf(err) {
	case core.CodeStoreUnavailable, core.CodeInternal:
		return true
	}
	return false
}

// startOf is the start instant of a run: when the tag named it, or its
// earliest sample in the batch if that is earlier (caller holds mu).
func (s *Sink) startOf(run string, batch []core.Sample) int64 {
	start := int64(-1)
	if run == s.run && s.runStart != math.MinInt64 {
		start = s.runStart
	}
	for _, smp := range batch {
		if ms := core.UsToMs(smp.TsUs); smp.Run == run && (start < 0 || ms < start) {
			start = ms
		}
	}
	return start
}

// RunFlusher flushes every FlushEvery until ctx ends, then once more
// (with a fresh context: what was received is stored).
func (s *Sink) RunFlusher(ctx context.Context) {
	t := time.NewTicker(s.opts.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.Flush(fctx); err != nil {
				s.opts.Logger.Error("final flush", "err", err)
			}
			cancel()
			return
		case <-t.C:
			if err := s.Flush(ctx); err != nil && ctx.Err() == nil {
				s.opts.Logger.Warn("flush", "err", err)
			}
		}
	}
}

// RecordGap records an interval that was not received (see the package
// doc). It never writes samples.
func (s *Sink) RecordGap(ctx context.Context, g Gap) {
	s.mu.Lock()
	s.stats.Gaps = append(s.stats.Gaps, g)
	s.mu.Unlock()
	payload := map[string]any{"connector": s.opts.Connector, "fromMs": g.FromMs, "toMs": g.ToMs, "lostCycles": g.LostCycles, "reason": g.Reason, "downMs": g.DownMs}
	s.opts.Logger.Warn("gap: interval not received", "connector", s.opts.Connector, "fromMs", g.FromMs, "toMs", g.ToMs, "lostCycles", g.LostCycles, "reason", g.Reason)
	if s.opts.Audit != nil {
		if _, err := s.opts.Audit.AppendAudit(ctx, s.opts.Actor, AuditGap, s.opts.Connector, s.opts.Line, payload); err != nil {
			s.opts.Logger.Error("audit gap", "err", err)
		}
	}
	s.opts.Bus.Publish(events.Event{Kind: EventGap, Line: s.opts.Line, ID: s.opts.Connector, Data: payload})
}

// RecordBackfill records an interval the live feed lost and the connector
// read back from the server's history: samples values added through Add,
// cycles line cycles filled (-1 when no cycle counter is mapped). It is
// appended to the audit log (action "connector.backfill") and counted in
// [Stats]; it is not a gap.
func (s *Sink) RecordBackfill(ctx context.Context, fromMs, toMs, cycles, samples int64, reason string) {
	s.mu.Lock()
	s.stats.Backfilled += samples
	s.stats.BackfilledCycles += max(0, cycles)
	s.mu.Unlock()
	payload := map[string]any{"connector": s.opts.Connector, "fromMs": fromMs, "toMs": toMs, "cycles": cycles, "samples": samples, "reason": reason}
	s.opts.Logger.Info("backfill: lost interval read back from the server's history", "connector", s.opts.Connector, "fromMs", fromMs, "toMs", toMs, "cycles", cycles, "samples", samples)
	if s.opts.Audit != nil {
		if _, err := s.opts.Audit.AppendAudit(ctx, s.opts.Actor, AuditBackfill, s.opts.Connector, s.opts.Line, payload); err != nil {
			s.opts.Logger.Error("audit backfill", "err", err)
		}
	}
}

// Stats returns a copy of the counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Gaps = append([]Gap(nil), s.stats.Gaps...)
	return st
}

// String describes the sink's context.
func (s *Sink) String() string {
	return fmt.Sprintf("%s → %s/%s/%s", s.opts.Connector, s.opts.Line, s.opts.Product, s.opts.Recipe)
}
