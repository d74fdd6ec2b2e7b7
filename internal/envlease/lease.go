package envlease

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Lease is a read lease on an environment: while it is held, no rebuild can
// start. It is kept alive by a heartbeat goroutine until Release.
type Lease struct {
	m       *Manager
	cfg     Config
	info    ReaderInfo
	file    *hbFile
	stop    chan struct{}
	done    chan struct{}
	lost    chan struct{}
	mu      sync.Mutex
	lostErr error
	once    sync.Once
}

// Acquire takes a read lease on the environment name for holder (a job id,
// say). It never waits: during a rebuild, or while an interrupted rebuild's
// lock file remains, it fails with ENV_BUSY; an unknown name is
// AML_NOT_FOUND. ctx only bounds the acquisition; the lease lives until
// Release.
//
// Order matters: the lease file is published first and the lock file checked
// second (Rebuild does the mirror image), so a reader and a rebuild that
// race can never both proceed.
func (m *Manager) Acquire(ctx context.Context, name, holder string) (*Lease, error) {
	cfg, err := m.Env(name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if holder == "" {
		holder = "job"
	}
	// Fast path, and a clearer error: a rebuild is visibly running.
	if ls, err := m.readLock(name); err != nil {
		return nil, err
	} else if ls != nil {
		return nil, m.busyLock(name, ls, "read lease refused")
	}
	dir := m.readersDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", dir)
	}
	info := ReaderInfo{Holder: holder, PID: os.Getpid(), Hostname: m.hostname, PIDNamespace: m.pidNS, Token: newToken(), StartedAt: nowMs()}
	path := filepath.Join(dir, safeName(holder)+"-"+strconv.Itoa(info.PID)+"-"+info.Token+".lease")
	render := func(hb int64) any { i := info; i.HeartbeatAt = hb; return i }
	// 1. publish the lease file.
	f, err := createUnique(path, render)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create lease %s", path)
	}
	// 2. then check for the exclusive lock.
	ls, err := m.readLock(name)
	if err == nil && ls != nil {
		err = m.busyLock(name, ls, "read lease refused")
	}
	if err != nil {
		f.close()
		_ = os.Remove(path) // best effort: a lease file left behind goes stale and is ignored
		return nil, err
	}
	l := &Lease{m: m, cfg: cfg, info: info, file: f, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	go l.heartbeat()
	return l, nil
}

// Env is the leased environment's configuration (Dir is where the trainer
// runs).
func (l *Lease) Env() Config { return l.cfg }

// File is the path of this lease's file.
func (l *Lease) File() string { return l.file.path }

// Lost is closed if the lease can no longer be trusted: its file was removed
// (aml env unlock judged it stale), or a rebuild started while it was held
// (possible only if this process stopped heartbeating long enough to look
// stale, e.g. it was suspended). Err then says which.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease is sound, else why it was lost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

func (l *Lease) markLost(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr == nil {
		l.lostErr = err
		close(l.lost)
	}
}

func (l *Lease) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(l.m.heartbeat)
	defer t.Stop()
	name := l.cfg.Name
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if !l.file.ours() {
			l.markLost(core.Errorf(core.CodeEnvBusy, "read lease on %q lost: its file %s was removed (judged stale?)", name, l.file.path))
			return // never recreate it: a rebuild may be running
		}
		// A failed beat is retried at the next tick; if the file goes stale
		// and is removed meanwhile, ours() above reports the loss.
		_ = l.file.beat()
		// A lock in phase "checking" may be a rebuild about to back off
		// because of this very lease; only "running" means it got past us.
		if ls, _ := l.m.readLock(name); ls != nil && ls.Phase == PhaseRunning {
			l.markLost(core.Errorf(core.CodeEnvBusy, "read lease on %q lost: a rebuild started while it was held (%s, pid %d)", name, ls.Owner, ls.PID))
		} else if lr, _ := l.m.readLast(name); lr != nil && lr.StartedAt > l.info.StartedAt {
			l.markLost(core.Errorf(core.CodeEnvBusy, "read lease on %q lost: the environment was rebuilt at %s while it was held", name, time.UnixMilli(lr.FinishedAt).UTC().Format(time.RFC3339)))
		}
	}
}

// Release ends the lease and removes its file. It is idempotent.
func (l *Lease) Release() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		if l.file.ours() {
			// Best effort: with the heartbeat stopped, a file left behind
			// goes stale and is ignored (aml env unlock removes it).
			_ = os.Remove(l.file.path)
		}
		l.file.close()
	})
}

// String describes the lease.
func (l *Lease) String() string {
	return fmt.Sprintf("read lease on %s by %s (pid %d)", l.cfg.Name, l.info.Holder, l.info.PID)
}
