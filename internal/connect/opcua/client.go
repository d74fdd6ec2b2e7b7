package opcua

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
)

// Security is how a client connects: the security policy and mode, the
// user login, and the client certificate for signed/encrypted channels.
type Security struct {
	// Policy is None (default), Basic256Sha256, Aes128_Sha256_RsaOaep, ...
	Policy string
	// Mode is None (default), Sign or SignAndEncrypt.
	Mode string
	// User and Password log in with a user name; empty means anonymous.
	User, Password string
	// CertFile and KeyFile are the client's certificate and RSA key (PEM
	// or DER), needed by a policy other than None.
	CertFile, KeyFile string
}

// Options configure a Connector.
type Options struct {
	Endpoint string
	Map      *Map
	Security Security
	// MinBackoff and MaxBackoff bound the reconnect delay, doubled after
	// each failed attempt (defaults 100 ms and 5 s).
	MinBackoff, MaxBackoff time.Duration
	// StallTimeout: no notification (data or keep-alive) for this long
	// counts as a lost connection (default 10 s).
	StallTimeout time.Duration
	// FlushEvery is the sink's flush period (default 200 ms).
	FlushEvery time.Duration
	Audit      connect.AuditLog
	Bus        *events.Bus
	Logger     *slog.Logger
}

// Stats are a connector's counters.
type Stats struct {
	connect.Stats
	Connects int    `json:"connects"`
	State    string `json:"state"`
	Endpoint string `json:"endpoint"`
	// ConnError is why the last connection attempt failed or was lost
	// (cleared when a subscription is active again).
	ConnError string `json:"connError,omitempty"`
}

// Connector subscribes to a server's nodes and ingests their values.
type Connector struct {
	st   connect.Store
	opts Options
	sink *connect.Sink

	handles []handle // client handle -> what it feeds

	mu        sync.Mutex
	connects  int
	state     string
	lastCycle int64
	haveCycle bool
	lastTs    int64
	downAt    time.Time
	lostAt    int64 // source instant of the last value before a loss
	seen      bool  // a value has arrived (before it, a loss leaves no gap in the data)
	lostCycle int64
	pending   bool // a reconnect gap is to be recorded at the next value
	connErr   string
	// recovered: line cycles of the current loss read back from the
	// server's history (set by recover, used by cycle/reconnectGap);
	// backfill describes what was read back, for the gap's reason.
	recovered int64
	backfill  string
	nodeLast  map[uint32]int64 // per mapped node (client handle): its last instant
	history   []bool           // per client handle: the server keeps its history (AccessLevel HistoryRead)
	cycleTs   [2]int64         // source instants of the last two cycle values (older first)
}

type handle struct {
	index  uint32 // its client handle
	nodeID *ua.NodeID
	node   string // AML node; "" for the tags
	tag    string // "run" or "cycle"
}

// New validates the options and prepares a connector; Run connects.
func New(st connect.Store, opts Options) (*Connector, error) {
	if opts.Map == nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "map", "a map is required")
	}
	if !strings.HasPrefix(opts.Endpoint, "opc.tcp://") {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "endpoint", "endpoint must be an opc.tcp:// URL, got %q", opts.Endpoint)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(5*time.Second, opts.MinBackoff)
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := opts.Map
	sink, err := connect.NewSink(st, connect.SinkOptions{Connector: "opcua:" + opts.Endpoint, Line: m.Line, Product: m.Product, Recipe: m.Recipe,
		FlushEvery: opts.FlushEvery, Audit: opts.Audit, Bus: opts.Bus, Actor: "connector:opcua", Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	c := &Connector{st: st, opts: opts, sink: sink, state: "idle", nodeLast: map[uint32]int64{}}
	for _, e := range m.Nodes {
		nid, _ := ua.ParseNodeID(e.OPCUA)
		c.handles = append(c.handles, handle{index: uint32(len(c.handles)), nodeID: nid, node: e.Node})
	}
	if m.RunTag != "" {
		nid, _ := ua.ParseNodeID(m.RunTag)
		c.handles = append(c.handles, handle{index: uint32(len(c.handles)), nodeID: nid, tag: "run"})
	}
	if m.CycleTag != "" {
		nid, _ := ua.ParseNodeID(m.CycleTag)
		c.handles = append(c.handles, handle{index: uint32(len(c.handles)), nodeID: nid, tag: "cycle"})
	}
	return c, nil
}

// Sink is the connector's sink (for its counters).
func (c *Connector) Sink() *connect.Sink { return c.sink }

// Stats returns the counters.
func (c *Connector) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Stats: c.sink.Stats(), Connects: c.connects, State: c.state, Endpoint: c.opts.Endpoint, ConnError: c.connErr}
}

func (c *Connector) setState(s string) {
	c.mu.Lock()
	c.state = s
	c.mu.Unlock()
	c.opts.Bus.Publish(events.Event{Kind: connect.EventState, Line: c.opts.Map.Line, ID: "opcua:" + c.opts.Endpoint, Data: map[string]any{"state": s}})
}

// Run connects, imports the mapped nodes, subscribes and ingests until
// ctx ends, reconnecting with backoff after any loss. The first
// connection's errors are returned (a wrong endpoint or map should fail
// fast); later losses are retried. It flushes what it received before
// returning.
func (c *Connector) Run(ctx context.Context) error {
	fctx, stopFlush := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() { c.sink.RunFlusher(fctx); close(flushed) }()
	defer func() { stopFlush(); <-flushed }()

	backoff := c.opts.MinBackoff
	first := true
	for {
		err := c.session(ctx, first)
		if err != nil {
			c.mu.Lock()
			c.connErr = err.Error()
			c.mu.Unlock()
		}
		if ctx.Err() != nil {
			c.setState("stopped")
			return nil
		}
		if first && err != nil && !c.connectedOnce() {
			c.setState("failed")
			return err
		}
		first = false
		c.opts.Logger.Warn("OPC UA connection lost; reconnecting", "endpoint", c.opts.Endpoint, "err", err, "backoff", backoff)
		c.setState("reconnecting")
		c.mu.Lock()
		if !c.pending && c.seen {
			c.pending, c.downAt, c.lostAt, c.lostCycle = true, time.Now(), c.lastTs, c.lastCycle
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			c.setState("stopped")
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
		if c.connectedOnce() && err == nil {
			backoff = c.opts.MinBackoff
		}
	}
}

func (c *Connector) connectedOnce() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connects > 0
}

// clientOptions builds the client options from the endpoint's offer.
func (c *Connector) clientOptions(ctx context.Context, stateCh chan gopcua.ConnState) ([]gopcua.Option, error) {
	sec := c.opts.Security
	policy, mode := sec.Policy, sec.Mode
	if policy == "" {
		policy = "None"
	}
	if mode == "" {
		mode = "None"
	}
	if !strings.HasPrefix(policy, "http://") {
		policy = ua.SecurityPolicyURIPrefix + policy
	}
	msm := ua.MessageSecurityModeFromString(mode)
	if msm == ua.MessageSecurityModeInvalid {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "security-mode", "security mode must be None, Sign or SignAndEncrypt, got %q", mode)
	}
	eps, err := gopcua.GetEndpoints(ctx, c.opts.Endpoint)
	if err != nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "OPC UA endpoints of %s: %v", c.opts.Endpoint, err)
	}
	ep, err := gopcua.SelectEndpoint(eps, policy, msm)
	if err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "security-policy", "the server offers no endpoint with policy %s and mode %s: %v", policy, mode, err)
	}
	// The server may advertise its own host name; keep the address dialled.
	ep.EndpointURL = c.opts.Endpoint
	auth := ua.UserTokenTypeAnonymous
	opts := []gopcua.Option{
		gopcua.SecurityPolicy(policy), gopcua.SecurityMode(msm),
		gopcua.AutoReconnect(false), gopcua.StateChangedCh(stateCh),
		gopcua.SessionTimeout(time.Minute), gopcua.RequestTimeout(5 * time.Second), gopcua.DialTimeout(3 * time.Second),
	}
	if sec.CertFile != "" || sec.KeyFile != "" {
		opts = append(opts, gopcua.CertificateFile(sec.CertFile), gopcua.PrivateKeyFile(sec.KeyFile))
	}
	if sec.User != "" {
		auth = ua.UserTokenTypeUserName
		opts = append(opts, gopcua.AuthUsername(sec.User, sec.Password))
	} else {
		opts = append(opts, gopcua.AuthAnonymous())
	}
	opts = append(opts, gopcua.SecurityFromEndpoint(ep, auth))
	return opts, nil
}

// session is one connection: connect, import, subscribe, ingest until
// the connection is lost or ctx ends.
func (c *Connector) session(ctx context.Context, first bool) error {
	c.setState("connecting")
	stateCh := make(chan gopcua.ConnState, 16)
	opts, err := c.clientOptions(ctx, stateCh)
	if err != nil {
		return err
	}
	cl, err := gopcua.NewClient(c.opts.Endpoint, opts...)
	if err != nil {
		return core.Errorf(core.CodeInvalidArgument, "OPC UA client: %v", err)
	}
	if err := cl.Connect(ctx); err != nil {
		return core.Errorf(core.CodeStoreUnavailable, "connect %s: %v", c.opts.Endpoint, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = cl.Close(cctx) // the session ends either way; a lost one cannot close cleanly
		cancel()
	}()
	if first || !c.connectedOnce() {
		if err := c.importNodes(ctx, cl); err != nil {
			return err
		}
	}

	c.readHistoryAccess(ctx, cl)

	notifs := make(chan *gopcua.PublishNotificationData, 256)
	pub := time.Duration(c.opts.Map.PublishingIntervalMs * float64(time.Millisecond))
	if pub <= 0 {
		pub = 20 * time.Millisecond
	}
	sub, err := cl.Subscribe(ctx, &gopcua.SubscriptionParameters{Interval: pub, MaxKeepAliveCount: 10}, notifs)
	if err != nil {
		return core.Errorf(core.CodeStoreUnavailable, "subscribe: %v", err)
	}
	items := make([]*ua.MonitoredItemCreateRequest, len(c.handles))
	for i, h := range c.handles {
		items[i] = gopcua.NewMonitoredItemCreateRequestWithDefaults(h.nodeID, ua.AttributeIDValue, uint32(i))
		items[i].RequestedParameters.SamplingInterval = c.opts.Map.SamplingIntervalMs
	}
	res, err := sub.Monitor(ctx, ua.TimestampsToReturnBoth, items...)
	if err != nil {
		return core.Errorf(core.CodeStoreUnavailable, "monitor: %v", err)
	}
	for i, r := range res.Results {
		if r.StatusCode != ua.StatusOK {
			return core.FieldErrorf(core.CodeInvalidArgument, "map", "monitor %s: %v", c.handles[i].nodeID, r.StatusCode)
		}
	}
	c.mu.Lock()
	c.connects++
	c.connErr = ""
	c.mu.Unlock()
	c.setState("connected")
	c.opts.Logger.Info("OPC UA subscription active", "endpoint", c.opts.Endpoint, "items", len(items), "publishingInterval", pub)

	stall := time.NewTimer(c.opts.StallTimeout)
	defer stall.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-stateCh:
			if s == gopcua.Disconnected || s == gopcua.Closed {
				return fmt.Errorf("connection %s", s)
			}
		case <-stall.C:
			return fmt.Errorf("no notification for %s", c.opts.StallTimeout)
		case n := <-notifs:
			stall.Reset(c.opts.StallTimeout)
			if n.Error != nil {
				return n.Error
			}
			if dc, ok := n.Value.(*ua.DataChangeNotification); ok {
				if err := c.handle(ctx, cl, dc); err != nil {
					return err
				}
			}
		}
	}
}

// importNodes declares each mapped node in the store with its unit,
// range (map first, then the server's EngineeringUnits and EURange) and
// kind (map, else dcw for a writable node).
func (c *Connector) importNodes(ctx context.Context, cl *gopcua.Client) error {
	for _, e := range c.opts.Map.Nodes {
		nid, _ := ua.ParseNodeID(e.OPCUA)
		props, writable, err := browseProps(ctx, cl, nid)
		if err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, "map", "node %s (%s): %v", e.OPCUA, e.Node, err)
		}
		n := core.Node{ID: e.Node, LineID: c.opts.Map.Line, Unit: e.Unit, Min: e.Min, Max: e.Max, Kind: e.Kind,
			Meaning: props.description}
		if n.Unit == "" {
			n.Unit = props.unit
		}
		if n.Min == nil && n.Max == nil && props.hasRange {
			lo, hi := props.low, props.high
			n.Min, n.Max = &lo, &hi
		}
		if n.Kind == "" {
			n.Kind = core.NodeDAQ
			if writable {
				n.Kind = core.NodeDCW
			}
		}
		if err := c.sink.DeclareNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

type nodeProps struct {
	unit, description string
	hasRange          bool
	low, high         float64
}

// browseProps reads a variable's access level and description and its
// EURange and EngineeringUnits properties (HasProperty), when present.
func browseProps(ctx context.Context, cl *gopcua.Client, nid *ua.NodeID) (nodeProps, bool, error) {
	var p nodeProps
	rr, err := cl.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{
		{NodeID: nid, AttributeID: ua.AttributeIDNodeClass},
		{NodeID: nid, AttributeID: ua.AttributeIDAccessLevel},
		{NodeID: nid, AttributeID: ua.AttributeIDDescription},
	}, TimestampsToReturn: ua.TimestampsToReturnNeither})
	if err != nil {
		return p, false, err
	}
	if len(rr.Results) != 3 || rr.Results[0].Status != ua.StatusOK {
		st := ua.StatusBadNodeIDUnknown
		if len(rr.Results) > 0 {
			st = rr.Results[0].Status
		}
		return p, false, fmt.Errorf("not readable: %v", st)
	}
	writable := false
	if rr.Results[1].Status == ua.StatusOK && rr.Results[1].Value != nil {
		if b, ok := rr.Results[1].Value.Value().(byte); ok {
			writable = b&byte(ua.AccessLevelTypeCurrentWrite) != 0
		}
	}
	if rr.Results[2].Status == ua.StatusOK && rr.Results[2].Value != nil {
		if lt, ok := rr.Results[2].Value.Value().(*ua.LocalizedText); ok && lt != nil {
			p.description = lt.Text
		}
	}
	br, err := cl.Browse(ctx, &ua.BrowseRequest{NodesToBrowse: []*ua.BrowseDescription{{
		NodeID: nid, BrowseDirection: ua.BrowseDirectionForward, ReferenceTypeID: ua.NewNumericNodeID(0, id.HasProperty),
		IncludeSubtypes: true, ResultMask: uint32(ua.BrowseResultMaskAll),
	}}})
	if err != nil || len(br.Results) == 0 {
		return p, writable, nil // no properties is not an error
	}
	for _, ref := range br.Results[0].References {
		if ref.BrowseName == nil || ref.NodeID == nil {
			continue
		}
		name := ref.BrowseName.Name
		if name != "EURange" && name != "EngineeringUnits" {
			continue
		}
		v, err := cl.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: ref.NodeID.NodeID, AttributeID: ua.AttributeIDValue}}})
		if err != nil || len(v.Results) == 0 || v.Results[0].Status != ua.StatusOK || v.Results[0].Value == nil {
			continue
		}
		eo, ok := v.Results[0].Value.Value().(*ua.ExtensionObject)
		if !ok || eo == nil {
			continue
		}
		switch x := eo.Value.(type) {
		case *ua.Range:
			if !math.IsNaN(x.Low) && !math.IsNaN(x.High) && x.Low < x.High {
				p.hasRange, p.low, p.high = true, x.Low, x.High
			}
		case *ua.EUInformation:
			if x.DisplayName != nil {
				p.unit = x.DisplayName.Text
			}
		}
	}
	return p, writable, nil
}

// handle ingests one data change notification: first what the feed lost
// since the last one, read back from the server's history when it keeps
// one (recover); then the run tag (it decides the run of the values at its
// instant), the cycle counter (a jump is a loss), then the values.
func (c *Connector) handle(ctx context.Context, cl *gopcua.Client, dc *ua.DataChangeNotification) error {
	items := dc.MonitoredItems
	order := make([]*ua.MonitoredItemNotification, 0, len(items))
	for _, it := range items {
		if it != nil && int(it.ClientHandle) < len(c.handles) && c.handles[it.ClientHandle].tag != "" {
			order = append(order, it)
		}
	}
	for _, it := range items {
		if it != nil && int(it.ClientHandle) < len(c.handles) && c.handles[it.ClientHandle].tag == "" {
			order = append(order, it)
		}
	}
	if err := c.recover(ctx, cl, order); err != nil {
		return err
	}
	for _, it := range order {
		h := c.handles[it.ClientHandle]
		dv := it.Value
		if dv == nil {
			c.sink.CountMalformed()
			continue
		}
		tsMs := sourceMs(dv)
		var raw any
		if dv.Value != nil {
			raw = dv.Value.Value()
		}
		switch h.tag {
		case "run":
			if s, ok := raw.(string); ok && dv.Status == ua.StatusOK {
				c.sink.SetRun(s, tsMs)
			} else {
				c.sink.CountMalformed()
			}
			continue
		case "cycle":
			x, ok := number(raw)
			if !ok || dv.Status != ua.StatusOK {
				c.sink.CountMalformed()
				continue
			}
			c.cycle(ctx, int64(x), tsMs)
			continue
		}
		c.reconnectGap(ctx, tsMs, -1)
		if _, err := c.add(ctx, h, dv, tsMs); err != nil {
			return err
		}
	}
	return nil
}

// sourceMs is a value's source instant (else the server's, else now).
func sourceMs(dv *ua.DataValue) int64 {
	ts := dv.SourceTimestamp
	if ts.IsZero() {
		ts = dv.ServerTimestamp
	}
	if ts.IsZero() {
		ts = time.Now()
	}
	return ts.UnixMilli()
}

// add stores one received value of a mapped node; false when it was
// malformed (counted, not stored).
func (c *Connector) add(ctx context.Context, h handle, dv *ua.DataValue, tsMs int64) (bool, error) {
	var raw any
	if dv.Value != nil {
		raw = dv.Value.Value()
	}
	x, ok := number(raw)
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
		c.sink.CountMalformed()
		c.opts.Logger.Warn("malformed value not stored", "node", h.node, "value", raw)
		return false, nil
	}
	state := connect.StateOK
	switch {
	case dv.Status == ua.StatusOK:
	case uint32(dv.Status)&0xC0000000 == 0x40000000:
		state = connect.StateUncertn
	default:
		state = connect.StateBad
	}
	if err := c.sink.Add(ctx, h.node, tsMs, x, state); err != nil {
		return false, err
	}
	c.mu.Lock()
	if tsMs > c.lastTs || !c.seen {
		c.lastTs = tsMs
	}
	if last, ok := c.nodeLast[h.index]; !ok || tsMs > last {
		c.nodeLast[h.index] = tsMs
	}
	c.seen = true
	c.mu.Unlock()
	return true, nil
}

// recover runs before a notification is ingested. When the feed lost
// something since the last value — the connection dropped (a reconnect),
// or the cycle counter jumped on a live subscription (the server kept
// only the newest value of an item between two publishes) — it reads the
// interval strictly between the last instant received and this
// notification's earliest one back with the OPC UA HistoryRead service
// (raw values of every mapped node and tag), and ingests them in time
// order: the run tag's changes first at their own instants, then the
// values. The cycles read back are subtracted from the loss the cycle
// check then records; a fully read-back interval is recorded as a
// backfill (audit "connector.backfill"), not a gap. A server without
// history (BadServiceUnsupported or any error) leaves the gap as it was.
func (c *Connector) recover(ctx context.Context, cl *gopcua.Client, items []*ua.MonitoredItemNotification) error {
	c.mu.Lock()
	c.recovered, c.backfill = 0, ""
	seen, pending, have, prev := c.seen, c.pending, c.haveCycle, c.lastCycle
	// From one cycle before the last one received: a node whose value of
	// that cycle came late and was replaced is covered too (each node
	// takes only what is newer than its own last value).
	from := c.lastTs
	if c.cycleTs[0] > 0 {
		from = min(from, c.cycleTs[0])
	} else if c.cycleTs[1] > 0 {
		from = min(from, c.cycleTs[1])
	}
	if pending {
		from = min(from, c.lostAt)
	}
	c.mu.Unlock()
	if cl == nil || !seen {
		return nil
	}
	toMs, cyc := int64(math.MinInt64), int64(-1)
	for _, it := range items {
		if it.Value == nil {
			continue
		}
		toMs = max(toMs, sourceMs(it.Value))
		if c.handles[it.ClientHandle].tag == "cycle" && it.Value.Value != nil && it.Value.Status == ua.StatusOK {
			if x, ok := number(it.Value.Value.Value()); ok {
				cyc = int64(x)
			}
		}
	}
	switch {
	case toMs <= from+1:
		return nil
	case pending:
	case have && cyc > prev+1:
	default:
		return nil
	}
	return c.readBack(ctx, cl, from, toMs, prev, cyc, pending)
}

// readHistoryAccess reads which mapped nodes and tags the server keeps
// history of: the HistoryRead bit of their AccessLevel (OPC UA Part 3).
// Only those are ever asked for with HistoryRead; a server that keeps
// none is never asked.
func (c *Connector) readHistoryAccess(ctx context.Context, cl *gopcua.Client) {
	hist := make([]bool, len(c.handles))
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	for _, h := range c.handles {
		req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: h.nodeID, AttributeID: ua.AttributeIDAccessLevel})
	}
	if rr, err := cl.Read(ctx, req); err == nil && len(rr.Results) == len(c.handles) {
		for i, r := range rr.Results {
			if r != nil && r.Status == ua.StatusOK && r.Value != nil {
				b, ok := r.Value.Value().(byte)
				hist[i] = ok && b&byte(ua.AccessLevelTypeHistoryRead) != 0
			}
		}
	}
	c.mu.Lock()
	c.history = hist
	c.mu.Unlock()
}

// readBack reads (fromMs, toMs) back from the server's history and
// ingests it (see recover).
func (c *Connector) readBack(ctx context.Context, cl *gopcua.Client, from, toMs, prev, cyc int64, pending bool) error {
	c.mu.Lock()
	hist := c.history
	c.mu.Unlock()
	var nodes []*ua.HistoryReadValueID
	var which []int // client handle of each node asked for
	for i, h := range c.handles {
		if i >= len(hist) || !hist[i] {
			continue
		}
		// DataEncoding must be present: the encoder writes nothing for a
		// nil one and the request would not decode.
		nodes = append(nodes, &ua.HistoryReadValueID{NodeID: h.nodeID, DataEncoding: &ua.QualifiedName{}})
		which = append(which, i)
	}
	if len(nodes) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, err := cl.HistoryReadRawModified(rctx, nodes, &ua.ReadRawModifiedDetails{
		StartTime: time.UnixMilli(from + 1).UTC(), EndTime: time.UnixMilli(toMs).UTC()})
	cancel()
	if err == nil && (res == nil || res.ResponseHeader == nil || res.ResponseHeader.ServiceResult != ua.StatusOK || len(res.Results) != len(nodes)) {
		err = fmt.Errorf("history read answered %v", res)
	}
	if err != nil {
		c.opts.Logger.Info("lost interval not read back: no history from the server", "fromMs", from, "toMs", toMs, "err", err)
		return nil
	}
	type stepVals struct {
		run    *string
		cycle  int64
		values []*ua.MonitoredItemNotification
	}
	steps := map[int64]*stepVals{}
	at := func(ts int64) *stepVals {
		st := steps[ts]
		if st == nil {
			st = &stepVals{cycle: -1}
			steps[ts] = st
		}
		return st
	}
	for k, r := range res.Results {
		i := which[k]
		if r == nil || r.StatusCode != ua.StatusOK || r.HistoryData == nil {
			continue
		}
		hd, ok := r.HistoryData.Value.(*ua.HistoryData)
		if !ok {
			continue
		}
		for _, dv := range hd.DataValues {
			if dv == nil || dv.SourceTimestamp.IsZero() {
				continue
			}
			ts := dv.SourceTimestamp.UnixMilli()
			if ts <= from || ts >= toMs {
				continue
			}
			var raw any
			if dv.Value != nil {
				raw = dv.Value.Value()
			}
			switch c.handles[i].tag {
			case "run":
				if s, ok := raw.(string); ok && dv.Status == ua.StatusOK {
					at(ts).run = &s
				}
			case "cycle":
				if x, ok := number(raw); ok && dv.Status == ua.StatusOK {
					at(ts).cycle = int64(x)
				}
			default:
				c.mu.Lock()
				last, ok := c.nodeLast[uint32(i)]
				c.mu.Unlock()
				if ok && ts <= last {
					continue // this node has it already
				}
				st := at(ts)
				st.values = append(st.values, &ua.MonitoredItemNotification{ClientHandle: uint32(i), Value: dv})
			}
		}
	}
	if len(steps) == 0 {
		return nil
	}
	keys := make([]int64, 0, len(steps))
	for ts := range steps {
		keys = append(keys, ts)
	}
	slices.Sort(keys)
	var samples, cycles int64
	for _, ts := range keys {
		st := steps[ts]
		if st.run != nil {
			c.sink.SetRun(*st.run, ts)
		}
		for _, it := range st.values {
			ok, err := c.add(ctx, c.handles[it.ClientHandle], it.Value, ts)
			if err != nil {
				return err
			}
			if ok {
				samples++
			}
		}
		if st.cycle > prev && (cyc < 0 || st.cycle < cyc) {
			cycles++
		}
	}
	c.mu.Lock()
	c.recovered = cycles
	if samples > 0 {
		c.backfill = fmt.Sprintf("%d values of %d cycles read back from the server's history", samples, cycles)
	}
	c.mu.Unlock()
	if !c.haveCycleTag() {
		cycles = -1
	}
	reason := "cycle counter jumped on a live subscription"
	if pending {
		reason = "connection lost; reconnected"
	}
	if samples > 0 {
		c.sink.RecordBackfill(ctx, from, toMs, cycles, samples, reason)
	}
	return nil
}

func (c *Connector) haveCycleTag() bool { return c.opts.Map.CycleTag != "" }

// cycle checks the cycle counter: after a reconnect the gap is recorded
// with the lost cycles; on a live connection a jump of more than one is a
// loss (the server kept only the newest value). Cycles recover read back
// from the server's history are not lost: a loss fully read back records
// no gap.
func (c *Connector) cycle(ctx context.Context, v int64, tsMs int64) {
	c.mu.Lock()
	prev, have, pending, recovered, note := c.lastCycle, c.haveCycle, c.pending, c.recovered, c.backfill
	c.lastCycle, c.haveCycle = v, true
	c.cycleTs = [2]int64{c.cycleTs[1], tsMs}
	c.recovered, c.backfill = 0, ""
	c.mu.Unlock()
	if pending {
		lost := int64(-1)
		if have {
			lost = max(0, v-prev-1-recovered)
		}
		if have && lost == 0 && v-prev-1 > 0 {
			// Everything the reconnect lost was read back.
			c.mu.Lock()
			c.pending = false
			c.mu.Unlock()
			return
		}
		c.reconnectGapNote(ctx, tsMs, lost, note)
		return
	}
	if have && v > prev+1 {
		lost := v - prev - 1 - recovered
		if lost <= 0 {
			return // read back from the server's history (recorded by recover)
		}
		c.mu.Lock()
		from := c.lastTs
		c.mu.Unlock()
		reason := "cycle counter jumped on a live subscription"
		if note != "" {
			reason += "; " + note
		}
		c.sink.RecordGap(ctx, connect.Gap{FromMs: from, ToMs: tsMs, LostCycles: lost, Reason: reason})
	}
}

// reconnectGap records the gap of a reconnect at the first value after it.
func (c *Connector) reconnectGap(ctx context.Context, tsMs int64, lost int64) {
	c.mu.Lock()
	note := c.backfill
	c.mu.Unlock()
	c.reconnectGapNote(ctx, tsMs, lost, note)
}

func (c *Connector) reconnectGapNote(ctx context.Context, tsMs int64, lost int64, note string) {
	c.mu.Lock()
	if !c.pending {
		c.mu.Unlock()
		return
	}
	c.pending = false
	reason := "connection lost; reconnected"
	if note != "" {
		reason += "; " + note
	}
	g := connect.Gap{FromMs: c.lostAt, ToMs: tsMs, LostCycles: lost, Reason: reason, DownMs: time.Since(c.downAt).Milliseconds()}
	c.mu.Unlock()
	c.sink.RecordGap(ctx, g)
}

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
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
