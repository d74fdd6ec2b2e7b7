package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/twin/contract"
)

// TestStepTestExecuteOverOPCUA: "aml twin steptest execute" reaches the
// line over OPC UA from the CLI's process (--opcua-endpoint, --map, as
// "aml cert execute" does): an unapproved test on the tank served over
// OPC UA is refused at its first move by the guard with nothing written
// to the server; without the flags no line is attached; with --server
// the flags are a usage error, and so is --no-wait without --server.
func TestStepTestExecuteOverOPCUA(t *testing.T) {
	d := t.TempDir()
	f := func(x float64) *float64 { return &x }
	sc := contract.SceneContract{
		SchemaVersion: contract.SceneSchemaVersion, CreatedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), CreatedBy: "eve",
		SceneID: "tank-level", SceneVersion: "1.0.0", LineID: "tank-line", ProductID: "tank-water", RecipeID: "tank-level", Phases: []string{"running"},
		Controls: []contract.SceneVariable{
			{ID: sim.TankHeater, Role: contract.RoleControl, PhysicalMeaning: "heater setpoint", Unit: "degC", Min: f(40), Max: f(60), MaxStep: f(4)},
			{ID: sim.TankFeed, Role: contract.RoleControl, PhysicalMeaning: "feed setpoint", Unit: "l/min", Min: f(10), Max: f(20), MaxStep: f(4)},
		},
		Observations: []contract.SceneVariable{{ID: sim.TankLevel, Role: contract.RoleTarget, PhysicalMeaning: "tank level", Unit: "cm", Min: f(30), Max: f(70)}},
		Constraints:  []contract.Constraint{{ID: "level", Kind: contract.KindHardRange, Variable: sim.TankLevel, Min: f(30), Max: f(70)}},
		WritePolicy: contract.WritePolicy{MinNodeIntervalSec: 60, MinLineActionIntervalSec: 60, MaxActionsPerRun: 20,
			MaxDeltaPerAction: map[string]float64{sim.TankHeater: 4, sim.TankFeed: 4}},
		Status: contract.SceneDraft,
	}
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	sceneFile := filepath.Join(d, "scene.json")
	if err := os.WriteFile(sceneFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errs, code := aml(t, append(args, "--data", d, "--json")...)
		if code != 0 {
			t.Fatalf("%v: %d %s", args, code, errs)
		}
		return out
	}
	var put struct{ Hash string }
	mustJSON(t, run("twin", "scene", "put", sceneFile, "--as", "eve"), &put)
	run("twin", "scene", "freeze", "tank-level", "--version", "1.0.0", "--expect-hash", put.Hash, "--by", "quality-lead")
	run("channel", "set", "--line", "tank-line", "--profile", "hybrid_twin", "--policy", "hitl_governed", "--as", "ada")
	var issued struct{ Test struct{ TestID string } }
	mustJSON(t, run("twin", "steptest", "issue", "--scene", "tank-level", "--base", "heater_sp=50", "--base", "feed_sp=15", "--hold", "5m",
		"--one-at-a-time", "--as", "alice"), &issued)
	id := issued.Test.TestID

	srv, err := opcuasrv.Start(context.Background(), opcuasrv.Options{Kind: opcuasrv.KindTank, Addr: "127.0.0.1:0", Manual: true, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	nodes := []map[string]any{}
	for _, n := range []string{sim.TankHeater, sim.TankFeed, sim.TankLevel} {
		nodes = append(nodes, map[string]any{"opcua": srv.NodeID(n), "node": n})
	}
	mapFile := writeFile(t, d, "tank.json", map[string]any{"line": "tank-line", "product": "tank-water", "recipe": "tank-level", "nodes": nodes})

	out, errs, code := aml(t, "twin", "steptest", "execute", id, "--as", "bob", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile, "--data", d, "--json")
	var res struct {
		Execution struct {
			Moves []struct{ Reason string }
		}
	}
	if code != 1 || !strings.Contains(errs, "AML_WRITE_DENIED") {
		t.Fatalf("unapproved execute: %d %s", code, errs)
	}
	if mustJSON(t, out, &res); len(res.Execution.Moves) != 1 || res.Execution.Moves[0].Reason != "CERT_NOT_APPROVED" || srv.Stats().Writes != 0 || srv.Stats().Refusals != 0 {
		t.Fatalf("unapproved execute: %s; server %+v", out, srv.Stats())
	}
	if _, errs, code := aml(t, "twin", "steptest", "execute", id, "--as", "bob", "--data", d); code != 1 || !strings.Contains(errs, "AML_INVALID_ARGUMENT: line:") {
		t.Fatalf("execute without a line: %d %s", code, errs)
	}
	if _, errs, code := aml(t, "twin", "steptest", "execute", id, "--as", "bob", "--opcua-endpoint", srv.Endpoint(), "--map", mapFile,
		"--server", "http://127.0.0.1:1"); code != 2 || !strings.Contains(errs, "AML_USAGE") {
		t.Fatalf("execute over OPC UA with --server: %d %s", code, errs)
	}
	// A test run from this process ends with it: --no-wait needs --server.
	if _, errs, code := aml(t, "twin", "steptest", "execute", id, "--as", "bob", "--no-wait", "--data", d); code != 2 || !strings.Contains(errs, "--no-wait needs --server") {
		t.Fatalf("--no-wait without --server: %d %s", code, errs)
	}
}
