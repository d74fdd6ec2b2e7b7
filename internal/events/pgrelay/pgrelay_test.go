package pgrelay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

func pool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func next(t *testing.T, s *events.Sub, within time.Duration) (events.Event, bool) {
	t.Helper()
	select {
	case e := <-s.C:
		return e, true
	case <-time.After(within):
		return events.Event{}, false
	}
}

// TestRelay: two processes' buses on one schema (two relays) see each
// other's relayed events with Origin set, never their own back; kinds that
// are not relayed stay local; an oversize event arrives without its data;
// a third relay on another schema of the same database sees nothing.
func TestRelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u := pgtest.Schema(t)
	busA, busB, busC := events.New(), events.New(), events.New()
	ra, err := Start(ctx, pool(t, u), busA, nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Start(ctx, pool(t, u), busB, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := Start(ctx, pool(t, pgtest.Schema(t)), busC, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Channel() != rb.Channel() || ra.Channel() == rc.Channel() || !strings.HasPrefix(ra.Channel(), ChannelPrefix) {
		t.Fatalf("channels %q %q %q", ra.Channel(), rb.Channel(), rc.Channel())
	}
	subA, subB, subC := busA.Subscribe(100, nil), busB.Subscribe(100, nil), busC.Subscribe(100, nil)

	busA.Publish(events.Event{Kind: events.JobProgress, Line: "L1", ID: "job-1", Data: map[string]any{"progress": 0.5}})
	busA.Publish(events.Event{Kind: "connector.state", Line: "L1", ID: "opcua:x"}) // not relayed
	busB.Publish(events.Event{Kind: events.CertificateUp, Line: "L2", ID: "rec-1", Data: map[string]any{"status": "APPROVED"}})
	busA.Publish(events.Event{Kind: events.JobState, Line: "L1", ID: "job-1", Data: map[string]any{"blob": strings.Repeat("x", 9000)}})

	// B receives A's two relayed events, in order, with A's origin.
	var gotB []events.Event
	for len(gotB) < 3 { // its own certificate event + 2 from A
		e, ok := next(t, subB, 10*time.Second)
		if !ok {
			t.Fatalf("B got %d events: %+v", len(gotB), gotB)
		}
		gotB = append(gotB, e)
	}
	var fromA []events.Event
	for _, e := range gotB {
		if e.Origin == ra.Origin() {
			fromA = append(fromA, e)
		} else if e.Origin != "" || e.Kind != events.CertificateUp {
			t.Errorf("B: unexpected %+v", e)
		}
	}
	if len(fromA) != 2 || fromA[0].Kind != events.JobProgress || fromA[0].Line != "L1" || fromA[0].Data["progress"] != 0.5 ||
		fromA[1].Kind != events.JobState || fromA[1].Data["truncated"] != true {
		t.Fatalf("B from A: %+v", fromA)
	}
	// A: its three local events and B's certificate event, nothing echoed.
	var gotA []events.Event
	for {
		e, ok := next(t, subA, time.Second)
		if !ok {
			break
		}
		gotA = append(gotA, e)
	}
	remote := 0
	for _, e := range gotA {
		if e.Origin != "" {
			remote++
			if e.Origin != rb.Origin() || e.Kind != events.CertificateUp || e.Data["status"] != "APPROVED" {
				t.Errorf("A: unexpected remote %+v", e)
			}
		}
	}
	if len(gotA) != 4 || remote != 1 {
		t.Fatalf("A got %d events (%d remote), want 4 (1 remote): %+v", len(gotA), remote, gotA)
	}
	if e, ok := next(t, subC, 500*time.Millisecond); ok {
		t.Fatalf("another schema's relay received %+v", e)
	}
	if ra.Sent.Load() != 2 || rb.Received.Load() != 2 || ra.Received.Load() != 1 {
		t.Fatalf("counters: A sent %d received %d, B received %d", ra.Sent.Load(), ra.Received.Load(), rb.Received.Load())
	}
}
