//go:build unix

package extrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// jobDir returns a fresh absolute job directory.
func jobDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sh runs script with /bin/sh in a fresh job directory.
func sh(t *testing.T, spec Spec, script string) (Result, []Event, error) {
	t.Helper()
	if spec.JobDir == "" {
		spec.JobDir = jobDir(t)
	}
	spec.Command = []string{"/bin/sh", "-c", script}
	var mu sync.Mutex
	var evs []Event
	res, err := Run(context.Background(), spec, func(e Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	})
	return res, evs, err
}

func readLog(t *testing.T, res Result) string {
	t.Helper()
	var b bytes.Buffer
	for _, f := range res.LogFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

func TestEventsParsed(t *testing.T) {
	script := `
echo 'hello on stdout'
echo 'hello on stderr' >&2
echo '##AML {"type":"stage","stage":"load","message":"reading"}'
echo '##AML {"type":"progress","progress":0.25}'
echo '##AML {"type":"progress","pct":50}'
echo '##AML {"type":"progress","progress":1.7}'
echo '##AML {"type":"metrics","source":"trainer-reported","rmse":1.5}'
echo '##AML {"type":"error","message":"minor trouble"}'
echo '##AML {"type":"stage","stage":"fake"}' >&2
echo '##AML {"type":"done","artifact":"model.json"}'
`
	res, evs, err := sh(t, Spec{}, script)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonExited || res.ExitCode != 0 || res.Signal != "" {
		t.Fatalf("result %+v", res)
	}
	if res.Events != 7 || len(evs) != 7 || res.Malformed != 0 || res.Lines != 10 {
		t.Fatalf("events %d (callback %d), malformed %d, lines %d", res.Events, len(evs), res.Malformed, res.Lines)
	}
	want := []string{"stage", "progress", "progress", "progress", "metrics", "error", "done"}
	for i, e := range evs {
		if e.Type != want[i] {
			t.Fatalf("event %d type %q, want %q", i, e.Type, want[i])
		}
		if e.At.IsZero() || len(e.Raw) == 0 {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if evs[0].Stage != "load" || evs[0].Message != "reading" {
		t.Fatalf("stage event %+v", evs[0])
	}
	for i, p := range []float64{0.25, 0.5, 1} {
		if evs[1+i].Progress == nil || *evs[1+i].Progress != p {
			t.Fatalf("progress event %d: %+v, want %v", i, evs[1+i], p)
		}
	}
	if !strings.Contains(string(evs[4].Raw), `"rmse":1.5`) {
		t.Fatalf("metrics raw %s", evs[4].Raw)
	}
	if !res.Done || !strings.Contains(string(res.DoneInfo), `"artifact":"model.json"`) || res.LastError != "minor trouble" {
		t.Fatalf("done %v %s, last error %q", res.Done, res.DoneInfo, res.LastError)
	}
	log := readLog(t, res)
	for _, s := range []string{"hello on stdout\n", "hello on stderr\n", `##AML {"type":"done","artifact":"model.json"}` + "\n"} {
		if !strings.Contains(log, s) {
			t.Fatalf("log lacks %q:\n%s", s, log)
		}
	}
	if len(res.LogFiles) != 1 || res.LogFiles[0] != filepath.Join(filepath.Dir(res.LogFiles[0]), LogName) {
		t.Fatalf("log files %v", res.LogFiles)
	}
}

func TestMalformedLinesCounted(t *testing.T) {
	script := `
echo '##AML not-json'
echo '##AML {"type":"bogus"}'
echo '##AML [1,2,3]'
echo '##AML "progress"'
echo '##AML null'
echo '##AML {"no":"type"}'
echo '##AML {"type":"progress"}'
echo '##AML {"type":"progress","progress":"half"}'
echo '##AML {"type":"stage"}'
echo '##AML {"type":"done"} trailing'
echo '##AML {"type":"error","message":3}'
echo '##AMLnot an event'
echo '##AML {"type":"done"}'
`
	res, evs, err := sh(t, Spec{}, script)
	if err != nil {
		t.Fatal(err)
	}
	if res.Malformed != 11 || res.Events != 1 || len(evs) != 1 || !res.Done || res.ExitCode != 0 {
		t.Fatalf("malformed %d, events %d, done %v, exit %d", res.Malformed, res.Events, res.Done, res.ExitCode)
	}
	if log := readLog(t, res); !strings.Contains(log, "##AML not-json\n") || !strings.Contains(log, `##AML {"type":"bogus"}`) {
		t.Fatalf("malformed lines not in the log:\n%s", log)
	}
}

func TestLongLineCut(t *testing.T) {
	script := `
head -c 204800 /dev/zero | tr '\000' a
echo
echo '##AML {"type":"progress","progress":0.5}'
head -c 70000 /dev/zero | tr '\000' b
echo '##AML {"type":"done"}'
`
	res, evs, err := sh(t, Spec{}, script)
	if err != nil {
		t.Fatal(err)
	}
	// The 200 KiB line is cut; so is the 70000-byte line that ends with the
	// done event: its rest (including the event) is discarded, not parsed.
	if res.Truncated != 2 || res.Events != 1 || len(evs) != 1 || evs[0].Type != EventProgress || res.Done {
		t.Fatalf("truncated %d, events %d %+v, done %v", res.Truncated, res.Events, evs, res.Done)
	}
	if res.Lines != 3 {
		t.Fatalf("lines %d, want 3", res.Lines)
	}
	log := readLog(t, res)
	lines := strings.Split(log, "\n")
	if len(lines[0]) != MaxLineBytes || strings.Trim(lines[0], "a") != "" {
		t.Fatalf("first log line has %d bytes", len(lines[0]))
	}
	if !strings.Contains(lines[1], fmt.Sprintf("%d more bytes discarded", 204800-MaxLineBytes)) {
		t.Fatalf("no truncation note: %q", lines[1])
	}
	if strings.Contains(log, `{"type":"done"}`) {
		t.Fatalf("the discarded rest of a line reached the log")
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err) // no /proc: trust kill(0)
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		pids = append(pids, p)
	}
	return pids
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive after the run", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestCancelKillsTree(t *testing.T) {
	for _, ignoreTerm := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreTERM=%v", ignoreTerm), func(t *testing.T) {
			dir := jobDir(t)
			trap := ""
			if ignoreTerm {
				trap = "trap '' TERM"
			}
			// Grandchildren: two sleeps and a subshell with its own sleep.
			script := trap + `
sleep 1000 &
echo $! > pids.tmp
( trap '' TERM; sleep 1000 ) &
echo $! >> pids.tmp
mv pids.tmp pids
echo '##AML {"type":"stage","stage":"running"}'
while :; do sleep 1; done
`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			var once sync.Once
			done := make(chan Result)
			go func() {
				res, err := Run(ctx, Spec{JobDir: dir, Command: []string{"/bin/sh", "-c", script}}, func(e Event) {
					if e.Type == EventStage {
						once.Do(func() { close(started) })
					}
				})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the script did not start")
			}
			pids := readPids(t, filepath.Join(dir, "pids"))
			for _, p := range pids {
				if !alive(p) {
					t.Fatalf("grandchild %d not running before cancel", p)
				}
			}
			t0 := time.Now()
			cancel()
			var res Result
			select {
			case res = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			el := time.Since(t0)
			if res.Reason != ReasonCancelled || res.Signal == "" || res.ExitCode != -1 {
				t.Fatalf("result %+v", res)
			}
			if ignoreTerm && (el < KillGrace-100*time.Millisecond || res.Signal != "SIGKILL") {
				t.Fatalf("a child ignoring SIGTERM stopped after %s by %s, want SIGKILL after the %s grace", el, res.Signal, KillGrace)
			}
			if !ignoreTerm && el > KillGrace {
				t.Fatalf("took %s to stop a child that honours SIGTERM", el)
			}
			waitGone(t, pids)
		})
	}
}

func TestLeftoverGrandchildKilledAfterNormalExit(t *testing.T) {
	dir := jobDir(t)
	res, _, err := sh(t, Spec{JobDir: dir}, `( trap '' TERM; exec sleep 1000 ) & echo $! > pids; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonExited || res.ExitCode != 3 {
		t.Fatalf("result %+v", res)
	}
	if res.Duration > DrainTimeout {
		t.Fatalf("Run waited %s for the grandchild's pipes", res.Duration)
	}
	waitGone(t, readPids(t, filepath.Join(dir, "pids")))
}

func TestWallTimeout(t *testing.T) {
	t0 := time.Now()
	res, _, err := sh(t, Spec{WallTimeout: 300 * time.Millisecond}, `echo '##AML {"type":"progress","progress":0.1}'; exec sleep 30`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonTimeout || res.Signal != "SIGTERM" {
		t.Fatalf("result %+v", res)
	}
	if el := time.Since(t0); el > 5*time.Second || res.Duration < 300*time.Millisecond {
		t.Fatalf("elapsed %s, duration %s", el, res.Duration)
	}
}

func TestStallTimeout(t *testing.T) {
	// Keeps printing, but no progress-type line after the first.
	script := `echo '##AML {"type":"progress","progress":0.1}'
while :; do echo working; echo '##AML {"type":"metrics","x":1}'; sleep 0.05; done`
	res, _, err := sh(t, Spec{StallTimeout: 500 * time.Millisecond, WallTimeout: 20 * time.Second}, script)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonStalled {
		t.Fatalf("result %+v", res)
	}
	if res.Duration < 500*time.Millisecond || res.Duration > 5*time.Second || res.Lines < 5 {
		t.Fatalf("duration %s, lines %d", res.Duration, res.Lines)
	}

	// Progress and stage lines keep a run alive past the stall timeout.
	script = `i=0; while [ $i -lt 20 ]; do
  if [ $((i % 2)) = 0 ]; then echo '##AML {"type":"progress","pct":'$((i*5))'}'; else echo '##AML {"type":"stage","stage":"s'$i'"}'; fi
  i=$((i+1)); sleep 0.05; done
echo '##AML {"type":"done"}'`
	res, _, err = sh(t, Spec{StallTimeout: 400 * time.Millisecond}, script)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonExited || !res.Done || res.Duration < 800*time.Millisecond {
		t.Fatalf("result %+v", res)
	}
}

func TestKilledBySignalNotSentByRunner(t *testing.T) {
	res, _, err := sh(t, Spec{}, `echo before; kill -9 $$; echo after`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonKilled || res.Signal != "SIGKILL" || res.ExitCode != -1 {
		t.Fatalf("result %+v", res)
	}
}

func TestExitCodePropagated(t *testing.T) {
	res, _, err := sh(t, Spec{}, `echo '##AML {"type":"error","message":"bad params"}'; exit 7`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonExited || res.ExitCode != 7 || res.LastError != "bad params" || res.Done {
		t.Fatalf("result %+v", res)
	}
}

func TestStartFailed(t *testing.T) {
	dir := jobDir(t)
	for _, cmd := range [][]string{{"no-such-program-aml"}, {"/nonexistent/trainer"}, {filepath.Join(dir, "logs")}} {
		res, err := Run(context.Background(), Spec{JobDir: dir, Command: cmd}, nil)
		if core.CodeOf(err) != CodeTrainerStartFailed || res.Reason != ReasonStartFailed || res.LastError == "" {
			t.Fatalf("%v: err %v, result %+v", cmd, err, res)
		}
	}
	notExec := filepath.Join(dir, "train.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{notExec}}, nil); core.CodeOf(err) != CodeTrainerStartFailed {
		t.Fatalf("non-executable file: %v", err)
	}
	for _, spec := range []Spec{
		{JobDir: "relative", Command: []string{"/bin/true"}},
		{JobDir: dir},
		{JobDir: dir, Command: []string{"/bin/true"}, Env: map[string]string{"HOME": "/"}},
		{JobDir: dir, Command: []string{"/bin/true"}, AllowEnv: []string{"PATH"}},
		{JobDir: dir, Command: []string{"/bin/true"}, Sandbox: "maybe"},
	} {
		if res, err := Run(context.Background(), spec, nil); core.CodeOf(err) != core.CodeInvalidArgument || res.Reason != ReasonStartFailed {
			t.Fatalf("%+v: %v", spec, err)
		}
	}
	// A context that is already done: nothing starts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Spec{JobDir: dir, Command: []string{"/bin/true"}}, nil)
	if err != nil || res.Reason != ReasonCancelled {
		t.Fatalf("cancelled ctx: %v %+v", err, res)
	}
}

func TestEnvironmentWhitelist(t *testing.T) {
	t.Setenv("AML_TEST_SECRET", "do-not-pass")
	t.Setenv("AML_TEST_ALLOWED", "pass me")
	dir := jobDir(t)
	res, _, err := sh(t, Spec{JobDir: dir, AllowEnv: []string{"AML_TEST_ALLOWED", "AML_TEST_UNSET"}, Env: map[string]string{"AML_SEED": "42"}},
		`env > env.txt; pwd > pwd.txt; echo x > "$TMPDIR/scratch"`)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	want := map[string]string{"PATH": DefaultPath, "HOME": dir, "TMPDIR": filepath.Join(dir, "tmp"), "LANG": "C.UTF-8",
		"AML_JOB_DIR": dir, "AML_SEED": "42", "AML_TEST_ALLOWED": "pass me"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"AML_TEST_SECRET", "AML_TEST_UNSET", shimEnv} {
		if _, ok := env[k]; ok {
			t.Errorf("%s leaked into the child's environment", k)
		}
	}
	// Only the runner's whitelist, plus what sh itself sets.
	for k := range env {
		if _, ok := want[k]; !ok && k != "PWD" && k != "SHLVL" && k != "_" && k != "OLDPWD" {
			t.Errorf("unexpected variable %s", k)
		}
	}
	if pwd, _ := os.ReadFile(filepath.Join(dir, "pwd.txt")); strings.TrimSpace(string(pwd)) != dir {
		t.Errorf("cwd %q, want %q", pwd, dir)
	}
	if strings.Join(res.Files, ",") != "env.txt,pwd.txt,tmp/scratch" {
		t.Errorf("files %v", res.Files)
	}
}

func TestPathOverride(t *testing.T) {
	dir := jobDir(t)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mytrainer"), []byte("#!/bin/sh\necho '##AML {\"type\":\"done\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{"mytrainer"}, PathOverride: bin + ":" + DefaultPath}, nil)
	if err != nil || !res.Done {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{"mytrainer"}}, nil); core.CodeOf(err) != CodeTrainerStartFailed {
		t.Fatalf("mytrainer found without PathOverride: %v", err)
	}
}

// printed returns what the rotation test scripts print: lines i = from..to-1.
func printed(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "line %06d abcdefghijklmnopqrstuvwxyz\n", i)
	}
	return b.String()
}

func lineScript(n int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf 'line %%06d abcdefghijklmnopqrstuvwxyz\n' $i; i=$((i+1)); done`, n)
}

func TestLogRotationKeepsEverything(t *testing.T) {
	const cap = 4096
	n := 3 * cap / 39 // 39-byte lines: ~3× the cap
	res, _, err := sh(t, Spec{LogMaxBytes: cap}, lineScript(n))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if len(res.LogFiles) < 3 || res.LogDroppedBytes != 0 {
		t.Fatalf("log files %v, dropped %d", res.LogFiles, res.LogDroppedBytes)
	}
	if got, want := readLog(t, res), printed(0, n); got != want {
		t.Fatalf("the rotated files do not add up to the output: %d bytes, want %d", len(got), len(want))
	}
	for i, f := range res.LogFiles {
		st, _ := os.Stat(f)
		if st.Size() > cap {
			t.Fatalf("%s has %d bytes, over the cap", f, st.Size())
		}
		want := LogName
		if k := len(res.LogFiles) - 1 - i; k > 0 {
			want += "." + strconv.Itoa(k)
		}
		if filepath.Base(f) != want {
			t.Fatalf("log file %d is %s, want %s", i, f, want)
		}
	}
}

func TestLogRotationBeyondKeepKeepsHeadAndTail(t *testing.T) {
	const cap = 4096
	n := 20 * cap / 39
	dir := jobDir(t)
	res, _, err := sh(t, Spec{JobDir: dir, LogMaxBytes: cap}, lineScript(n))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if len(res.LogFiles) != LogKeep+1 || res.LogDroppedBytes == 0 {
		t.Fatalf("log files %v, dropped %d", res.LogFiles, res.LogDroppedBytes)
	}
	head, err := os.ReadFile(res.LogFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	all := printed(0, n)
	var headData strings.Builder
	notes := 0
	for _, l := range strings.SplitAfter(string(head), "\n") {
		if strings.HasPrefix(l, "[aml-runner] log rotation dropped") {
			notes++
		} else {
			headData.WriteString(l)
		}
	}
	if notes == 0 || !strings.HasPrefix(all, headData.String()) || headData.Len() < cap/2 {
		t.Fatalf("the head file does not start the log or lacks the drop note:\n%.300s", head)
	}
	var rest strings.Builder
	for _, f := range res.LogFiles[1:] {
		b, _ := os.ReadFile(f)
		rest.Write(b)
	}
	if !strings.HasSuffix(all, rest.String()) || rest.Len() < (LogKeep-1)*cap/2 {
		t.Fatalf("the newest files are not the end of the output")
	}
	// Head (without notes) + dropped + tail = everything printed.
	if int64(headData.Len())+res.LogDroppedBytes+int64(rest.Len()) != int64(len(all)) {
		t.Fatalf("head %d + dropped %d + tail %d != %d", headData.Len(), res.LogDroppedBytes, rest.Len(), len(all))
	}

	// A second run in the same job directory moves this log aside.
	res2, _, err := sh(t, Spec{JobDir: dir}, `echo second`)
	if err != nil || readLog(t, res2) != "second\n" {
		t.Fatalf("second run: %v %q", err, readLog(t, res2))
	}
	prev, _ := filepath.Glob(filepath.Join(dir, "logs", "prev-1", LogName+"*"))
	if len(prev) != LogKeep+1 {
		t.Fatalf("earlier log not moved aside: %v", prev)
	}
}

func TestPythonScriptCommand(t *testing.T) {
	py := python(t)
	dir := jobDir(t)
	script := filepath.Join(dir, "t.py")
	if err := os.WriteFile(script, []byte("import os\nprint('##AML {\"type\":\"done\",\"cwd\":\"%s\"}' % os.getcwd())\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{script}, PathOverride: filepath.Dir(py) + ":" + DefaultPath}, nil)
	if err != nil || !res.Done || !strings.Contains(string(res.DoneInfo), dir) {
		t.Fatalf("%v %+v", err, res)
	}
}

// python returns the real python3 interpreter (not a pyenv shim, which needs
// the caller's HOME), or skips the test.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed; skipping the Python-based test")
	}
	out, err := exec.Command(p, "-c", "import os, sys; print(os.path.realpath(sys.executable))").Output()
	if err != nil {
		t.Skipf("python3 does not run (%v); skipping the Python-based test", err)
	}
	return strings.TrimSpace(string(out))
}

func TestEscapedProcessDoesNotBlockRun(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	old := drainTimeout
	drainTimeout = 300 * time.Millisecond
	defer func() { drainTimeout = old }()
	dir := jobDir(t)
	// setsid puts the sleep in a new session (out of the runner's process
	// group): it survives the group kill and keeps stdout open.
	res, _, err := sh(t, Spec{JobDir: dir}, `setsid sh -c 'echo $$ > pid; exec sleep 30' &
while [ ! -s pid ]; do sleep 0.01; done
echo '##AML {"type":"done"}'`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range readPids(t, filepath.Join(dir, "pid")) {
		_ = syscall.Kill(p, syscall.SIGKILL) // cleanup of the escaped sleep (ESRCH: gone already)
	}
	if res.Reason != ReasonExited || !res.Done {
		t.Fatalf("%+v", res)
	}
	if log := readLog(t, res); !strings.Contains(log, "stopped reading") {
		t.Fatalf("no drain note in the log:\n%s", log)
	}
}
