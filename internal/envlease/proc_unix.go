//go:build unix

package envlease

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// procAlive reports whether pid names a running (not zombie) process on this
// host. EPERM means it exists but belongs to someone else: alive.
func procAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return !procZombie(pid)
}

// setupRebuildCmd runs the rebuild in its own process group so that
// cancelling (Ctrl-C, SIGTERM on aml) sends SIGTERM to the whole group, and
// bounds how long Wait waits for it and its output pipes afterwards.
func setupRebuildCmd(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
	c.WaitDelay = 10 * time.Second
}
