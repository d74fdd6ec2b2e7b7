package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	mauth "github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// freePort returns a loopback address nobody listens on (yet).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }() // only the port number was wanted
	return l.Addr().String()
}

// waitListening waits (bounded) until addr accepts TCP connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close() // a probe: nothing was sent
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type cliResult struct {
	out, errs string
	code      int
}

// amlAsync runs the CLI entrypoint in a goroutine.
func amlAsync(t *testing.T, args ...string) <-chan cliResult {
	t.Helper()
	ch := make(chan cliResult, 1)
	go func() {
		out, errs, code := aml(t, args...)
		ch <- cliResult{out, errs, code}
	}()
	return ch
}

func writeFile(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// countTS counts a node's stored samples with aml ts query.
func countTS(t *testing.T, d, node string) int {
	t.Helper()
	out, errs, code := aml(t, "ts", "query", "--data", d, "--node", node, "--json")
	if code != 0 {
		t.Fatalf("ts query %s: %d %s", node, code, errs)
	}
	var p core.Page
	mustJSON(t, out, &p)
	return len(p.Points)
}

// TestSimServeAndConnectOPCUA runs "aml sim serve-opcua" and "aml connect
// opcua" side by side (the CLI entrypoint, in goroutines): the server
// serves, the connector ingests, every value it stored is counted back
// with "aml ts query", and "aml connect status" shows the connector
// stopped with the same counters.
func TestSimServeAndConnectOPCUA(t *testing.T) {
	d := t.TempDir()
	addr := freePort(t)
	srvDone := amlAsync(t, "sim", "serve-opcua", "--addr", addr, "--speed", "20", "--for", "5s", "--data", d, "--json")
	waitListening(t, addr)
	endpoint := "opc.tcp://" + addr
	nodes := []map[string]any{}
	for _, n := range []string{"part_weight", "hold_pressure", "melt_temperature"} {
		nodes = append(nodes, map[string]any{"opcua": "ns=1;s=" + n, "node": n})
	}
	mapFile := writeFile(t, d, "line.json", map[string]any{"line": sim.DefaultLineID, "product": sim.DefaultProductID, "recipe": sim.DefaultRecipeID,
		"runTag": "ns=1;s=" + opcuasrv.TagRunID, "cycleTag": "ns=1;s=" + opcuasrv.TagCycle, "publishingIntervalMs": 20, "nodes": nodes})
	out, errs, code := aml(t, "connect", "opcua", "--endpoint", endpoint, "--map", mapFile, "--for", "3s", "--status-every", "500ms", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("connect opcua: %d %s", code, errs)
	}
	var st struct {
		Received, Stored, Malformed int64
		Runs                        int64 `json:"runsStarted"`
		Connects                    int
		State                       string
		Gaps                        []connect.Gap
	}
	mustJSON(t, out, &st)
	// 20 steps/s for ~3 s: dozens of values per node.
	if st.Stored < 60 || st.Stored != st.Received || st.Malformed != 0 || st.Connects != 1 || st.State != "stopped" || st.Runs < 1 {
		t.Fatalf("connector stats %+v", st)
	}
	total := 0
	for _, n := range []string{"part_weight", "hold_pressure", "melt_temperature"} {
		c := countTS(t, d, n)
		if c < 20 {
			t.Errorf("%s: %d samples stored", n, c)
		}
		total += c
	}
	if int64(total) != st.Stored {
		t.Errorf("ts query counts %d samples, the connector stored %d", total, st.Stored)
	}

	out, errs, code = aml(t, "connect", "status", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("connect status: %d %s", code, errs)
	}
	var rows []connect.Status
	mustJSON(t, out, &rows)
	if len(rows) != 1 || rows[0].ID != "opcua:"+endpoint || rows[0].Line != sim.DefaultLineID || rows[0].State != connect.StateStopped ||
		rows[0].Stored != st.Stored || rows[0].Received != st.Received || rows[0].Stale || rows[0].LastSampleMs == 0 || rows[0].IntervalMs != 500 {
		t.Fatalf("connect status %+v", rows)
	}
	out, _, _ = aml(t, "connect", "status", "--data", d)
	if !strings.Contains(out, "opcua:"+endpoint) || !strings.Contains(out, "stopped") {
		t.Errorf("connect status (human):\n%s", out)
	}

	r := <-srvDone
	if r.code != 0 {
		t.Fatalf("sim serve-opcua: %d %s", r.code, r.errs)
	}
	var served struct {
		Endpoint string            `json:"endpoint"`
		Nodes    map[string]string `json:"nodes"`
		Stats    opcuasrv.Stats    `json:"stats"`
	}
	mustJSON(t, r.out, &served)
	// ~5 s at 20×: about 100 steps; the connector saw a part of them.
	if served.Endpoint != endpoint || served.Nodes["part_weight"] != "ns=1;s=part_weight" || served.Stats.Steps < 40 || served.Stats.RunID == "" {
		t.Fatalf("serve-opcua result %+v", served)
	}
}

// TestConnectOPCUAFailsFast: nothing listens; the first connection's
// error is returned and the status row says failed with the error.
func TestConnectOPCUAFailsFast(t *testing.T) {
	d := t.TempDir()
	endpoint := "opc.tcp://" + freePort(t)
	mapFile := writeFile(t, d, "m.json", map[string]any{"line": "l1", "product": "p", "recipe": "r", "nodes": []map[string]any{{"opcua": "ns=1;s=x", "node": "x"}}})
	_, errs, code := aml(t, "connect", "opcua", "--endpoint", endpoint, "--map", mapFile, "--for", "5s", "--data", d)
	if code != 1 || !strings.Contains(errs, "error: AML_") {
		t.Fatalf("connect to nothing: %d %s", code, errs)
	}
	out, _, _ := aml(t, "connect", "status", "--data", d, "--json")
	var rows []connect.Status
	mustJSON(t, out, &rows)
	if len(rows) != 1 || rows[0].State != connect.StateFailed || rows[0].LastError == "" {
		t.Fatalf("status after a failed start: %+v", rows)
	}
	if _, errs, code := aml(t, "connect", "opcua", "--endpoint", endpoint, "--data", d); code != 2 {
		t.Errorf("missing --map: %d %s", code, errs)
	}
}

// TestConnectMQTTCountsMalformed: "aml connect mqtt" against an embedded
// broker; good payloads stored (counted back), malformed ones counted per
// topic and never stored.
func TestConnectMQTTCountsMalformed(t *testing.T) {
	d := t.TempDir()
	addr := freePort(t)
	b := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := b.AddHook(new(mauth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddListener(listeners.NewTCP(listeners.Config{ID: "t", Address: addr})); err != nil {
		t.Fatal(err)
	}
	if err := b.Serve(); err != nil { // it starts the listeners and returns
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() }) // teardown: the broker's clients are gone
	waitListening(t, addr)

	mapFile := writeFile(t, d, "topics.json", map[string]any{"line": "l-mqtt", "product": "p1", "recipe": "r1", "runTopic": "l/run", "runPath": "id",
		"topics": []map[string]any{
			{"topic": "l/w", "node": "mq_weight", "path": "v", "timePath": "ts", "unit": "g"},
			{"topic": "l/p", "node": "mq_pressure", "path": "v", "timePath": "t", "timeUnit": "s"},
		}})
	done := amlAsync(t, "connect", "mqtt", "--broker", "tcp://"+addr, "--map", mapFile, "--for", "3s", "--data", d, "--json")
	// Publish once the connector has subscribed (QoS 1 to a topic nobody
	// subscribed to yet is dropped by the broker).
	deadline := time.Now().Add(10 * time.Second)
	for {
		s1, s2 := b.Topics.Subscribers("l/w"), b.Topics.Subscribers("l/p")
		if len(s1.Subscriptions) > 0 && len(s2.Subscriptions) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connector did not subscribe")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("test-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher: %v", tok.Error())
	}
	defer pub.Disconnect(50)
	send := func(topic, payload string) {
		if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	send("l/run", `{"id":"mq-run-1"}`)
	t0 := int64(1_800_000_000_000)
	for i := 0; i < 10; i++ {
		send("l/w", fmt.Sprintf(`{"v": %d.5, "ts": %d}`, 50+i, t0+int64(i)*1000))
		send("l/p", fmt.Sprintf(`{"v": %d, "t": %d}`, 600+i, t0/1000+int64(i)))
	}
	for _, bad := range []string{`{"v": "heavy", "ts": 1}`, `not json`, `{"ts": 5}`} {
		send("l/w", bad)
	}
	send("l/p", `{"nested": 1}`)

	r := <-done
	if r.code != 0 {
		t.Fatalf("connect mqtt: %d %s", r.code, r.errs)
	}
	var st struct {
		Received, Stored, Malformed int64
		Connects                    int
		ByTopic                     map[string]int64 `json:"malformedByTopic"`
	}
	mustJSON(t, r.out, &st)
	if st.Stored != 20 || st.Malformed != 4 || st.ByTopic["l/w"] != 3 || st.ByTopic["l/p"] != 1 || st.Connects < 1 {
		t.Fatalf("mqtt stats %+v", st)
	}
	if n := countTS(t, d, "mq_weight"); n != 10 {
		t.Errorf("mq_weight: %d samples stored, want 10", n)
	}
	if n := countTS(t, d, "mq_pressure"); n != 10 {
		t.Errorf("mq_pressure: %d samples stored, want 10", n)
	}
	out, _, _ := aml(t, "connect", "status", "--data", d, "--line", "l-mqtt", "--json")
	var rows []connect.Status
	mustJSON(t, out, &rows)
	if len(rows) != 1 || rows[0].Kind != connect.KindMQTT || rows[0].Malformed != 4 || rows[0].Stored != 20 || rows[0].State != connect.StateStopped || rows[0].RunID != "mq-run-1" {
		t.Fatalf("mqtt status %+v", rows)
	}
}

// TestCertExecuteOverOPCUA: an approved certificate is executed with
// --opcua-endpoint against the simulated line: every move written and
// read back, the line's setpoints changed, the certificate EXECUTED.
// Without approval the guard refuses and nothing reaches the line.
func TestCertExecuteOverOPCUA(t *testing.T) {
	d := t.TempDir()
	seedTwin(t, d, 2)
	if _, _, err := subCLI(t, d, newChannelCmd, "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "hitl_governed",
		"--scene", "injection-hold-control@1.0.0", "--as", "ops"); err != nil {
		t.Fatal(err)
	}
	// The line holds the snapshot's setpoints (the moves' From values).
	srv, err := opcuasrv.Start(context.Background(), opcuasrv.Options{Addr: "127.0.0.1:0", Manual: true,
		Initial: map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }() // teardown of the simulated line
	var nodes []map[string]any
	for _, n := range []string{"hold_pressure", "hold_time", "melt_temperature_setpoint", "part_weight"} {
		nodes = append(nodes, map[string]any{"opcua": srv.NodeID(n), "node": n})
	}
	mapFile := writeFile(t, d, "line.json", map[string]any{"line": certLine, "product": "P", "recipe": "R", "nodes": nodes})

	unapproved := issueCLI(t, d, "trial-1")
	out, err := certCLI(t, d, "execute", unapproved, "--as", "carol", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile)
	if core.CodeOf(err) != govern.CodeWriteDenied || !strings.Contains(out, "CERT_NOT_APPROVED") || srv.Stats().Writes != 0 {
		t.Fatalf("unapproved over OPC UA: %v (writes %d)\n%s", err, srv.Stats().Writes, out)
	}

	id := issueCLI(t, d, "trial-2")
	if _, err := certCLI(t, d, "approve", id, "--as", "bob"); err != nil {
		t.Fatal(err)
	}
	out, err = certCLI(t, d, "--json", "execute", id, "--as", "carol", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile)
	if err != nil {
		t.Fatalf("execute over OPC UA: %v\n%s", err, out)
	}
	var res govern.Result
	mustJSON(t, out, &res)
	if !res.Executed || res.Status != guard.OutcomeVerified || res.Written() != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, m := range res.Writes {
		if !m.Verified || m.Readback != m.To {
			t.Errorf("move %+v not read back", m)
		}
	}
	v := srv.Values()
	if v["hold_pressure"] != 65 || v["hold_time"] != 8.5 || v["melt_temperature_setpoint"] != 247 || srv.Stats().Writes != 3 {
		t.Fatalf("line after the write: %v, %d writes", v, srv.Stats().Writes)
	}
	out, err = certCLI(t, d, "--json", "verify", id)
	var rep govern.VerifyReport
	mustJSON(t, out, &rep)
	if err != nil || !rep.OK || rep.Status != "EXECUTED" {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	// Executed once: a second execution is refused and writes nothing.
	if _, err := certCLI(t, d, "execute", id, "--as", "carol", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile); core.CodeOf(err) != govern.CodeWriteDenied || srv.Stats().Writes != 3 {
		t.Fatalf("second execution: %v (writes %d)", err, srv.Stats().Writes)
	}
	if _, err := certCLI(t, d, "execute", id, "--as", "carol", "--opcua-endpoint", srv.Endpoint()); !isUsage(err) {
		t.Errorf("--opcua-endpoint without --map: %v", err)
	}
	if _, errs, code := aml(t, "cert", "execute", id, "--as", "carol", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile, "--server", "http://127.0.0.1:1", "--token", "x"); code != 2 || !strings.Contains(errs, "cannot be combined with --server") {
		t.Errorf("--opcua-endpoint with --server: %d %s", code, errs)
	}
}

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

// TestSimServeTankOPCUA: "aml sim serve-opcua --kind tank" serves the
// tank's three nodes; an unknown kind is an invalid argument.
func TestSimServeTankOPCUA(t *testing.T) {
	d := t.TempDir()
	out, errs, code := aml(t, "sim", "serve-opcua", "--kind", "tank", "--addr", freePort(t), "--speed", "50", "--for", "300ms", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("serve tank: %d %s", code, errs)
	}
	var served struct {
		Nodes map[string]string `json:"nodes"`
		Stats opcuasrv.Stats    `json:"stats"`
	}
	mustJSON(t, out, &served)
	if len(served.Nodes) != 5 || served.Nodes["level"] != "ns=1;s=level" || served.Nodes["heater_sp"] == "" || served.Stats.Steps < 2 || served.Stats.RunID != "tank-level-run-001" {
		t.Fatalf("served %+v", served)
	}
	_, errs, code = aml(t, "sim", "serve-opcua", "--kind", "boiler", "--addr", freePort(t), "--for", "100ms", "--data", d)
	if code != 1 || !strings.Contains(errs, "error: AML_INVALID_ARGUMENT: kind:") {
		t.Fatalf("unknown kind: %d %s", code, errs)
	}
}
