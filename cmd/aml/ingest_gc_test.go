package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestIngestGC: "aml ingest csv" into PostgreSQL turns the collector's pace
// off and bounds the heap with ingestMemLimit; with GOMEMLIMIT set, or into
// SQLite, it paces at ingestGCPercent and keeps the limit; with GOGC set the
// user's pace and limit stay.
func TestIngestGC(t *testing.T) {
	prevGC := debug.SetGCPercent(100)
	prevLim := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevGC)
		debug.SetMemoryLimit(prevLim)
	})
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	ingestGC(true)
	if got := debug.SetGCPercent(100); got != -1 {
		t.Fatalf("GC percent %d, want off (-1)", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != ingestMemLimit {
		t.Fatalf("memory limit %d, want %d", got, ingestMemLimit)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	ingestGC(true)
	if got := debug.SetGCPercent(100); got != ingestGCPercent {
		t.Fatalf("GOMEMLIMIT set: GC percent %d, want %d", got, ingestGCPercent)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != 1<<30 {
		t.Fatalf("GOMEMLIMIT=1GiB was overridden: %d", got)
	}
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	ingestGC(false)
	if got := debug.SetGCPercent(100); got != ingestGCPercent {
		t.Fatalf("SQLite: GC percent %d, want %d", got, ingestGCPercent)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Fatalf("SQLite: memory limit set to %d", got)
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	ingestGC(true)
	if got := debug.SetGCPercent(100); got != 150 {
		t.Fatalf("GOGC=150 was overridden: %d", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != 1<<30 {
		t.Fatalf("GOGC set: memory limit changed to %d", got)
	}
}
