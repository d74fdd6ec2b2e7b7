package opcua

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
)

const tankMap = `{"line":"tank-line","product":"tank-water","recipe":"tank-level","nodes":[{"opcua":"ns=1;s=heater_sp","node":"heater_sp"}]}`

func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := m[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
}

// TestParseLineWriters: a valid file gives one config per line (map
// parsed, password from its variable, sample defaulted); every bad entry
// is a Problem naming its field.
func TestParseLineWriters(t *testing.T) {
	fs := files(map[string]string{"tank.json": tankMap, "bad.json": `{"nodes":[]}`})
	env := func(k string) string { return map[string]string{"PW": "secret"}[k] }
	cfgs, err := ParseLineWriters([]byte(`{"lines":[{"line":"tank-line","endpoint":"opc.tcp://127.0.0.1:4840","map":"tank.json","user":"aml","passwordEnv":"PW"}]}`), fs, env)
	if err != nil || len(cfgs) != 1 {
		t.Fatalf("%v %+v", err, cfgs)
	}
	if c := cfgs[0]; c.Line != "tank-line" || c.Map == nil || c.Map.Nodes[0].Node != "heater_sp" || c.Security.Password != "secret" || c.Sample != DefaultSample {
		t.Fatalf("%+v", c)
	}
	for _, tc := range []struct{ name, doc, field string }{
		{"not json", `{`, "lines"},
		{"unknown field", `{"lines":[],"program":"/bin/sh"}`, "lines"},
		{"no lines", `{"lines":[]}`, "lines"},
		{"bad line id", `{"lines":[{"line":"../x","endpoint":"opc.tcp://h:1","map":"tank.json"}]}`, "lines[0].line"},
		{"twice", `{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h:1","map":"tank.json"},{"line":"tank-line","endpoint":"opc.tcp://h:2","map":"tank.json"}]}`, "lines[1].line"},
		{"not opc.tcp", `{"lines":[{"line":"tank-line","endpoint":"http://h:1","map":"tank.json"}]}`, "lines[0].endpoint"},
		{"no map", `{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h:1"}]}`, "lines[0].map"},
		{"missing map", `{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h:1","map":"nope.json"}]}`, "lines[0].map"},
		{"bad map", `{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h:1","map":"bad.json"}]}`, "lines[0].map"},
		{"map of another line", `{"lines":[{"line":"line-2","endpoint":"opc.tcp://h:1","map":"tank.json"}]}`, "lines[0].map"},
		{"bad sample", `{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h:1","map":"tank.json","sample":"1ns"}]}`, "lines[0].sample"},
		{"empty password", `{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h:1","map":"tank.json","passwordEnv":"NONE"}]}`, "lines[0].passwordEnv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLineWriters([]byte(tc.doc), fs, env)
			if core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("want AML_INVALID_ARGUMENT, got %v", err)
			}
			var ce *core.Error
			found := false
			if errors.As(err, &ce) {
				found = ce.Field == tc.field
				for _, p := range ce.Problems {
					found = found || p.Field == tc.field
				}
			}
			if !found {
				t.Fatalf("no problem on %s: %v", tc.field, err)
			}
		})
	}
}

// FuzzParseLineWriters: any input gives configs or a typed error, never
// a panic, and never a config without its map.
func FuzzParseLineWriters(f *testing.F) {
	f.Add([]byte(`{"lines":[{"line":"tank-line","endpoint":"opc.tcp://127.0.0.1:4840","map":"tank.json","sample":"2s"}]}`))
	f.Add([]byte(`{"lines":[{"line":"tank-line","endpoint":"opc.tcp://h","map":"x"}]}`))
	fs := files(map[string]string{"tank.json": tankMap})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgs, err := ParseLineWriters(data, fs, func(string) string { return "" })
		if err != nil {
			if core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, c := range cfgs {
			if c.Map == nil || c.Map.Line != c.Line || c.Sample <= 0 {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}

// TestLoadLineWritersRelative: the map is read relative to the file.
func TestLoadLineWritersRelative(t *testing.T) {
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "tank.json"), []byte(tankMap), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "writers.json")
	if err := os.WriteFile(p, []byte(`{"lines":[{"line":"tank-line","endpoint":"opc.tcp://127.0.0.1:1","map":"tank.json","sample":"250ms"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadLineWriters(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Lines(); len(got) != 1 || got[0] != "tank-line" || r.SampleFor("tank-line") != 250*time.Millisecond {
		t.Fatalf("%v %v", got, r.SampleFor("tank-line"))
	}
	if _, err := LoadLineWriters(filepath.Join(d, "none.json")); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("missing file: %v", err)
	}
}

// TestLineWritersLazy: nothing is dialled until a line's writer is asked
// for; it is dialled once and shared; a line without a writer gets none;
// a dial that fails is AML_LINE_WRITER_UNAVAILABLE and retried; after
// Close no writer is handed out.
func TestLineWritersLazy(t *testing.T) {
	ctx := context.Background()
	srv, err := opcuasrv.Start(ctx, opcuasrv.Options{Kind: opcuasrv.KindTank, Addr: "127.0.0.1:0", Manual: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	m := &Map{Line: "tank-line", Product: "tank-water", Recipe: "tank-level"}
	for _, n := range []string{sim.TankHeater, sim.TankLevel} {
		m.Nodes = append(m.Nodes, MapEntry{OPCUA: srv.NodeID(n), Node: n})
	}
	down := &Map{Line: "down-line", Product: "p", Recipe: "r", Nodes: m.Nodes}
	r, err := NewLineWriters(LineConfig{Line: "tank-line", Endpoint: srv.Endpoint(), Map: m}, LineConfig{Line: "down-line", Endpoint: "opc.tcp://127.0.0.1:1", Map: down})
	if err != nil {
		t.Fatal(err)
	}
	dials := 0
	dial := r.dial
	r.dial = func(ctx context.Context, c LineConfig) (*Writer, error) { dials++; return dial(ctx, c) }
	if w, err := r.WriterFor(ctx, "other-line"); w != nil || err != nil || dials != 0 {
		t.Fatalf("unconfigured line: %v %v, %d dials", w, err, dials)
	}
	w1, err := r.WriterFor(ctx, "tank-line")
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := r.WriterFor(ctx, "tank-line")
	if w1 != w2 || dials != 1 {
		t.Fatalf("not shared: %d dials", dials)
	}
	if x, err := w1.Read(ctx, sim.TankHeater); err != nil || x != srv.Values()[sim.TankHeater] {
		t.Fatalf("read %v %v", x, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.WriterFor(ctx, "down-line"); core.CodeOf(err) != core.CodeLineWriterUnavailable || !strings.Contains(err.Error(), "down-line") {
			t.Fatalf("dial failure: %v", err)
		}
	}
	if dials != 3 {
		t.Fatalf("a failed dial is retried: %d dials", dials)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriterFor(ctx, "tank-line"); core.CodeOf(err) != core.CodeLineWriterUnavailable {
		t.Fatalf("after close: %v", err)
	}
	if s := srv.Stats(); s.Writes != 0 {
		t.Fatalf("the registry wrote: %+v", s)
	}
}
