package main

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// skipTraining skips t under -short: it trains a model end to end (the
// hybrid twin of aml demo), the part of the suite -short leaves out.
func skipTraining(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what + " trains the hybrid twin end to end; runs without -short")
	}
}

// The trained demo data dir, made once per test binary by aml demo and
// copied by every test that needs a trained twin: training the hybrid twin
// is the most expensive step of this package, and the tests only read it
// (each works on its own copy).
var demoFix struct {
	once sync.Once
	dir  string
	out  string
	err  error
}

// sharedDemo returns a private copy of the data dir aml demo left and the
// demo's --json output.
func sharedDemo(t *testing.T) (dir, out string) {
	t.Helper()
	skipTraining(t, "aml demo")
	demoFix.once.Do(func() {
		d, err := os.MkdirTemp("", "aml-cmd-demo-")
		if err != nil {
			demoFix.err = err
			return
		}
		demoFix.dir = d
		var o, e bytes.Buffer
		// The demo's write is recorded at its wall clock: two minutes back,
		// so the tests executing certificates on its data right after it
		// are past the scene's write intervals (as the wall clock will be
		// for a person running a command after aml demo).
		demoWall = func() time.Time { return time.Now().Add(-2 * time.Minute) }
		defer func() { demoWall = nil }()
		if code := run([]string{"demo", "--data", d, "--json"}, &o, &e); code != 0 {
			demoFix.err = fmt.Errorf("aml demo: exit %d\n%s", code, e.String())
			return
		}
		demoFix.out = o.String()
	})
	if demoFix.err != nil {
		t.Fatal(demoFix.err)
	}
	return copyDataDir(t, demoFix.dir), demoFix.out
}
