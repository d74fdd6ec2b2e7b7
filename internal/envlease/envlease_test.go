package envlease

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

const testHB = 100 * time.Millisecond

// TestMain doubles as the child process of TestReaderInAnotherProcess: with
// ENVLEASE_TEST_HOLD=1 it takes a read lease on env "t" of
// ENVLEASE_TEST_DIR, prints "ready" and sleeps until killed.
func TestMain(m *testing.M) {
	if os.Getenv("ENVLEASE_TEST_HOLD") == "1" {
		mg, err := Open(os.Getenv("ENVLEASE_TEST_DIR"), WithHeartbeat(testHB))
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		l, err := mg.Acquire(context.Background(), "t", "child-job")
		if err != nil {
			fmt.Println("acquire:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		time.Sleep(2 * time.Minute)
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// setup writes envs.json with one env "t" rebuilt by argv.
func setup(t *testing.T, argv ...string) (string, *Manager) {
	t.Helper()
	d := t.TempDir()
	b, _ := json.Marshal([]Config{{Name: "t", Dir: "envs/t", Rebuild: argv, Description: "test env"}})
	if err := os.WriteFile(filepath.Join(d, ConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(d, WithHeartbeat(testHB))
	if err != nil {
		t.Fatal(err)
	}
	return d, m
}

func wantCode(t *testing.T, err error, code string, contains ...string) {
	t.Helper()
	if core.CodeOf(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("error %q does not contain %q", err, c)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func lockPhase(m *Manager, name string) string {
	ls, _ := m.readLock(name)
	if ls == nil {
		return ""
	}
	return ls.Phase
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

func writeLock(t *testing.T, m *Manager, name string, li LockInfo) {
	t.Helper()
	if err := os.MkdirAll(m.runtime, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(li)
	if err := os.WriteFile(m.lockPath(name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRebuildRefusedWhileLeaseHeldThenAllowed(t *testing.T) {
	_, m := setup(t, "sh", "-c", "echo built; pwd")
	l, err := m.Acquire(context.Background(), "t", "job-42")
	if err != nil {
		t.Fatal(err)
	}
	if !exists(l.File()) || !strings.HasPrefix(filepath.Base(l.File()), "job-42-"+strconv.Itoa(os.Getpid())+"-") {
		t.Fatalf("lease file %s", l.File())
	}
	st, _ := m.Status("t")
	if st.Readers != 1 || st.Holders[0].Holder != "job-42" || st.Rebuilding != nil || st.Stale {
		t.Fatalf("status %+v", st)
	}
	// Held across several heartbeats: still live.
	time.Sleep(4 * testHB)
	var out bytes.Buffer
	_, err = m.Rebuild(context.Background(), "t", "admin", &out)
	wantCode(t, err, core.CodeEnvBusy, "in use by 1 job", `"job-42"`)
	if exists(m.lockPath("t")) {
		t.Fatal("refused rebuild left its lock behind")
	}
	if out.Len() != 0 {
		t.Fatalf("refused rebuild ran something: %q", out.String())
	}
	l.Release()
	l.Release() // idempotent
	if exists(l.File()) {
		t.Fatal("lease file not removed")
	}
	res, err := m.Rebuild(context.Background(), "t", "admin", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.ExitCode != 0 || !strings.Contains(out.String(), "built\n") || !strings.Contains(out.String(), filepath.Join("envs", "t")) {
		t.Fatalf("result %+v, output %q", res, out.String())
	}
	st, _ = m.Status("t")
	if st.LastRebuild == nil || !st.LastRebuild.OK || st.LastRebuild.Owner != "admin" || st.Rebuilding != nil {
		t.Fatalf("status after rebuild %+v", st)
	}
}

func TestLeaseRefusedDuringRebuild(t *testing.T) {
	_, m := setup(t, "sh", "-c", "sleep 1")
	done := make(chan error, 1)
	go func() {
		_, err := m.Rebuild(context.Background(), "t", "admin", nil)
		done <- err
	}()
	waitFor(t, "rebuild to run", func() bool { return lockPhase(m, "t") == PhaseRunning })
	_, err := m.Acquire(context.Background(), "t", "job")
	wantCode(t, err, core.CodeEnvBusy, "read lease refused", "being rebuilt", `"admin"`)
	if ents, _ := os.ReadDir(m.readersDir("t")); len(ents) != 0 {
		t.Fatalf("refused lease left files: %v", ents)
	}
	st, _ := m.Status("t")
	if st.Rebuilding == nil || st.Rebuilding.Stale || st.Rebuilding.PID != os.Getpid() || st.Stale {
		t.Fatalf("status during rebuild %+v", st.Rebuilding)
	}
	// The lock's heartbeat keeps it live past the stale limit.
	time.Sleep(5 * testHB)
	if st, _ := m.Status("t"); st.Rebuilding == nil || st.Rebuilding.Stale {
		t.Fatalf("lock went stale during the rebuild: %+v", st.Rebuilding)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(context.Background(), "t", "job")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

func TestTwoManagersCannotRebuildAtOnce(t *testing.T) {
	d, m1 := setup(t, "sh", "-c", "echo x >> ../../count; sleep 1")
	m2, err := Open(d, WithHeartbeat(testHB))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := m1.Rebuild(context.Background(), "t", "first", nil); done <- err }()
	waitFor(t, "first rebuild", func() bool { return lockPhase(m2, "t") == PhaseRunning })
	_, err = m2.Rebuild(context.Background(), "t", "second", nil)
	wantCode(t, err, core.CodeEnvBusy, "rebuild refused", "being rebuilt", `"first"`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Many managers racing: exactly one runs the command.
	if err := os.Remove(filepath.Join(d, "count")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, busy := 0, 0
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		mi, err := Open(d, WithHeartbeat(testHB))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := mi.Rebuild(context.Background(), "t", fmt.Sprint("m", i), nil)
			mu.Lock()
			defer mu.Unlock()
			switch core.CodeOf(err) {
			case "":
				ok++
			case core.CodeEnvBusy:
				busy++
			default:
				t.Errorf("rebuild %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	b, _ := os.ReadFile(filepath.Join(d, "count"))
	if ok != 1 || busy != 7 || string(b) != "x\n" {
		t.Fatalf("ok %d busy %d, command ran %q", ok, busy, b)
	}
}

// A reader and a rebuild started at the same moment never both proceed.
func TestAcquireRebuildRace(t *testing.T) {
	d, _ := setup(t, "true")
	both := 0
	outcome := map[string]int{}
	for i := 0; i < 40; i++ {
		mr, _ := Open(d, WithHeartbeat(testHB))
		mw, _ := Open(d, WithHeartbeat(testHB))
		start := make(chan struct{})
		var l *Lease
		var lerr, rerr error
		var wg sync.WaitGroup
		wg.Add(2)
		var granted int64
		go func() {
			defer wg.Done()
			<-start
			l, lerr = mr.Acquire(context.Background(), "t", "racer")
			granted = nowMs()
		}()
		go func() { defer wg.Done(); <-start; _, rerr = mw.Rebuild(context.Background(), "t", "admin", nil) }()
		close(start)
		wg.Wait()
		if lerr == nil && rerr == nil {
			// Legal only if the rebuild finished before the lease was granted.
			lr, _ := mw.readLast("t")
			if lr == nil || lr.FinishedAt > granted {
				both++
			}
		}
		outcome[fmt.Sprintf("lease:%s rebuild:%s", core.CodeOf(lerr), core.CodeOf(rerr))]++
		for _, err := range []error{lerr, rerr} {
			if err != nil && core.CodeOf(err) != core.CodeEnvBusy {
				t.Fatal(err)
			}
		}
		if l != nil {
			l.Release()
		}
		if exists(mw.lockPath("t")) {
			t.Fatal("lock left behind")
		}
	}
	t.Logf("outcomes: %v", outcome)
	if both != 0 {
		t.Fatalf("reader and rebuild overlapped %d times", both)
	}
}

func TestStaleLockDeadPIDReportedNotDeleted(t *testing.T) {
	_, m := setup(t, "sh", "-c", "echo rebuilt")
	pid := deadPID(t)
	li := LockInfo{Owner: "crashed-admin", PID: pid, Hostname: m.hostname, PIDNamespace: m.pidNS, HeartbeatAt: nowMs(), Token: "tok-dead", StartedAt: nowMs() - 60_000, Phase: PhaseRunning}
	writeLock(t, m, "t", li)
	before, _ := os.ReadFile(m.lockPath("t"))

	st, err := m.Status("t")
	if err != nil {
		t.Fatal(err)
	}
	if st.Rebuilding == nil || !st.Rebuilding.Stale || st.Rebuilding.PIDAlive != "no" || !st.Stale || !strings.Contains(st.Rebuilding.Reason, "not running") {
		t.Fatalf("status %+v", st.Rebuilding)
	}
	var out bytes.Buffer
	_, err = m.Rebuild(context.Background(), "t", "admin", &out)
	wantCode(t, err, core.CodeEnvBusy, "looks stale", fmt.Sprintf("pid %d", pid), `"crashed-admin"`, "started 1m0s ago", "aml env unlock t --force", "confirming the process")
	if out.Len() != 0 {
		t.Fatalf("rebuild ran: %q", out.String())
	}
	_, err = m.Acquire(context.Background(), "t", "job")
	wantCode(t, err, core.CodeEnvBusy, "looks stale", "aml env unlock t --force")
	after, err := os.ReadFile(m.lockPath("t"))
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("stale lock was touched: %v", err)
	}

	res, err := m.Unlock("t", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedLock == nil || res.RemovedLock.Token != "tok-dead" || exists(m.lockPath("t")) {
		t.Fatalf("unlock %+v", res)
	}
	if _, err := m.Rebuild(context.Background(), "t", "admin", &out); err != nil {
		t.Fatal(err)
	}
	// Nothing left to unlock.
	res, err = m.Unlock("t", false)
	if err != nil || res.RemovedLock != nil {
		t.Fatalf("second unlock %+v %v", res, err)
	}
}

func TestLockOnOtherHost(t *testing.T) {
	_, m := setup(t, "true")
	li := LockInfo{Owner: "remote", PID: 1, Hostname: "elsewhere.example", HeartbeatAt: nowMs(), Token: "tok-remote", StartedAt: nowMs(), Phase: PhaseRunning}
	writeLock(t, m, "t", li)
	st, _ := m.Status("t")
	if st.Rebuilding == nil || st.Rebuilding.Stale || st.Rebuilding.PIDAlive != "unknown" {
		t.Fatalf("fresh remote lock judged %+v", st.Rebuilding)
	}
	_, err := m.Unlock("t", false)
	wantCode(t, err, core.CodeEnvBusy, "looks live", "--force")
	if !exists(m.lockPath("t")) {
		t.Fatal("live lock removed without --force")
	}
	if res, err := m.Unlock("t", true); err != nil || res.RemovedLock == nil || exists(m.lockPath("t")) {
		t.Fatalf("force unlock %+v %v", res, err)
	}
	// An old heartbeat makes it stale: reported, then removable without force.
	li.HeartbeatAt = nowMs() - 10*testHB.Milliseconds()
	writeLock(t, m, "t", li)
	_, err = m.Rebuild(context.Background(), "t", "admin", nil)
	wantCode(t, err, core.CodeEnvBusy, "looks stale", "heartbeat is", "on host elsewhere.example", "aml env unlock t --force")
	if _, err := m.Unlock("t", false); err != nil || exists(m.lockPath("t")) {
		t.Fatalf("unlock stale remote lock: %v", err)
	}
}

func TestUnlockRefusesLivePIDOnThisHost(t *testing.T) {
	_, m := setup(t, "true")
	// Our own pid: alive. Fresh heartbeat: a running rebuild.
	li := LockInfo{Owner: "me", PID: os.Getpid(), Hostname: m.hostname, PIDNamespace: m.pidNS, HeartbeatAt: nowMs(), Token: "tok-live", StartedAt: nowMs(), Phase: PhaseRunning}
	writeLock(t, m, "t", li)
	_, err := m.Unlock("t", true)
	wantCode(t, err, core.CodeEnvBusy, "even --force never", "being rebuilt")
	// Old heartbeat: stale (hung), but the process is alive: still refused,
	// and told to stop it first.
	li.HeartbeatAt = nowMs() - 10*testHB.Milliseconds()
	writeLock(t, m, "t", li)
	st, _ := m.Status("t")
	if !st.Rebuilding.Stale || st.Rebuilding.PIDAlive != "yes" {
		t.Fatalf("hung lock judged %+v", st.Rebuilding)
	}
	_, err = m.Unlock("t", true)
	wantCode(t, err, core.CodeEnvBusy, "even --force never", fmt.Sprintf("kill %d", os.Getpid()))
	_, err = m.Rebuild(context.Background(), "t", "admin", nil)
	wantCode(t, err, core.CodeEnvBusy, "looks stale", "still running on this host", fmt.Sprintf("kill %d", os.Getpid()), "aml env unlock t --force")
	if !exists(m.lockPath("t")) {
		t.Fatal("lock of a live process removed")
	}
}

func TestTokenMismatchNeverRemovesOthersLock(t *testing.T) {
	_, m := setup(t, "true")
	if err := os.MkdirAll(m.runtime, 0o755); err != nil {
		t.Fatal(err)
	}
	// Same file, rewritten with another token.
	lk, err := m.createLock("t", "me")
	if err != nil {
		t.Fatal(err)
	}
	other := LockInfo{Owner: "other", PID: os.Getpid(), Hostname: m.hostname, PIDNamespace: m.pidNS, HeartbeatAt: nowMs(), Token: "someone-else", StartedAt: nowMs()}
	b, _ := json.Marshal(other)
	if err := os.WriteFile(m.lockPath("t"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if lk.release() {
		t.Fatal("released a lock with another token")
	}
	if ls, _ := m.readLock("t"); ls == nil || ls.Token != "someone-else" {
		t.Fatalf("other lock gone: %+v", ls)
	}
	if err := os.Remove(m.lockPath("t")); err != nil {
		t.Fatal(err)
	}
	// Removed and recreated by someone else (another inode) while held,
	// and the heartbeat must not overwrite it either.
	lk, err = m.createLock("t", "me")
	if err != nil {
		t.Fatal(err)
	}
	lk.startHeartbeat()
	if err := os.Remove(m.lockPath("t")); err != nil {
		t.Fatal(err)
	}
	writeLock(t, m, "t", other)
	time.Sleep(3 * testHB)
	if lk.release() || !lk.lost.Load() {
		t.Fatal("released a replaced lock")
	}
	if ls, _ := m.readLock("t"); ls == nil || ls.Token != "someone-else" || ls.Owner != "other" {
		t.Fatalf("other lock gone or overwritten: %+v", ls)
	}
	// A second createLock while one exists fails with ErrExist.
	if _, err := m.createLock("t", "me"); !errors.Is(err, os.ErrExist) {
		t.Fatalf("exclusive create: %v", err)
	}
}

func TestFailingRebuildReleasesLock(t *testing.T) {
	_, m := setup(t, "sh", "-c", "echo oops >&2; exit 3")
	var out bytes.Buffer
	res, err := m.Rebuild(context.Background(), "t", "admin", &out)
	wantCode(t, err, CodeRebuildFailed, "status 3", "half built")
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Kind() != core.KindFailed {
		t.Fatalf("kind %s: %v", ae.Kind(), err)
	}
	if res.OK || res.ExitCode != 3 || !strings.Contains(out.String(), "oops") {
		t.Fatalf("result %+v output %q", res, out.String())
	}
	if exists(m.lockPath("t")) {
		t.Fatal("failed rebuild kept the lock")
	}
	st, _ := m.Status("t")
	if st.LastRebuild == nil || st.LastRebuild.OK || st.LastRebuild.ExitCode != 3 || !strings.Contains(st.LastRebuild.Error, "status 3") {
		t.Fatalf("last %+v", st.LastRebuild)
	}
	// A command that cannot start.
	_, m2 := setup(t, "/nonexistent/rebuild-tool")
	res, err = m2.Rebuild(context.Background(), "t", "admin", nil)
	wantCode(t, err, CodeRebuildFailed, "could not run")
	if res.ExitCode != -1 || exists(m2.lockPath("t")) {
		t.Fatalf("result %+v", res)
	}
	// A cancelled rebuild stops the command and releases the lock.
	_, m3 := setup(t, "sh", "-c", "sleep 30")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { _, err := m3.Rebuild(ctx, "t", "admin", nil); done <- err }()
	waitFor(t, "rebuild to run", func() bool { return lockPhase(m3, "t") == PhaseRunning })
	cancel()
	err = <-done
	wantCode(t, err, CodeRebuildFailed, "interrupted")
	if time.Since(t0) > 10*time.Second || exists(m3.lockPath("t")) {
		t.Fatalf("cancel took %s, lock left %v", time.Since(t0), exists(m3.lockPath("t")))
	}
}

func TestReaderInAnotherProcess(t *testing.T) {
	d, m := setup(t, "sh", "-c", "echo rebuilt")
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "ENVLEASE_TEST_HOLD=1", "ENVLEASE_TEST_DIR="+d)
	stdout, _ := c.StdoutPipe()
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed { // teardown of a failed test
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("child said %q", line)
	}
	st, _ := m.Status("t")
	if st.Readers != 1 || st.Holders[0].PID != c.Process.Pid || st.Holders[0].PIDAlive != "yes" {
		t.Fatalf("status %+v", st)
	}
	_, err := m.Rebuild(context.Background(), "t", "admin", nil)
	wantCode(t, err, core.CodeEnvBusy, `"child-job"`, fmt.Sprintf("pid %d", c.Process.Pid))
	// Its heartbeat keeps it live past the stale limit.
	time.Sleep(5 * testHB)
	_, err = m.Rebuild(context.Background(), "t", "admin", nil)
	wantCode(t, err, core.CodeEnvBusy, `"child-job"`)

	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait() // "signal: killed": reaped, which is all that is wanted
	killed = true
	st, _ = m.Status("t")
	if st.Readers != 0 || len(st.StaleReaders) != 1 || !st.Stale || st.StaleReaders[0].PIDAlive != "no" {
		t.Fatalf("status after kill %+v", st)
	}
	var out bytes.Buffer
	res, err := m.Rebuild(context.Background(), "t", "admin", &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StaleReaders) != 1 || res.StaleReaders[0].Holder != "child-job" || !strings.Contains(out.String(), `ignoring stale read lease of "child-job"`) {
		t.Fatalf("stale reader not reported: %+v %q", res.StaleReaders, out.String())
	}
	// Reported and ignored, not deleted; unlock removes it.
	if st, _ := m.Status("t"); len(st.StaleReaders) != 1 {
		t.Fatalf("stale reader deleted by rebuild: %+v", st)
	}
	ur, err := m.Unlock("t", false)
	if err != nil || len(ur.RemovedReaders) != 1 || ur.RemovedLock != nil {
		t.Fatalf("unlock %+v %v", ur, err)
	}
	if st, _ := m.Status("t"); len(st.StaleReaders) != 0 || st.Stale {
		t.Fatalf("after unlock %+v", st)
	}
}

func TestStaleReaderByHeartbeatAndLostLease(t *testing.T) {
	_, m := setup(t, "true")
	// A lease file of a live pid (ours) whose heartbeat stopped: stale,
	// ignored by rebuild, kept by unlock.
	if err := os.MkdirAll(m.readersDir("t"), 0o755); err != nil {
		t.Fatal(err)
	}
	ri := ReaderInfo{Holder: "hung", PID: os.Getpid(), Hostname: m.hostname, PIDNamespace: m.pidNS, HeartbeatAt: nowMs() - 10*testHB.Milliseconds(), Token: "tok", StartedAt: nowMs() - 60_000}
	b, _ := json.Marshal(ri)
	p := filepath.Join(m.readersDir("t"), "hung-1-tok.lease")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := m.Rebuild(context.Background(), "t", "admin", nil)
	if err != nil || len(res.StaleReaders) != 1 || !strings.Contains(res.StaleReaders[0].Reason, "heartbeat") {
		t.Fatalf("rebuild %+v %v", res, err)
	}
	ur, err := m.Unlock("t", false)
	if err != nil || len(ur.KeptReaders) != 1 || !exists(p) {
		t.Fatalf("unlock %+v %v", ur, err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}

	// A live lease whose file disappears reports it is lost.
	l, err := m.Acquire(context.Background(), "t", "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := os.Remove(l.File()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("lost lease not noticed")
	}
	wantCode(t, l.Err(), core.CodeEnvBusy, "removed")
	time.Sleep(2 * testHB)
	if exists(l.File()) {
		t.Fatal("heartbeat recreated a removed lease file")
	}

	// A lock in phase "checking" (a rebuild about to back off because of
	// this lease) does not make the lease lost; one in phase "running" does.
	l2, err := m.Acquire(context.Background(), "t", "job2")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	li := LockInfo{Owner: "x", PID: os.Getpid(), Hostname: m.hostname, PIDNamespace: m.pidNS, HeartbeatAt: nowMs(), Token: "t1", StartedAt: nowMs(), Phase: PhaseChecking}
	writeLock(t, m, "t", li)
	time.Sleep(3 * testHB)
	if l2.Err() != nil {
		t.Fatalf("lease lost to a checking lock: %v", l2.Err())
	}
	li.Phase = PhaseRunning
	writeLock(t, m, "t", li)
	select {
	case <-l2.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("rebuild under a lease not noticed")
	}
	wantCode(t, l2.Err(), core.CodeEnvBusy, "a rebuild started while it was held")
	if !exists(l2.File()) {
		t.Fatal("lost lease stopped being visible")
	}
}

func TestUnknownEnvAndConfig(t *testing.T) {
	_, m := setup(t, "true")
	_, err := m.Acquire(context.Background(), "nope", "job")
	wantCode(t, err, core.CodeNotFound, `"nope"`, "configured: t")
	_, err = m.Rebuild(context.Background(), "nope", "a", nil)
	wantCode(t, err, core.CodeNotFound)
	_, err = m.Unlock("nope", true)
	wantCode(t, err, core.CodeNotFound)

	d := t.TempDir()
	md, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	envs := md.Envs()
	py := filepath.Join(md.dataDir, "envs", "python")
	if len(envs) != 1 || envs[0].Name != "python" || envs[0].Dir != py || strings.Join(envs[0].Rebuild, " ") != "python3 -m venv --clear "+py {
		t.Fatalf("default envs %+v", envs)
	}
	list, err := md.List()
	if err != nil || len(list) != 1 || list[0].Readers != 0 || list[0].LastRebuild != nil || list[0].Holders == nil {
		t.Fatalf("list %+v %v", list, err)
	}
	if exists(filepath.Join(d, "runtime")) {
		t.Fatal("List created files")
	}
	if err := os.WriteFile(filepath.Join(d, ConfigFile), []byte(`[{"name":"bad name","rebuild":[]},{"name":"a","rebuild":["x"]},{"name":"a","rebuild":["y"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(d)
	wantCode(t, err, core.CodeInvalidArgument, "3 problem(s)", "envs.json[0].name", "envs.json[0].rebuild", "duplicate")
	if err := os.WriteFile(filepath.Join(d, ConfigFile), []byte(`[{"name":"a","rebuild":["x"],"cmd":"typo"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(d)
	wantCode(t, err, core.CodeInvalidArgument, "cmd")
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{"job-42": "job-42", "a b/c": "a_b_c", "": "job", "../../etc": "_.._etc", strings.Repeat("a", 100): strings.Repeat("a", 40)} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The owner of a lock died but the rebuild command it started lives on: the
// lock is stale yet cannot be cleared until the command is stopped.
func TestOrphanedRebuildCommandBlocksUnlock(t *testing.T) {
	_, m := setup(t, "true")
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // teardown; "already finished" once killed below
	li := LockInfo{Owner: "crashed", PID: deadPID(t), Hostname: m.hostname, PIDNamespace: m.pidNS, HeartbeatAt: nowMs(), Token: "tok", StartedAt: nowMs() - 5000, Phase: PhaseRunning, CommandPID: cmd.Process.Pid}
	writeLock(t, m, "t", li)
	st, _ := m.Status("t")
	if st.Rebuilding == nil || !st.Rebuilding.Stale || st.Rebuilding.CommandAlive != "yes" {
		t.Fatalf("status %+v", st.Rebuilding)
	}
	_, err := m.Rebuild(context.Background(), "t", "admin", nil)
	wantCode(t, err, core.CodeEnvBusy, "looks stale", fmt.Sprintf("kill -- -%d", cmd.Process.Pid))
	_, err = m.Unlock("t", true)
	wantCode(t, err, core.CodeEnvBusy, "even --force never", "still running")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed": reaped, which is all that is wanted
	if res, err := m.Unlock("t", false); err != nil || res.RemovedLock == nil {
		t.Fatalf("unlock after the command stopped: %+v %v", res, err)
	}
}

// A running rebuild records its command's pid in the lock.
func TestLockRecordsCommandPID(t *testing.T) {
	_, m := setup(t, "sh", "-c", "sleep 1")
	done := make(chan error, 1)
	go func() { _, err := m.Rebuild(context.Background(), "t", "admin", nil); done <- err }()
	waitFor(t, "command pid", func() bool { ls, _ := m.readLock("t"); return ls != nil && ls.CommandPID > 0 })
	ls, _ := m.readLock("t")
	if ls.CommandAlive != "yes" || ls.Stale || ls.PID != os.Getpid() {
		t.Fatalf("lock %+v", ls)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
