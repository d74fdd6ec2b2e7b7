package opcuasrv

import (
	"sort"
	"time"

	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"
)

// maxHistoryValues caps the values of one node in one HistoryRead answer
// (a client asks again from the last instant it received).
const maxHistoryValues = 10_000

// histStep is one recorded step: the line's clock, the cycle counter,
// the run id and the reported value of every numeric node (by spec
// index).
type histStep struct {
	ms    int64
	cycle uint64
	run   string
	vals  []float64
}

// histRing keeps the latest steps; the zero value keeps none.
type histRing struct {
	steps []histStep
	next  int // index of the slot the next step overwrites
	n     int // steps held
}

func newHistRing(size, nodes int) histRing {
	r := histRing{steps: make([]histStep, size)}
	for i := range r.steps {
		r.steps[i].vals = make([]float64, nodes)
	}
	return r
}

// record appends the line's last step (caller holds l.mu).
func (r *histRing) record(l *line) {
	if len(r.steps) == 0 {
		return
	}
	h := &r.steps[r.next]
	h.ms, h.cycle, h.run = l.nowMs, l.step, l.runID
	for i, sp := range l.specs {
		h.vals[i] = l.values[sp.id]
	}
	r.next = (r.next + 1) % len(r.steps)
	r.n = min(r.n+1, len(r.steps))
}

// each calls f for the held steps from oldest to newest.
func (r *histRing) each(f func(*histStep)) {
	start := (r.next - r.n + len(r.steps)) % max(1, len(r.steps))
	for i := range r.n {
		f(&r.steps[(start+i)%len(r.steps)])
	}
}

// historyRead answers the OPC UA HistoryRead service with raw values
// (ReadRawModifiedDetails, IsReadModified false) of the line's variables
// from the steps the server keeps (Options.HistorySteps): for each node,
// the values whose source time t has StartTime ≤ t < EndTime (either
// bound may be the zero time: open), oldest first, at most
// NumValuesPerNode (0: all, capped at 10 000; no continuation points —
// a client asks again from the last instant it received). Other details
// (modified, processed, at-time, events) answer
// BadHistoryOperationUnsupported; a node outside the line's variables
// BadNodeIDUnknown; a setpoint the server does not let a client read
// BadNotReadable.
func (s *Server) historyRead(_ *uasc.SecureChannel, r ua.Request, _ uint32) (ua.Response, error) {
	req, ok := r.(*ua.HistoryReadRequest)
	if !ok {
		return nil, ua.StatusBadRequestTypeInvalid
	}
	hdr := func(code ua.StatusCode) *ua.ResponseHeader {
		h := &ua.ResponseHeader{Timestamp: time.Now(), ServiceResult: code, ServiceDiagnostics: &ua.DiagnosticInfo{},
			StringTable: []string{}, AdditionalHeader: ua.NewExtensionObject(nil)}
		if req.RequestHeader != nil {
			h.RequestHandle = req.RequestHeader.RequestHandle
		}
		return h
	}
	var det *ua.ReadRawModifiedDetails
	if req.HistoryReadDetails != nil {
		det, _ = req.HistoryReadDetails.Value.(*ua.ReadRawModifiedDetails)
	}
	if det == nil || det.IsReadModified {
		return &ua.HistoryReadResponse{ResponseHeader: hdr(ua.StatusBadHistoryOperationUnsupported)}, nil
	}
	if len(req.NodesToRead) == 0 {
		return &ua.HistoryReadResponse{ResponseHeader: hdr(ua.StatusBadNothingToDo)}, nil
	}
	limit := maxHistoryValues
	if det.NumValuesPerNode > 0 && int(det.NumValuesPerNode) < limit {
		limit = int(det.NumValuesPerNode)
	}
	var from, to int64 = -1 << 62, 1 << 62
	if !det.StartTime.IsZero() {
		from = det.StartTime.UnixMilli()
	}
	if !det.EndTime.IsZero() {
		to = det.EndTime.UnixMilli()
	}
	res := make([]*ua.HistoryReadResult, len(req.NodesToRead))
	for i, nr := range req.NodesToRead {
		res[i] = s.historyOf(nr, from, to, limit, req.TimestampsToReturn)
	}
	return &ua.HistoryReadResponse{ResponseHeader: hdr(ua.StatusOK), Results: res, DiagnosticInfos: []*ua.DiagnosticInfo{}}, nil
}

// historyOf is one node's answer.
func (s *Server) historyOf(nr *ua.HistoryReadValueID, from, to int64, limit int, stamps ua.TimestampsToReturn) *ua.HistoryReadResult {
	fail := func(code ua.StatusCode) *ua.HistoryReadResult {
		return &ua.HistoryReadResult{StatusCode: code, HistoryData: ua.NewExtensionObject(nil)}
	}
	if nr == nil || nr.NodeID == nil || nr.NodeID.Namespace() != s.ns.id || nr.NodeID.Type() != ua.NodeIDTypeString {
		return fail(ua.StatusBadNodeIDUnknown)
	}
	name := nr.NodeID.StringID()
	l := s.line
	idx, numeric := l.byID[name]
	if !numeric && name != TagRunID && name != TagCycle {
		return fail(ua.StatusBadNodeIDUnknown)
	}
	if n := s.ns.Node(nr.NodeID); n == nil || accessOf(n)&byte(ua.AccessLevelTypeCurrentRead) == 0 {
		return fail(ua.StatusBadNotReadable)
	}
	mask := byte(ua.DataValueValue | ua.DataValueSourceTimestamp)
	if stamps == ua.TimestampsToReturnServer || stamps == ua.TimestampsToReturnBoth {
		mask |= ua.DataValueServerTimestamp
	}
	var out []*ua.DataValue
	l.mu.Lock()
	l.hist.each(func(h *histStep) {
		if h.ms < from || h.ms >= to || len(out) >= limit {
			return
		}
		var v any
		switch {
		case numeric:
			v = h.vals[idx]
		case name == TagRunID:
			v = h.run
		default:
			v = uint32(h.cycle)
		}
		t := time.UnixMilli(h.ms).UTC()
		out = append(out, &ua.DataValue{EncodingMask: mask, Value: ua.MustVariant(v), SourceTimestamp: t, ServerTimestamp: t})
	})
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].SourceTimestamp.Before(out[j].SourceTimestamp) })
	return &ua.HistoryReadResult{StatusCode: ua.StatusOK,
		HistoryData: ua.NewExtensionObject(&ua.HistoryData{DataValues: out})}
}

// historizing marks a readable line variable as keeping history
// (AccessLevel HistoryRead and the Historizing attribute), so a client
// browsing the server sees which nodes HistoryRead serves.
func historizing(acc byte) byte {
	if acc&byte(ua.AccessLevelTypeCurrentRead) != 0 {
		acc |= byte(ua.AccessLevelTypeHistoryRead)
	}
	return acc
}
