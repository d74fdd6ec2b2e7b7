//go:build linux

package dataset

import (
	"os"
	"syscall"
)

// oDirect is the open flag for writes that bypass the page cache.
const oDirect = syscall.O_DIRECT

// setDirect turns O_DIRECT on or off for an open file.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		if e != 0 {
			opErr = e
			return
		}
		if on {
			fl |= syscall.O_DIRECT
		} else {
			fl &^= syscall.O_DIRECT
		}
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, fl); e != 0 {
			opErr = e
		}
	}); err != nil {
		return err
	}
	return opErr
}
