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
cat "$OUTSIDE/keep.txt" >/dev/null 2>&1 && echo "outside read ok" || echo "outside read refused"
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
	if !res.WriteRestricted || !res.ReadRestricted {
		t.Fatalf("WriteRestricted %v ReadRestricted %v under Landlock", res.WriteRestricted, res.ReadRestricted)
	}
	for _, s := range []string{"inside ok", "mkdir ok", "tmp ok", "devnull ok", "extra ok", "outside rm refused", "outside read refused"} {
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

// TestSec8_SandboxRestrictsReads: under Landlock a trainer reads its job
// directory, the paths granted (the dataset) and the system's libraries,
// not the data directory around them (the database, the signing key, other
// jobs) nor the server's /proc entry; a granted path containing the data
// directory is dropped with a note.
func TestSec8_SandboxRestrictsReads(t *testing.T) {
	if landlockABI() < 1 || !shimPossible() {
		dir := jobDir(t)
		res, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{"/bin/true"}}, nil)
		if err != nil || res.ReadRestricted || !strings.Contains(readLog(t, res), "Landlock is not available") {
			t.Fatalf("fallback not said in the log: %v %+v", err, res)
		}
		t.Skip("Landlock is not available on this kernel: reads are not restricted (the log says so)")
	}
	data := jobDir(t)
	for _, d := range []string{"jobs/j1", "jobs/other", "datasets/ds1"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for f, c := range map[string]string{"aml.db": "TOKEN-HASHES", "cert-key.json": "PRIVATE", "jobs/other/job.json": "OTHER", "datasets/ds1/manifest.json": "{}"} {
		if err := os.WriteFile(filepath.Join(data, f), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `
cat "$DATA/aml.db" >/dev/null 2>&1 && echo "db READ" || echo "db refused"
cat "$DATA/cert-key.json" >/dev/null 2>&1 && echo "key READ" || echo "key refused"
cat "$DATA/jobs/other/job.json" >/dev/null 2>&1 && echo "other job READ" || echo "other job refused"
ls "$DATA" >/dev/null 2>&1 && echo "data dir LISTED" || echo "data dir refused"
cat "$DATA/datasets/ds1/manifest.json" >/dev/null && echo "dataset ok"
echo x > own.txt && cat own.txt >/dev/null && echo "job dir ok"
cat /proc/$PPID/environ >/dev/null 2>&1 && echo "parent environ READ" || echo "parent environ refused"
cat /proc/$$/status >/dev/null && echo "own proc ok"
/usr/bin/env true && echo "exec ok"
echo '##AML {"type":"done"}'
`
	jd := filepath.Join(data, "jobs", "j1")
	res, err := Run(context.Background(), Spec{JobDir: jd, Command: []string{"/bin/sh", "-c", script},
		Readable: []string{filepath.Join(data, "datasets", "ds1"), filepath.Dir(data)}, Protect: []string{data},
		Env: map[string]string{"DATA": data}}, nil)
	if err != nil || !res.Done || !res.ReadRestricted {
		t.Fatalf("%v %+v", err, res)
	}
	log := readLog(t, res)
	for _, s := range []string{"db refused", "key refused", "other job refused", "data dir refused", "dataset ok", "job dir ok",
		"parent environ refused", "own proc ok", "exec ok", "is not made readable: it contains the data directory"} {
		if !strings.Contains(log, s) {
			t.Errorf("%q missing from the log:\n%s", s, log)
		}
	}
}
