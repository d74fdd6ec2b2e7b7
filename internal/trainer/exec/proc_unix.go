//go:build unix

package extrun

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// startChild starts l's command in a new process group with stdin, stdout
// and stderr as given, through the Landlock shim when shim is true.
func startChild(l *launch, shim bool, stdin, stdout, stderr *os.File) (*os.Process, error) {
	attr := &os.ProcAttr{
		Dir:   l.dir,
		Env:   l.env,
		Files: []*os.File{stdin, stdout, stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	setDeathSignal(attr.Sys)
	if shim {
		return startShim(l, attr)
	}
	return os.StartProcess(l.argv[0], l.argv, attr)
}

// signalGroup sends sig to the process group pgid (ESRCH is ignored: the
// group is already gone).
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig) // ESRCH is the only failure for our own child's group
	}
}

// exitInfo returns the exit code (-1 if signalled or unknown), the signal
// name and whether the process died by a signal.
func exitInfo(st *os.ProcessState) (int, string, bool) {
	if st == nil {
		return -1, "", false
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok {
		return st.ExitCode(), "", false
	}
	if ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = "signal " + strconv.Itoa(int(ws.Signal()))
		}
		return -1, name, true
	}
	return ws.ExitStatus(), "", false
}
