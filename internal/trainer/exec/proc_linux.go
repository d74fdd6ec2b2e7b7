//go:build linux

package extrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The write sandbox. Landlock restricts the calling thread and what it
// executes, so it has to be applied in the child between fork and exec,
// which os.StartProcess cannot do. The runner therefore starts its own
// executable (/proc/self/exe) with argv[0] = shimArg0 and the configuration
// in shimEnv; this package's init function recognises that, restricts the
// thread, removes shimEnv from the environment and execs the real command.
// Success or failure of that step is reported on fd 3, a close-on-exec pipe:
// EOF without data means the exec succeeded.
const (
	shimEnv  = "AML_EXTRUN_SHIM"
	shimArg0 = "aml-extrun-shim"
)

type shimConfig struct {
	Writable []string `json:"writable"`
	// Readable lists what may be read (and executed) besides Writable when
	// RestrictReads is set: directories (everything beneath) and files.
	Readable      []string `json:"readable,omitempty"`
	RestrictReads bool     `json:"restrictReads,omitempty"`
}

func init() {
	if len(os.Args) < 2 || os.Args[0] != shimArg0 {
		return
	}
	cfg, ok := os.LookupEnv(shimEnv)
	if !ok {
		return
	}
	shimMain(cfg)
}

// shimMain never returns.
func shimMain(cfg string) {
	runtime.LockOSThread() // Landlock and no_new_privs are per thread
	status := os.NewFile(3, "aml-extrun-status")
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		_, _ = status.WriteString(msg) // if this fails, stderr below still says it
		fmt.Fprintln(os.Stderr, "[aml-runner] "+msg)
		os.Exit(127)
	}
	syscall.CloseOnExec(3)
	var c shimConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fail("sandbox: bad configuration: %v", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, shimEnv+"=") {
			env = append(env, kv)
		}
	}
	if err := restrict(c); err != nil {
		fail("sandbox: %v", err)
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], env)
	fail("exec %s: %v", os.Args[1], err)
}

var landlockVersion = sync.OnceValue(func() int {
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(r)
})

// landlockABI is the kernel's Landlock ABI version, 0 if unavailable.
func landlockABI() int { return landlockVersion() }

var selfExe = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/exe")
	return err == nil
})

func shimPossible() bool { return selfExe() }

// rulesetAttr is struct landlock_ruleset_attr up to "scoped" (ABI 6).
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// writeAccess is every file-system right that changes something. Reading
// and executing are not restricted.
func writeAccess(abi int) uint64 {
	a := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		a |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		a |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return a
}

// readAccess is reading files and directories and executing.
const readAccess = uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)

// fileAccess are the rights a rule on a file (not a directory) may carry.
const fileAccess = uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
	unix.LANDLOCK_ACCESS_FS_TRUNCATE)

// writableDevices may be opened for writing (and truncated: "> /dev/null").
var writableDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// systemReadable is what a program and its interpreter need to run —
// binaries, shared libraries, the interpreters' standard libraries, the
// loader and name-service configuration, the process's own /proc entry,
// CPU information — and nothing of AML's data. Paths that do not exist
// are skipped.
var systemReadable = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
	"/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/mime.types",
	"/etc/python3", "/etc/alternatives",
	"/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/filesystems", "/sys/devices/system/cpu", "/sys/fs/cgroup"}

// restrict confines the calling thread (and what it executes) so that it
// can change files only under c.Writable, /dev/shm and the devices above,
// and, with c.RestrictReads, read and execute only those, c.Readable and
// systemReadable; with ABI ≥ 6 it also cannot send signals to processes
// outside its domain.
func restrict(c shimConfig) error {
	dirs := c.Writable
	abi := landlockABI()
	if abi < 1 {
		return errors.New("no Landlock support in this kernel")
	}
	handled := writeAccess(abi)
	if c.RestrictReads {
		handled |= readAccess
	}
	attr := rulesetAttr{handledFS: handled}
	size := unsafe.Sizeof(attr.handledFS)
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %v", e)
	}
	rs := int(r)
	defer func() { _ = unix.Close(rs) }() // a ruleset fd: nothing to flush
	for _, d := range dirs {
		if err := addRule(rs, d, handled); err != nil {
			return err
		}
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if err := addRule(rs, "/dev/shm", handled); err != nil {
			return err
		}
	}
	dev := handled & (unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_READ_FILE)
	for _, p := range writableDevices {
		if _, err := os.Stat(p); err == nil {
			if err := addRule(rs, p, dev); err != nil {
				return err
			}
		}
	}
	if c.RestrictReads {
		for _, p := range append(append([]string(nil), systemReadable...), c.Readable...) {
			st, err := os.Stat(p)
			if err != nil {
				continue // absent on this system
			}
			access := readAccess
			if !st.IsDir() {
				access &= fileAccess
			}
			if err := addRule(rs, p, access); err != nil {
				return err
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %v", e)
	}
	return nil
}

func addRule(rs int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %v", path, err)
	}
	defer func() { _ = unix.Close(fd) }() // an O_PATH fd: nothing to flush
	pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock_add_rule %s: %v", path, e)
	}
	return nil
}

// shimTimeout bounds the shim's start-up (a Go binary's initialisation).
const shimTimeout = 30 * time.Second

// startShim starts the command through the Landlock shim and waits until it
// has exec'd the real command (or failed to).
func startShim(l *launch, attr *os.ProcAttr) (*os.Process, error) {
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(shimConfig{Writable: l.writable, Readable: l.readable, RestrictReads: l.restrictReads})
	if err != nil {
		sr.Close()
		sw.Close()
		return nil, err
	}
	a := *attr
	a.Env = append(append([]string(nil), l.env...), shimEnv+"="+string(cfg))
	a.Files = append(append([]*os.File(nil), attr.Files...), sw)
	p, err := os.StartProcess("/proc/self/exe", append([]string{shimArg0}, l.argv...), &a)
	sw.Close()
	if err != nil {
		sr.Close()
		return nil, err
	}
	// Without the deadline a hung shim would block the read for ever.
	var msg []byte
	rerr := sr.SetReadDeadline(time.Now().Add(shimTimeout))
	if rerr == nil {
		msg, rerr = io.ReadAll(io.LimitReader(sr, 4096))
	}
	sr.Close()
	if len(msg) == 0 && rerr == nil {
		return p, nil
	}
	// p is not reaped yet: its group id is ours (ESRCH: it is gone already).
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_, _ = p.Wait() // reap it: its status adds nothing to msg
	if len(msg) == 0 {
		msg = []byte("sandbox shim did not start: " + rerr.Error())
	}
	return nil, errors.New(string(msg))
}

// waitAndReap waits until p exited, calls beforeReap while p is a zombie
// (so its pid — the process group id — cannot be reused yet) and reaps it.
func waitAndReap(p *os.Process, beforeReap func()) (*os.ProcessState, error) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	beforeReap()
	return p.Wait()
}
