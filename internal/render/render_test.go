package render

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Every op has a rendering, so that no CLI command or MCP tool answers a
// person with nothing, and no rendering names an op that does not exist.
func TestEveryOpRenders(t *testing.T) {
	ops := map[string]bool{}
	for _, o := range app.Ops() {
		ops[o.Name] = true
		if !Has(o.Name) {
			t.Errorf("op %s has no rendering", o.Name)
		}
	}
	for name := range byOp {
		if !ops[name] {
			t.Errorf("rendering for %s, which is not an op", name)
		}
	}
}

// A zero answer (and a nil or empty request) renders without panicking:
// a renderer reads only what the answer has.
func TestZeroAnswersRender(t *testing.T) {
	for _, o := range app.Ops() {
		for _, req := range []any{nil, reflect.New(o.Req).Interface()} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: zero answer: %v", o.Name, r)
					}
				}()
				String(o.Name, req, reflect.Zero(o.Resp).Interface())
				String(o.Name, req, reflect.New(o.Resp).Interface())
			}()
		}
	}
}

// The answer may come as the op's type, a pointer to it, or its value.
func TestAsConverts(t *testing.T) {
	rec := contract.CertRecord{LineID: "L"}
	if got := as[*contract.CertRecord](rec); got == nil || got.LineID != "L" {
		t.Fatalf("value → pointer: %+v", got)
	}
	if got := as[contract.CertRecord](&rec); got.LineID != "L" {
		t.Fatalf("pointer → value: %+v", got)
	}
	if got := as[core.Job](nil); got.ID != "" {
		t.Fatalf("nil: %+v", got)
	}
}

// Tables list every item in order with the count after them.
func TestListRendering(t *testing.T) {
	got := String("job.list", nil, app.List[core.Job]{Items: []core.Job{{ID: "j1", Status: core.JobDone}, {ID: "j2", Status: core.JobQueued}}})
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "JOB") || !strings.HasPrefix(lines[1], "j1") || !strings.HasPrefix(lines[2], "j2") || lines[3] != "2 job(s)" {
		t.Fatalf("job list:\n%s", got)
	}
	if got := String("job.list", nil, app.List[core.Job]{}); !strings.HasSuffix(got, "0 job(s)\n") {
		t.Fatalf("empty job list:\n%s", got)
	}
}
