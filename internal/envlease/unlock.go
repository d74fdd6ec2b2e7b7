package envlease

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// UnlockResult says what Unlock removed.
type UnlockResult struct {
	Name string `json:"name"`
	// RemovedLock is the lock file removed, nil if there was none.
	RemovedLock *LockState `json:"removedLock"`
	// RemovedReaders are the stale lease files removed.
	RemovedReaders []ReaderState `json:"removedReaders"`
	// KeptReaders are stale lease files whose pid is still alive on this
	// host (a stopped or hung job): left alone.
	KeptReaders []ReaderState `json:"keptReaders"`
}

// Unlock clears what an interrupted rebuild or crashed job left behind:
// stale lease files whose holder is gone, and the lock file. A stale lock
// is removed; a live one is refused (ENV_BUSY) unless force, and even with
// force when its pid is alive on this host, unless that process started
// after the lock was taken (the pid was reused). Removal re-checks the
// token, so a lock taken by someone else meanwhile is never removed.
func (m *Manager) Unlock(name string, force bool) (UnlockResult, error) {
	res := UnlockResult{Name: name, RemovedReaders: []ReaderState{}, KeptReaders: []ReaderState{}}
	if _, err := m.Env(name); err != nil {
		return res, err
	}
	_, stale, err := m.readReaders(name)
	if err != nil {
		return res, err
	}
	for _, r := range stale {
		if r.PIDAlive == "yes" {
			res.KeptReaders = append(res.KeptReaders, r)
			continue
		}
		if err := os.Remove(r.File); err == nil || errors.Is(err, os.ErrNotExist) {
			res.RemovedReaders = append(res.RemovedReaders, r)
		} else {
			return res, core.Wrap(core.CodeInternal, err, "remove stale lease %s", r.File)
		}
	}
	ls, err := m.readLock(name)
	if err != nil || ls == nil {
		return res, err
	}
	if ls.PIDAlive == "yes" {
		reused := false
		if start, ok := procStartMs(ls.PID); ok && ls.StartedAt > 0 && start > ls.StartedAt+2000 {
			reused = true
		}
		switch {
		case reused && !force:
			return res, core.Errorf(core.CodeEnvBusy, "unlock refused: the lock of %q names pid %d, which is running on this host but started after the lock was taken (%s), so it is probably another process reusing the pid; if so, clear the lock with 'aml env unlock %s --force'",
				name, ls.PID, time.UnixMilli(ls.StartedAt).UTC().Format(time.RFC3339), name)
		case !reused && ls.Stale:
			return res, core.Errorf(core.CodeEnvBusy, "unlock refused (even --force never removes the lock of a process running on this host): %s", m.clearHint(name, ls))
		case !reused:
			return res, core.Errorf(core.CodeEnvBusy, "unlock refused (even --force never removes the lock of a process running on this host): environment %q is being rebuilt by %q (pid %d, heartbeat %s ago)",
				name, ls.Owner, ls.PID, fmtAge(time.Duration(ls.HeartbeatAgeSeconds*float64(time.Second))))
		}
	} else if ls.CommandAlive == "yes" {
		return res, core.Errorf(core.CodeEnvBusy, "unlock refused (even --force never removes the lock of a process running on this host): %s", ls.Hint)
	} else if !ls.Stale && !force {
		return res, core.Errorf(core.CodeEnvBusy, "unlock refused: the lock of %q looks live (owner %q, pid %d on host %s, heartbeat %s ago); if you are sure that rebuild is gone, use 'aml env unlock %s --force'",
			name, ls.Owner, ls.PID, ls.Hostname, fmtAge(time.Duration(ls.HeartbeatAgeSeconds*float64(time.Second))), name)
	}
	// Re-read just before removing: never delete a lock that changed hands.
	var cur LockInfo
	_, rerr := readJSON(ls.File, &cur)
	switch {
	case errors.Is(rerr, os.ErrNotExist):
		return res, nil // released meanwhile
	case rerr == nil && (ls.Unreadable || cur.Token != ls.Token), rerr != nil && !ls.Unreadable:
		return res, core.Errorf(core.CodeEnvBusy, "unlock refused: the lock of %q changed while unlocking (a new rebuild?); look again with 'aml env list'", name)
	}
	if err := os.Remove(ls.File); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, core.Wrap(core.CodeInternal, err, "remove lock %s", ls.File)
	}
	res.RemovedLock = ls
	return res, nil
}

// String summarises the result for humans.
func (r UnlockResult) String() string {
	s := ""
	if r.RemovedLock != nil {
		s = fmt.Sprintf("removed the lock of %q (owner %q, pid %d on %s)", r.Name, r.RemovedLock.Owner, r.RemovedLock.PID, r.RemovedLock.Hostname)
	} else {
		s = fmt.Sprintf("%q has no lock", r.Name)
	}
	s += fmt.Sprintf("; removed %d stale read lease(s)", len(r.RemovedReaders))
	if n := len(r.KeptReaders); n > 0 {
		s += fmt.Sprintf("; kept %d stale read lease(s) whose process is still running on this host", n)
	}
	return s
}
