package jobs

import (
	"sort"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// TrainContext is what a native trainer gets (trainer.TrainContext).
type TrainContext = trainer.TrainContext

// Trainer is a native (in-process) trainer (trainer.Trainer).
type Trainer = trainer.Trainer

// Trainers is a registry of native trainers and of the model formats they
// write: the runner evaluates every trained artifact with these formats
// besides model's built-in ones. The composition root fills it with an
// explicit list (cmd/aml: trainers.All() and trainers.Formats()); this
// package holds no trainer of its own but the test trainer.
type Trainers struct {
	m       map[string]Trainer
	formats map[string]model.FormatLoader
}

// NewTrainers registers ts.
func NewTrainers(ts ...Trainer) *Trainers {
	r := &Trainers{m: map[string]Trainer{}, formats: map[string]model.FormatLoader{}}
	for _, t := range ts {
		r.m[t.Ref()] = t
	}
	return r
}

// Add registers t.
func (r *Trainers) Add(t Trainer) { r.m[t.Ref()] = t }

// WithFormats registers the model formats f (name → loader; the native
// trainers' are trainers.Formats()) and returns r.
func (r *Trainers) WithFormats(f map[string]model.FormatLoader) *Trainers {
	for name, l := range f {
		r.formats[name] = l
	}
	return r
}

// Formats returns the registered model formats, for
// model.LoadOptions.Formats.
func (r *Trainers) Formats() map[string]model.FormatLoader {
	out := make(map[string]model.FormatLoader, len(r.formats))
	for name, l := range r.formats {
		out[name] = l
	}
	return out
}

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

// IsExt reports a registered external trainer reference "ext:NAME".
func IsExt(ref string) (string, bool) {
	if n, ok := strings.CutPrefix(ref, "ext:"); ok && n != "" {
		return n, true
	}
	return "", false
}

// ValidateRef checks a trainer reference's form before a job is created
// (the runner checks that an ext:NAME is registered).
func (r *Trainers) ValidateRef(ref string) error {
	if _, ok := IsExec(ref); ok {
		return nil
	}
	if _, ok := IsExt(ref); ok {
		return nil
	}
	if _, ok := r.Get(ref); ok {
		return nil
	}
	return core.FieldErrorf(core.CodeInvalidArgument, "trainer", "unknown trainer %q: use one of %s, or ext:NAME for a registered external trainer (aml trainer list)", ref, strings.Join(r.Refs(), ", "))
}
