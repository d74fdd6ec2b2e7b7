package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/trainers"
)

// fakeSource is a ModelSource without a store: one model row, and a
// record of what LoadFrom asked for.
type fakeSource struct {
	m      core.Model
	dirErr error
	asked  []string
}

func (s *fakeSource) Model(_ context.Context, id string) (core.Model, error) {
	s.asked = append(s.asked, "model")
	if id != s.m.ID {
		return core.Model{}, core.Errorf(core.CodeNotFound, "model %s not found", id)
	}
	return s.m, nil
}

func (s *fakeSource) ArtifactDir(context.Context, core.Model) (string, error) {
	s.asked = append(s.asked, "artifact")
	return "", s.dirErr
}

func (s *fakeSource) Manifest(context.Context, core.Model) (*dataset.Manifest, error) {
	s.asked = append(s.asked, "manifest")
	return nil, errors.New("no manifest")
}

// TestLoadFromSource: LoadFrom asks its source for the row, refuses
// another format before touching the artifact, and stops at the first
// error of the source.
func TestLoadFromSource(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{m: core.Model{ID: "m1", ArtifactKind: trainers.FormatOE}}
	if _, err := LoadFrom(ctx, src, "m2"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := LoadFrom(ctx, src, "m1"); core.CodeOf(err) != CodeModelUnsupported {
		t.Fatalf("an output-error model: %v, want %s", err, CodeModelUnsupported)
	}
	if len(src.asked) != 2 || src.asked[1] != "model" {
		t.Fatalf("asked %v: the artifact of a refused model was read", src.asked)
	}
	// every format the twin does not run (the noise-model and
	// process-model classes, external trainers' formats) is refused the
	// same way, unread; static models are run (static.go)
	for _, f := range []string{trainers.FormatOE, trainers.FormatARMAX, trainers.FormatBJ, trainers.FormatProcess, "ext:mine"} {
		src := &fakeSource{m: core.Model{ID: "m1", ArtifactKind: f}}
		if _, err := LoadFrom(ctx, src, "m1"); core.CodeOf(err) != CodeModelUnsupported || !strings.Contains(err.Error(), "aml.narx/1") {
			t.Fatalf("%s: %v, want %s naming the formats the twin runs", f, err, CodeModelUnsupported)
		}
		if len(src.asked) != 1 {
			t.Fatalf("%s: asked %v", f, src.asked)
		}
	}
	for _, f := range []string{trainers.FormatStatic, trainers.FormatForest} {
		if !IsTwinFormat(f) {
			t.Fatalf("%s is not a twin format", f)
		}
	}
	tampered := core.Errorf(core.CodeModelTampered, "changed")
	src = &fakeSource{m: core.Model{ID: "m1", ArtifactKind: "aml.hybrid/1"}, dirErr: tampered}
	if _, err := LoadFrom(ctx, src, "m1"); !errors.Is(err, tampered) {
		t.Fatalf("tampered artifact: %v", err)
	}
	if len(src.asked) != 2 {
		t.Fatalf("asked %v after the artifact failed", src.asked)
	}
	src.dirErr = nil
	if _, err := LoadFrom(ctx, src, "m1"); err == nil || err.Error() != "no manifest" {
		t.Fatalf("missing manifest: %v", err)
	}
}
