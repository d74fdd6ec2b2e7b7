package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// Writer is the port to a line's writable nodes.
type Writer interface {
	Write(ctx context.Context, nodeID string, value float64) error
	Read(ctx context.Context, nodeID string) (float64, error)
}

// Recorder records a write in the history Check reads.
type Recorder interface {
	Record(ctx context.Context, r contract.WriteRecord) error
}

// Outcome statuses.
const (
	OutcomeVerified = "readback-verified"
	OutcomeFailed   = "failed"
	OutcomeRefused  = "refused"
	// OutcomeTransportAck: every move was written and acknowledged by the
	// transport, but at least one node does not allow reading it back
	// (the Writer's Read returned ErrReadbackUnsupported), so the value
	// the line holds is not verified.
	OutcomeTransportAck = "transport-ack"
)

// ErrReadbackUnsupported is returned (wrapped) by a Writer's Read when the
// line does not let the node be read back. Before a write it skips the
// check that the node holds From (the snapshot's freshness still bounds
// the drift); after a write the move is acknowledged, not verified.
var ErrReadbackUnsupported = errors.New("guard: the node cannot be read back")

// ErrNotAllowed is returned by Execute for a decision that does not
// authorise the request.
var ErrNotAllowed = errors.New("guard: write not allowed")

// MoveResult is what happened to one move.
type MoveResult struct {
	Move     Move
	Written  bool
	Readback float64
	Verified bool
	// Acked: written and acknowledged, but not readable back.
	Acked bool
	Err   string
}

// Outcome is the result of Execute. Results holds the moves attempted, in
// order; moves after the first failure are not attempted.
type Outcome struct {
	Status  string
	Detail  string
	Results []MoveResult
}

// Execute applies an allowed decision. It refuses (OutcomeRefused,
// ErrNotAllowed) unless d is an allowed Decision that Check returned for
// this line, run, certificate and these moves. For each move in order it
// reads the node (it must hold From, or the delta Check allowed no longer
// holds), writes To, records the write (every attempted write is recorded,
// so a write of unknown effect still counts against the intervals) and
// reads it back; the readback must equal To within Tolerance. The first
// failure stops the remaining moves and returns OutcomeFailed with an
// error. req.WallNow stamps the records (zero: req.Now, else time.Now):
// the write history is kept on the wall clock.
func Execute(ctx context.Context, w Writer, rec Recorder, d Decision, req Request) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			out.Status, out.Detail = OutcomeFailed, fmt.Sprintf("panic during execution: %v", r)
			err = fmt.Errorf("guard: %s", out.Detail)
		}
	}()
	if ctx == nil {
		ctx = context.Background()
	}
	if reason := refusal(d, req); reason != "" {
		return Outcome{Status: OutcomeRefused, Detail: reason}, fmt.Errorf("%w: %s", ErrNotAllowed, reason)
	}
	if w == nil || rec == nil {
		return Outcome{Status: OutcomeRefused, Detail: "no writer or recorder"}, fmt.Errorf("%w: no writer or recorder", ErrNotAllowed)
	}
	authID, _, _ := req.authority()
	fail := func(r MoveResult, format string, args ...any) (Outcome, error) {
		r.Err = fmt.Sprintf(format, args...)
		out.Results = append(out.Results, r)
		out.Status, out.Detail = OutcomeFailed, fmt.Sprintf("move %s on %s: %s", r.Move.VariableID, r.Move.NodeID, r.Err)
		return out, fmt.Errorf("guard: %s", out.Detail)
	}
	for _, m := range req.Moves {
		r := MoveResult{Move: m}
		cur, err := w.Read(ctx, m.NodeID)
		unreadable := errors.Is(err, ErrReadbackUnsupported)
		if err != nil && !unreadable {
			return fail(r, "read before write: %v", err)
		}
		if !unreadable && !near(cur, m.From) {
			return fail(r, "node holds %v, the move starts from %v", cur, m.From)
		}
		werr := w.Write(ctx, m.NodeID, m.To)
		r.Written = werr == nil
		at := req.WallNow
		if at.IsZero() {
			at = req.Now
		}
		if at.IsZero() {
			at = time.Now()
		}
		if err := rec.Record(ctx, contract.WriteRecord{LineID: req.LineID, NodeID: m.NodeID, CertificateID: authID, RunID: req.RunID, At: at, Value: m.To, Delta: m.Delta()}); err != nil {
			return fail(r, "record write: %v", err)
		}
		if werr != nil {
			return fail(r, "write: %v", werr)
		}
		back, err := w.Read(ctx, m.NodeID)
		if errors.Is(err, ErrReadbackUnsupported) {
			r.Acked = true
			out.Results = append(out.Results, r)
			continue
		}
		if err != nil {
			return fail(r, "readback: %v", err)
		}
		r.Readback = back
		if !near(back, m.To) {
			return fail(r, "read back %v, wrote %v", back, m.To)
		}
		r.Verified = true
		out.Results = append(out.Results, r)
	}
	out.Status, out.Detail = OutcomeVerified, fmt.Sprintf("%d moves written and read back", len(out.Results))
	for _, r := range out.Results {
		if r.Acked {
			out.Status, out.Detail = OutcomeTransportAck, fmt.Sprintf("%d moves written; not every node can be read back (transport acknowledged)", len(out.Results))
			break
		}
	}
	return out, nil
}

// refusal returns why d does not authorise req ("" when it does).
func refusal(d Decision, req Request) string {
	switch {
	case !d.Allowed:
		return fmt.Sprintf("decision denied (%s): %s", d.Reason, d.Detail)
	case d.grant == nil:
		return "decision was not made by Check"
	}
	_, hash, ok := req.authority()
	if !ok {
		return "no certificate or envelope"
	}
	g := d.grant
	if g.lineID != req.LineID || g.runID != req.RunID || g.certHash != hash || len(g.moves) != len(req.Moves) {
		return "decision was made for another request"
	}
	for i := range g.moves {
		if g.moves[i] != req.Moves[i] {
			return "decision was made for other moves"
		}
	}
	return ""
}

// RecordingWriter is an in-memory Writer for tests and demos. Distort,
// when set, changes what a write stores (to simulate a node that does not
// take a value); FailWrite, when set, fails writes to a node.
type RecordingWriter struct {
	mu        sync.Mutex
	Values    map[string]float64
	Writes    []contract.WriteRecord // NodeID and Value of every accepted write, in order
	Distort   func(nodeID string, v float64) float64
	FailWrite func(nodeID string) error
}

// NewRecordingWriter returns a writer whose nodes hold initial.
func NewRecordingWriter(initial map[string]float64) *RecordingWriter {
	w := &RecordingWriter{Values: map[string]float64{}}
	for k, v := range initial {
		w.Values[k] = v
	}
	return w
}

// Write stores value (through Distort) in the node.
func (w *RecordingWriter) Write(_ context.Context, nodeID string, value float64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.FailWrite != nil {
		if err := w.FailWrite(nodeID); err != nil {
			return err
		}
	}
	if w.Distort != nil {
		value = w.Distort(nodeID, value)
	}
	if w.Values == nil {
		w.Values = map[string]float64{}
	}
	w.Values[nodeID] = value
	w.Writes = append(w.Writes, contract.WriteRecord{NodeID: nodeID, Value: value})
	return nil
}

// Read returns the node's value; an unknown node is an error.
func (w *RecordingWriter) Read(_ context.Context, nodeID string) (float64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.Values[nodeID]
	if !ok {
		return 0, fmt.Errorf("unknown node %q", nodeID)
	}
	return v, nil
}

// MemoryHistory is an in-memory History and Recorder.
type MemoryHistory struct {
	mu      sync.Mutex
	Records []contract.WriteRecord
}

// Writes returns the records of the line at or after since.
func (h *MemoryHistory) Writes(_ context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []contract.WriteRecord
	for _, r := range h.Records {
		if r.LineID == lineID && !r.At.Before(since) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Record appends r.
func (h *MemoryHistory) Record(_ context.Context, r contract.WriteRecord) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Records = append(h.Records, r)
	return nil
}
