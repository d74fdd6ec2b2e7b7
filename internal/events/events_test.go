package events

import (
	"testing"
	"time"
)

func TestFanOutFilterAndSlowConsumer(t *testing.T) {
	b := New()
	all := b.Subscribe(100, nil)
	line := b.Subscribe(100, func(e Event) bool { return e.Line == "L1" })
	slow := b.Subscribe(1, nil)
	done := make(chan struct{})
	go func() {
		for i := 0; i < 50; i++ {
			l := "L1"
			if i%2 == 1 {
				l = "L2"
			}
			b.Publish(Event{Kind: JobProgress, Line: l, ID: "j"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("publisher blocked by a slow subscriber")
	}
	if len(all.C) != 50 || len(line.C) != 25 {
		t.Fatalf("all %d line %d", len(all.C), len(line.C))
	}
	if slow.Dropped() != 49 {
		t.Fatalf("slow dropped %d", slow.Dropped())
	}
	var last uint64
	for i := 0; i < 50; i++ {
		e := <-all.C
		if e.Seq <= last || e.At.IsZero() {
			t.Fatal("sequence not increasing")
		}
		last = e.Seq
	}
	all.Close()
	all.Close()
	if _, ok := <-all.C; ok {
		t.Fatal("closed subscription still open")
	}
	b.Publish(Event{Kind: JobState})
	var nilBus *Bus
	nilBus.Publish(Event{})
}
