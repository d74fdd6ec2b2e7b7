package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/benefit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/service"
)

// Principal is who acts: a person or an agent (role agent), with a role and
// a line scope. The API and MCP take it from the verified token; the local
// CLI builds one for the OS user (Local).
type Principal = auth.Principal

// Defaults of Options.
const (
	DefaultHeavyConcurrent = 4       // trials, optimise, gate, dataset builds at once
	DefaultMaxBatchSamples = 100_000 // samples in one JSON ingest batch
	// Request body limits of the HTTP front doors (the API and the UI's
	// forms), applied before a body is read.
	DefaultMaxBodyBytes = 8 << 20   // JSON request bodies and forms
	DefaultMaxCSVBytes  = 512 << 20 // CSV uploads
)

// Options configure an App beyond its shared resources.
type Options struct {
	// Now is the clock of certificates, trials, snapshots and ids
	// (default time.Now); a demo runs it at simulated time.
	Now func() time.Time
	// WallNow is the wall clock (default time.Now): the time the write
	// history records a governed write at, whatever Now says.
	WallNow func() time.Time
	// HeavyConcurrent bounds heavy operations running at once (default
	// DefaultHeavyConcurrent); the slots are shared by every interface.
	HeavyConcurrent int
	// MaxBatchSamples bounds one JSON ingest batch.
	MaxBatchSamples int
	// Version is reported by Info.
	Version string
	// MaxDatasetCells is the work budget of a dataset build (grid points ×
	// nodes, computed before any sample is read; default
	// dataset.DefaultMaxCells). A request may ask for less, never more.
	MaxDatasetCells int64
	// MaxDatasetWindows and MaxDatasetBytesMiB are the quotas of a
	// dataset build on windows (rows) and size on disk (defaults
	// dataset.DefaultMaxWindows and dataset.DefaultMaxBytes). A request
	// over the API or MCP may ask for less, never more; the local CLI (a
	// person at the machine, Principal.Local) may raise them.
	MaxDatasetWindows  int
	MaxDatasetBytesMiB int
	// BenefitStudy, when set, adjusts a benefit study's options after the
	// request's (tests shorten the history and the runs; benefit.run).
	BenefitStudy func(*benefit.Options)
	// LineWriters are the governed writers of the lines this process
	// reaches, configured by its operator (aml serve --line-writers, the
	// local CLI's --opcua-endpoint and --map); cert.execute,
	// steptest.execute and the envelope cycle write through the line's
	// writer when it has one (see writerFor). Nil: none.
	LineWriters LineWriters
	// RequireLineWriter refuses a governed write on a line without a
	// writer in LineWriters instead of falling back (the local CLI given
	// an OPC UA writer).
	RequireLineWriter bool
	// LineClock and LineSleep pace a step test on a configured line
	// (default the wall clock; tests run a simulated line's clock).
	LineClock func() time.Time
	LineSleep func(time.Duration)
}

// App runs AML's use cases on one set of resources.
type App struct {
	d     *service.Deps
	o     Options
	heavy chan struct{}
	log   *slog.Logger

	jobLines sync.Map // job id → line id

	// slotWait, when set (tests), is called when a call finds every
	// heavy slot taken, before it waits for one.
	slotWait func()
	// heartbeats, when set (tests), paces a running step test's lease
	// renewals instead of a ticker of steptest.HeartbeatEvery.
	heartbeats func() (tick <-chan time.Time, stop func())

	obsMu sync.Mutex
	obs   []func(op string, d time.Duration, out any, err error)

	// life ends when the process shuts down (Shutdown): the background
	// work the App started (a running step test) stops on it; bg counts
	// that work.
	bgMu     sync.Mutex
	life     context.Context
	stopLife context.CancelFunc
	bg       sync.WaitGroup
}

// New returns the application over d.
func New(d *service.Deps, o Options) *App {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.WallNow == nil {
		o.WallNow = time.Now
	}
	if o.HeavyConcurrent <= 0 {
		o.HeavyConcurrent = DefaultHeavyConcurrent
	}
	if o.MaxBatchSamples <= 0 {
		o.MaxBatchSamples = DefaultMaxBatchSamples
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.MaxDatasetCells <= 0 {
		o.MaxDatasetCells = dataset.DefaultMaxCells
	}
	if o.MaxDatasetWindows <= 0 {
		o.MaxDatasetWindows = dataset.DefaultMaxWindows
	}
	if o.MaxDatasetBytesMiB <= 0 {
		o.MaxDatasetBytesMiB = int(dataset.DefaultMaxBytes >> 20)
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{d: d, o: o, heavy: make(chan struct{}, o.HeavyConcurrent), log: log}
	a.life, a.stopLife = context.WithCancel(context.Background())
	return a
}

// Shutdown stops the background work the App started — a step test
// running after its call answered stops before its next move and
// records its end in the audit log (steptest.executed, then
// steptest.result with AML_WORKER_LOST) — and waits until it has, or
// until ctx ends (AML_WORKER_LOST). The serving process calls it when
// it shuts down; the App takes no new background work afterwards.
func (a *App) Shutdown(ctx context.Context) error {
	a.bgMu.Lock()
	a.stopLife()
	a.bgMu.Unlock()
	done := make(chan struct{})
	go func() {
		a.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return core.Wrap(core.CodeWorkerLost, ctx.Err(), "shutdown: background work (a running step test or benefit study) did not record its end in time")
	}
}

// background runs f in its own goroutine on a context that keeps ctx's
// values but not its cancellation (the caller that started it may go
// away) and ends when the App shuts down (Shutdown); false, and f not
// run, when the App is shutting down already.
func (a *App) background(ctx context.Context, f func(ctx context.Context)) bool {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	if a.life.Err() != nil {
		return false
	}
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		f(lifeCtx{Context: context.WithoutCancel(ctx), life: a.life})
	}()
	return true
}

// lifeCtx is a context with the values of its Context and the
// cancellation of life: ended exactly when life is (no goroutine in
// between).
type lifeCtx struct {
	context.Context
	life context.Context
}

func (c lifeCtx) Deadline() (time.Time, bool) { return c.life.Deadline() }
func (c lifeCtx) Done() <-chan struct{}       { return c.life.Done() }
func (c lifeCtx) Err() error                  { return c.life.Err() }

// Deps are the shared resources the application runs on.
func (a *App) Deps() *service.Deps { return a.d }

// Now is the application's clock.
func (a *App) Now() time.Time { return a.o.Now() }

// publish sends an event when the process has a bus.
func (a *App) publish(e events.Event) {
	if a.d.Bus != nil {
		a.d.Bus.Publish(e)
	}
}

// newID is a time-ordered id with a random suffix (unique across
// concurrent requests and processes sharing a store).
func (a *App) newID(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + a.o.Now().UTC().Format("20060102T150405.000") + "-" + hex.EncodeToString(b[:])
}

// acquire takes a heavy-operation slot, or fails when ctx ends first.
func (a *App) acquire(ctx context.Context) (func(), error) {
	select {
	case a.heavy <- struct{}{}:
		return func() { <-a.heavy }, nil
	default:
	}
	if a.slotWait != nil {
		a.slotWait()
	}
	select {
	case a.heavy <- struct{}{}:
		return func() { <-a.heavy }, nil
	case <-ctx.Done():
		return nil, core.Wrap(core.CodeStoreUnavailable, ctx.Err(), "request cancelled while waiting for a compute slot")
	}
}

// scope checks an explicit line filter against p's scope; an empty filter
// is fine (the list is then filtered per item).
func scope(p Principal, act auth.Action, line string) error {
	if line == "" {
		return nil
	}
	return p.Allow(act, line)
}

// filter keeps the items whose line is in p's scope.
func filter[T any](p Principal, items []T, line func(T) string) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if p.InScope(line(it)) {
			out = append(out, it)
		}
	}
	return out
}

// OnDone registers f to be told of every finished call of a use case,
// refused ones included (its name, how long it took, its answer and its
// error): metrics of the serving process.
func (a *App) OnDone(f func(op string, d time.Duration, out any, err error)) {
	a.obsMu.Lock()
	defer a.obsMu.Unlock()
	a.obs = append(a.obs, f)
}

func (a *App) done(op string, d time.Duration, out any, err error) {
	a.obsMu.Lock()
	obs := a.obs
	a.obsMu.Unlock()
	for _, f := range obs {
		f(op, d, out, err)
	}
}

// listIn is the shape of every line-scoped list: an explicit line filter
// must be in p's scope, the items read are filtered to p's lines.
func listIn[T any](p Principal, line string, read func() ([]T, error), lineOf func(T) string) (List[T], error) {
	if err := scope(p, auth.ActRead, line); err != nil {
		return List[T]{}, err
	}
	items, err := read()
	if err != nil {
		return List[T]{}, err
	}
	return ListOf(filter(p, items, lineOf)), nil
}
