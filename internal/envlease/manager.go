package envlease

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// DefaultHeartbeat is how often lock and lease files are refreshed. A file
// whose heartbeat is older than StaleAfter heartbeats is stale.
const (
	DefaultHeartbeat = 2 * time.Second
	StaleAfter       = 3
)

// CodeRebuildFailed is the error code of a rebuild command that could not
// be started or exited with a non-zero status (HTTP 500); registered in
// internal/core/codes.go.
const CodeRebuildFailed = core.CodeEnvRebuildFailed

// Manager coordinates the environments of one data directory. Any number of
// Managers, in any number of processes, may share a data directory: all
// coordination goes through files under <dataDir>/runtime.
type Manager struct {
	dataDir   string
	runtime   string
	envs      []Config
	heartbeat time.Duration
	hostname  string
	pidNS     string
}

// Option adjusts a Manager.
type Option func(*Manager)

// WithHeartbeat sets the heartbeat interval (default DefaultHeartbeat).
// Every process sharing a data directory should use the same interval: a
// file is stale after StaleAfter intervals of the reader's own setting.
func WithHeartbeat(d time.Duration) Option {
	return func(m *Manager) {
		if d > 0 {
			m.heartbeat = d
		}
	}
}

// Open loads <dataDir>/envs.json (a JSON array of Config; if it is absent,
// one default "python" venv under <dataDir>/envs/python). It creates
// nothing: the runtime directory is made when first needed.
func Open(dataDir string, opts ...Option) (*Manager, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "data dir %s", dataDir)
	}
	envs, err := loadConfigs(abs)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	m := &Manager{dataDir: abs, runtime: filepath.Join(abs, "runtime"), envs: envs, heartbeat: DefaultHeartbeat, hostname: host, pidNS: pidNamespace()}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// Envs returns the configured environments.
func (m *Manager) Envs() []Config { return append([]Config(nil), m.envs...) }

// Env returns one environment's configuration (AML_NOT_FOUND if unknown).
func (m *Manager) Env(name string) (Config, error) {
	for _, c := range m.envs {
		if c.Name == name {
			return c, nil
		}
	}
	names := make([]string, len(m.envs))
	for i, c := range m.envs {
		names[i] = c.Name
	}
	return Config{}, core.Errorf(core.CodeNotFound, "environment %q not found (configured: %s; see %s)", name, strings.Join(names, ", "), filepath.Join(m.dataDir, ConfigFile))
}

// Dir returns an environment's directory, false if the name is unknown.
func (m *Manager) Dir(name string) (string, bool) {
	for _, c := range m.envs {
		if c.Name == name {
			return c.Dir, true
		}
	}
	return "", false
}

func (m *Manager) lockPath(name string) string {
	return filepath.Join(m.runtime, "env-"+name+".lock")
}
func (m *Manager) readersDir(name string) string {
	return filepath.Join(m.runtime, "env-"+name+".readers")
}
func (m *Manager) lastPath(name string) string {
	return filepath.Join(m.runtime, "env-"+name+".last.json")
}

// local reports whether a holder's pid can be checked from here: same host
// name and same pid namespace.
func (m *Manager) local(host, ns string) bool {
	return host == m.hostname && ns == m.pidNS
}

func (m *Manager) staleLimit() time.Duration { return StaleAfter * m.heartbeat }

// judge decides whether a holder is alive. On this host a dead pid makes it
// stale at once; anywhere, a heartbeat older than StaleAfter intervals does.
func (m *Manager) judge(file string, pid int, host, ns string, hbMs int64, mtime time.Time, unreadable bool) Liveness {
	l := Liveness{File: file, PIDAlive: "unknown", Unreadable: unreadable}
	age := time.Since(time.UnixMilli(hbMs))
	if unreadable {
		age = time.Since(mtime)
	}
	l.HeartbeatAgeSeconds = max(0, age.Seconds())
	var reasons []string
	if unreadable {
		reasons = append(reasons, "file is unreadable")
	}
	if !unreadable && m.local(host, ns) {
		if procAlive(pid) {
			l.PIDAlive = "yes"
		} else {
			l.PIDAlive = "no"
			reasons = append(reasons, fmt.Sprintf("pid %d is not running on this host", pid))
		}
	}
	if age > m.staleLimit() {
		reasons = append(reasons, fmt.Sprintf("heartbeat is %s old (stale after %s)", fmtAge(age), m.staleLimit()))
	}
	if l.PIDAlive == "no" || age > m.staleLimit() {
		l.Stale = true
		l.Reason = strings.Join(reasons, "; ")
	}
	return l
}

func fmtAge(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// readLock returns the lock file's state, or nil if there is none.
func (m *Manager) readLock(name string) (*LockState, error) {
	path := m.lockPath(name)
	var li LockInfo
	mtime, err := readJSON(path, &li)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var pe *parseError
	unreadable := errors.As(err, &pe)
	if err != nil && !unreadable {
		return nil, core.Wrap(core.CodeInternal, err, "read lock %s", path)
	}
	ls := &LockState{LockInfo: li, Liveness: m.judge(path, li.PID, li.Hostname, li.PIDNamespace, li.HeartbeatAt, mtime, unreadable)}
	if li.CommandPID > 0 && m.local(li.Hostname, li.PIDNamespace) && !unreadable {
		ls.CommandAlive = "no"
		if m.commandAlive(ls) {
			ls.CommandAlive = "yes"
		}
	}
	if ls.Stale {
		ls.Hint = m.clearHint(name, ls)
	}
	return ls, nil
}

// readReaders returns the reader files of an environment, live first.
func (m *Manager) readReaders(name string) (live, stale []ReaderState, err error) {
	dir := m.readersDir(name)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, core.Wrap(core.CodeInternal, err, "list readers %s", dir)
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".lease") {
			continue
		}
		path := filepath.Join(dir, n)
		var ri ReaderInfo
		mtime, err := readJSON(path, &ri)
		if errors.Is(err, os.ErrNotExist) {
			continue // released meanwhile
		}
		var pe *parseError
		unreadable := errors.As(err, &pe)
		if err != nil && !unreadable {
			return nil, nil, core.Wrap(core.CodeInternal, err, "read lease %s", path)
		}
		rs := ReaderState{ReaderInfo: ri, Liveness: m.judge(path, ri.PID, ri.Hostname, ri.PIDNamespace, ri.HeartbeatAt, mtime, unreadable)}
		if rs.Stale {
			stale = append(stale, rs)
		} else {
			live = append(live, rs)
		}
	}
	return live, stale, nil
}

// LastRebuild is the record of an environment's latest finished rebuild,
// <dataDir>/runtime/env-<name>.last.json.
type LastRebuild struct {
	Owner      string  `json:"owner"`
	StartedAt  int64   `json:"startedAt"`  // unix ms
	FinishedAt int64   `json:"finishedAt"` // unix ms
	Seconds    float64 `json:"seconds"`
	OK         bool    `json:"ok"`
	ExitCode   int     `json:"exitCode"` // -1 if the command did not start or was killed by a signal
	Error      string  `json:"error,omitempty"`
}

func (m *Manager) readLast(name string) (*LastRebuild, error) {
	var lr LastRebuild
	_, err := readJSON(m.lastPath(name), &lr)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "read %s", m.lastPath(name))
	}
	return &lr, nil
}

// Status is one environment's state.
type Status struct {
	Name        string   `json:"name"`
	Dir         string   `json:"dir"`
	Description string   `json:"description,omitempty"`
	Rebuild     []string `json:"rebuild"`
	// Readers counts the live read leases (all processes); Holders lists them.
	Readers int           `json:"readers"`
	Holders []ReaderState `json:"holders"`
	// StaleReaders are lease files whose holder looks gone. They do not
	// block a rebuild (which reports them); aml env unlock removes them.
	StaleReaders []ReaderState `json:"staleReaders"`
	// Rebuilding is the exclusive lock, nil when none. Its Stale field says
	// whether the rebuild looks interrupted.
	Rebuilding *LockState `json:"rebuilding"`
	// Stale is true when the lock or any reader file is stale.
	Stale       bool         `json:"stale"`
	LastRebuild *LastRebuild `json:"lastRebuild"`
}

// Status returns one environment's state.
func (m *Manager) Status(name string) (Status, error) {
	c, err := m.Env(name)
	if err != nil {
		return Status{}, err
	}
	st := Status{Name: c.Name, Dir: c.Dir, Description: c.Description, Rebuild: c.Rebuild, Holders: []ReaderState{}, StaleReaders: []ReaderState{}}
	live, stale, err := m.readReaders(name)
	if err != nil {
		return Status{}, err
	}
	st.Holders = append(st.Holders, live...)
	st.StaleReaders = append(st.StaleReaders, stale...)
	sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].StartedAt < st.Holders[j].StartedAt })
	st.Readers = len(live)
	if st.Rebuilding, err = m.readLock(name); err != nil {
		return Status{}, err
	}
	st.Stale = len(stale) > 0 || (st.Rebuilding != nil && st.Rebuilding.Stale)
	if st.LastRebuild, err = m.readLast(name); err != nil {
		return Status{}, err
	}
	return st, nil
}

// List returns every environment's state, in configuration order.
func (m *Manager) List() ([]Status, error) {
	out := make([]Status, 0, len(m.envs))
	for _, c := range m.envs {
		st, err := m.Status(c.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// commandAlive reports whether the lock's rebuild command still runs here.
// A process that started after the lock's last heartbeat is not that
// command but a reuse of its pid.
func (m *Manager) commandAlive(ls *LockState) bool {
	if !procAlive(ls.CommandPID) {
		return false
	}
	start, ok := procStartMs(ls.CommandPID)
	return !ok || start <= ls.HeartbeatAt+2000
}

// busyLock builds the ENV_BUSY error for an existing lock file.
func (m *Manager) busyLock(name string, ls *LockState, what string) error {
	who := fmt.Sprintf("owner %q, pid %d on host %s", ls.Owner, ls.PID, ls.Hostname)
	if ls.Unreadable {
		who = "owner unknown (file unreadable)"
	}
	if !ls.Stale {
		return core.Errorf(core.CodeEnvBusy, "%s: environment %q is being rebuilt (%s, started %s ago, heartbeat %s ago); retry when the rebuild is done",
			what, name, who, fmtAge(time.Since(time.UnixMilli(ls.StartedAt))), fmtAge(time.Duration(ls.HeartbeatAgeSeconds*float64(time.Second))))
	}
	age := fmtAge(time.Duration(ls.HeartbeatAgeSeconds * float64(time.Second)))
	if !ls.Unreadable {
		who += fmt.Sprintf(", started %s ago", fmtAge(time.Since(time.UnixMilli(ls.StartedAt))))
	}
	return core.Errorf(core.CodeEnvBusy, "%s: environment %q has a lock file that looks stale (%s, last heartbeat %s ago; %s): %s", what, name, who, age, ls.Reason, m.clearHint(name, ls))
}

// clearHint says exactly how to clear a stale lock.
func (m *Manager) clearHint(name string, ls *LockState) string {
	tail := fmt.Sprintf("then rebuild the environment, which may be half built (aml env rebuild %s)", name)
	if ls.CommandAlive == "yes" && ls.PIDAlive != "yes" {
		return fmt.Sprintf("its owner is gone but the rebuild command it started (pid %d) is still running on this host: stop it first (kill -- -%d stops its process group), then clear the lock with 'aml env unlock %s --force', %s",
			ls.CommandPID, ls.CommandPID, name, tail)
	}
	if ls.PIDAlive == "yes" {
		return fmt.Sprintf("pid %d is still running on this host but no longer refreshes the lock (hung or stopped?): stop it first (kill %d), then clear the lock with 'aml env unlock %s --force', %s",
			ls.PID, ls.PID, name, tail)
	}
	where := "on host " + ls.Hostname
	if m.local(ls.Hostname, ls.PIDNamespace) {
		where = "on this host"
	}
	if ls.Unreadable {
		return fmt.Sprintf("the lock file %s is unreadable; after confirming no rebuild of %q is running, clear it with 'aml env unlock %s --force', %s", ls.File, name, name, tail)
	}
	return fmt.Sprintf("after confirming the process (pid %d %s) is gone, clear it with 'aml env unlock %s --force', %s", ls.PID, where, name, tail)
}
