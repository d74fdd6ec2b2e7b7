package dataset

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// noReads is a store whose sample reads fail (and are counted): a build
// refused up front never gets to them.
type noReads struct {
	Store
	reads atomic.Int64
}

func (s *noReads) QueryPage(ctx context.Context, q core.PageQuery) (core.Page, error) {
	s.reads.Add(1)
	return core.Page{}, errors.New("samples were read")
}

// TestSec10a_WorkBudget: a spec whose grid (points × nodes over the
// selected runs, from the plan) exceeds the work budget is refused before
// any sample is read, with the limit and the computed size in the error.
func TestSec10a_WorkBudget(t *testing.T) {
	st, dir := simulated(t)
	s := &noReads{Store: st}
	spec := injectionSpec(t)
	spec.BeatMs = 1
	_, err := Build(context.Background(), s, spec, Options{DataDir: dir})
	if core.CodeOf(err) != core.CodeQuotaExceeded {
		t.Fatalf("beatMs 1: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, strconv.Itoa(DefaultMaxCells)) || !strings.Contains(msg, "cells") || !strings.Contains(msg, "beatMs") {
		t.Fatalf("the error names neither the limit nor the size: %v", err)
	}
	if n := s.reads.Load(); n != 0 {
		t.Fatalf("%d sample reads before the refusal", n)
	}
	// The budget is configurable; the example spec fits the default.
	spec = injectionSpec(t)
	if _, err := Build(context.Background(), s, spec, Options{DataDir: dir, MaxCells: 1000}); core.CodeOf(err) != core.CodeQuotaExceeded || s.reads.Load() != 0 {
		t.Fatalf("MaxCells 1000: %v", err)
	}
	if _, err := Build(context.Background(), st, injectionSpec(t), Options{DataDir: dir}); err != nil {
		t.Fatalf("the example spec: %v", err)
	}
}
