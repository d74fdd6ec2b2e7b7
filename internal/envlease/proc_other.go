//go:build !unix

package envlease

import (
	"os/exec"
	"time"
)

// procAlive cannot check processes here: it answers "alive", so only the
// heartbeat can make a holder stale.
func procAlive(pid int) bool { return pid > 0 }

func setupRebuildCmd(c *exec.Cmd) { c.WaitDelay = 10 * time.Second }
