//go:build unix && !linux

package extrun

import "syscall"

// setDeathSignal: no parent-death signal outside Linux; recovery kills the
// recorded process group instead.
func setDeathSignal(*syscall.SysProcAttr) {}
