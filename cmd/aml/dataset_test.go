package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary compiles aml once per test that needs a real process.
// buildBinary builds the aml binary once per test process (tests that run
// it as a separate process share it); TestMain removes it.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "aml-test-bin-")
		if binErr != nil {
			return
		}
		bin := filepath.Join(binDir, "aml")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce         sync.Once
	binDir, binPath string
	binErr          error
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{binDir, demoFix.dir} {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "remove test directory:", err)
		}
	}
	os.Exit(code)
}

func TestDatasetCLI(t *testing.T) {
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "12", "--seed", "7", "--duration", "10m", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	spec := "../../examples/specs/injection.json"
	out, errs, code := aml(t, "dataset", "build", "--spec", spec, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("build: %s", errs)
	}
	var b struct {
		Dataset struct {
			ID              string `json:"id"`
			SHA256          string `json:"sha256"`
			Path            string `json:"path"`
			TrainWindows    int    `json:"trainWindows"`
			LineageVerified bool   `json:"lineageVerified"`
		} `json:"dataset"`
	}
	mustJSON(t, out, &b)
	id := b.Dataset.ID
	if id == "" || b.Dataset.TrainWindows == 0 || !b.Dataset.LineageVerified {
		t.Fatalf("build result %+v", b)
	}
	out, _, _ = aml(t, "dataset", "list", "--data", d, "--json")
	var list []struct{ ID string }
	mustJSON(t, out, &list)
	if len(list) != 1 || list[0].ID != id {
		t.Fatalf("list %+v", list)
	}
	if out, errs, code = aml(t, "dataset", "verify", id, "--data", d); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("verify: %d %s %s", code, out, errs)
	}
	out, _, code = aml(t, "dataset", "report", id, "--data", d)
	for _, want := range []string{"per node, over all train runs", "HAMPEL", "lag cross-correlation", "part_weight"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("report lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = aml(t, "dataset", "report", id, "--data", d, "--json")
	var rep struct {
		Nodes []struct {
			NodeID   string                             `json:"nodeId"`
			Cleaning struct{ State, Range, Hampel int } `json:"cleaning"`
		} `json:"nodes"`
	}
	mustJSON(t, out, &rep)
	var st, rg, hp int
	for _, n := range rep.Nodes {
		st, rg, hp = st+n.Cleaning.State, rg+n.Cleaning.Range, hp+n.Cleaning.Hampel
	}
	if st == 0 || rg == 0 || hp == 0 {
		t.Fatalf("cleaning counts state %d range %d hampel %d", st, rg, hp)
	}
	if out, _, code = aml(t, "dataset", "show", id, "--data", d); code != 0 || !strings.Contains(out, "lineage  verified=true") {
		t.Fatalf("show:\n%s", out)
	}
	// Tamper one byte → verify fails with the stable code and exit 1.
	y := filepath.Join(d, b.Dataset.Path, "arrays", "y.f32")
	raw, _ := os.ReadFile(y)
	raw[len(raw)/3] ^= 0x40
	if err := os.WriteFile(y, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = aml(t, "dataset", "verify", id, "--data", d)
	if code != 1 || !strings.HasPrefix(errs, "error: AML_DATASET_TAMPERED: ") || !strings.Contains(errs, "arrays/y.f32") {
		t.Fatalf("tampered verify: %d %q", code, errs)
	}
	// A bad spec reports every problem with its field.
	bad := filepath.Join(d, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"lineId":"","productId":"p","recipeId":"r","nodes":[{"nodeId":"a","role":"target"}],"beatMs":0,"historySteps":1,"horizonSteps":1,"split":{"valRatio":0.9,"testRatio":0.1,"seed":1},"purpose":"mpc_surrogate"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = aml(t, "dataset", "build", "--spec", bad, "--data", d)
	if code != 1 || !strings.HasPrefix(errs, "error: AML_SPEC_INVALID: ") || !strings.Contains(errs, "lineId") || !strings.Contains(errs, "beatMs") || !strings.Contains(errs, "nodes") {
		t.Fatalf("bad spec: %d %q", code, errs)
	}
	// Quota: nothing written.
	_, errs, code = aml(t, "dataset", "build", "--spec", spec, "--data", d, "--max-windows", "10")
	if code != 1 || !strings.Contains(errs, "AML_QUOTA_EXCEEDED") {
		t.Fatalf("quota: %d %q", code, errs)
	}
	if _, _, code = aml(t, "dataset", "delete", id, "--data", d); code != 0 {
		t.Fatal("delete failed")
	}
	if _, err := os.Stat(filepath.Join(d, b.Dataset.Path)); !os.IsNotExist(err) {
		t.Fatalf("files left after delete: %v", err)
	}
	if _, errs, code = aml(t, "dataset", "show", id, "--data", d); code != 1 || !strings.Contains(errs, "AML_NOT_FOUND") {
		t.Fatalf("show deleted: %q", errs)
	}
}

// TestDatasetBuildKilledMidWrite kills the build process while it writes
// the dataset files: nothing may be registered, and the next build succeeds
// (and clears the dead build's temporary directory).
func TestDatasetBuildKilledMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short mode")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	if out, err := exec.Command(bin, "sim", "injection", "--runs", "6", "--seed", "2", "--duration", "10m", "--data", d).CombinedOutput(); err != nil {
		t.Fatalf("sim: %v %s", err, out)
	}
	spec := "../../examples/specs/injection.json"
	cmd := exec.Command(bin, "dataset", "build", "--spec", spec, "--data", d)
	cmd.Env = append(os.Environ(), "AML_DEBUG_DATASET_WRITE_DELAY=30s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the build is writing: its temp dir holds the grid array.
	deadline := time.Now().Add(60 * time.Second)
	var tmp string
	for tmp == "" && time.Now().Before(deadline) {
		m, _ := filepath.Glob(filepath.Join(d, "datasets", ".tmp-*", "arrays", "grid.f32"))
		if len(m) > 0 {
			tmp = filepath.Dir(filepath.Dir(m[0]))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tmp == "" {
		_ = cmd.Process.Kill() // failing anyway
		t.Fatal("build never started writing")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed": reaped, which is all that is wanted
	out, err := exec.Command(bin, "dataset", "list", "--data", d, "--json").Output()
	if err != nil || strings.TrimSpace(string(out)) != "[]" {
		t.Fatalf("after kill: %v %s", err, out)
	}
	ents, _ := os.ReadDir(filepath.Join(d, "datasets"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("a dataset directory appeared under its final name: %s", e.Name())
		}
	}
	out, err = exec.Command(bin, "dataset", "build", "--spec", spec, "--data", d, "--json").Output()
	if err != nil {
		t.Fatalf("next build: %v %s", err, out)
	}
	var b struct {
		Dataset struct{ ID string } `json:"dataset"`
	}
	mustJSON(t, string(out), &b)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("dead build's temp dir not cleaned: %v", err)
	}
	if out, err := exec.Command(bin, "dataset", "verify", b.Dataset.ID, "--data", d).CombinedOutput(); err != nil {
		t.Fatalf("verify: %v %s", err, out)
	}
}
