//go:build !unix

package extrun

import (
	"errors"
	"os"
	"syscall"
)

const shimEnv = "AML_EXTRUN_SHIM"

// errUnsupported is returned where child processes cannot be managed.
var errUnsupported = errors.New("external trainers need a Unix system")

func landlockABI() int { return 0 }

func shimPossible() bool { return false }

func startChild(l *launch, shim bool, stdin, stdout, stderr *os.File) (*os.Process, error) {
	return nil, errUnsupported
}

func signalGroup(pgid int, sig syscall.Signal) {}

func waitAndReap(p *os.Process, beforeReap func()) (*os.ProcessState, error) {
	st, err := p.Wait()
	beforeReap()
	return st, err
}

func exitInfo(st *os.ProcessState) (int, string, bool) {
	if st == nil {
		return -1, "", false
	}
	return st.ExitCode(), "", false
}
