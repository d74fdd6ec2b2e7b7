package opcuasrv

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/server/attrs"
	"github.com/gopcua/opcua/ua"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
)

// NamespaceURI is the name of the injection line's namespace (index 1).
const NamespaceURI = "urn:aml:sim:injection"

// FolderName is the browse name of the injection line's folder under Objects.
const FolderName = "InjectionLine"

// The tank line's namespace (index 1) and folder.
const (
	TankNamespaceURI = "urn:aml:sim:tank"
	TankFolderName   = "TankLine"
)

// Line kinds (Options.Kind).
const (
	// KindInjection is the injection-moulding line (sim.TruePlant), the default.
	KindInjection = "injection"
	// KindTank is the plant's own tank line (sim.TankLine): setpoints
	// heater_sp and feed_sp, the level measured; its true gains, time
	// constant and dead times are sim.PlantTruth().
	KindTank = "tank"
)

var timeZero = time.Unix(0, 0).UTC()

// Options configures [Start]. Zero values select the defaults.
type Options struct {
	// Kind is the simulated line: KindInjection (default) or KindTank.
	Kind string
	// Addr is host:port to listen on (default 127.0.0.1:4840); port 0
	// picks a free port (see [Server.Endpoint]).
	Addr string
	// Speed is simulated seconds per wall second (default 1; 10 runs ten
	// times faster than real time). At most 1000.
	Speed float64
	// StepMs is one physics step of simulated time (default 1000).
	StepMs int64
	// StartMs is the line clock's first step, epoch ms (default: the wall
	// clock at Start, truncated to the second).
	StartMs int64
	// Seed selects the noise and disturbance streams.
	Seed uint64
	// LineID, RecipeID name the line and the recipe whose run ids the
	// line uses (defaults sim.DefaultLineID, sim.DefaultRecipeID; the
	// tank: "tank-line", "tank-level").
	LineID, RecipeID string
	// FirstRun numbers the runs from FirstRun+1 (sim.RunID).
	FirstRun int
	// RunSteps is the length of a run in steps (default 1800: 30 min at
	// 1 s); IdleSteps the steps between runs (default 0).
	RunSteps, IdleSteps int
	// WearRuns is the line's age in runs at Start (mould wear; the
	// injection line only).
	WearRuns float64
	// Initial overrides the recipe's nominal setpoints.
	Initial map[string]float64
	// WriteOnlySetpoints makes the setpoints writable but not readable.
	WriteOnlySetpoints bool
	// Manual: no ticker; the line advances only by [Server.Step] (tests).
	Manual bool
	// HistorySteps is how many of the latest steps the server keeps for
	// the OPC UA HistoryRead service (default 3600; -1: no history, the
	// service answers BadServiceUnsupported like a server without a
	// historian).
	HistorySteps int
	// Logger (default: discard).
	Logger *slog.Logger
}

func (o Options) normalize() (Options, error) {
	switch o.Kind {
	case "":
		o.Kind = KindInjection
	case KindInjection, KindTank:
	default:
		return o, core.FieldErrorf(core.CodeInvalidArgument, "kind", "line kind must be %s or %s, got %q", KindInjection, KindTank, o.Kind)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:4840"
	}
	if o.Speed == 0 {
		o.Speed = 1
	}
	if !(o.Speed > 0 && o.Speed <= 1000) {
		return o, core.FieldErrorf(core.CodeInvalidArgument, "speed", "speed must be in (0, 1000], got %v", o.Speed)
	}
	if o.StepMs == 0 {
		o.StepMs = 1000
	}
	if o.StepMs < 10 || o.StepMs > 3_600_000 {
		return o, core.FieldErrorf(core.CodeInvalidArgument, "step-ms", "step must be 10..3600000 ms, got %d", o.StepMs)
	}
	if o.Kind == KindTank && o.StepMs%1000 != 0 {
		return o, core.FieldErrorf(core.CodeInvalidArgument, "step-ms", "the tank samples in whole seconds: step must be a multiple of 1000 ms, got %d", o.StepMs)
	}
	if o.StartMs == 0 {
		o.StartMs = time.Now().Truncate(time.Second).UnixMilli()
	}
	if o.LineID == "" {
		o.LineID = sim.DefaultLineID
		if o.Kind == KindTank {
			o.LineID = "tank-line"
		}
	}
	if o.RecipeID == "" {
		o.RecipeID = sim.DefaultRecipeID
		if o.Kind == KindTank {
			o.RecipeID = "tank-level"
		}
	}
	if o.RunSteps == 0 {
		o.RunSteps = 1800
	}
	switch {
	case o.HistorySteps == 0:
		o.HistorySteps = 3600
	case o.HistorySteps < -1 || o.HistorySteps > 1_000_000:
		return o, core.FieldErrorf(core.CodeInvalidArgument, "history-steps", "history must be -1 (none) or 1..1000000 steps, got %d", o.HistorySteps)
	}
	if o.RunSteps < 1 || o.IdleSteps < 0 {
		return o, core.FieldErrorf(core.CodeInvalidArgument, "run-steps", "run steps must be ≥ 1 and idle steps ≥ 0")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, s := range specs(o.Kind, o.LineID) {
		if v, ok := o.Initial[s.id]; ok && (!s.writable || !(v >= s.min && v <= s.max)) {
			return o, core.FieldErrorf(core.CodeInvalidArgument, "initial", "initial %s=%v is not a setpoint within [%v, %v]", s.id, v, s.min, s.max)
		}
	}
	return o, nil
}

// Stats are the line's counters.
type Stats struct {
	// Steps is the number of physics steps since Start.
	Steps uint64 `json:"steps"`
	// NowMs is the line clock: the instant of the last step.
	NowMs int64 `json:"nowMs"`
	// RunID is the active run ("" between runs).
	RunID string `json:"runId"`
	// Writes and Refusals count accepted and refused setpoint writes.
	Writes   int `json:"writes"`
	Refusals int `json:"refusals"`
}

// Server is the simulated line served over OPC UA.
type Server struct {
	opts     Options
	srv      *server.Server
	ns       *lineNS
	line     *line
	endpoint string
	cancel   context.CancelFunc
	done     chan struct{}
	stepMu   sync.Mutex
	closed   sync.Once
}

// Start builds the line, starts the OPC UA server on opts.Addr and, unless
// opts.Manual, the line's ticker. Close stops both. The line has taken its
// first step when Start returns.
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	host, portS, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "addr", "address %q: %v", o.Addr, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 0 || port > 65535 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "addr", "address %q: bad port", o.Addr)
	}
	if port == 0 {
		// The server package listens on the endpoint URL it advertises,
		// so a free port is chosen here first.
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, core.Errorf(core.CodeInternal, "find a free port on %s: %v", host, err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close() // only the port number was wanted; the server's own listen reports a problem
	}
	s := &Server{opts: o, line: newLine(o), done: make(chan struct{})}
	s.srv = server.New(
		server.EndPoint(host, port),
		server.EnableSecurity("None", ua.MessageSecurityModeNone),
		server.EnableAuthMode(ua.UserTokenTypeAnonymous),
		server.ServerName("AML simulated "+o.Kind+" line"),
		server.ProductName("aml sim serve-opcua"),
	)
	s.endpoint = fmt.Sprintf("opc.tcp://%s", net.JoinHostPort(host, strconv.Itoa(port)))
	s.ns = newLineNS(s)
	s.srv.AddNamespace(s.ns)
	s.ns.build()
	root, _ := s.srv.Namespace(0)
	root.Objects().AddRef(s.ns.folder, id.Organizes, true)

	s.line.advance()
	if o.HistorySteps > 0 {
		// Registered before Start, so it replaces the package's
		// "unsupported" HistoryRead handler.
		s.srv.RegisterHandler(id.HistoryReadRequest_Encoding_DefaultBinary, s.historyRead)
	}
	if err := s.srv.Start(ctx); err != nil {
		return nil, core.Errorf(core.CodeInternal, "start OPC UA server on %s: %v", s.endpoint, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if o.Manual {
		close(s.done)
	} else {
		go s.run(rctx)
	}
	o.Logger.Info("simulated line serving", "endpoint", s.endpoint, "speed", o.Speed, "stepMs", o.StepMs)
	return s, nil
}

// Endpoint is the server's endpoint URL (opc.tcp://host:port).
func (s *Server) Endpoint() string { return s.endpoint }

// NodeID returns the OPC UA node id of a line node or tag ("ns=1;s=<id>").
func (s *Server) NodeID(node string) string { return ua.NewStringNodeID(s.ns.id, node).String() }

// Nodes returns the ids of the line's numeric nodes (sorted) and its
// two tags.
func (s *Server) Nodes() []string {
	out := make([]string, 0, len(s.line.specs)+2)
	for _, sp := range s.line.specs {
		out = append(out, sp.id)
	}
	return append(out, TagRunID, TagCycle)
}

// Stats returns the line's counters.
func (s *Server) Stats() Stats {
	l := s.line
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Steps: l.step, NowMs: l.nowMs, RunID: l.runID, Writes: l.writes, Refusals: l.refusals}
}

// Now is the line's clock (the instant of the last step).
func (s *Server) Now() time.Time { return time.UnixMilli(s.Stats().NowMs).UTC() }

// Values returns the reported value of every numeric node at the last step.
func (s *Server) Values() map[string]float64 {
	l := s.line
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]float64, len(l.values))
	for k, v := range l.values {
		out[k] = v
	}
	return out
}

// Truth returns the noise-free value of every numeric node at the last step.
func (s *Server) Truth() map[string]float64 {
	l := s.line
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]float64, len(l.truth))
	for k, v := range l.truth {
		out[k] = v
	}
	return out
}

// Step advances the line by n steps at once (Manual mode, or to skip
// ahead) and notifies subscribers after each.
func (s *Server) Step(n int) {
	for range n {
		s.step()
	}
}

func (s *Server) step() {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	runChanged := s.line.advance()
	for _, sp := range s.line.specs {
		s.srv.ChangeNotification(ua.NewStringNodeID(s.ns.id, sp.id))
	}
	s.srv.ChangeNotification(ua.NewStringNodeID(s.ns.id, TagCycle))
	if runChanged {
		s.srv.ChangeNotification(ua.NewStringNodeID(s.ns.id, TagRunID))
	}
}

func (s *Server) run(ctx context.Context) {
	defer close(s.done)
	period := time.Duration(float64(time.Duration(s.opts.StepMs)*time.Millisecond) / s.opts.Speed)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.step()
		}
	}
}

// Close stops the line and the server (idempotent).
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		s.cancel()
		<-s.done
		err = s.srv.Close()
	})
	return err
}

// lineNS is the line's namespace. It implements server.NameSpace itself
// (rather than using server.NodeNameSpace) so that values come from the
// line under its lock and writes are validated before they reach the
// plant.
type lineNS struct {
	s      *Server
	id     uint16
	mu     sync.RWMutex
	nodes  map[string]*server.Node
	refs   map[string][]*ua.ReferenceDescription
	props  map[string]*ua.DataValue // property node id -> constant value
	folder *server.Node
}

func newLineNS(s *Server) *lineNS {
	return &lineNS{s: s, nodes: map[string]*server.Node{}, refs: map[string][]*ua.ReferenceDescription{}, props: map[string]*ua.DataValue{}}
}

func (ns *lineNS) Name() string {
	if ns.s.opts.Kind == KindTank {
		return TankNamespaceURI
	}
	return NamespaceURI
}
func (ns *lineNS) ID() uint16     { return ns.id }
func (ns *lineNS) SetID(v uint16) { ns.id = v }

func (ns *lineNS) AddNode(n *server.Node) *server.Node {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.nodes[n.ID().String()] = n
	return n
}

func (ns *lineNS) Node(nid *ua.NodeID) *server.Node {
	if nid == nil {
		return nil
	}
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	return ns.nodes[nid.String()]
}

func (ns *lineNS) Objects() *server.Node { return ns.folder }
func (ns *lineNS) Root() *server.Node    { return ns.folder }

func dv(v any) *ua.DataValue { return server.DataValueFromValue(v) }

func (ns *lineNS) newNode(nid *ua.NodeID, name string, class ua.NodeClass, extra map[ua.AttributeID]*ua.DataValue) *server.Node {
	a := map[ua.AttributeID]*ua.DataValue{
		ua.AttributeIDNodeClass:   dv(int32(class)),
		ua.AttributeIDBrowseName:  dv(&ua.QualifiedName{NamespaceIndex: ns.id, Name: name}),
		ua.AttributeIDDisplayName: dv(attrs.DisplayName(name, "")),
	}
	for k, v := range extra {
		a[k] = v
	}
	n := server.NewNode(nid, a, nil, nil)
	ns.AddNode(n)
	return n
}

func (ns *lineNS) addRef(from, to *server.Node, refType uint32, typeDef uint32) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	k := from.ID().String()
	ns.refs[k] = append(ns.refs[k], &ua.ReferenceDescription{
		ReferenceTypeID: ua.NewNumericNodeID(0, refType), IsForward: true,
		NodeID: ua.NewExpandedNodeID(to.ID(), "", 0), BrowseName: to.BrowseName(), DisplayName: to.DisplayName(),
		NodeClass: to.NodeClass(), TypeDefinition: ua.NewNumericExpandedNodeID(0, typeDef),
	})
}

// build creates the folder, the variables and their properties.
func (ns *lineNS) build() {
	folder := FolderName
	if ns.s.opts.Kind == KindTank {
		folder = TankFolderName
	}
	ns.folder = ns.newNode(ua.NewStringNodeID(ns.id, folder), folder, ua.NodeClassObject, map[ua.AttributeID]*ua.DataValue{
		ua.AttributeIDDataType: dv(ua.NewNumericExpandedNodeID(0, id.FolderType)),
	})
	access := func(read, write bool) byte {
		var b byte
		if read {
			b |= byte(ua.AccessLevelTypeCurrentRead)
		}
		if write {
			b |= byte(ua.AccessLevelTypeCurrentWrite)
		}
		return b
	}
	hist := ns.s.opts.HistorySteps > 0
	variable := func(name string, dataType uint32, acc byte) *server.Node {
		if hist {
			acc = historizing(acc)
		}
		n := ns.newNode(ua.NewStringNodeID(ns.id, name), name, ua.NodeClassVariable, map[ua.AttributeID]*ua.DataValue{
			ua.AttributeIDDataType:        dv(ua.NewNumericExpandedNodeID(0, dataType)),
			ua.AttributeIDAccessLevel:     dv(acc),
			ua.AttributeIDUserAccessLevel: dv(acc),
			ua.AttributeIDValueRank:       dv(int32(-1)),
			ua.AttributeIDHistorizing:     dv(hist && acc&byte(ua.AccessLevelTypeHistoryRead) != 0),
		})
		ns.addRef(ns.folder, n, id.HasComponent, id.BaseDataVariableType)
		return n
	}
	for _, sp := range ns.s.line.specs {
		acc := access(true, false)
		if sp.writable {
			acc = access(!ns.s.opts.WriteOnlySetpoints, true)
		}
		v := variable(sp.id, id.Double, acc)
		v.SetDescription(fmt.Sprintf("%s (%s, %s)", sp.id, sp.unit, sp.kind), "")
		for _, p := range []struct {
			name string
			val  any
		}{
			{"EURange", ua.NewExtensionObject(&ua.Range{Low: sp.min, High: sp.max})},
			{"EngineeringUnits", ua.NewExtensionObject(&ua.EUInformation{NamespaceURI: "urn:aml:units", UnitID: -1,
				DisplayName: &ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: sp.unit},
				Description: &ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: sp.unit}})},
		} {
			pid := ua.NewStringNodeID(ns.id, sp.id+"."+p.name)
			pn := ns.newNode(pid, p.name, ua.NodeClassVariable, map[ua.AttributeID]*ua.DataValue{
				ua.AttributeIDAccessLevel:     dv(access(true, false)),
				ua.AttributeIDUserAccessLevel: dv(access(true, false)),
			})
			ns.mu.Lock()
			ns.props[pid.String()] = &ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(p.val)}
			ns.mu.Unlock()
			ns.addRef(v, pn, id.HasProperty, id.PropertyType)
		}
	}
	variable(TagRunID, id.String, access(true, false))
	variable(TagCycle, id.UInt32, access(true, false))
}

// Browse lists a node's forward references (this namespace keeps no
// inverse ones) filtered by reference type and node class.
func (ns *lineNS) Browse(bd *ua.BrowseDescription) *ua.BrowseResult {
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	if bd == nil || bd.NodeID == nil || ns.nodes[bd.NodeID.String()] == nil {
		return &ua.BrowseResult{StatusCode: ua.StatusBadNodeIDUnknown}
	}
	var out []*ua.ReferenceDescription
	if bd.BrowseDirection != ua.BrowseDirectionInverse {
		for _, r := range ns.refs[bd.NodeID.String()] {
			if !refTypeMatches(bd.ReferenceTypeID, r.ReferenceTypeID.IntID(), bd.IncludeSubtypes) {
				continue
			}
			if bd.NodeClassMask > 0 && bd.NodeClassMask&uint32(r.NodeClass) == 0 {
				continue
			}
			out = append(out, r)
		}
	}
	return &ua.BrowseResult{StatusCode: ua.StatusGood, References: out}
}

// refTypeMatches: no type (i=0) or the same type; with subtypes, the
// hierarchical and non-hierarchical super types of the three used here.
func refTypeMatches(want *ua.NodeID, got uint32, subtypes bool) bool {
	if want == nil || want.IntID() == 0 || want.IntID() == got {
		return true
	}
	if !subtypes {
		return false
	}
	switch want.IntID() {
	case id.References:
		return true
	case id.HierarchicalReferences:
		return got == id.HasComponent || got == id.Organizes || got == id.HasProperty
	case id.Aggregates:
		return got == id.HasComponent || got == id.HasProperty
	}
	return false
}

func bad(code ua.StatusCode) *ua.DataValue {
	return &ua.DataValue{EncodingMask: ua.DataValueServerTimestamp | ua.DataValueStatusCode, ServerTimestamp: time.Now(), Status: code}
}

func accessOf(n *server.Node) byte {
	a, err := n.Attribute(ua.AttributeIDUserAccessLevel)
	if err != nil {
		return 0xff
	}
	b, _ := a.Value.Value.Value().(byte)
	return b
}

// Attribute reads an attribute; a variable's value comes from the line.
func (ns *lineNS) Attribute(nid *ua.NodeID, attr ua.AttributeID) *ua.DataValue {
	n := ns.Node(nid)
	if n == nil {
		return bad(ua.StatusBadNodeIDUnknown)
	}
	switch attr {
	case ua.AttributeIDNodeID:
		return dv(nid)
	case ua.AttributeIDEventNotifier:
		return dv(byte(0))
	case ua.AttributeIDValue:
		if accessOf(n)&byte(ua.AccessLevelTypeCurrentRead) == 0 {
			return bad(ua.StatusBadNotReadable)
		}
		ns.mu.RLock()
		p := ns.props[nid.String()]
		ns.mu.RUnlock()
		if p != nil {
			return p
		}
		return ns.value(nid)
	}
	a, err := n.Attribute(attr)
	if err != nil {
		return bad(ua.StatusBadAttributeIDInvalid)
	}
	return a.Value
}

// value is the current value of a line variable, stamped with the line's
// clock.
func (ns *lineNS) value(nid *ua.NodeID) *ua.DataValue {
	l := ns.s.line
	l.mu.Lock()
	defer l.mu.Unlock()
	name := nid.StringID()
	var v any
	switch name {
	case TagRunID:
		v = l.runID
	case TagCycle:
		v = uint32(l.step)
	default:
		x, ok := l.values[name]
		if !ok {
			return bad(ua.StatusBadNodeIDUnknown)
		}
		v = x
	}
	return &ua.DataValue{
		EncodingMask:    ua.DataValueValue | ua.DataValueSourceTimestamp | ua.DataValueServerTimestamp,
		Value:           ua.MustVariant(v),
		SourceTimestamp: time.UnixMilli(l.nowMs).UTC(),
		ServerTimestamp: time.Now().UTC(),
	}
}

// SetAttribute writes a setpoint: a finite number within its range.
func (ns *lineNS) SetAttribute(nid *ua.NodeID, attr ua.AttributeID, val *ua.DataValue) ua.StatusCode {
	n := ns.Node(nid)
	if n == nil {
		return ua.StatusBadNodeIDUnknown
	}
	refuse := func(c ua.StatusCode) ua.StatusCode {
		l := ns.s.line
		l.mu.Lock()
		l.refusals++
		l.mu.Unlock()
		return c
	}
	if attr != ua.AttributeIDValue || accessOf(n)&byte(ua.AccessLevelTypeCurrentWrite) == 0 {
		return refuse(ua.StatusBadNotWritable)
	}
	i, ok := ns.s.line.byID[nid.StringID()]
	if !ok || !ns.s.line.specs[i].writable {
		return refuse(ua.StatusBadNotWritable)
	}
	sp := ns.s.line.specs[i]
	if val == nil || val.Value == nil {
		return refuse(ua.StatusBadTypeMismatch)
	}
	x, ok := number(val.Value.Value())
	if !ok {
		return refuse(ua.StatusBadTypeMismatch)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) || x < sp.min || x > sp.max {
		return refuse(ua.StatusBadOutOfRange)
	}
	ns.s.line.setControl(sp.id, x)
	ns.s.srv.ChangeNotification(nid)
	return ua.StatusOK
}

// number converts the numeric variant types to float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}
