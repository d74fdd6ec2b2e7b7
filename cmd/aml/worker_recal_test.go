package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
)

// The worker's recalibration loop steps on an empty queue without error and
// stops when its context ends.
func TestWorkerRecalibrationLoopStops(t *testing.T) {
	a := &app{dataDir: t.TempDir(), stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := a.openStore()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	r := jobs.NewRunner(s, jobs.Options{DataDir: a.dataDir, Trainers: trainers(), Bus: events.New()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.recalibrationLoop(ctx, r, 10*time.Millisecond); close(done) }()
	time.Sleep(60 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the recalibration loop does not stop")
	}
}
