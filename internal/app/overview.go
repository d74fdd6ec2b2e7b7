package app

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
)

// The operator's overview of one line (line.overview): what a DCS
// faceplate shows, read in one call — each node's newest value against
// its normal range (an alarm when outside it, or when the value is older
// than staleAfter on the application's clock), the connectors feeding the
// line, the certificates waiting for a person or for execution (with
// whether they can still execute), and the last governed writes with the
// value each move wrote and the value read back. Nothing is computed that
// another op does not already state: the values are the store's newest
// samples, the writes the audit log's write.executed / write.failed
// entries.

var opLineOverview = Op{Name: "line.overview", Act: auth.ActRead, Summary: "An operator's view of one line: each node's newest value against its range (alarms), connectors, certificates awaiting approval or execution, the last governed writes with readback"}

func overviewOps() []*Op {
	return []*Op{bind(&opLineOverview, (*App).LineOverview)}
}

// Overview bounds.
const (
	DefaultOverviewWrites     = 10
	MaxOverviewWrites         = 100
	DefaultOverviewStaleAfter = 5 * time.Minute
	maxOverviewNodes          = 500
)

// Alarm states of a node in the overview.
const (
	AlarmHigh   = "high"    // above the node's max
	AlarmLow    = "low"     // below the node's min
	AlarmStale  = "stale"   // newest value older than staleAfter
	AlarmNoData = "no data" // no sample at all
)

// LineOverviewRequest names the line.
type LineOverviewRequest struct {
	Line       string   `json:"line" jsonschema:"the line"`
	Writes     int      `json:"writes,omitempty" jsonschema:"at most this many recent governed writes (default 10, at most 100)"`
	StaleAfter Duration `json:"staleAfter,omitempty" jsonschema:"a newest value older than this is stale (default 5m)"`
}

// Validate checks the line and the bounds.
func (r *LineOverviewRequest) Validate() error {
	if err := required("line", r.Line); err != nil {
		return err
	}
	if err := core.CheckID("line", r.Line); err != nil {
		return err
	}
	if r.StaleAfter < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "staleAfter", "staleAfter must not be negative")
	}
	return limitIn("writes", r.Writes, 1, MaxOverviewWrites)
}

// NodeLive is one node with its newest value.
type NodeLive struct {
	core.Node
	// Setpoint: a node the twin may write (kind dcw, SP); else a
	// measurement (PV).
	Setpoint bool     `json:"setpoint"`
	Value    *float64 `json:"value,omitempty" jsonschema:"the newest value (absent: none)"`
	At       *int64   `json:"atMs,omitempty" jsonschema:"its source time, epoch ms"`
	RunID    string   `json:"runId,omitempty" jsonschema:"the run it belongs to"`
	AgeMs    *int64   `json:"ageMs,omitempty" jsonschema:"how old it is on the application's clock"`
	// Alarm is high, low, stale or no data ("" when normal).
	Alarm string `json:"alarm,omitempty" jsonschema:"high (above max), low (below min), stale, no data, or empty when normal"`
}

// PendingCert is a certificate awaiting approval or execution.
type PendingCert struct {
	ID          string              `json:"id"`
	Status      contract.CertStatus `json:"status"`
	TrialID     string              `json:"trialId"`
	RequestedBy string              `json:"requestedBy"`
	ApprovedBy  string              `json:"approvedBy,omitempty"`
	IssuedAt    time.Time           `json:"issuedAt"`
	Verified    bool                `json:"verified"`
	Execution   CertExecution       `json:"execution"`
}

// WriteOutcome is one governed write: the audit log's write.executed or
// write.failed entry with its moves (written value and readback).
type WriteOutcome struct {
	Seq           int64               `json:"seq"`
	At            time.Time           `json:"at"`
	Actor         string              `json:"actor"`
	CertificateID string              `json:"certificateId"`
	Executed      bool                `json:"executed" jsonschema:"true: write.executed; false: write.failed"`
	Status        string              `json:"status" jsonschema:"the guard's outcome (readback-verified, transport-ack, …)"`
	Detail        string              `json:"detail,omitempty"`
	Moves         []govern.MoveResult `json:"moves"`
}

// LineOverview is the operator's view of a line.
type LineOverview struct {
	Line string    `json:"line"`
	At   time.Time `json:"at" jsonschema:"the application's clock when read"`
	// Run is the line's newest run.
	Run        *core.Run        `json:"run,omitempty"`
	Nodes      []NodeLive       `json:"nodes"`
	Alarms     int              `json:"alarms" jsonschema:"nodes with an alarm"`
	Connectors []connect.Status `json:"connectors"`
	Pending    []PendingCert    `json:"pending"`
	Writes     []WriteOutcome   `json:"writes"`
}

// LineOverview reads the operator's view of one line.
func (a *App) LineOverview(ctx context.Context, p Principal, req LineOverviewRequest) (LineOverview, error) {
	return run(ctx, a, p, &opLineOverview, req, func(ctx context.Context, p Principal, req LineOverviewRequest) (LineOverview, error) {
		if err := p.Allow(auth.ActRead, req.Line); err != nil {
			return LineOverview{}, err
		}
		now := a.o.Now()
		out := LineOverview{Line: req.Line, At: now.UTC(), Nodes: []NodeLive{}, Connectors: []connect.Status{}, Pending: []PendingCert{}, Writes: []WriteOutcome{}}
		nodes, err := a.d.Store.ListNodes(ctx, req.Line)
		if err != nil {
			return out, err
		}
		runs, err := a.d.Store.ListRuns(ctx, core.RunFilter{Line: req.Line})
		if err != nil {
			return out, err
		}
		if len(runs) == 0 && len(nodes) == 0 {
			return out, core.Errorf(core.CodeNotFound, "line %q has no runs or nodes", req.Line)
		}
		for i := range runs {
			if out.Run == nil || runs[i].StartedMs > out.Run.StartedMs {
				out.Run = &runs[i]
			}
		}
		if err := a.overviewNodes(ctx, &out, req, nodes, now); err != nil {
			return out, err
		}
		conns, err := connect.NewStatusStore(a.d.Store.SQL()).List(ctx, req.Line, now)
		if err != nil {
			return out, err
		}
		out.Connectors = append(out.Connectors, conns...)
		if err := a.overviewPending(ctx, &out, req.Line); err != nil {
			return out, err
		}
		return out, a.overviewWrites(ctx, &out, req)
	})
}

// overviewNodes fills the nodes (setpoints first, then by id) with their
// newest sample on the line and its alarm.
func (a *App) overviewNodes(ctx context.Context, out *LineOverview, req LineOverviewRequest, nodes []core.Node, now time.Time) error {
	sort.SliceStable(nodes, func(i, j int) bool {
		si, sj := nodes[i].Kind == core.NodeDCW, nodes[j].Kind == core.NodeDCW
		if si != sj {
			return si
		}
		return nodes[i].ID < nodes[j].ID
	})
	if len(nodes) > maxOverviewNodes {
		nodes = nodes[:maxOverviewNodes]
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	latest, err := a.d.Store.Latest(ctx, ids, core.ContextFilter{Line: req.Line})
	if err != nil {
		return err
	}
	byNode := make(map[string]core.Sample, len(latest))
	for _, s := range latest {
		byNode[s.Node] = s
	}
	stale := req.StaleAfter.D()
	if stale == 0 {
		stale = DefaultOverviewStaleAfter
	}
	for _, n := range nodes {
		nl := NodeLive{Node: n, Setpoint: n.Kind == core.NodeDCW}
		s, ok := byNode[n.ID]
		switch {
		case !ok || math.IsNaN(s.Value) || math.IsInf(s.Value, 0):
			nl.Alarm = AlarmNoData
		default:
			v, at := s.Value, core.UsToMs(s.TsUs)
			age := now.UnixMilli() - at
			nl.Value, nl.At, nl.AgeMs, nl.RunID = &v, &at, &age, s.Run
			nl.Alarm = Alarm(n, v, time.Duration(age)*time.Millisecond, stale)
		}
		if nl.Alarm != "" {
			out.Alarms++
		}
		out.Nodes = append(out.Nodes, nl)
	}
	return nil
}

// Alarm is the alarm of node n holding v, age old: outside its range
// (high, low) before stale; "" when normal.
func Alarm(n core.Node, v float64, age, staleAfter time.Duration) string {
	switch {
	case n.Max != nil && v > *n.Max:
		return AlarmHigh
	case n.Min != nil && v < *n.Min:
		return AlarmLow
	case age > staleAfter:
		return AlarmStale
	}
	return ""
}

// overviewPending lists the line's ISSUED and APPROVED certificates,
// newest first, with their execution state.
func (a *App) overviewPending(ctx context.Context, out *LineOverview, line string) error {
	if a.d.Key == nil {
		return nil // no certificate key: no certificates to verify
	}
	for _, st := range []contract.CertStatus{contract.CertApproved, contract.CertIssued} {
		items, err := a.d.Store.ListCertificates(ctx, contract.CertFilter{LineID: line, Status: st, Limit: 100}, a.d.Key.Public)
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.Cert == nil {
				continue
			}
			rec := it.CertRecord
			out.Pending = append(out.Pending, PendingCert{ID: it.Cert.RecommendationID, Status: it.Cert.Status, TrialID: it.Cert.TrialID,
				RequestedBy: it.Cert.CreatedBy, ApprovedBy: it.Cert.ApprovedBy, IssuedAt: it.Cert.IssuedAt, Verified: it.Verified,
				Execution: a.CertExecutionOf(ctx, &rec, it.Verified, it.Problem)})
		}
	}
	sort.SliceStable(out.Pending, func(i, j int) bool { return out.Pending[i].IssuedAt.After(out.Pending[j].IssuedAt) })
	return nil
}

// overviewWrites reads the line's newest write.executed and write.failed
// audit entries.
func (a *App) overviewWrites(ctx context.Context, out *LineOverview, req LineOverviewRequest) error {
	n := req.Writes
	if n == 0 {
		n = DefaultOverviewWrites
	}
	var es []audit.Entry
	for _, action := range []string{twinstore.AuditWriteExecuted, twinstore.AuditWriteFailed} {
		got, err := a.auditLog().Query(ctx, audit.Query{Action: action, Lines: []string{req.Line}, Newest: true, Limit: n})
		if err != nil {
			return err
		}
		es = append(es, got...)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Seq > es[j].Seq })
	if len(es) > n {
		es = es[:n]
	}
	for _, e := range es {
		var pl struct {
			Status string              `json:"status"`
			Detail string              `json:"detail"`
			Writes []govern.MoveResult `json:"writes"`
		}
		if err := json.Unmarshal(e.Payload, &pl); err != nil {
			return core.Errorf(core.CodeAuditTampered, "audit entry %d (%s) has a payload that does not decode: %v", e.Seq, e.Action, err)
		}
		if pl.Writes == nil {
			pl.Writes = []govern.MoveResult{}
		}
		out.Writes = append(out.Writes, WriteOutcome{Seq: e.Seq, At: e.At, Actor: e.Actor, CertificateID: e.Subject, Executed: e.Action == twinstore.AuditWriteExecuted,
			Status: pl.Status, Detail: pl.Detail, Moves: pl.Writes})
	}
	return nil
}
