package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/contract"
)

// twinCLI runs `aml twin ARGS` on data dir d through newTwinCmd under a
// minimal root, and returns stdout, the exit status run() would give the
// error (0, 1 error, 2 usage) and the error.
func twinCLI(t *testing.T, d string, args ...string) (string, int, error) {
	t.Helper()
	stdout, _, err := subCLI(t, d, newTwinCmd, args...)
	code := 0
	var ue *usageError
	switch {
	case err == nil:
	case errors.As(err, &ue) || isCobraUsage(err):
		code = 2
	default:
		code = 1
	}
	return stdout, code, err
}

func TestTwinSceneCLI(t *testing.T) {
	d := t.TempDir()
	// The author of a stored scene is whoever stores it (here $USER).
	t.Setenv("USER", "alice")
	def := contract.DefaultInjectionScene()
	def.CreatedBy = "alice"
	h, err := def.Hash()
	if err != nil {
		t.Fatal(err)
	}

	out, code, err := twinCLI(t, d, "scene", "put", "--default-injection")
	if code != 0 || !strings.Contains(out, "hash "+h) || !strings.Contains(out, def.SceneID) {
		t.Fatalf("put default: %d %v\n%s", code, err, out)
	}

	// A file: a new version of the default scene.
	c := contract.DefaultInjectionScene()
	c.SceneVersion, c.CreatedBy = "1.1.0", "alice"
	js, _ := json.Marshal(c)
	f := filepath.Join(t.TempDir(), "scene.json")
	if err := os.WriteFile(f, js, 0o644); err != nil {
		t.Fatal(err)
	}
	h2, _ := c.Hash()
	out, code, err = twinCLI(t, d, "--json", "scene", "put", f)
	var r amlapp.SceneSummary
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Hash != h2 || r.Status != "draft" || r.SceneVersion != "1.1.0" {
		t.Fatalf("put file: %d %v\n%s", code, err, out)
	}

	// show: latest version by default, human summary.
	out, code, err = twinCLI(t, d, "scene", "show", def.SceneID, "--version", "1.0.0")
	if code != 0 || !strings.Contains(out, "status draft") || !strings.Contains(out, "hash "+h) || !strings.Contains(out, "maxStep") ||
		!strings.Contains(out, "controls (") || !strings.Contains(out, "write policy:") {
		t.Fatalf("show: %d %v\n%s", code, err, out)
	}
	for _, v := range def.Controls {
		if !strings.Contains(out, v.ID) {
			t.Fatalf("show lacks control %s:\n%s", v.ID, out)
		}
	}

	// freeze: stale hash → AML_CONFLICT, exit 1, nothing changes.
	stale := strings.Repeat("0", 64)
	_, code, err = twinCLI(t, d, "scene", "freeze", def.SceneID, "--version", "1.0.0", "--expect-hash", stale, "--by", "bob")
	if code != 1 || core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("stale freeze: %d %v", code, err)
	}
	// usage errors → exit 2.
	if _, code, err = twinCLI(t, d, "scene", "freeze", def.SceneID, "--expect-hash", h); code != 2 {
		t.Fatalf("freeze without --version: %d %v", code, err)
	}
	if _, code, err = twinCLI(t, d, "scene", "put"); code != 2 {
		t.Fatalf("put without file: %d %v", code, err)
	}
	if _, code, err = twinCLI(t, d, "scene", "put", "--default-injection", f); code != 2 {
		t.Fatalf("put with both: %d %v", code, err)
	}

	t.Setenv("USER", "carol")
	out, code, err = twinCLI(t, d, "scene", "freeze", def.SceneID, "--version", "1.0.0", "--expect-hash", h)
	if code != 0 || !strings.Contains(out, "frozen by carol") {
		t.Fatalf("freeze: %d %v\n%s", code, err, out)
	}
	// A second freeze and a put over the frozen scene are refused.
	if _, code, err = twinCLI(t, d, "scene", "freeze", def.SceneID, "--version", "1.0.0", "--expect-hash", h); code != 1 || core.CodeOf(err) != contract.CodeSceneFrozen {
		t.Fatalf("refreeze: %d %v", code, err)
	}
	if _, code, err = twinCLI(t, d, "scene", "put", "--default-injection"); code != 1 || core.CodeOf(err) != contract.CodeSceneFrozen {
		t.Fatalf("put over frozen: %d %v", code, err)
	}

	// show --json: the full frozen contract with its hash.
	out, code, err = twinCLI(t, d, "--json", "scene", "show", def.SceneID, "--version", "1.0.0")
	if code != 0 {
		t.Fatalf("show json: %d %v", code, err)
	}
	var shown struct {
		Scene json.RawMessage
		Hash  string
	}
	mustJSON(t, out, &shown)
	got, err := contract.ParseScene(shown.Scene)
	if err != nil || got.Status != contract.SceneFrozen || got.FrozenBy != "carol" || shown.Hash != h {
		t.Fatalf("show json: %v\n%s", err, out)
	}
	if gh, _ := got.Hash(); gh != h {
		t.Fatalf("frozen hash %s, want %s", gh, h)
	}
	// list: both versions, the frozen one and the draft.
	out, code, err = twinCLI(t, d, "--json", "scene", "list", "--line", def.LineID)
	var scenes []amlapp.SceneSummary
	if mustJSON(t, out, &scenes); code != 0 || len(scenes) != 2 {
		t.Fatalf("list: %d %v\n%s", code, err, out)
	}
	if out, _, _ = twinCLI(t, d, "scene", "list"); !strings.Contains(out, "frozen") || !strings.Contains(out, "2 scene(s)") {
		t.Fatalf("list:\n%s", out)
	}
	// Latest version is 1.1.0, still a draft.
	out, code, _ = twinCLI(t, d, "scene", "show", def.SceneID)
	if code != 0 || !strings.Contains(out, "version 1.1.0") || !strings.Contains(out, "status draft") {
		t.Fatalf("show latest: %d\n%s", code, out)
	}
	if _, code, err = twinCLI(t, d, "scene", "show", "nope"); code != 1 || core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("show missing: %d %v", code, err)
	}

	// The audit log holds put, put, freeze and verifies.
	s, err := sqlite.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	res, err := audit.New(s.SQL()).Verify(context.Background())
	if err != nil || !res.OK || res.Entries != 3 {
		t.Fatalf("audit: %v %+v", err, res)
	}
}
