package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/envlease"
	"github.com/spf13/cobra"
)

// envCLI runs `aml env ARGS` on data dir d through newEnvCmd, under a
// parent that declares --json the way the root command does.
func envCLI(t *testing.T, d string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{dataDir: d, stdout: &out, stderr: &errb}
	root := &cobra.Command{Use: "aml", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "")
	root.AddCommand(newEnvCmd(a))
	root.SetArgs(append([]string{"env"}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func TestEnvCLI(t *testing.T) {
	d := t.TempDir()
	cfg := `[{"name":"t","dir":"envs/t","rebuild":["sh","-c","echo built"],"description":"test env"}]`
	if err := os.WriteFile(filepath.Join(d, "envs.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	out, errs, err := envCLI(t, d, "rebuild", "t", "--owner", "tester", "--json")
	if err != nil {
		t.Fatalf("rebuild: %v (%s)", err, errs)
	}
	var res struct {
		Name     string `json:"name"`
		OK       bool   `json:"ok"`
		ExitCode int    `json:"exitCode"`
		Owner    string `json:"owner"`
	}
	mustJSON(t, out, &res)
	if res.Name != "t" || !res.OK || res.ExitCode != 0 || res.Owner != "tester" {
		t.Fatalf("rebuild result %+v", res)
	}
	if errs != "built\n" {
		t.Fatalf("rebuild output not streamed to stderr: %q", errs)
	}

	out, _, err = envCLI(t, d, "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct {
		Name        string          `json:"name"`
		Dir         string          `json:"dir"`
		Readers     int             `json:"readers"`
		Holders     []any           `json:"holders"`
		Rebuilding  json.RawMessage `json:"rebuilding"`
		Stale       bool            `json:"stale"`
		LastRebuild *struct {
			OK      bool   `json:"ok"`
			Owner   string `json:"owner"`
			Seconds float64
		} `json:"lastRebuild"`
	}
	mustJSON(t, out, &list)
	if len(list) != 1 || list[0].Name != "t" || list[0].Readers != 0 || list[0].Holders == nil || string(list[0].Rebuilding) != "null" || list[0].Stale ||
		list[0].LastRebuild == nil || !list[0].LastRebuild.OK || list[0].LastRebuild.Owner != "tester" || !strings.HasSuffix(list[0].Dir, filepath.Join("envs", "t")) {
		t.Fatalf("list %s", out)
	}

	// A job holding a lease (another Manager, as a worker process would):
	// rebuild refused with ENV_BUSY, listed as a reader.
	m, err := envlease.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(context.Background(), "t", "job-7")
	if err != nil {
		t.Fatal(err)
	}
	out, errs, err = envCLI(t, d, "rebuild", "t")
	if core.CodeOf(err) != core.CodeEnvBusy || !strings.Contains(err.Error(), `"job-7"`) || out != "" || errs != "" {
		t.Fatalf("rebuild while leased: %v; stdout %q stderr %q", err, out, errs)
	}
	out, _, _ = envCLI(t, d, "list")
	if !strings.Contains(out, "NAME  READERS  REBUILDING  STALE  LAST-REBUILD") || !strings.Contains(out, "t     1        -           -      ") || !strings.Contains(out, " ok ") {
		t.Fatalf("human list:\n%s", out)
	}
	l.Release()

	// A stale lock (dead pid): listed with how to clear it, rebuild refused,
	// unlock removes it.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	lock, _ := json.Marshal(envlease.LockInfo{Owner: "crashed", PID: c.Process.Pid, Hostname: host, HeartbeatAt: 1, Token: "x", StartedAt: 1})
	lockPath := filepath.Join(d, "runtime", "env-t.lock")
	if err := os.WriteFile(lockPath, lock, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ = envCLI(t, d, "list")
	if !strings.Contains(out, "lock looks stale") || !strings.Contains(out, "aml env unlock t --force") {
		t.Fatalf("stale lock not reported:\n%s", out)
	}
	_, _, err = envCLI(t, d, "rebuild", "t")
	if core.CodeOf(err) != core.CodeEnvBusy || !strings.Contains(err.Error(), "looks stale") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", c.Process.Pid)) {
		t.Fatalf("rebuild with stale lock: %v", err)
	}
	if _, err := os.Stat(lockPath); err != nil {
		t.Fatal("rebuild deleted the stale lock")
	}
	out, _, err = envCLI(t, d, "unlock", "t")
	if err != nil || !strings.Contains(out, `removed the lock of "t"`) {
		t.Fatalf("unlock: %v\n%s", err, out)
	}

	// Failing command: ENV_REBUILD_FAILED with its exit status.
	if err := os.WriteFile(filepath.Join(d, "envs.json"), []byte(`[{"name":"t","rebuild":["sh","-c","exit 4"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = envCLI(t, d, "rebuild", "t")
	if core.CodeOf(err) != envlease.CodeRebuildFailed || !strings.Contains(err.Error(), "status 4") {
		t.Fatalf("failing rebuild: %v", err)
	}
	// Usage and unknown names.
	if _, _, err := envCLI(t, d, "rebuild"); err == nil || !strings.Contains(err.Error(), "takes 1 argument") {
		t.Fatalf("rebuild without name: %v", err)
	}
	if _, _, err := envCLI(t, d, "unlock", "ghost"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unlock ghost: %v", err)
	}
}

// Through the root command: exit status and the one-line error.
func TestEnvCLIErrorLine(t *testing.T) {
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "envs.json"), []byte(`[{"name":"t","rebuild":["true"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := envlease.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(context.Background(), "t", "job-9")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	out, errs, code := aml(t, "env", "rebuild", "t", "--data", d, "--json")
	if code != 1 || !strings.HasPrefix(errs, `error: ENV_BUSY: rebuild refused: environment "t" is in use by 1 job(s)`) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	// Under --json the error is stdout's one document too.
	var doc struct {
		Error struct{ Code, Message string }
	}
	mustJSON(t, out, &doc)
	if doc.Error.Code != "ENV_BUSY" || !strings.Contains(doc.Error.Message, "in use by 1 job(s)") {
		t.Fatalf("--json error document %q", out)
	}
	if _, errs, code := aml(t, "env", "unlock", "--data", d); code != 2 || !strings.Contains(errs, "AML_USAGE") {
		t.Fatalf("unlock without a name: %d %q", code, errs)
	}
}
