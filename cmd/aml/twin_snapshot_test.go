package main

import (
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

func TestTwinSnapshotCLI(t *testing.T) {
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "2", "--seed", "3", "--duration", "6m", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := aml(t, "twin", "scene", "put", "--default-injection", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	// The second run ends at 06:21:59.
	const at = "2026-01-05T06:22:04Z"
	take := []string{"twin", "snapshot", "take", "--scene", "injection-hold-control@1.0.0", "--at", at, "--data", d}

	_, errs, code := aml(t, take...)
	if code != 1 || !strings.Contains(errs, "error: AML_BINDING_MISMATCH") || !strings.Contains(errs, "weight") {
		t.Fatalf("without --bind: %d %s", code, errs)
	}
	take = append(take, "--bind", "weight=part_weight")
	out, errs, code := aml(t, append(take, "--json", "--by", "alice")...)
	if code != 0 {
		t.Fatal(errs)
	}
	var res struct {
		Snapshot contract.TwinSnapshot `json:"snapshot"`
		Report   snapshot.Report       `json:"report"`
	}
	mustJSON(t, out, &res)
	s := res.Snapshot
	if s.SnapshotHash == "" || s.CreatedBy != "alice" || s.Window == nil || s.Window.Steps != 30 || len(s.ControlValues) != 3 ||
		res.Report.RunID != "recipe-injection-a-run-002" || !s.DataQuality.Fresh || res.Report.Bound != 10 {
		t.Fatalf("take: %s", out)
	}
	if h, _ := s.Hash(); h != s.SnapshotHash {
		t.Fatalf("hash %s, content %s", s.SnapshotHash, h)
	}
	// Human output: a table of variables.
	out, errs, code = aml(t, take...)
	if code != 0 || !strings.Contains(out, "VARIABLE") || !strings.Contains(out, "hold_pressure") || !strings.Contains(out, "unbound") {
		t.Fatalf("human: %d %s %s", code, out, errs)
	}

	out, errs, code = aml(t, "twin", "snapshot", "show", s.SnapshotID, "--json", "--data", d)
	var shown struct {
		Snapshot contract.TwinSnapshot `json:"snapshot"`
		Info     struct{ Strict bool } `json:"info"`
	}
	mustJSON(t, out, &shown)
	if code != 0 || shown.Snapshot.SnapshotHash != s.SnapshotHash {
		t.Fatalf("show: %d %s %s", code, out, errs)
	}
	out, _, code = aml(t, "twin", "snapshot", "show", s.SnapshotID, "--data", d)
	if code != 0 || !strings.Contains(out, "controls:") || !strings.Contains(out, s.SnapshotHash) {
		t.Fatalf("show human: %s", out)
	}
	if _, errs, code = aml(t, "twin", "snapshot", "show", "nope", "--data", d); code != 1 || !strings.Contains(errs, "AML_NOT_FOUND") {
		t.Fatalf("show unknown: %d %s", code, errs)
	}
	out, _, code = aml(t, "twin", "snapshot", "list", "--line", "line-injection-01", "--json", "--data", d)
	var list []struct{ SnapshotID string }
	mustJSON(t, out, &list)
	if code != 0 || len(list) != 2 {
		t.Fatalf("list: %s", out)
	}

	// Strict, three minutes later: stale, refused, nothing stored.
	late := []string{"twin", "snapshot", "take", "--scene", "injection-hold-control", "--at", "2026-01-05T06:25:00Z", "--bind", "weight=part_weight", "--strict", "--data", d}
	if _, errs, code = aml(t, late...); code != 1 || !strings.Contains(errs, "error: AML_SNAPSHOT_QUALITY") || !strings.Contains(errs, "stale") {
		t.Fatalf("strict: %d %s", code, errs)
	}
	if _, errs, code = aml(t, append(late, "--max-age", "5m")...); code != 0 {
		t.Fatalf("strict, max age 5m: %s", errs)
	}
	if _, errs, code = aml(t, append(take, "--bind", "oops")...); code != 2 {
		t.Fatalf("bad --bind: %d %s", code, errs)
	}

	// --model: an unknown model is named (the real estimator: TestDemo).
	if _, errs, code = aml(t, append(take, "--model", "m1")...); code != 1 || !strings.Contains(errs, "AML_NOT_FOUND") || !strings.Contains(errs, "m1") {
		t.Fatalf("--model with an unknown model: %d %s", code, errs)
	}
}
