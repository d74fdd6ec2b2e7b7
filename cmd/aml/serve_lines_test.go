package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
)

// TestServeLineWritersRefusedAtStart: aml serve --line-writers with a
// missing file, or a file whose map is of another line, fails before it
// listens, naming the problem.
func TestServeLineWritersRefusedAtStart(t *testing.T) {
	d := t.TempDir()
	bad := filepath.Join(d, "writers.json")
	if err := os.WriteFile(filepath.Join(d, "map.json"), []byte(`{"line":"line-a","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=x","node":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"lines":[{"line":"line-b","endpoint":"opc.tcp://127.0.0.1:1","map":"map.json"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(d, "none.json"), "AML_INVALID_ARGUMENT: line-writers file"},
		{bad, `maps line "line-a", not "line-b"`},
	} {
		_, errs, code := aml(t, "serve", "--addr", "127.0.0.1:0", "--workers", "0", "--line-writers", c.file, "--data", d)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(errs, "listening") {
			t.Fatalf("%s: exit %d: %s", c.file, code, errs)
		}
	}
}

// TestCertExecuteOPCUAOtherLineRefused: the CLI given an OPC UA writer
// (--opcua-endpoint, --map) for another line than the certificate's
// refuses to execute it — it never falls back to the recording writer —
// and nothing reaches the line; the certificate stays APPROVED.
func TestCertExecuteOPCUAOtherLineRefused(t *testing.T) {
	d := t.TempDir()
	seedTwin(t, d, 1)
	if _, _, err := subCLI(t, d, newChannelCmd, "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "hitl_governed",
		"--scene", "injection-hold-control@1.0.0", "--as", "ops"); err != nil {
		t.Fatal(err)
	}
	srv, err := opcuasrv.Start(context.Background(), opcuasrv.Options{Addr: "127.0.0.1:0", Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	mapFile := writeFile(t, d, "other.json", map[string]any{"line": "line-other", "product": "P", "recipe": "R",
		"nodes": []map[string]any{{"opcua": srv.NodeID("hold_pressure"), "node": "hold_pressure"}}})
	id := issueCLI(t, d, "trial-1")
	if _, err := certCLI(t, d, "approve", id, "--as", "bob"); err != nil {
		t.Fatal(err)
	}
	_, err = certCLI(t, d, "execute", id, "--as", "carol", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile)
	if core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), certLine) || srv.Stats().Writes != 0 {
		t.Fatalf("another line's writer: %v (writes %d)", err, srv.Stats().Writes)
	}
	out, err := certCLI(t, d, "--json", "show", id)
	if err != nil || !strings.Contains(out, `"APPROVED"`) {
		t.Fatalf("certificate after the refusal: %v\n%s", err, out)
	}
}
