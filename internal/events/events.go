// Package events is AML's in-process event bus: datasets built, job state
// and progress, model stage changes, trials and certificates. The API
// streams it to clients (Server-Sent Events) and `aml job submit --wait`
// follows it.
//
// Publishing never blocks: every subscriber has a bounded buffer, and a
// subscriber that falls behind loses events (counted in Dropped) instead of
// slowing the job that publishes them. Subscribers that need the truth
// re-read the store; events only say that something changed.
package events

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event kinds.
const (
	DatasetBuilt  = "dataset.built"
	JobState      = "job.state"
	JobProgress   = "job.progress"
	ModelStage    = "model.stage"
	TrialDone     = "trial.done"
	CertificateUp = "certificate.status"
)

// Event is one notification. Line scopes it for per-line filtering.
type Event struct {
	Seq  uint64         `json:"seq"`
	Kind string         `json:"kind"`
	Line string         `json:"line,omitempty"`
	ID   string         `json:"id"`
	At   time.Time      `json:"at"`
	Data map[string]any `json:"data,omitempty"`
	// Origin is set on an event another process published and a relay
	// (internal/events/pgrelay) delivered here; empty for local events, so
	// a relay never sends back what it received.
	Origin string `json:"origin,omitempty"`
}

// Relayed are the kinds a cross-process relay forwards: the events of
// actions (a job's progress, a stage change, a certificate decision), which
// only the process that acted sees. Connector events are not among them:
// every serving process derives those from the database itself.
var Relayed = map[string]bool{DatasetBuilt: true, JobState: true, JobProgress: true, ModelStage: true, TrialDone: true, CertificateUp: true}

// Bus fans events out to subscribers.
type Bus struct {
	mu   sync.RWMutex
	subs map[*Sub]struct{}
	seq  atomic.Uint64
}

// New returns an empty bus.
func New() *Bus { return &Bus{subs: map[*Sub]struct{}{}} }

// Sub is one subscription; read C until it is closed by Close.
type Sub struct {
	C       <-chan Event
	c       chan Event
	filter  func(Event) bool
	bus     *Bus
	dropped atomic.Uint64
	once    sync.Once
}

// Dropped is how many events this subscriber lost for being slow.
func (s *Sub) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes and closes C.
func (s *Sub) Close() {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		close(s.c)
	})
}

// Subscribe registers a subscriber with a buffer of size events (≥ 1); a
// nil filter accepts everything.
func (b *Bus) Subscribe(size int, filter func(Event) bool) *Sub {
	c := make(chan Event, max(size, 1))
	s := &Sub{C: c, c: c, filter: filter, bus: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish stamps e with a sequence number and time and offers it to every
// subscriber without blocking. A nil bus ignores events.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	e.Seq = b.seq.Add(1)
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.dropped.Add(1)
		}
	}
}
