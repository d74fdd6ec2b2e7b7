package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/jobs"
)

// A worker's recalibration loop steps on an empty queue without error and
// stops when its context ends.
func TestRecalibrateStops(t *testing.T) {
	p := New(Config{DataDir: t.TempDir(), Trainers: jobs.NewTrainers()})
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := p.Jobs(context.Background(), false, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Recalibrate(ctx, 10*time.Millisecond); close(done) }()
	time.Sleep(60 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the recalibration loop does not stop")
	}
}

// The process opens each resource once and only when asked; a key and a
// job system come from the same store.
func TestProcessOpensOnce(t *testing.T) {
	p := New(Config{DataDir: t.TempDir(), Trainers: jobs.NewTrainers()})
	defer func() { _ = p.Close() }()
	if d := p.Opened(); d.Store != nil || d.Runner != nil || d.Key != nil {
		t.Fatalf("opened before use: %+v", d)
	}
	ctx := context.Background()
	s1, err := p.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Deps(ctx, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Store != s1 || d.Runner == nil || d.Queue == nil || d.Bus == nil || d.Key == nil {
		t.Fatalf("deps: %+v", d)
	}
	k1 := d.Key
	if k2, err := p.Key(ctx); err != nil || k2 != k1 {
		t.Fatalf("key opened twice: %v", err)
	}
	if _, err := p.StartWorkers(ctx); err == nil {
		t.Fatal("workers started on an insert-only job system")
	}
}

func TestCheckDB(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{{"", true}, {"postgres://u:p@h/db", true}, {"postgresql://h/db", true}, {"mysql://u:secret@h/db", false}} {
		err := CheckDB(c.url)
		if (err == nil) != c.ok {
			t.Errorf("CheckDB(%q) = %v", c.url, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckDB leaks the password: %v", err)
		}
	}
}
