package main

import (
	"runtime/debug"
	"testing"
)

// TestIngestGC: "aml ingest csv" sets the collector's pace to
// ingestGCPercent, unless GOGC is set (then the user's pace stays).
func TestIngestGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "")
	ingestGC()
	if got := debug.SetGCPercent(100); got != ingestGCPercent {
		t.Fatalf("GC percent %d, want %d", got, ingestGCPercent)
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	ingestGC()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Fatalf("GOGC=150 was overridden: %d", got)
	}
}
