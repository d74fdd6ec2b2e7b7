// Package mqtt ingests samples from an MQTT broker: each mapped topic
// feeds one AML node, its JSON payload holding the value (and optionally
// the time) at a path.
//
// # Map file
//
//	{
//	  "line": "line-injection-01", "product": "product-injection-a", "recipe": "recipe-injection-a",
//	  "runTopic": "line1/run", "runPath": "id",
//	  "topics": [
//	    {"topic": "line1/part_weight", "node": "part_weight", "path": "value",
//	     "timePath": "ts", "timeUnit": "ms", "unit": "g"}
//	  ]
//	}
//
// path and timePath are dot-separated keys into the JSON object ("a.b.c";
// an all-digit key indexes an array); an empty path means the payload
// itself is the number. timeUnit is ms (default), s or rfc3339; without a
// timePath a sample is stamped with the time it was received. runTopic
// (optional) carries the active run's id at runPath ("" ends the run).
//
// # Delivery
//
// The client subscribes with QoS 1 and a persistent session (clean
// session off, a stable client id), so the broker redelivers what it
// queued while the client was away; the client reconnects by itself with
// backoff (paho's auto-reconnect) and re-subscribes on every connect.
// A payload that is not JSON, lacks the path, holds no finite number or
// has an unparsable time is malformed: it is counted (Stats.Malformed),
// logged, and never stored. Values go through connect.Sink (batched
// transactions, run context).
//
// # Bursts and the broker's queue
//
// MQTT has no flow control from a subscriber back to a publisher: the
// broker acknowledges a QoS 1 publish when it receives it, and a v3.1.1
// client (paho.mqtt.golang) cannot announce a receive maximum. When
// publishers outrun the connector, the messages the connector has not
// yet acknowledged wait in the broker's per-client queue, and a full
// queue makes the broker drop further messages for good (mochi:
// Capabilities.MaximumInflight and MaximumClientWritesPending, 8192
// each by default; mosquitto: max_queued_messages, 1000 by default;
// EMQX: max_mqueue_len). The connector cannot see that loss. Size that
// queue above the largest burst the publishers can produce beyond the
// connector's rate: one publisher sending 20,000 messages as fast as it
// can (about 70,000/s) left up to 17,500 unacknowledged for the
// connector in TestMQTTBurstStoredExactly, and with mochi's defaults
// the broker dropped 4,000 to 7,000 of them — even a connector whose
// handler did nothing left 1,900 to 4,000 dropped.
package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
)

// Map is an MQTT map file.
type Map struct {
	Line     string  `json:"line"`
	Product  string  `json:"product"`
	Recipe   string  `json:"recipe"`
	RunTopic string  `json:"runTopic,omitempty"`
	RunPath  string  `json:"runPath,omitempty"`
	Topics   []Topic `json:"topics"`
}

// Topic maps one topic to one node.
type Topic struct {
	Topic    string   `json:"topic"`
	Node     string   `json:"node"`
	Path     string   `json:"path,omitempty"`
	TimePath string   `json:"timePath,omitempty"`
	TimeUnit string   `json:"timeUnit,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	Kind     string   `json:"kind,omitempty"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
}

var amlID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ParseMap parses and validates a map (AML_INVALID_ARGUMENT listing every
// problem; unknown fields are errors).
func ParseMap(data []byte) (*Map, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Map
	if err := dec.Decode(&m); err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "map", "map file: %v", err)
	}
	if dec.More() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "map", "map file: trailing data after the JSON object")
	}
	var probs []core.Problem
	add := func(field, format string, args ...any) {
		probs = append(probs, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	for _, f := range [...][2]string{{"line", m.Line}, {"product", m.Product}, {"recipe", m.Recipe}} {
		if !amlID.MatchString(f[1]) {
			add(f[0], "must be 1..100 characters of [A-Za-z0-9._-] starting with a letter or digit, got %q", f[1])
		}
	}
	if m.RunTopic != "" {
		if err := validTopic(m.RunTopic); err != "" {
			add("runTopic", "%s", err)
		}
	}
	if len(m.Topics) == 0 {
		add("topics", "at least one topic is required")
	}
	seenT, seenN := map[string]bool{}, map[string]bool{}
	for i, t := range m.Topics {
		f := fmt.Sprintf("topics[%d]", i)
		if err := validTopic(t.Topic); err != "" {
			add(f+".topic", "%s", err)
		} else if seenT[t.Topic] || t.Topic == m.RunTopic {
			add(f+".topic", "topic %q is mapped twice", t.Topic)
		}
		seenT[t.Topic] = true
		if !amlID.MatchString(t.Node) {
			add(f+".node", "AML node id must be 1..100 characters of [A-Za-z0-9._-] starting with a letter or digit, got %q", t.Node)
		} else if seenN[t.Node] {
			add(f+".node", "AML node %q is fed twice", t.Node)
		}
		seenN[t.Node] = true
		switch t.TimeUnit {
		case "", "ms", "s", "rfc3339":
		default:
			add(f+".timeUnit", "must be ms, s or rfc3339, got %q", t.TimeUnit)
		}
		if t.TimeUnit != "" && t.TimePath == "" {
			add(f+".timeUnit", "a time unit needs a timePath")
		}
		if t.Kind != "" && t.Kind != core.NodeDAQ && t.Kind != core.NodeDCW {
			add(f+".kind", "must be daq or dcw, got %q", t.Kind)
		}
		if t.Min != nil && t.Max != nil && !(*t.Min < *t.Max) {
			add(f+".min", "min %v must be below max %v", *t.Min, *t.Max)
		}
	}
	if err := core.Invalid(core.CodeInvalidArgument, probs); err != nil {
		return nil, err
	}
	return &m, nil
}

// validTopic accepts a topic name without wildcards (an exact topic
// feeds exactly one node).
func validTopic(t string) string {
	switch {
	case t == "":
		return "topic is empty"
	case len(t) > 1024:
		return "topic longer than 1024 bytes"
	case strings.ContainsAny(t, "+#\x00"):
		return fmt.Sprintf("topic %q: wildcards are not allowed (one topic feeds one node)", t)
	}
	return ""
}

// lookup follows a dot path into a decoded JSON value.
func lookup(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			nv, ok := x[k]
			if !ok {
				return nil, false
			}
			v = nv
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// Decode extracts the value and time of one payload for topic t; now
// stamps it when t has no time path. ok is false for a malformed payload
// (why says what is wrong).
func Decode(t Topic, payload []byte, now time.Time) (value float64, tsMs int64, why string) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return 0, 0, "not JSON: " + err.Error()
	}
	if dec.More() {
		return 0, 0, "trailing data after the JSON value"
	}
	raw, ok := lookup(doc, t.Path)
	if !ok {
		return 0, 0, fmt.Sprintf("no value at path %q", t.Path)
	}
	n, ok := raw.(json.Number)
	if !ok {
		return 0, 0, fmt.Sprintf("value at %q is not a number", t.Path)
	}
	x, err := n.Float64()
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, 0, fmt.Sprintf("value %s is not a finite number", n)
	}
	if t.TimePath == "" {
		return x, now.UnixMilli(), ""
	}
	rt, ok := lookup(doc, t.TimePath)
	if !ok {
		return 0, 0, fmt.Sprintf("no time at path %q", t.TimePath)
	}
	switch t.TimeUnit {
	case "rfc3339":
		s, ok := rt.(string)
		if !ok {
			return 0, 0, "time is not an RFC 3339 string"
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, 0, "time: " + err.Error()
		}
		return x, tm.UnixMilli(), ""
	default:
		tn, ok := rt.(json.Number)
		if !ok {
			return 0, 0, "time is not a number"
		}
		f, err := tn.Float64()
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e16 {
			return 0, 0, fmt.Sprintf("time %s is not a valid epoch", tn)
		}
		if t.TimeUnit == "s" {
			f *= 1000
		}
		if f > 1e15 {
			return 0, 0, fmt.Sprintf("time %s is out of range", tn)
		}
		return x, int64(math.Round(f)), ""
	}
}

// Options configure a Connector.
type Options struct {
	// Broker is tcp://host:port (or ssl://, ws://).
	Broker string
	Map    *Map
	// ClientID (default "aml-<line>") names the persistent session.
	ClientID       string
	User, Password string
	FlushEvery     time.Duration
	Audit          connect.AuditLog
	Bus            *events.Bus
	Logger         *slog.Logger
	// Now stamps samples without a time path (default time.Now).
	Now func() time.Time
}

// Stats are a connector's counters.
type Stats struct {
	connect.Stats
	Connects    int               `json:"connects"`
	Disconnects int               `json:"disconnects"`
	Connected   bool              `json:"connected"`
	Malformed   map[string]int64  `json:"malformedByTopic"`
	LastProblem map[string]string `json:"lastProblemByTopic,omitempty"`
}

// Connector subscribes to the mapped topics and ingests their values.
type Connector struct {
	opts  Options
	sink  *connect.Sink
	byTop map[string]Topic

	mu          sync.Mutex
	connects    int
	disconnects int
	connected   bool
	malformed   map[string]int64
	lastProblem map[string]string
}

// New validates the options and prepares a connector.
func New(st connect.Store, opts Options) (*Connector, error) {
	if opts.Map == nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "map", "a map is required")
	}
	if !strings.Contains(opts.Broker, "://") {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "broker", "broker must be a URL such as tcp://127.0.0.1:1883, got %q", opts.Broker)
	}
	if opts.ClientID == "" {
		opts.ClientID = "aml-" + opts.Map.Line
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := opts.Map
	sink, err := connect.NewSink(st, connect.SinkOptions{Connector: "mqtt:" + opts.Broker, Line: m.Line, Product: m.Product, Recipe: m.Recipe,
		FlushEvery: opts.FlushEvery, Audit: opts.Audit, Bus: opts.Bus, Actor: "connector:mqtt", Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	c := &Connector{opts: opts, sink: sink, byTop: map[string]Topic{}, malformed: map[string]int64{}, lastProblem: map[string]string{}}
	for _, t := range m.Topics {
		c.byTop[t.Topic] = t
	}
	return c, nil
}

// Sink is the connector's sink.
func (c *Connector) Sink() *connect.Sink { return c.sink }

// Stats returns the counters.
func (c *Connector) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Stats: c.sink.Stats(), Connects: c.connects, Disconnects: c.disconnects, Connected: c.connected,
		Malformed: map[string]int64{}, LastProblem: map[string]string{}}
	for k, v := range c.malformed {
		s.Malformed[k] = v
	}
	for k, v := range c.lastProblem {
		s.LastProblem[k] = v
	}
	return s
}

func (c *Connector) malformedPayload(topic, why string) {
	c.sink.CountMalformed()
	c.mu.Lock()
	c.malformed[topic]++
	c.lastProblem[topic] = why
	c.mu.Unlock()
	c.opts.Logger.Warn("malformed MQTT payload not stored", "topic", topic, "problem", why)
}

// Run declares the mapped nodes, connects and ingests until ctx ends.
// The first connection must succeed (a wrong broker fails fast); later
// losses reconnect automatically.
func (c *Connector) Run(ctx context.Context) error {
	for _, t := range c.opts.Map.Topics {
		if err := c.sink.DeclareNode(ctx, core.Node{ID: t.Node, Unit: t.Unit, Kind: t.Kind, Min: t.Min, Max: t.Max}); err != nil {
			return err
		}
	}
	fctx, stopFlush := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() { c.sink.RunFlusher(fctx); close(flushed) }()
	defer func() { stopFlush(); <-flushed }()

	topics := map[string]byte{}
	for _, t := range c.opts.Map.Topics {
		topics[t.Topic] = 1
	}
	if c.opts.Map.RunTopic != "" {
		topics[c.opts.Map.RunTopic] = 1
	}
	o := paho.NewClientOptions().AddBroker(c.opts.Broker).SetClientID(c.opts.ClientID).
		SetCleanSession(false).SetOrderMatters(true).SetAutoReconnect(true).
		SetMaxReconnectInterval(5 * time.Second).SetConnectRetry(false).SetConnectTimeout(5 * time.Second).
		SetKeepAlive(10 * time.Second).SetMessageChannelDepth(10000)
	if c.opts.User != "" {
		o.SetUsername(c.opts.User).SetPassword(c.opts.Password)
	}
	o.SetDefaultPublishHandler(func(_ paho.Client, msg paho.Message) { c.onMessage(ctx, msg) })
	o.SetOnConnectHandler(func(cl paho.Client) {
		c.mu.Lock()
		c.connects++
		c.connected = true
		c.mu.Unlock()
		tok := cl.SubscribeMultiple(topics, func(_ paho.Client, msg paho.Message) { c.onMessage(ctx, msg) })
		if tok.WaitTimeout(5*time.Second) && tok.Error() != nil {
			c.opts.Logger.Error("MQTT subscribe", "err", tok.Error())
		}
		c.opts.Bus.Publish(events.Event{Kind: connect.EventState, Line: c.opts.Map.Line, ID: "mqtt:" + c.opts.Broker, Data: map[string]any{"state": "connected"}})
	})
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		c.mu.Lock()
		c.disconnects++
		c.connected = false
		c.mu.Unlock()
		c.opts.Logger.Warn("MQTT connection lost; reconnecting", "broker", c.opts.Broker, "err", err)
		c.opts.Bus.Publish(events.Event{Kind: connect.EventState, Line: c.opts.Map.Line, ID: "mqtt:" + c.opts.Broker, Data: map[string]any{"state": "reconnecting"}})
	})
	cl := paho.NewClient(o)
	tok := cl.Connect()
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		err := tok.Error()
		if err == nil {
			err = fmt.Errorf("timed out")
		}
		return core.Errorf(core.CodeStoreUnavailable, "connect to MQTT broker %s: %v", c.opts.Broker, err)
	}
	<-ctx.Done()
	cl.Disconnect(250)
	return nil
}

func (c *Connector) onMessage(ctx context.Context, msg paho.Message) {
	topic := msg.Topic()
	if topic == c.opts.Map.RunTopic && topic != "" {
		var doc any
		if err := json.Unmarshal(msg.Payload(), &doc); err != nil {
			c.malformedPayload(topic, "run payload is not JSON")
			return
		}
		v, ok := lookup(doc, c.opts.Map.RunPath)
		s, isStr := v.(string)
		if !ok || !isStr || (s != "" && !amlID.MatchString(s)) {
			c.malformedPayload(topic, "no valid run id at the run path")
			return
		}
		c.sink.SetRunOnArrival(s)
		return
	}
	t, ok := c.byTop[topic]
	if !ok {
		return
	}
	x, ts, why := Decode(t, msg.Payload(), c.opts.Now())
	if why != "" {
		c.malformedPayload(topic, why)
		return
	}
	if err := c.sink.Add(ctx, t.Node, ts, x, core.StateOK); err != nil {
		c.opts.Logger.Error("store MQTT sample", "err", err)
	}
}
