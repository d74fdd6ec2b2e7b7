package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeGracefulShutdown runs `aml serve` as a process: API, metrics,
// MCP and UI mounted behind tokens; a job runs on its worker; SIGTERM
// ends the process cleanly and the running job is handed back to the
// queue (or marked interrupted), never left active.
func TestServeGracefulShutdown(t *testing.T) {
	bin := buildBinary(t)
	d, ds := simDataset(t)
	out, errs, code := aml(t, "token", "create", "--role", "engineer", "--name", "erin", "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var tk struct{ Token string }
	mustJSON(t, out, &tk)

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", d, "--workers", "1", "--grace", "20s")
	cmd.Env = append(os.Environ(), "AML_TEST_TRAINERS=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }() // teardown; "already finished" once the test stopped it
	sc := bufio.NewScanner(stderr)
	var base string
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if base == "" {
		t.Fatal("serve did not print its address")
	}
	var logTail strings.Builder
	tailDone := make(chan struct{})
	go func() { _, _ = io.Copy(&logTail, stderr); close(tailDone) }() // until serve exits

	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tk.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	if st, b := call("GET", "/api/v1/runs", ""); st != 200 {
		t.Fatalf("runs: %d %s", st, b)
	}
	if st, _ := call("GET", "/metrics", ""); st != 200 {
		t.Fatalf("metrics: %d", st)
	}
	res, err := http.Get(base + "/api/v1/runs")
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("tokenless request: %v %v", res.StatusCode, err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if res, err := noRedirect.Get(base + "/ui/"); err != nil || res.StatusCode/100 != 3 {
		t.Fatalf("UI without a session should redirect to its login page: %v %v", res, err)
	}
	if st, _ := call("GET", "/mcp", ""); st == 404 {
		t.Fatal("MCP not mounted")
	}

	st, b := call("POST", "/api/v1/jobs", `{"datasetId":"`+ds+`","trainer":"test_mean@1","params":{"steps":400,"stepMs":50}}`)
	if st != 201 {
		t.Fatalf("submit: %d %s", st, b)
	}
	var j struct{ ID, Status string }
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for j.Status != "training" {
		if time.Now().After(deadline) {
			t.Fatalf("job never started: %s", j.Status)
		}
		time.Sleep(50 * time.Millisecond)
		_, b = call("GET", "/api/v1/jobs/"+j.ID, "")
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { <-tailDone; waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, logTail.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not shut down")
	}
	if !strings.Contains(logTail.String(), "shutting down") {
		t.Fatalf("log: %s", logTail.String())
	}
	out, errs, code = aml(t, "job", "status", j.ID, "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	mustJSON(t, out, &j)
	if j.Status != "queued" && j.Status != "interrupted" {
		t.Fatalf("running job left %s after shutdown", j.Status)
	}
}
