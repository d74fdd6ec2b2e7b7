package app

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// fakeLines is a registry of fixed writers; fail names lines whose
// writer cannot be opened.
type fakeLines struct {
	w    map[string]guard.Writer
	fail map[string]bool
	asks []string
}

func (f *fakeLines) WriterFor(_ context.Context, line string) (guard.Writer, error) {
	f.asks = append(f.asks, line)
	if f.fail[line] {
		return nil, core.Errorf(core.CodeLineWriterUnavailable, "line %s down", line)
	}
	return f.w[line], nil
}

func (f *fakeLines) SampleFor(string) time.Duration { return 3 * time.Second }

// TestWriterFor: the in-process caller's writer first (the registry is
// not asked), then the line's configured writer, else none (the op's
// default) — or, with RequireLineWriter, a refusal naming the line; a
// registry failure is passed on typed. The step test's live line is the
// configured writer paced at the line's sampling period.
func TestWriterFor(t *testing.T) {
	ctx := context.Background()
	tank, given := guard.NewRecordingWriter(nil), guard.NewRecordingWriter(nil)
	reg := &fakeLines{w: map[string]guard.Writer{"tank-line": tank}, fail: map[string]bool{"down-line": true}}
	a := New(&service.Deps{}, Options{LineWriters: reg})
	for _, c := range []struct {
		line  string
		given guard.Writer
		want  guard.Writer
		code  string
	}{
		{"tank-line", given, given, ""},
		{"tank-line", nil, tank, ""},
		{"other-line", nil, nil, ""},
		{"down-line", nil, nil, core.CodeLineWriterUnavailable},
	} {
		w, err := a.writerFor(ctx, c.line, c.given)
		if w != c.want || core.CodeOf(err) != c.code {
			t.Fatalf("%s: %v %v", c.line, w, err)
		}
	}
	if len(reg.asks) != 3 {
		t.Fatalf("registry asked %v: the caller's writer needs no registry", reg.asks)
	}
	strict := New(&service.Deps{}, Options{LineWriters: reg, RequireLineWriter: true})
	if _, err := strict.writerFor(ctx, "other-line", nil); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("strict, another line: %v", err)
	}
	l, err := a.liveLine(ctx, "tank-line", nil)
	p, ok := l.(*steptest.PacedLine)
	if err != nil || !ok || p.Writer != tank || p.Period != 3*time.Second {
		t.Fatalf("live line %#v %v", l, err)
	}
	if l, err := a.liveLine(ctx, "other-line", nil); l != nil || err != nil {
		t.Fatalf("no writer: %v %v", l, err)
	}
	if l, err := New(&service.Deps{}, Options{}).liveLine(ctx, "tank-line", nil); l != nil || err != nil {
		t.Fatalf("no registry: %v %v", l, err)
	}
}
