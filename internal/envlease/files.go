package envlease

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// LockInfo is the content of an exclusive lock file
// <dataDir>/runtime/env-<name>.lock.
type LockInfo struct {
	Owner       string `json:"owner"`
	PID         int    `json:"pid"`
	Hostname    string `json:"hostname"`
	HeartbeatAt int64  `json:"heartbeatAt"` // unix ms, refreshed while the rebuild runs
	Token       string `json:"token"`       // random; release removes the file only if it matches
	StartedAt   int64  `json:"startedAt"`   // unix ms
	// PIDNamespace identifies the pid namespace on Linux (a container on
	// the same host may share the hostname but not the pids).
	PIDNamespace string `json:"pidNamespace,omitempty"`
	// Phase is PhaseChecking from creation until the rebuild has verified
	// that no reader holds a lease, then PhaseRunning.
	Phase string `json:"phase"`
	// CommandPID is the rebuild command's pid (and process group), once
	// started. If the owner dies, the command may live on.
	CommandPID int `json:"commandPid,omitempty"`
}

// Lock phases.
const (
	PhaseChecking = "checking"
	PhaseRunning  = "running"
)

// ReaderInfo is the content of a read-lease file
// <dataDir>/runtime/env-<name>.readers/<holder>-<pid>-<token>.lease.
type ReaderInfo struct {
	Holder      string `json:"holder"`
	PID         int    `json:"pid"`
	Hostname    string `json:"hostname"`
	HeartbeatAt int64  `json:"heartbeatAt"` // unix ms, refreshed while the lease is held
	Token       string `json:"token"`
	StartedAt   int64  `json:"startedAt"` // unix ms
	// PIDNamespace: see LockInfo.
	PIDNamespace string `json:"pidNamespace,omitempty"`
}

// Liveness is how a lock or reader file was judged.
type Liveness struct {
	// File is the path of the lock or lease file.
	File string `json:"file"`
	// Stale is true when the holder looks gone: its pid is not running on
	// this host, or its heartbeat is older than 3 heartbeat intervals.
	Stale bool `json:"stale"`
	// Reason explains Stale (empty when live).
	Reason string `json:"reason,omitempty"`
	// HeartbeatAgeSeconds is how old the last heartbeat is.
	HeartbeatAgeSeconds float64 `json:"heartbeatAgeSeconds"`
	// PIDAlive is "yes" or "no" for a holder on this host, "unknown" for
	// one on another host (only the heartbeat can tell).
	PIDAlive string `json:"pidAlive"`
	// Unreadable is set when the file could not be parsed; its age is then
	// its modification time.
	Unreadable bool `json:"unreadable,omitempty"`
}

// LockState is a lock file as seen by [Manager.List] and the errors.
type LockState struct {
	LockInfo
	Liveness
	// CommandAlive is "yes" when the rebuild command (CommandPID) still runs
	// on this host, "no" when it does not, empty when unknown.
	CommandAlive string `json:"commandAlive,omitempty"`
	// Hint says how to clear a stale lock (empty when live).
	Hint string `json:"hint,omitempty"`
}

// ReaderState is a reader file as seen by [Manager.List] and [Manager.Rebuild].
type ReaderState struct {
	ReaderInfo
	Liveness
}

func newToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func nowMs() int64 { return time.Now().UnixMilli() }

// pad renders v as JSON padded with spaces to size bytes (at least), ending
// in a newline. Every rewrite of a heartbeat file has the same size, so it is
// one pwrite at offset 0 that never truncates: a concurrent reader never
// sees an empty file.
func pad(v any, size int) []byte {
	b, _ := json.Marshal(v)
	if n := len(b) + 1; n > size {
		size = n
	}
	out := bytes.Repeat([]byte{' '}, size)
	copy(out, b)
	out[size-1] = '\n'
	return out
}

// fileSize picks the fixed size of a heartbeat file: the JSON plus room for
// the heartbeat to grow, rounded up to 256 bytes.
func fileSize(v any) int {
	b, _ := json.Marshal(v)
	return (len(b) + 64 + 255) / 256 * 256
}

// hbFile is an open lock or lease file whose heartbeat this process
// refreshes through its descriptor. Writing through the descriptor (never by
// path) means a heartbeat can never recreate or overwrite a file that was
// removed and replaced by someone else.
type hbFile struct {
	mu     sync.Mutex // one render+write at a time, so the newest state wins
	path   string
	f      *os.File
	size   int
	render func(hb int64) any
}

func (h *hbFile) beat() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.f.WriteAt(pad(h.render(nowMs()), h.size), 0)
	return err
}

// ours reports whether path still names the file this process created.
func (h *hbFile) ours() bool {
	a, err := h.f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(h.path)
	return err == nil && os.SameFile(a, b)
}

// close closes the file: every beat is a complete WriteAt, so Close has
// nothing left to write.
func (h *hbFile) close() { _ = h.f.Close() }

// writeTemp writes a fully rendered heartbeat file under a hidden temporary
// name next to path and returns it open.
func writeTemp(path string, render func(int64) any) (*hbFile, string, error) {
	v := render(nowMs())
	size := fileSize(v)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+newToken()+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, "", err
	}
	if _, err := f.WriteAt(pad(v, size), 0); err != nil {
		f.Close()
		_ = os.Remove(tmp) // best effort: the write error is what matters
		return nil, "", err
	}
	h := &hbFile{path: path, f: f, size: size, render: render}
	return h, tmp, nil
}

// createExclusive creates path with the rendered content, failing with
// os.ErrExist if it already exists. It writes a temporary file and links it
// into place: link(2) fails with EEXIST exactly like open(O_CREAT|O_EXCL),
// but the file appears with its full content, so no reader ever sees a
// half-written lock. Where hard links are not supported it falls back to
// O_EXCL and then writes the content.
func createExclusive(path string, render func(int64) any) (*hbFile, error) {
	h, tmp, err := writeTemp(path, render)
	if err != nil {
		return nil, err
	}
	// The temporary name goes either way (linked or not); a leftover is a
	// hidden file nobody reads.
	defer func() { _ = os.Remove(tmp) }()
	lerr := os.Link(tmp, path)
	if lerr == nil {
		return h, nil
	}
	h.close()
	if errors.Is(lerr, os.ErrExist) {
		return nil, os.ErrExist
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	h.f = f
	if err := h.beat(); err != nil {
		f.Close()
		_ = os.Remove(path) // best effort: an empty lock file goes stale like any other
		return nil, err
	}
	return h, nil
}

// createUnique publishes a file under a name nobody else uses (a reader
// file): temporary file, then rename, so it appears complete.
func createUnique(path string, render func(int64) any) (*hbFile, error) {
	h, tmp, err := writeTemp(path, render)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		h.close()
		_ = os.Remove(tmp) // best effort: the rename error is what matters
		return nil, err
	}
	return h, nil
}

// readJSON parses a heartbeat file, retrying briefly if a concurrent
// rewrite made it momentarily unparsable. It returns the file's
// modification time too.
func readJSON(path string, v any) (time.Time, error) {
	var lastErr error
	var mtime time.Time
	for i := 0; i < 3; i++ {
		if i > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return time.Time{}, err
		}
		mtime = fi.ModTime()
		b, err := os.ReadFile(path)
		if err != nil {
			return mtime, err
		}
		if lastErr = json.Unmarshal(bytes.TrimSpace(b), v); lastErr == nil {
			return mtime, nil
		}
	}
	return mtime, &parseError{lastErr}
}

type parseError struct{ err error }

func (e *parseError) Error() string { return "unparsable: " + e.err.Error() }

// writeAtomic writes a small file by temporary file and rename.
func writeAtomic(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+newToken()+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp) // best effort: the rename error is what matters
		return err
	}
	return nil
}

// safeName makes a holder name usable in a file name.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	out := strings.TrimLeft(b.String(), ".")
	if out == "" {
		return "job"
	}
	return out
}
