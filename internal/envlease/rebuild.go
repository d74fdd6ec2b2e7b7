package envlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// lockHandle is an exclusive lock this process created.
type lockHandle struct {
	m    *Manager
	file *hbFile
	mu   sync.Mutex
	info LockInfo
	stop chan struct{}
	done chan struct{}
	lost atomic.Bool
}

func (m *Manager) createLock(name, owner string) (*lockHandle, error) {
	now := nowMs()
	lk := &lockHandle{m: m, info: LockInfo{Owner: owner, PID: os.Getpid(), Hostname: m.hostname, PIDNamespace: m.pidNS, Token: newToken(), StartedAt: now, Phase: PhaseChecking}}
	f, err := createExclusive(m.lockPath(name), func(hb int64) any {
		lk.mu.Lock()
		defer lk.mu.Unlock()
		i := lk.info
		i.HeartbeatAt = hb
		return i
	})
	if err != nil {
		return nil, err
	}
	lk.file = f
	return lk, nil
}

func (lk *lockHandle) setPhase(p string) error {
	lk.mu.Lock()
	lk.info.Phase = p
	lk.mu.Unlock()
	return lk.file.beat()
}

func (lk *lockHandle) setCommand(pid int) {
	lk.mu.Lock()
	lk.info.CommandPID = pid
	lk.mu.Unlock()
	_ = lk.file.beat() // if this write fails, the next heartbeat records the pid
}

func (lk *lockHandle) startHeartbeat() {
	lk.stop, lk.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(lk.done)
		t := time.NewTicker(lk.m.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-lk.stop:
				return
			case <-t.C:
			}
			if !lk.file.ours() {
				lk.lost.Store(true)
				return
			}
			_ = lk.file.beat() // a failed beat is retried at the next tick
		}
	}()
}

// release stops the heartbeat and removes the lock file, but only if it is
// still this process's lock: the same file (inode) and the same token.
// It never deletes someone else's lock and reports whether it removed it.
func (lk *lockHandle) release() bool {
	if lk.stop != nil {
		close(lk.stop)
		<-lk.done
		lk.stop = nil
	}
	defer lk.file.close()
	var cur LockInfo
	if _, err := readJSON(lk.file.path, &cur); err != nil || cur.Token != lk.info.Token || !lk.file.ours() {
		lk.lost.Store(true)
		return false
	}
	return os.Remove(lk.file.path) == nil
}

// RebuildResult describes a finished rebuild.
type RebuildResult struct {
	Name       string   `json:"name"`
	Dir        string   `json:"dir"`
	Owner      string   `json:"owner"`
	Command    []string `json:"command"`
	StartedAt  int64    `json:"startedAt"`  // unix ms
	FinishedAt int64    `json:"finishedAt"` // unix ms
	Seconds    float64  `json:"seconds"`
	OK         bool     `json:"ok"`
	ExitCode   int      `json:"exitCode"` // -1 if it did not start or was killed by a signal
	// StaleReaders are lease files judged stale (holder gone): reported on
	// out and here, then ignored.
	StaleReaders []ReaderState `json:"staleReaders"`
}

// Rebuild rebuilds the environment name under its exclusive lock, for
// owner (who asked: "cli:alice", say). It never waits and never stops
// anything: it fails at once with ENV_BUSY while any live read lease exists,
// while another rebuild runs (in any process), or while a stale lock file
// remains (the error says how to clear it). Otherwise it runs the
// configured command with the environment's Dir as working directory,
// streaming its stdout and stderr to out, records the outcome in
// <dataDir>/runtime/env-<name>.last.json and releases the lock, also when
// the command fails (CodeRebuildFailed, with its exit status) or ctx is
// cancelled (the command's process group gets SIGTERM).
//
// Order matters: the lock file is created first and the lease files counted
// second (Acquire does the mirror image), so a reader and a rebuild that
// race can never both proceed.
func (m *Manager) Rebuild(ctx context.Context, name, owner string, out io.Writer) (RebuildResult, error) {
	cfg, err := m.Env(name)
	if err != nil {
		return RebuildResult{}, err
	}
	if owner == "" {
		owner = "unknown"
	}
	if out == nil {
		out = io.Discard
	}
	res := RebuildResult{Name: name, Dir: cfg.Dir, Owner: owner, Command: cfg.Rebuild, ExitCode: -1, StaleReaders: []ReaderState{}}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := os.MkdirAll(m.runtime, 0o755); err != nil {
		return res, core.Wrap(core.CodeInternal, err, "create %s", m.runtime)
	}
	// 1. take the exclusive lock.
	var lk *lockHandle
	for attempt := 0; ; attempt++ {
		lk, err = m.createLock(name, owner)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return res, core.Wrap(core.CodeInternal, err, "create lock %s", m.lockPath(name))
		}
		ls, rerr := m.readLock(name)
		if rerr != nil {
			return res, rerr
		}
		if ls != nil {
			return res, m.busyLock(name, ls, "rebuild refused")
		}
		if attempt > 0 { // it keeps appearing and vanishing
			return res, core.Errorf(core.CodeEnvBusy, "rebuild refused: environment %q is being locked and unlocked by another process; retry", name)
		}
	}
	// 2. then count the readers.
	live, stale, err := m.readReaders(name)
	if err == nil && len(live) > 0 {
		err = busyReaders(name, live)
	}
	if err == nil {
		err = lk.setPhase(PhaseRunning)
	}
	if err != nil {
		lk.release()
		return res, err
	}
	lk.startHeartbeat()
	for _, r := range stale {
		fmt.Fprintf(out, "aml: env %s: ignoring stale read lease of %q (pid %d on %s): %s; 'aml env unlock %s' removes it\n", name, r.Holder, r.PID, r.Hostname, r.Reason, name)
	}
	res.StaleReaders = append(res.StaleReaders, stale...)

	t0 := time.Now()
	res.StartedAt = lk.info.StartedAt
	runErr := m.runRebuild(ctx, cfg, out, lk.setCommand)
	res.Seconds = time.Since(t0).Seconds()
	res.FinishedAt = nowMs()
	if runErr == nil {
		res.OK, res.ExitCode = true, 0
	} else if ee := (*exec.ExitError)(nil); errors.As(runErr, &ee) {
		res.ExitCode = ee.ExitCode()
	}
	var failure error
	if runErr != nil {
		msg := fmt.Sprintf("rebuild of %q failed: %s", name, describeExit(cfg.Rebuild, runErr, res.Seconds))
		if ctx.Err() != nil {
			msg = fmt.Sprintf("rebuild of %q interrupted (%v): %s", name, ctx.Err(), describeExit(cfg.Rebuild, runErr, res.Seconds))
		}
		e := core.Errorf(CodeRebuildFailed, "%s; the environment may be half built, rebuild it again", msg)
		e.Err = runErr
		failure = e
	}
	last := LastRebuild{Owner: owner, StartedAt: res.StartedAt, FinishedAt: res.FinishedAt, Seconds: res.Seconds, OK: res.OK, ExitCode: res.ExitCode}
	if failure != nil {
		last.Error = failure.Error()
	}
	b, _ := json.MarshalIndent(last, "", "  ")
	werr := writeAtomic(m.lastPath(name), append(b, '\n'))
	if !lk.release() || lk.lost.Load() {
		lost := core.Errorf(core.CodeConflict, "the lock file of %q was removed or replaced by someone else during the rebuild (aml env unlock --force from another host?); the environment may be inconsistent: rebuild it again", name)
		if failure == nil {
			failure = lost
		}
	}
	if failure != nil {
		return res, failure
	}
	if werr != nil {
		return res, core.Wrap(core.CodeInternal, werr, "record rebuild in %s", m.lastPath(name))
	}
	return res, nil
}

func (m *Manager) runRebuild(ctx context.Context, cfg Config, out io.Writer, started func(pid int)) error {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	c := exec.CommandContext(ctx, cfg.Rebuild[0], cfg.Rebuild[1:]...)
	c.Dir = cfg.Dir
	c.Stdout, c.Stderr = out, out
	c.Env = append(os.Environ(), "AML_ENV_NAME="+cfg.Name, "AML_ENV_DIR="+cfg.Dir)
	setupRebuildCmd(c)
	if err := c.Start(); err != nil {
		return err
	}
	started(c.Process.Pid)
	return c.Wait()
}

func describeExit(argv []string, err error, secs float64) string {
	cmd := strings.Join(argv, " ")
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() >= 0 {
			return fmt.Sprintf("%q exited with status %d after %.1fs", cmd, ee.ExitCode(), secs)
		}
		return fmt.Sprintf("%q was killed (%v) after %.1fs", cmd, ee, secs)
	}
	return fmt.Sprintf("%q could not run: %v", cmd, err)
}

func busyReaders(name string, live []ReaderState) error {
	parts := make([]string, 0, len(live))
	for i, r := range live {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(live)-5))
			break
		}
		if r.Unreadable {
			parts = append(parts, fmt.Sprintf("unreadable lease %s", r.File))
			continue
		}
		parts = append(parts, fmt.Sprintf("%q (pid %d on %s, for %s)", r.Holder, r.PID, r.Hostname, fmtAge(time.Since(time.UnixMilli(r.StartedAt)))))
	}
	return core.Errorf(core.CodeEnvBusy, "rebuild refused: environment %q is in use by %d job(s) holding a read lease: %s; a rebuild never waits for or stops jobs, retry when they have finished",
		name, len(live), strings.Join(parts, ", "))
}
