// Package extrun runs external trainers and executable predictors — programs
// in any language — as child processes (directory internal/trainer/exec;
// the package is named extrun so that it does not shadow os/exec).
//
// The protocol is described in docs/external-trainer.md. In short:
//
//   - the child runs in its own process group with cwd = JobDir and an
//     environment built from a whitelist only (PATH, HOME=JobDir,
//     TMPDIR=JobDir/tmp, LANG, AML_JOB_DIR, Spec.AllowEnv, Spec.Env);
//   - stdout and stderr go to JobDir/logs/trainer.log (rotated, see
//     [Spec.LogMaxBytes]); stdout lines "##AML {json}" are events;
//   - on cancellation, wall timeout or stall the whole process group is sent
//     SIGTERM, then SIGKILL after [KillGrace]; [Run] returns only once the
//     child is reaped and its output drained;
//   - on Linux with Landlock (ABI ≥ 1) the child can write only under
//     JobDir (plus [Spec.ExtraWritable] and a few device files); elsewhere
//     writes outside JobDir are not prevented by the OS
//     ([Result.WriteRestricted] tells which).
//
// [Predict] runs an executable predictor per the aml.predict/1 protocol.
package extrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Error codes of this package (see internal/core for the shared ones).
const (
	// CodePredictInvalid: an executable predictor failed or produced an
	// unusable answer (missing yhat.f32, wrong size, NaN/Inf, non-zero
	// exit, timeout).
	CodePredictInvalid = core.CodePredictInvalid
	// CodeTrainerStartFailed: the trainer could not be started (command not
	// found or not executable, sandbox setup failed, …).
	CodeTrainerStartFailed = core.CodeTrainerStartFailed
)

// Limits and defaults.
const (
	// DefaultPath is the child's PATH unless Spec.PathOverride is set.
	DefaultPath = "/usr/local/bin:/usr/bin:/bin"
	// DefaultLogMaxBytes is the default size cap of one log file.
	DefaultLogMaxBytes = 8 << 20
	// LogKeep is how many rotated files (trainer.log.1 … .5) are kept
	// besides trainer.log: the log holds up to (LogKeep+1)× the cap.
	LogKeep = 5
	// MaxLineBytes is the longest line read; the rest of a longer line is
	// discarded (Result.Truncated).
	MaxLineBytes = 64 << 10
	// KillGrace is the time between SIGTERM and SIGKILL to the process
	// group.
	KillGrace = 2 * time.Second
	// DrainTimeout bounds how long output is read after the child exited
	// and its process group was killed (only a process that left the group
	// can keep the pipes open that long).
	DrainTimeout = 5 * time.Second
	// EventPrefix starts an event line on stdout.
	EventPrefix = "##AML "
	// LogName is the log file name under JobDir/logs.
	LogName = "trainer.log"
)

// Reasons a run ended (Result.Reason).
const (
	ReasonExited      = "exited"       // the child exited (any exit code)
	ReasonCancelled   = "cancelled"    // ctx was done
	ReasonTimeout     = "timeout"      // Spec.WallTimeout elapsed
	ReasonStalled     = "stalled"      // no progress/stage event for Spec.StallTimeout
	ReasonKilled      = "killed"       // died by a signal the runner did not send
	ReasonStartFailed = "start_failed" // never started
)

// Event types.
const (
	EventProgress = "progress"
	EventStage    = "stage"
	EventMetrics  = "metrics"
	EventError    = "error"
	EventDone     = "done"
)

// Sandbox modes (Spec.Sandbox).
const (
	SandboxAuto    = ""        // use Landlock when the kernel has it
	SandboxOff     = "off"     // never
	SandboxRequire = "require" // fail to start without it
)

// Spec describes one trainer run.
type Spec struct {
	// Command is the argv. argv[0]: a path containing "/" (relative paths
	// are resolved against the caller's working directory) must be an
	// executable file; a name without "/" is looked up in the child's PATH;
	// a "*.py" path is run as ["python3", path, args...] (python3 from the
	// child's PATH). "exec:" references are stripped by the caller.
	Command []string
	// JobDir is the absolute job directory; it must exist. The child runs
	// with cwd = JobDir; logs/ and tmp/ are created if missing.
	JobDir string
	// Env holds extra variables (e.g. AML_SEED). It cannot set PATH, HOME,
	// TMPDIR, AML_JOB_DIR or AML_PREDICT_DIR.
	Env map[string]string
	// AllowEnv names parent variables passed through when set (e.g.
	// VIRTUAL_ENV).
	AllowEnv []string
	// PathOverride replaces DefaultPath as the child's PATH.
	PathOverride string
	// LogMaxBytes caps one log file (0 = DefaultLogMaxBytes).
	LogMaxBytes int64
	// WallTimeout bounds the run from its start; 0 = none.
	WallTimeout time.Duration
	// StallTimeout: no "progress" or "stage" event for this long (counted
	// from the start, then from the last such event) stops the run; 0 =
	// none.
	StallTimeout time.Duration
	// ExtraWritable lists absolute directories outside JobDir the child
	// may write to under the Landlock sandbox (e.g. an artifacts directory
	// placed elsewhere).
	ExtraWritable []string
	// Sandbox is SandboxAuto (""), SandboxOff or SandboxRequire.
	Sandbox string
	// Readable lists absolute paths (directories or files) the child may
	// read under the Landlock sandbox besides JobDir, ExtraWritable, its
	// program (and a script's directory), the directories of VIRTUAL_ENV
	// and PYTHONPATH when passed through, and the system's libraries: e.g.
	// the dataset and the job's environment. Everything else is unreadable.
	Readable []string
	// Protect lists directories that must stay unreadable (the data
	// directory): a readable path that contains one is dropped (noted in
	// the log); paths beneath it (JobDir, the dataset) are unaffected.
	Protect []string
	// ReadAll leaves reads unrestricted (writes stay confined).
	ReadAll bool
}

// Event is one "##AML {json}" line of the child's stdout.
type Event struct {
	Type string // progress | stage | metrics | error | done
	// Raw is the JSON object as printed.
	Raw json.RawMessage
	// Progress is set for "progress" events: "progress" (0..1) or "pct"
	// (0..100), clamped to 0..1.
	Progress *float64
	// Stage is the "stage" field of "stage" events (and of any event that
	// has one).
	Stage string
	// Message is the "message" field, if a string.
	Message string
	// At is when the runner read the line.
	At time.Time
}

// Result describes a finished run.
type Result struct {
	// ExitCode is the exit status, or -1 if the child died by a signal or
	// never started.
	ExitCode int
	// Signal names the signal that ended the child ("SIGKILL"), "" if it
	// exited normally.
	Signal string
	// Reason is one of the Reason* constants.
	Reason string
	// Malformed counts "##AML " lines on stdout that are not a valid event.
	Malformed int
	// Truncated counts lines longer than MaxLineBytes (stdout and stderr).
	Truncated int
	// Lines counts lines read (stdout and stderr); Events the valid events.
	Lines  int
	Events int
	// Done is true once a "done" event was seen; DoneInfo is the last one.
	Done     bool
	DoneInfo json.RawMessage
	// LastError is the message of the last "error" event, or why the run
	// could not start.
	LastError string
	// Duration is from start to reaping the child.
	Duration time.Duration
	// LogFiles are the log files in chronological order (oldest first);
	// their concatenation is the log.
	LogFiles []string
	// LogDroppedBytes is how much output rotation dropped (the log keeps
	// its first file and the newest ones; see docs/external-trainer.md).
	LogDroppedBytes int64
	// WriteRestricted is true when the OS (Landlock) confined the child's
	// writes to JobDir (+ ExtraWritable).
	WriteRestricted bool
	// ReadRestricted is true when Landlock also confined the child's reads
	// to JobDir, Spec.Readable (minus what contains a Spec.Protect
	// directory), its program and the system's libraries.
	ReadRestricted bool
	// Files lists regular files under JobDir (outside logs/) created or
	// modified during the run, as slash-separated relative paths, sorted,
	// at most MaxReportedFiles.
	Files []string
}

// MaxReportedFiles caps Result.Files.
const MaxReportedFiles = 1000

// reserved environment names the caller cannot set through Env/AllowEnv.
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "AML_JOB_DIR": true, "AML_PREDICT_DIR": true, shimEnv: true}

// Run runs the trainer described by spec and returns once it is reaped and
// its output drained. onEvent (may be nil) is called for every valid event,
// in order, from a single goroutine; it should return quickly (the child
// blocks on a full pipe meanwhile).
//
// The error is non-nil only when the run could not start (invalid spec,
// command not found, sandbox unavailable with SandboxRequire, log not
// writable); Result.Reason is then "start_failed" and Result.LastError
// holds the same message. Every other outcome — including non-zero exits,
// signals, cancellation and timeouts — is reported in Result with a nil
// error.
func Run(ctx context.Context, spec Spec, onEvent func(Event)) (Result, error) {
	res := Result{ExitCode: -1, Reason: ReasonStartFailed}
	fail := func(err error) (Result, error) {
		res.LastError = err.Error()
		return res, err
	}
	if len(spec.Command) == 0 {
		return fail(core.FieldErrorf(core.CodeInvalidArgument, "command", "empty command"))
	}
	if !filepath.IsAbs(spec.JobDir) {
		return fail(core.FieldErrorf(core.CodeInvalidArgument, "jobDir", "must be an absolute path, got %q", spec.JobDir))
	}
	jobDir := filepath.Clean(spec.JobDir)
	if st, err := os.Stat(jobDir); err != nil || !st.IsDir() {
		return fail(core.FieldErrorf(core.CodeInvalidArgument, "jobDir", "%s is not a directory", jobDir))
	}
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(jobDir, d), 0o700); err != nil {
			return fail(core.Wrap(core.CodeInternal, err, "job directory"))
		}
	}
	path := DefaultPath
	if spec.PathOverride != "" {
		path = spec.PathOverride
	}
	env, err := buildEnv(path, jobDir, map[string]string{"AML_JOB_DIR": jobDir}, spec.AllowEnv, spec.Env)
	if err != nil {
		return fail(err)
	}
	argv, err := resolveCommand(spec.Command, path, "")
	if err != nil {
		return fail(err)
	}
	writable := []string{jobDir}
	for _, d := range spec.ExtraWritable {
		if !filepath.IsAbs(d) {
			return fail(core.FieldErrorf(core.CodeInvalidArgument, "extraWritable", "must be an absolute path, got %q", d))
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return fail(core.FieldErrorf(core.CodeInvalidArgument, "extraWritable", "%s is not a directory", d))
		}
		writable = append(writable, filepath.Clean(d))
	}
	if err := checkSandboxMode(spec.Sandbox); err != nil {
		return fail(err)
	}
	logMax := spec.LogMaxBytes
	if logMax <= 0 {
		logMax = DefaultLogMaxBytes
	}
	lg, err := openRotLog(filepath.Join(jobDir, "logs"), LogName, logMax, LogKeep)
	if err != nil {
		return fail(core.Wrap(core.CodeInternal, err, "trainer log"))
	}
	before := snapshot(jobDir)
	readable, notes := readablePaths(argv, env, spec.Readable, spec.Protect)
	l := &launch{argv: argv, dir: jobDir, env: env, writable: writable, sandbox: spec.Sandbox, pidFile: PidFile(jobDir),
		wall: spec.WallTimeout, stall: spec.StallTimeout, log: lg, onEvent: onEvent,
		readable: readable, restrictReads: !spec.ReadAll, notes: notes}
	res, err = l.execute(ctx)
	defer lg.release()
	if cerr := lg.Close(); cerr != nil && err == nil && res.Reason != ReasonStartFailed {
		// A log that could not be written is reported but does not hide the
		// run's outcome.
		res.LastError = strings.TrimSpace(res.LastError + " (log: " + cerr.Error() + ")")
	}
	res.LogFiles = lg.Files()
	res.LogDroppedBytes = lg.Dropped()
	if res.Reason != ReasonStartFailed {
		res.Files = changedFiles(jobDir, before)
	}
	return res, err
}

func checkSandboxMode(m string) error {
	switch m {
	case SandboxAuto, SandboxOff, SandboxRequire:
		return nil
	}
	return core.FieldErrorf(core.CodeInvalidArgument, "sandbox", "unknown sandbox mode %q (use \"\", %q or %q)", m, SandboxOff, SandboxRequire)
}

// buildEnv returns the child's environment, sorted: PATH, HOME=home,
// TMPDIR=home/tmp, LANG=C.UTF-8, fixed, then the allowed parent variables,
// then extra.
func buildEnv(path, home string, fixed map[string]string, allow []string, extra map[string]string) ([]string, error) {
	m := map[string]string{"PATH": path, "HOME": home, "TMPDIR": filepath.Join(home, "tmp"), "LANG": "C.UTF-8"}
	for k, v := range fixed {
		m[k] = v
	}
	check := func(field, k string) error {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return core.FieldErrorf(core.CodeInvalidArgument, field, "invalid variable name %q", k)
		}
		if reservedEnv[k] {
			return core.FieldErrorf(core.CodeInvalidArgument, field, "%s is set by the runner and cannot be overridden", k)
		}
		return nil
	}
	for _, k := range allow {
		if err := check("allowEnv", k); err != nil {
			return nil, err
		}
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range extra {
		if err := check("env", k); err != nil {
			return nil, err
		}
		if strings.ContainsRune(v, 0) {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "env", "value of %s contains NUL", k)
		}
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// resolveCommand returns the argv with argv[0] replaced by an absolute
// executable path (the original name is kept as the child's argv[0] when
// looked up in PATH). Relative paths are resolved against base (the
// caller's working directory when base is "").
func resolveCommand(command []string, path, base string) ([]string, error) {
	for i, a := range command {
		if strings.ContainsRune(a, 0) {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, fmt.Sprintf("command[%d]", i), "contains NUL")
		}
	}
	argv := append([]string(nil), command...)
	if argv[0] == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "command[0]", "empty program")
	}
	abs := func(p string) (string, error) {
		if filepath.IsAbs(p) {
			return filepath.Clean(p), nil
		}
		if base != "" {
			return filepath.Join(base, p), nil
		}
		return filepath.Abs(p)
	}
	if strings.HasSuffix(argv[0], ".py") {
		script, err := abs(argv[0])
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(script); err != nil || !st.Mode().IsRegular() {
			return nil, core.FieldErrorf(CodeTrainerStartFailed, "command[0]", "%s is not a file", script)
		}
		argv = append([]string{"python3", script}, argv[1:]...)
	}
	if strings.ContainsRune(argv[0], '/') {
		p, err := abs(argv[0])
		if err != nil {
			return nil, err
		}
		if err := checkExecutable(p); err != nil {
			return nil, core.FieldErrorf(CodeTrainerStartFailed, "command[0]", "%v", err)
		}
		return append([]string{p}, argv[1:]...), nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never resolve against the working directory
		}
		p := filepath.Join(dir, argv[0])
		if checkExecutable(p) == nil {
			return append([]string{p}, argv[1:]...), nil
		}
	}
	return nil, core.FieldErrorf(CodeTrainerStartFailed, "command[0]", "%s not found in the child's PATH %s", argv[0], path)
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// fileStamp identifies a file version for the created/modified report.
type fileStamp struct {
	size int64
	mod  time.Time
}

const maxWalk = 100000

// snapshot records the regular files under dir (outside logs/).
func snapshot(dir string) map[string]fileStamp {
	m := map[string]fileStamp{}
	n := 0
	// Best effort: what cannot be read is left out (the callback never
	// fails the walk), it only goes unreported as changed.
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if n++; n > maxWalk {
			return filepath.SkipAll
		}
		rel, rerr := filepath.Rel(dir, p)
		if rerr != nil {
			return nil
		}
		if d.IsDir() {
			if rel == "logs" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			m[filepath.ToSlash(rel)] = fileStamp{info.Size(), info.ModTime()}
		}
		return nil
	})
	return m
}

func changedFiles(dir string, before map[string]fileStamp) []string {
	var out []string
	for rel, st := range snapshot(dir) {
		if old, ok := before[rel]; !ok || old != st {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	if len(out) > MaxReportedFiles {
		out = out[:MaxReportedFiles]
	}
	return out
}

// PidFile is where Run records the running trainer's pid (its process
// group id): beside jobDir, not in it, so that a trainer (whose writes the
// sandbox confines to jobDir) cannot name another process group for
// recovery to kill.
func PidFile(jobDir string) string { return filepath.Clean(jobDir) + ".trainer.pid" }

// readablePaths is what the sandbox lets a child with argv and env read
// besides its writable directories: extra, the program (argv[0]; a
// script's file and directory when argv[0] is an interpreter), the
// directories named by VIRTUAL_ENV and PYTHONPATH in env. A path that is
// or contains a protected directory is left out, with a note.
func readablePaths(argv, env, extra, protect []string) ([]string, []string) {
	var cand []string
	cand = append(cand, extra...)
	cand = append(cand, argv[0], filepath.Dir(argv[0]))
	// An interpreter's installation (PREFIX/bin/python3, pyenv's
	// PREFIX/shims/python3, and the same for the link's target): its
	// standard library lives under PREFIX.
	progs := []string{argv[0]}
	if real, err := filepath.EvalSymlinks(argv[0]); err == nil && real != argv[0] {
		progs = append(progs, real)
	}
	for _, p := range progs {
		if d := filepath.Dir(p); (filepath.Base(d) == "bin" || filepath.Base(d) == "shims") && filepath.Dir(d) != "/" {
			cand = append(cand, filepath.Dir(d))
		}
	}
	if len(argv) > 1 && filepath.IsAbs(argv[1]) {
		if st, err := os.Stat(argv[1]); err == nil && st.Mode().IsRegular() {
			cand = append(cand, argv[1], filepath.Dir(argv[1])) // python3 SCRIPT
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "VIRTUAL_ENV":
			cand = append(cand, v)
		case "PYTHONPATH":
			cand = append(cand, filepath.SplitList(v)...)
		}
	}
	var out, notes []string
	seen := map[string]bool{}
	for _, p := range cand {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if seen[p] {
			continue
		}
		seen[p] = true
		if p == "/" {
			continue // never the whole file system
		}
		if within(protect, p) {
			notes = append(notes, fmt.Sprintf("sandbox: %s is not made readable: it contains the data directory", p))
			continue
		}
		out = append(out, p)
	}
	return out, notes
}

// within reports whether p is one of dirs or an ancestor of one.
func within(dirs []string, p string) bool {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if rel, err := filepath.Rel(p, filepath.Clean(d)); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
			return true
		}
	}
	return false
}
