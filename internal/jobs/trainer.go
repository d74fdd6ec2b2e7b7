package jobs

import (
	"context"
	"encoding/json"
	"io"
	"sort"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// TrainContext is what a native trainer gets.
type TrainContext struct {
	Job          core.Job
	JobDir       string
	ArtifactsDir string // write the model artifact (model.json ...) here
	Dataset      *dataset.Bundle
	Params       json.RawMessage
	Seed         int64
	// Progress reports a fraction in [0,1] and optionally a stage name; it
	// also feeds the stall watchdog.
	Progress func(frac float64, stage string)
	Log      io.Writer
}

// Trainer is a native (in-process) trainer registered by reference, such as
// "linear_state_space@1".
type Trainer interface {
	Ref() string
	// HasTrainingStep is false for trainers that only derive a model from
	// the data during provisioning (the seed allows done from provisioning).
	HasTrainingStep() bool
	Train(ctx context.Context, tc *TrainContext) error
}

// Trainers is a registry of native trainers.
type Trainers struct{ m map[string]Trainer }

// NewTrainers registers ts.
func NewTrainers(ts ...Trainer) *Trainers {
	r := &Trainers{m: map[string]Trainer{}}
	for _, t := range ts {
		r.m[t.Ref()] = t
	}
	return r
}

// Add registers t.
func (r *Trainers) Add(t Trainer) { r.m[t.Ref()] = t }

// Get returns the trainer for ref.
func (r *Trainers) Get(ref string) (Trainer, bool) {
	t, ok := r.m[ref]
	return t, ok
}

// Refs lists registered references.
func (r *Trainers) Refs() []string {
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IsExec reports an external trainer reference "exec:PATH".
func IsExec(ref string) (string, bool) {
	if p, ok := strings.CutPrefix(ref, "exec:"); ok && p != "" {
		return p, true
	}
	return "", false
}

// ValidateRef checks a trainer reference before a job is created.
func (r *Trainers) ValidateRef(ref string) error {
	if _, ok := IsExec(ref); ok {
		return nil
	}
	if _, ok := r.Get(ref); ok {
		return nil
	}
	return core.FieldErrorf(core.CodeInvalidArgument, "trainer", "unknown trainer %q: use one of %s, or exec:PATH for an external trainer", ref, strings.Join(r.Refs(), ", "))
}
