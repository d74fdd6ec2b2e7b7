package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// simDataset makes a data dir with a small simulated dataset and returns
// the dir and the dataset id.
func simDataset(t *testing.T) (string, string) {
	t.Helper()
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "5", "--seed", "4", "--duration", "8m", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile("../../examples/specs/injection.json")
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["stride"] = 5
	spec["split"].(map[string]any)["valRatio"] = 0.2
	spec["split"].(map[string]any)["testRatio"] = 0.2
	sb, _ := json.Marshal(spec)
	if err := os.WriteFile(d+"/spec.json", sb, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := aml(t, "dataset", "build", "--spec", d+"/spec.json", "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var res struct {
		Dataset struct{ ID string } `json:"dataset"`
	}
	mustJSON(t, out, &res)
	return d, res.Dataset.ID
}

func TestJobCLI(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	d, ds := simDataset(t)
	out, errs, code := aml(t, "job", "submit", "--dataset", ds, "--trainer", "test_mean@1", "--params", `{"steps":3,"stepMs":10}`, "--wait", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("submit --wait: %d %s", code, errs)
	}
	var j struct {
		ID, Status, ModelID string
	}
	mustJSON(t, out, &j)
	if j.Status != "done" || j.ModelID == "" {
		t.Fatalf("job %+v", j)
	}
	out, _, _ = aml(t, "job", "status", j.ID, "--data", d)
	if !strings.Contains(out, "status    done") || !strings.Contains(out, "computed by the platform") {
		t.Fatalf("status:\n%s", out)
	}
	out, _, _ = aml(t, "model", "show", j.ModelID, "--data", d)
	if !strings.Contains(out, "upstream-mpc-v2 v2: passed=false") || !strings.Contains(out, "FAIL G1") {
		t.Fatalf("model card:\n%s", out)
	}
	// Predict from the middle of a run, through the training pipeline.
	out, _, _ = aml(t, "runs", "list", "--data", d, "--json")
	var runs []struct {
		ID      string `json:"id"`
		Started int64  `json:"startedAtMs"`
	}
	mustJSON(t, out, &runs)
	at := fmt.Sprint(runs[1].Started + 4*60*1000)
	out, errs, code = aml(t, "model", "predict", j.ModelID, "--run", runs[1].ID, "--from", at, "--steps", "3", "--data", d, "--json")
	var pr struct {
		Steps []struct {
			Pred     []float64  `json:"prediction"`
			Measured []*float64 `json:"measured"`
		} `json:"steps"`
	}
	mustJSON(t, out, &pr)
	if code != 0 || len(pr.Steps) != 3 || len(pr.Steps[0].Pred) != 3 {
		t.Fatalf("predict: %d %q %+v", code, errs, pr)
	}
	if _, errs, code = aml(t, "model", "predict", j.ModelID, "--run", runs[1].ID, "--from", at, "--steps", "99", "--data", d); code != 1 || !strings.Contains(errs, "AML_INVALID_ARGUMENT: steps") {
		t.Fatalf("too many steps: %d %q", code, errs)
	}
	_, errs, code = aml(t, "model", "promote", j.ModelID, "--to", "production", "--data", d)
	if code != 1 || !strings.Contains(errs, "AML_GATE_FAILED") {
		t.Fatalf("promote failing model: %d %q", code, errs)
	}
	if _, errs, code = aml(t, "model", "promote", j.ModelID, "--to", "shadow", "--expect", "production", "--data", d); code != 1 || !strings.Contains(errs, "AML_STAGE_RACE") {
		t.Fatalf("stale expectation: %q", errs)
	}
	// Queued (no worker) then cancelled.
	out, _, code = aml(t, "job", "submit", "--dataset", ds, "--trainer", "test_mean@1", "--data", d, "--json")
	mustJSON(t, out, &j)
	if code != 0 || j.Status != "queued" {
		t.Fatalf("queued: %+v", j)
	}
	out, _, code = aml(t, "job", "cancel", j.ID, "--data", d, "--json")
	mustJSON(t, out, &j)
	if code != 0 || j.Status != "cancelled" {
		t.Fatalf("cancel queued: %+v", j)
	}
	if _, errs, code = aml(t, "job", "cancel", j.ID, "--data", d); code != 1 || !strings.Contains(errs, "AML_JOB_CONFLICT") {
		t.Fatalf("cancel twice: %q", errs)
	}
	// A failing trainer: exit 1 with the job's error code.
	_, errs, code = aml(t, "job", "submit", "--dataset", ds, "--trainer", "test_mean@1", "--params", `{"fail":true}`, "--wait", "--data", d)
	if code != 1 || !strings.Contains(errs, "AML_TRAINER_FAILED") {
		t.Fatalf("failing job: %d %q", code, errs)
	}
	if _, errs, code = aml(t, "job", "submit", "--dataset", ds, "--trainer", "nope@1", "--data", d); code != 1 || !strings.Contains(errs, "unknown trainer") {
		t.Fatalf("unknown trainer: %q", errs)
	}
	if _, errs, code = aml(t, "dataset", "delete", ds, "--data", d); code != 1 || !strings.Contains(errs, "AML_IN_USE") {
		t.Fatalf("delete used dataset: %q", errs)
	}
	out, _, _ = aml(t, "job", "list", "--data", d, "--json")
	var list []struct{ Status string }
	mustJSON(t, out, &list)
	if len(list) != 3 {
		t.Fatalf("%d jobs", len(list))
	}
}

// TestWorkerKilledMidJob kills an `aml worker` process with SIGKILL while it
// trains; a new worker recovers the job (requeued, second attempt) and
// finishes it. No job stays active and each ends in exactly one terminal state.
func TestWorkerKilledMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short mode")
	}
	bin := buildBinary(t)
	t.Setenv("AML_TEST_TRAINERS", "1")
	d, ds := simDataset(t)
	out, errs, code := aml(t, "job", "submit", "--dataset", ds, "--trainer", "test_mean@1", "--params", `{"steps":40,"stepMs":50}`, "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var j struct {
		ID      string
		Status  string
		Attempt int
		Retry   int `json:"retryCount"`
	}
	mustJSON(t, out, &j)
	startWorker := func() *exec.Cmd {
		w := exec.Command(bin, "worker", "--data", d)
		w.Env = append(os.Environ(), "AML_TEST_TRAINERS=1")
		var eb bytes.Buffer
		w.Stderr = &eb
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	status := func() {
		o, _, _ := aml(t, "job", "status", j.ID, "--data", d, "--json")
		mustJSON(t, o, &j)
	}
	w := startWorker()
	deadline := time.Now().Add(60 * time.Second)
	for status(); j.Status != "training" && time.Now().Before(deadline); status() {
		time.Sleep(50 * time.Millisecond)
	}
	if j.Status != "training" {
		_ = w.Process.Kill() // failing anyway
		t.Fatalf("job never trained: %s", j.Status)
	}
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.Wait() // "signal: killed": reaped, which is all that is wanted
	status()
	if j.Status != "training" {
		t.Fatalf("status right after the kill: %s", j.Status)
	}
	w2 := startWorker()
	defer func() { _ = w2.Process.Signal(syscall.SIGTERM); _ = w2.Wait() }() // teardown: its job is checked below
	deadline = time.Now().Add(90 * time.Second)
	for status(); j.Status != "done" && time.Now().Before(deadline); status() {
		time.Sleep(100 * time.Millisecond)
	}
	if j.Status != "done" || j.Attempt != 2 || j.Retry != 1 {
		t.Fatalf("after recovery: %+v", j)
	}
	o, _, _ := aml(t, "model", "list", "--data", d, "--json")
	var models []struct{ JobID string }
	mustJSON(t, o, &models)
	if len(models) != 1 {
		t.Fatalf("%d models for one job", len(models))
	}
}

func TestJobLogs(t *testing.T) {
	d, ds := simDataset(t)
	script := d + "/trainer.sh"
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello-from-trainer\necho '##AML {\"type\":\"progress\",\"progress\":0.5}'\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errs, code := aml(t, "job", "submit", "--dataset", ds, "--trainer", "exec:"+script, "--wait", "--data", d, "--json")
	var j struct{ ID, Status, ErrorCode string }
	mustJSON(t, out, &j)
	if code != 1 || j.Status != "failed" || !strings.Contains(errs, "AML_TRAINER_FAILED") {
		t.Fatalf("failing exec trainer: %d %+v %q", code, j, errs)
	}
	out, _, code = aml(t, "job", "logs", j.ID, "--data", d)
	if code != 0 || !strings.Contains(out, "hello-from-trainer") || !strings.Contains(out, `##AML {"type":"progress"`) {
		t.Fatalf("logs:\n%s", out)
	}
	out, _, code = aml(t, "job", "logs", j.ID, "-f", "--data", d)
	if code != 0 || !strings.Contains(out, "hello-from-trainer") {
		t.Fatalf("logs -f of a finished job:\n%s", out)
	}
}

// TestJobSubmitGateProfileCLI: --gate-profile names the profile the model
// is judged by (shown with its version on the model card); an unknown one
// is refused, naming the known profiles; aml gate profiles lists G6 with
// its threshold.
func TestJobSubmitGateProfileCLI(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	d, ds := simDataset(t)
	_, errs, code := aml(t, "job", "submit", "--dataset", ds, "--trainer", "test_mean@1", "--gate-profile", "upstream-mpc-v0", "--data", d)
	if code == 0 || !strings.Contains(errs, "AML_INVALID_ARGUMENT") || !strings.Contains(errs, "upstream-mpc-v2") || !strings.Contains(errs, "gateProfile") {
		t.Fatalf("unknown profile: %d %s", code, errs)
	}
	out, errs, code := aml(t, "job", "submit", "--dataset", ds, "--trainer", "test_mean@1", "--params", `{"steps":1,"stepMs":1}`,
		"--gate-profile", "upstream-mpc-v1", "--wait", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errs)
	}
	var j struct{ ModelID, GateProfile string }
	mustJSON(t, out, &j)
	if j.GateProfile != "upstream-mpc-v1" {
		t.Fatalf("job %+v", j)
	}
	if out, _, _ = aml(t, "model", "show", j.ModelID, "--data", d); !strings.Contains(out, "gates     upstream-mpc-v1 v1: passed=false") || strings.Contains(out, " G6 ") {
		t.Fatalf("model card:\n%s", out)
	}
	out, _, _ = aml(t, "gate", "profiles", "--data", d)
	if !strings.Contains(out, "model gate upstream-mpc-v2 v2, purpose mpc_surrogate (default for mpc_surrogate)") ||
		!strings.Contains(out, "  G6   interval coverage (test) at its level    test.intervalCoverageError <= 0.05 (or 3σ of the measurement, if wider)") {
		t.Fatalf("gate profiles:\n%s", out)
	}
}
