package opcuasrv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
)

var t0 = time.Date(2026, 11, 9, 6, 0, 0, 0, time.UTC)

func startTank(t *testing.T, o opcuasrv.Options) (*opcuasrv.Server, *opcua.Writer) {
	t.Helper()
	ctx := context.Background()
	o.Addr, o.Manual, o.Kind, o.StartMs = "127.0.0.1:0", true, opcuasrv.KindTank, t0.UnixMilli()
	srv, err := opcuasrv.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	m := &opcua.Map{Line: "tank-line"}
	for _, n := range srv.Nodes() {
		m.Nodes = append(m.Nodes, opcua.MapEntry{OPCUA: srv.NodeID(n), Node: n})
	}
	w, err := opcua.DialWriter(ctx, srv.Endpoint(), m, opcua.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return srv, w
}

// TestTankLine: the tank served over OPC UA: its three nodes with their
// ranges and units as properties, the setpoints written and read back,
// refused out of range, the level read-only, and the level following a
// heater step in the true gain's direction on the line's own clock.
func TestTankLine(t *testing.T) {
	ctx := context.Background()
	srv, w := startTank(t, opcuasrv.Options{Seed: 3})
	if got := strings.Join(srv.Nodes(), ","); got != "feed_sp,heater_sp,level,run_id,cycle" {
		t.Fatalf("nodes %s", got)
	}
	if !srv.Now().Equal(t0) {
		t.Fatalf("line clock %v, want %v", srv.Now(), t0)
	}

	// Properties, read with a plain client.
	eps, err := gopcua.GetEndpoints(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	ep, err := gopcua.SelectEndpoint(eps, ua.SecurityPolicyURINone, ua.MessageSecurityModeNone)
	if err != nil {
		t.Fatal(err)
	}
	ep.EndpointURL = srv.Endpoint()
	cl, err := gopcua.NewClient(srv.Endpoint(), gopcua.SecurityPolicy(ua.SecurityPolicyURINone), gopcua.SecurityMode(ua.MessageSecurityModeNone),
		gopcua.AuthAnonymous(), gopcua.SecurityFromEndpoint(ep, ua.UserTokenTypeAnonymous))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close(ctx) }()
	for _, tc := range []struct {
		node, unit string
		lo, hi     float64
	}{{sim.TankHeater, "degC", 40, 60}, {sim.TankFeed, "l/min", 10, 20}, {sim.TankLevel, "cm", 30, 70}} {
		rr, err := cl.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{
			{NodeID: ua.MustParseNodeID(srv.NodeID(tc.node) + ".EURange"), AttributeID: ua.AttributeIDValue},
			{NodeID: ua.MustParseNodeID(srv.NodeID(tc.node) + ".EngineeringUnits"), AttributeID: ua.AttributeIDValue},
		}})
		if err != nil || len(rr.Results) != 2 {
			t.Fatalf("%s properties: %v", tc.node, err)
		}
		r, _ := rr.Results[0].Value.Value().(*ua.ExtensionObject).Value.(*ua.Range)
		u, _ := rr.Results[1].Value.Value().(*ua.ExtensionObject).Value.(*ua.EUInformation)
		if r == nil || u == nil || r.Low != tc.lo || r.High != tc.hi || u.DisplayName.Text != tc.unit {
			t.Fatalf("%s: range %+v unit %+v", tc.node, r, u)
		}
	}
	ns, err := cl.NamespaceArray(ctx)
	if err != nil || len(ns) < 2 || ns[1] != opcuasrv.TankNamespaceURI {
		t.Fatalf("namespaces %v %v", ns, err)
	}

	// Writes: within range, read back at once; refused outside it, or to the level.
	if err := w.Write(ctx, sim.TankHeater, 54); err != nil {
		t.Fatal(err)
	}
	if v, err := w.Read(ctx, sim.TankHeater); err != nil || v != 54 {
		t.Fatalf("heater readback %v %v", v, err)
	}
	for _, bad := range []struct {
		node string
		v    float64
		st   string
	}{{sim.TankHeater, 61, "BadOutOfRange"}, {sim.TankFeed, 9.5, "BadOutOfRange"}, {sim.TankLevel, 50, "BadNotWritable"}} {
		if err := w.Write(ctx, bad.node, bad.v); err == nil || !strings.Contains(err.Error(), bad.st) {
			t.Fatalf("%s=%v: %v", bad.node, bad.v, err)
		}
	}
	if st := srv.Stats(); st.Writes != 1 || st.Refusals != 3 {
		t.Fatalf("stats %+v", st)
	}

	// The level follows the heater step (+4 degC × 0.9 cm/degC), after
	// its dead time, on the line's clock.
	y0 := srv.Truth()[sim.TankLevel]
	srv.Step(10)
	if d := srv.Truth()[sim.TankLevel] - y0; d != 0 {
		t.Fatalf("level moved %v within the 15 s dead time", d)
	}
	srv.Step(890)
	truth := sim.PlantTruth()
	if d := srv.Truth()[sim.TankLevel] - y0; d < 0.99*4*truth.KHeater || d > 4*truth.KHeater+1e-9 {
		t.Fatalf("level moved %v after 900 s, want about %v", d, 4*truth.KHeater)
	}
	if v, err := w.Read(ctx, sim.TankLevel); err != nil || v != srv.Values()[sim.TankLevel] {
		t.Fatalf("level read %v %v, served %v", v, err, srv.Values()[sim.TankLevel])
	}
	if !srv.Now().Equal(t0.Add(900 * time.Second)) {
		t.Fatalf("line clock %v", srv.Now())
	}
}

// TestTankOptions: the tank's initial setpoints are settled on; bad kinds,
// steps that are not whole seconds and initial values outside the range
// are refused; the injection line stays the default.
func TestTankOptions(t *testing.T) {
	ctx := context.Background()
	srv, _ := startTank(t, opcuasrv.Options{Seed: 3, Initial: map[string]float64{sim.TankHeater: 45}})
	truth := sim.PlantTruth()
	if v := srv.Values()[sim.TankHeater]; v != 45 {
		t.Fatalf("heater %v", v)
	}
	if y, want := srv.Truth()[sim.TankLevel], 50+truth.KHeater*(45-50); y < want-0.01 || y > want+0.01 {
		t.Fatalf("settled level %v, want %v", y, want)
	}
	for _, o := range []opcuasrv.Options{
		{Kind: "boiler"},
		{Kind: opcuasrv.KindTank, StepMs: 500},
		{Kind: opcuasrv.KindTank, Initial: map[string]float64{sim.TankFeed: 25}},
		{Kind: opcuasrv.KindTank, Initial: map[string]float64{sim.TankLevel: 50}},
	} {
		o.Addr, o.Manual = "127.0.0.1:0", true
		if s, err := opcuasrv.Start(ctx, o); core.CodeOf(err) != core.CodeInvalidArgument {
			if s != nil {
				_ = s.Close()
			}
			t.Fatalf("%+v: %v", o, err)
		}
	}
	inj, err := opcuasrv.Start(ctx, opcuasrv.Options{Addr: "127.0.0.1:0", Manual: true, StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inj.Close() }()
	if n := inj.Nodes(); len(n) != 12 || n[0] != sim.NodeAmbientTemperature {
		t.Fatalf("injection nodes %v", n)
	}
}
