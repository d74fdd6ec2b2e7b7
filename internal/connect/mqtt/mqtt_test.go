package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }() // only the port number was wanted
	return l.Addr().String()
}

// startBroker runs an embedded mochi broker on addr (127.0.0.1).
type broker struct {
	b    *mochi.Server
	once *sync.Once
}

// Close stops the broker once (mochi's Close is not idempotent).
func (b *broker) Close() { b.once.Do(func() { _ = b.b.Close() }) }

func startBroker(t testing.TB, addr string) *broker {
	t.Helper()
	b := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
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

func publisher(t testing.TB, addr string) paho.Client {
	t.Helper()
	cl := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(fmt.Sprintf("pub-%d", time.Now().UnixNano())).SetConnectRetry(true).SetConnectRetryInterval(50 * time.Millisecond))
	tok := cl.Connect()
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { cl.Disconnect(50) })
	return cl
}

func publish(t *testing.T, cl paho.Client, topic, payload string) {
	t.Helper()
	tok := cl.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const testMap = `{"line":"l1","product":"p1","recipe":"r1","runTopic":"l1/run","runPath":"id",
 "topics":[{"topic":"l1/w","node":"part_weight","path":"data.value","timePath":"ts","timeUnit":"ms","unit":"g"},
           {"topic":"l1/p","node":"cavity_pressure","path":"","unit":"bar"}]}`

// Valid payloads are stored with their time and run; malformed ones are
// counted per topic and never stored; after the broker restarts the
// client reconnects, re-subscribes and ingests again.
func TestMQTTIngestMalformedAndReconnect(t *testing.T) {
	addr := freeAddr(t)
	broker := startBroker(t, addr)
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	m, err := ParseMap([]byte(testMap))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(st, Options{Broker: "tcp://" + addr, Map: m, FlushEvery: 50 * time.Millisecond, ClientID: "aml-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "connect", func() bool { return c.Stats().Connected })
	time.Sleep(100 * time.Millisecond) // the subscription follows the connect
	pub := publisher(t, addr)

	publish(t, pub, "l1/run", `{"id":"run-a"}`)
	waitFor(t, "run", func() bool { return c.Stats().RunID == "run-a" })
	const n = 200
	base := int64(1_767_600_000_000)
	for i := range n {
		publish(t, pub, "l1/w", fmt.Sprintf(`{"ts":%d,"data":{"value":%g}}`, base+int64(i)*1000, 31+float64(i)/1000))
	}
	malformed := []string{`not json`, `{"ts":1,"data":{}}`, `{"ts":1,"data":{"value":"x"}}`, `{"data":{"value":1}}`, `{"ts":"yesterday","data":{"value":1}}`, `{"ts":1,"data":{"value":1}} extra`}
	for _, p := range malformed {
		publish(t, pub, "l1/w", p)
	}
	publish(t, pub, "l1/p", `65.5`)
	publish(t, pub, "l1/p", `[1,2]`)
	waitFor(t, "all messages", func() bool { s := c.Stats(); return s.Received == n+1 && s.Malformed["l1/w"] == int64(len(malformed)) })
	waitFor(t, "stored", func() bool { return c.Stats().Stored == n+1 })

	cnt, err := st.CountRunSamples(ctx, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	if cnt["part_weight"] != n {
		t.Fatalf("run-a holds %d part weights, want %d (malformed never stored)", cnt["part_weight"], n)
	}
	s := c.Stats()
	if s.Malformed["l1/p"] != 1 || s.Stats.Malformed != int64(len(malformed))+1 {
		t.Fatalf("malformed counts %v total %d", s.Malformed, s.Stats.Malformed)
	}
	node, _ := st.GetNode(ctx, "part_weight")
	if node.Unit != "g" {
		t.Fatalf("unit %q", node.Unit)
	}

	// Broker restart on the same address: reconnect and ingest again.
	broker.Close()
	waitFor(t, "disconnect", func() bool { return c.Stats().Disconnects >= 1 })
	startBroker(t, addr)
	waitFor(t, "reconnect", func() bool { s := c.Stats(); return s.Connected && s.Connects >= 2 })
	time.Sleep(200 * time.Millisecond)
	pub2 := publisher(t, addr)
	publish(t, pub2, "l1/w", fmt.Sprintf(`{"ts":%d,"data":{"value":31.5}}`, base+int64(n)*1000))
	waitFor(t, "message after reconnect", func() bool { return c.Stats().Stored == n+2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p, err := st.QueryPage(context.Background(), core.PageQuery{Node: "part_weight", Limit: 1000})
	if err != nil || len(p.Points) != n+1 {
		t.Fatalf("%d part weights stored (%v)", len(p.Points), err)
	}
}

func TestDecode(t *testing.T) {
	now := time.UnixMilli(5000)
	for _, tc := range []struct {
		name    string
		topic   Topic
		payload string
		v       float64
		ts      int64
		bad     bool
	}{
		{"bare number, receive time", Topic{}, `12.5`, 12.5, 5000, false},
		{"path and ms", Topic{Path: "a.b", TimePath: "t"}, `{"a":{"b":3},"t":1000}`, 3, 1000, false},
		{"seconds", Topic{Path: "v", TimePath: "t", TimeUnit: "s"}, `{"v":1,"t":1.5}`, 1, 1500, false},
		{"rfc3339", Topic{Path: "v", TimePath: "t", TimeUnit: "rfc3339"}, `{"v":1,"t":"1970-01-01T00:00:02Z"}`, 1, 2000, false},
		{"array index", Topic{Path: "v.1"}, `{"v":[1,2]}`, 2, 5000, false},
		{"string value", Topic{Path: "v"}, `{"v":"1"}`, 0, 0, true},
		{"null", Topic{Path: "v"}, `{"v":null}`, 0, 0, true},
		{"huge", Topic{}, `1e999`, 0, 0, true},
		{"negative time", Topic{Path: "v", TimePath: "t"}, `{"v":1,"t":-1}`, 0, 0, true},
		{"empty", Topic{}, ``, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ts, why := Decode(tc.topic, []byte(tc.payload), now)
			if (why != "") != tc.bad || (!tc.bad && (v != tc.v || ts != tc.ts)) {
				t.Fatalf("got %v %v %q", v, ts, why)
			}
		})
	}
}

func TestParseMapProblems(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"wildcard", `{"line":"l","product":"p","recipe":"r","topics":[{"topic":"a/#","node":"n"}]}`},
		{"duplicate node", `{"line":"l","product":"p","recipe":"r","topics":[{"topic":"a","node":"n"},{"topic":"b","node":"n"}]}`},
		{"unknown field", `{"line":"l","product":"p","recipe":"r","x":1,"topics":[{"topic":"a","node":"n"}]}`},
		{"no topics", `{"line":"l","product":"p","recipe":"r","topics":[]}`},
		{"bad unit", `{"line":"l","product":"p","recipe":"r","topics":[{"topic":"a","node":"n","timeUnit":"h","timePath":"t"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseMap([]byte(tc.in)); core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("want AML_INVALID_ARGUMENT, got %v", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(`{"v":1,"t":2}`, "v", "t", "ms")
	f.Add(`[1,{"a":2}]`, "1.a", "", "")
	f.Fuzz(func(t *testing.T, payload, path, tpath, unit string) {
		Decode(Topic{Path: path, TimePath: tpath, TimeUnit: unit}, []byte(payload), time.UnixMilli(0))
	})
}
