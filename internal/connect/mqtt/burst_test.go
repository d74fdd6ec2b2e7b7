package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// burstMap maps two time-stamped topics: the receive time is not used,
// so every message is one distinct (node, instant) and none can replace
// another in the store.
const burstMap = `{"line":"l1","product":"p1","recipe":"r1","runTopic":"l1/run","runPath":"id",
 "topics":[{"topic":"l1/a","node":"node_a","path":"v","timePath":"ts"},
           {"topic":"l1/b","node":"node_b","path":"v","timePath":"ts"}]}`

// A burst of 20,000 QoS 1 messages published as fast as one client can
// (no waiting on the acknowledgements) is stored completely and exactly
// once: the connector must keep acknowledging while the sink writes, or
// the broker's per-client queue of unacknowledged messages overflows and
// it drops messages for good. The deadline is generous; the test asserts
// completeness, not speed (the time is logged). On a timeout it logs the
// connector's and the broker's counters and every goroutine's stack.
func TestMQTTBurstStoredExactly(t *testing.T) {
	const perNode = 10_000
	addr := freeAddr(t)
	br := startBurstBroker(t, addr)
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	m, err := ParseMap([]byte(burstMap))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(st, Options{Broker: "tcp://" + addr, Map: m, ClientID: "aml-burst"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "connect", func() bool { return c.Stats().Connected })
	time.Sleep(100 * time.Millisecond) // the subscription follows the connect
	pub := publisher(t, addr)
	publish(t, pub, "l1/run", `{"id":"run-burst"}`)
	waitFor(t, "run", func() bool { return c.Stats().RunID == "run-burst" })

	// Publish without waiting on each token; a failed token is counted.
	base := int64(1_767_600_000_000)
	var pubErrs atomic.Int64
	toks := make([]paho.Token, 0, 2*perNode)
	// The peak of the broker's unacknowledged messages (all for the
	// connector: mochi acknowledges the publisher's QoS 1 on receipt) is
	// how far the connector fell behind: the queue a broker needs.
	var peak atomic.Int64
	stopPeak := make(chan struct{})
	peakDone := make(chan struct{})
	go func() {
		defer close(peakDone)
		for {
			if n := br.b.Info.Clone().Inflight; n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stopPeak:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	for i := range perNode {
		ts := base + int64(i)
		toks = append(toks,
			pub.Publish("l1/a", 1, false, fmt.Sprintf(`{"ts":%d,"v":%d}`, ts, i)),
			pub.Publish("l1/b", 1, false, fmt.Sprintf(`{"ts":%d,"v":%d}`, ts, -i)))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
			pubErrs.Add(1)
		}
	}
	published := time.Since(t0)
	if n := pubErrs.Load(); n > 0 {
		t.Fatalf("%d of %d publishes were not acknowledged by the broker", n, len(toks))
	}

	// Wait until everything is stored. A message the broker dropped never
	// arrives: once the broker reports drops and the connector has been
	// idle for 5 s, waiting longer cannot help.
	deadline := time.Now().Add(120 * time.Second)
	lastRecv, lastChange := int64(-1), time.Now()
	for c.Stats().Stored < 2*perNode {
		s := c.Stats()
		info := br.b.Info.Clone()
		if s.Received != lastRecv {
			lastRecv, lastChange = s.Received, time.Now()
		}
		dropped := info.InflightDropped + info.MessagesDropped
		if time.Now().After(deadline) || (dropped > 0 && time.Since(lastChange) > 5*time.Second) {
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			t.Fatalf("incomplete: stored %d received %d of %d after %v (published in %v); broker inflight %d, dropped at its inflight limit %d, dropped at its write queue %d\n%s",
				s.Stored, s.Received, 2*perNode, time.Since(t0).Round(time.Millisecond), published.Round(time.Millisecond),
				info.Inflight, info.InflightDropped, info.MessagesDropped, stacks.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	total := time.Since(t0)
	close(stopPeak)
	<-peakDone
	info := br.b.Info.Clone()
	t.Logf("%d messages: published (broker-acknowledged) in %v, all stored in %v (%.0f samples/s); peak unacknowledged at the broker %d; dropped %d+%d",
		2*perNode, published.Round(time.Millisecond), total.Round(time.Millisecond), float64(2*perNode)/total.Seconds(), peak.Load(), info.InflightDropped, info.MessagesDropped)

	// Exactly once per (node, instant), with the published values.
	cnt, err := st.CountRunSamples(context.Background(), "run-burst")
	if err != nil {
		t.Fatal(err)
	}
	if cnt["node_a"] != perNode || cnt["node_b"] != perNode {
		t.Fatalf("run holds %v, want %d per node", cnt, perNode)
	}
	for _, tc := range []struct {
		node string
		sign float64
	}{{"node_a", 1}, {"node_b", -1}} {
		p, err := st.QueryPage(context.Background(), core.PageQuery{Node: tc.node, Limit: 2 * perNode})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Points) != perNode {
			t.Fatalf("%s: %d points stored, want %d", tc.node, len(p.Points), perNode)
		}
		for i, pt := range p.Points {
			if pt.TsUs != (base+int64(i))*1000 || pt.Value != tc.sign*float64(i) {
				t.Fatalf("%s point %d: ts %d µs value %v, want ts %d ms value %v", tc.node, i, pt.TsUs, pt.Value, base+int64(i), tc.sign*float64(i))
			}
		}
	}
	if s := c.Stats(); s.Stored != 2*perNode || s.Received != 2*perNode || s.Rejected != 0 || s.Stats.Malformed != 0 {
		t.Fatalf("counters: received %d stored %d rejected %d malformed %d", s.Received, s.Stored, s.Rejected, s.Stats.Malformed)
	}
}

// startBurstBroker runs an embedded mochi broker whose per-client queue
// can hold the whole burst. MQTT has no flow control from a subscriber
// back to a publisher: the broker acknowledges a QoS 1 publish on
// receipt, and a v3.1.1 subscriber (paho.mqtt.golang) cannot announce a
// receive maximum. mochi then keeps at most MaximumInflight (default
// 8192) unacknowledged messages per subscriber and at most
// MaximumClientWritesPending (default 8192) queued writes, and drops any
// further message for that subscriber for good (Info.InflightDropped,
// Info.MessagesDropped). One publisher reaches about 70,000 messages/s
// here, faster than any subscriber acknowledges (even one whose handler
// does nothing), so with the defaults a 20,000-message burst loses
// thousands of messages at the broker. Sizing these limits above the
// largest burst is a broker setting (see the package doc); this test
// sets them to their maximum so that what it measures is the connector.
func startBurstBroker(t testing.TB, addr string) *broker {
	t.Helper()
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumInflight = 65535
	caps.MaximumClientWritesPending = 65536
	b := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler), Capabilities: caps})
	if err := b.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddListener(listeners.NewTCP(listeners.Config{ID: "t", Address: addr})); err != nil {
		t.Fatal(err)
	}
	if err := b.Serve(); err != nil { // it starts the listeners and returns
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { _ = b.Close() }) }) // teardown: its clients are gone
	return &broker{b: b, once: &once}
}
