//go:build linux

package extrun

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func TestSandboxRestrictsWrites(t *testing.T) {
	abi := landlockABI()
	if abi < 1 || !shimPossible() {
		dir := jobDir(t)
		_, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{"/bin/true"}, Sandbox: SandboxRequire}, nil)
		if core.CodeOf(err) != CodeTrainerStartFailed {
			t.Fatalf("SandboxRequire without Landlock: %v", err)
		}
		t.Skip("Landlock is not available on this kernel: writes outside JobDir are not prevented")
	}
	outside := jobDir(t)
	extra := jobDir(t)
	victim := exec.Command("sleep", "100")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }() // teardown: "signal: killed"
	script := `
set -u
echo ok > inside.txt && echo "inside ok"
mkdir -p artifacts/sub && echo m > artifacts/sub/model.json && echo "mkdir ok"
echo x > "$TMPDIR/t" && echo "tmp ok"
echo x > /dev/null && echo "devnull ok"
echo x > "$EXTRA/extra.txt" && echo "extra ok"
echo x > "$OUTSIDE/escape.txt" 2>/dev/null && echo "outside WRITTEN"
rm -f "$OUTSIDE/keep.txt" 2>/dev/null; [ -e "$OUTSIDE/keep.txt" ] && echo "outside rm refused"
cat "$OUTSIDE/keep.txt" >/dev/null && echo "outside read ok"
kill -0 "$VICTIM" 2>/dev/null && echo "signal SENT" || echo "signal refused"
echo '##AML {"type":"done"}'
`
	if err := os.WriteFile(filepath.Join(outside, "keep.txt"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(mode string) (Result, string) {
		dir := jobDir(t)
		res, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{"/bin/sh", "-c", script}, Sandbox: mode,
			ExtraWritable: []string{extra},
			Env:           map[string]string{"OUTSIDE": outside, "EXTRA": extra, "VICTIM": strconv.Itoa(victim.Process.Pid)}}, nil)
		if err != nil || !res.Done {
			t.Fatalf("%s: %v %+v", mode, err, res)
		}
		return res, readLog(t, res)
	}

	res, log := run(SandboxRequire)
	if !res.WriteRestricted {
		t.Fatalf("WriteRestricted false under Landlock")
	}
	for _, s := range []string{"inside ok", "mkdir ok", "tmp ok", "devnull ok", "extra ok", "outside rm refused", "outside read ok"} {
		if !strings.Contains(log, s+"\n") {
			t.Errorf("sandboxed: %q missing from the log:\n%s", s, log)
		}
	}
	if strings.Contains(log, "outside WRITTEN") {
		t.Errorf("sandboxed child wrote outside JobDir")
	}
	if _, err := os.Stat(filepath.Join(outside, "escape.txt")); err == nil {
		t.Errorf("escape.txt exists")
	}
	if abi >= 6 && !strings.Contains(log, "signal refused") {
		t.Errorf("sandboxed child could signal a process outside its domain:\n%s", log)
	}

	res, log = run(SandboxOff)
	if res.WriteRestricted || !strings.Contains(log, "outside WRITTEN") {
		t.Fatalf("SandboxOff: restricted %v, log:\n%s", res.WriteRestricted, log)
	}
}

func TestSandboxShimStartFailure(t *testing.T) {
	if landlockABI() < 1 || !shimPossible() {
		t.Skip("Landlock is not available")
	}
	// ExtraWritable must exist; the shim reports exec failures as start
	// failures.
	dir := jobDir(t)
	f := filepath.Join(dir, "notexec")
	if err := os.WriteFile(f, []byte("x"), 0o755); err != nil { // executable bit, but not a valid program
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{f}, Sandbox: SandboxRequire}, nil)
	if core.CodeOf(err) != CodeTrainerStartFailed || res.Reason != ReasonStartFailed || !strings.Contains(res.LastError, "exec") {
		t.Fatalf("%v %+v", err, res)
	}
}
