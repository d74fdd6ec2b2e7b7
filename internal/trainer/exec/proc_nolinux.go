//go:build unix && !linux

package extrun

import (
	"errors"
	"os"
)

const shimEnv = "AML_EXTRUN_SHIM"

// landlockABI is 0: Landlock is Linux-only.
func landlockABI() int { return 0 }

func shimPossible() bool { return false }

func startShim(l *launch, attr *os.ProcAttr) (*os.Process, error) {
	return nil, errors.New("no write sandbox on this system")
}

// waitAndReap waits for p. Without waitid(WNOWAIT) the process group cannot
// be pinned, so beforeReap runs after the reap (best effort: the group id
// could in theory have been reused by then).
func waitAndReap(p *os.Process, beforeReap func()) (*os.ProcessState, error) {
	st, err := p.Wait()
	beforeReap()
	return st, err
}
