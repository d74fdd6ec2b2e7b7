package extrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// drainTimeout is DrainTimeout; tests shorten it.
var drainTimeout = DrainTimeout

// launch is one child process to run: shared by Run and Predict.
type launch struct {
	argv     []string // argv[0] is an absolute path
	dir      string   // working directory
	env      []string
	writable []string // directories the sandbox lets the child write to
	// readable: what the sandbox lets the child read besides writable and
	// the system's libraries, when restrictReads.
	readable      []string
	restrictReads bool
	notes         []string // runner notes for the top of the log
	sandbox       string
	wall          time.Duration
	stall         time.Duration
	log           *rotLog
	onEvent       func(Event)
	pidFile       string // if set, the child's pid (= its process group) is written here while it runs
}

// execute starts the child, watches it and returns once it is reaped and its
// output drained. The error is non-nil only if the child did not start.
func (l *launch) execute(ctx context.Context) (Result, error) {
	res := Result{ExitCode: -1, Reason: ReasonStartFailed}
	startFailed := func(err error) (Result, error) {
		e := core.Wrap(CodeTrainerStartFailed, err, "cannot start %s", l.argv[0])
		res.LastError = e.Error()
		return res, e
	}
	if ctx.Err() != nil {
		res.Reason = ReasonCancelled
		return res, nil
	}
	useShim := false
	if l.sandbox != SandboxOff {
		if landlockABI() > 0 && shimPossible() {
			useShim = true
		} else if l.sandbox == SandboxRequire {
			return startFailed(errors.New("sandbox required but Landlock is not available on this system"))
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return startFailed(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return startFailed(err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return startFailed(err)
	}
	start := time.Now()
	proc, err := startChild(l, useShim, devnull, outW, errW)
	outW.Close()
	errW.Close()
	devnull.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return startFailed(err)
	}
	res.WriteRestricted = useShim
	res.ReadRestricted = useShim && l.restrictReads
	c := &collector{log: l.log, onEvent: l.onEvent, progress: make(chan struct{}, 1)}
	for _, n := range l.notes {
		c.note("[aml-runner] " + n)
	}
	if !useShim && l.sandbox == SandboxAuto {
		// The fallback is said in the log (Result.ReadRestricted and
		// WriteRestricted record it too); a confined run adds nothing.
		c.note("[aml-runner] sandbox: Landlock is not available on this system: the trainer can read and write whatever this server's user can, the data directory included")
	}
	if l.pidFile != "" {
		// A worker that dies without cleaning up (kill -9) leaves this file;
		// recovery uses it to kill the orphaned process group. Without it
		// the trainer still runs; the log says what recovery will lack.
		if err := os.WriteFile(l.pidFile, []byte(strconv.Itoa(proc.Pid)), 0o600); err != nil {
			c.note(fmt.Sprintf("[aml-runner] cannot record the trainer's pid (%v): if this worker dies, recovery cannot stop the trainer", err))
		}
		defer func() { _ = os.Remove(l.pidFile) }() // best effort: gone already if the write failed
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); c.read(outR, true) }()
	go func() { defer readers.Done(); c.read(errR, false) }()

	k := &killer{pid: proc.Pid}
	stopMonitor, monitorDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(monitorDone)
		l.monitor(ctx, k, c.progress, stopMonitor)
	}()
	state, werr := waitAndReap(proc, k.leaderExited)
	res.Duration = time.Since(start)
	close(stopMonitor)
	<-monitorDone

	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		// Only a process that left the child's process group can still
		// hold the pipes: stop reading.
		outR.Close()
		errR.Close()
		<-drained
		c.note(fmt.Sprintf("[aml-runner] output still open %s after the child exited (a process left its process group); stopped reading", drainTimeout))
	}
	outR.Close()
	errR.Close()

	c.fill(&res)
	code, sig, signaled := exitInfo(state)
	res.ExitCode, res.Signal = code, sig
	switch why := k.reason(); {
	case why != "":
		res.Reason = why
	case werr != nil || state == nil:
		res.Reason = ReasonKilled
		if res.LastError == "" && werr != nil {
			res.LastError = "wait: " + werr.Error()
		}
	case signaled:
		res.Reason = ReasonKilled
	default:
		res.Reason = ReasonExited
	}
	return res, nil
}

// monitor enforces cancellation and the wall and stall timeouts until stop
// is closed.
func (l *launch) monitor(ctx context.Context, k *killer, progress <-chan struct{}, stop <-chan struct{}) {
	var wallC, stallC, graceC <-chan time.Time
	if l.wall > 0 {
		t := time.NewTimer(l.wall)
		defer t.Stop()
		wallC = t.C
	}
	var stallT *time.Timer
	if l.stall > 0 {
		stallT = time.NewTimer(l.stall)
		defer stallT.Stop()
		stallC = stallT.C
	}
	ctxDone := ctx.Done()
	stopWith := func(why string) {
		ctxDone, wallC, stallC = nil, nil, nil
		if k.terminate(why) {
			graceC = time.After(KillGrace)
		}
	}
	for {
		select {
		case <-stop:
			return
		case <-ctxDone:
			stopWith(ReasonCancelled)
		case <-wallC:
			stopWith(ReasonTimeout)
		case <-stallC:
			stopWith(ReasonStalled)
		case <-progress:
			if stallC != nil {
				stallT.Reset(l.stall)
			}
		case <-graceC:
			graceC = nil
			k.kill()
		}
	}
}

// killer signals the child's process group, never after the leader was
// reaped (its pid, which is the group id, could then be reused).
type killer struct {
	mu     sync.Mutex
	pid    int
	exited bool
	why    string
}

// terminate records why the run is stopped and sends SIGTERM to the group;
// false if the run already ended or is already being stopped.
func (k *killer) terminate(why string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.exited || k.why != "" {
		return false
	}
	k.why = why
	signalGroup(k.pid, syscall.SIGTERM)
	return true
}

// kill sends SIGKILL to the group unless the leader already exited.
func (k *killer) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.exited {
		signalGroup(k.pid, syscall.SIGKILL)
	}
}

// leaderExited is called once the group leader exited and (on Linux) before
// it is reaped: whatever is left of its process group is killed, so that no
// trainer process outlives the run.
func (k *killer) leaderExited() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.exited = true
	signalGroup(k.pid, syscall.SIGKILL)
}

func (k *killer) reason() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.why
}

// collector reads the child's output, writes it to the log and parses
// events.
type collector struct {
	mu       sync.Mutex
	log      *rotLog
	onEvent  func(Event)
	progress chan struct{}

	lines, events, malformed, truncated int
	done                                bool
	doneInfo                            json.RawMessage
	lastError                           string
}

// read reads lines from r until EOF or an error. Lines longer than
// MaxLineBytes are cut; the rest of such a line is discarded.
func (c *collector) read(r io.Reader, stdout bool) {
	br := bufio.NewReaderSize(r, MaxLineBytes)
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			line := append([]byte(nil), b...)
			cut := 0
			for {
				more, err2 := br.ReadSlice('\n')
				cut += len(more)
				if err2 == nil {
					cut-- // the newline
					break
				}
				if err2 != bufio.ErrBufferFull {
					err = err2
					break
				}
			}
			c.line(line, stdout, cut)
			if err != bufio.ErrBufferFull {
				return
			}
			continue
		}
		if len(b) > 0 {
			c.line(bytes.TrimSuffix(b, []byte{'\n'}), stdout, 0)
		}
		if err != nil {
			return
		}
	}
}

// line handles one line (without its newline); cut is how many bytes of it
// were discarded.
func (c *collector) line(b []byte, stdout bool, cut int) {
	c.mu.Lock()
	c.lines++
	c.log.WriteLine(b)
	if cut > 0 {
		c.truncated++
		c.log.WriteLine([]byte(fmt.Sprintf("[aml-runner] the line above was longer than %d bytes: %d more bytes discarded", MaxLineBytes, cut)))
	}
	var ev Event
	ok := false
	if stdout {
		if payload, is := bytes.CutPrefix(b, []byte(EventPrefix)); is {
			ev, ok = parseEvent(payload)
			if ok {
				c.events++
				switch ev.Type {
				case EventDone:
					c.done, c.doneInfo = true, ev.Raw
				case EventError:
					c.lastError = ev.Message
					if c.lastError == "" {
						c.lastError = string(ev.Raw)
					}
				}
			} else {
				c.malformed++
			}
		}
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	if ev.Type == EventProgress || ev.Type == EventStage {
		select {
		case c.progress <- struct{}{}:
		default: // a reset is already pending
		}
	}
	if c.onEvent != nil {
		c.onEvent(ev)
	}
}

// note writes a runner message to the log.
func (c *collector) note(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.WriteLine([]byte(msg))
}

func (c *collector) fill(r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Lines, r.Events, r.Malformed, r.Truncated = c.lines, c.events, c.malformed, c.truncated
	r.Done, r.DoneInfo = c.done, c.doneInfo
	if c.lastError != "" {
		r.LastError = c.lastError
	}
}

// parseEvent parses the JSON after "##AML ". It must be exactly one JSON
// object whose "type" is a known event type; "progress" events need a
// numeric "progress" (0..1) or "pct" (0..100); "stage" events a non-empty
// string "stage"; "message" and "stage", when present, must be strings.
func parseEvent(payload []byte) (Event, bool) {
	payload = bytes.TrimSpace(payload)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return Event{}, false
	}
	ev := Event{Raw: json.RawMessage(append([]byte(nil), payload...)), At: time.Now()}
	if err := json.Unmarshal(m["type"], &ev.Type); err != nil {
		return Event{}, false
	}
	str := func(key string, dst *string) bool {
		raw, ok := m[key]
		if !ok {
			return true
		}
		return json.Unmarshal(raw, dst) == nil
	}
	if !str("message", &ev.Message) || !str("stage", &ev.Stage) {
		return Event{}, false
	}
	switch ev.Type {
	case EventProgress:
		var p float64
		if raw, ok := m["progress"]; ok {
			if json.Unmarshal(raw, &p) != nil {
				return Event{}, false
			}
		} else if raw, ok := m["pct"]; ok {
			if json.Unmarshal(raw, &p) != nil {
				return Event{}, false
			}
			p /= 100
		} else {
			return Event{}, false
		}
		p = math.Min(1, math.Max(0, p))
		ev.Progress = &p
	case EventStage:
		if ev.Stage == "" {
			return Event{}, false
		}
	case EventMetrics, EventError, EventDone:
	default:
		return Event{}, false
	}
	return ev, true
}
