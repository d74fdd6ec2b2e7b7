//go:build linux

package extrun

import "syscall"

// setDeathSignal makes the kernel kill the trainer if the worker process
// dies (kill -9 of the worker must not leave a trainer running unwatched).
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
