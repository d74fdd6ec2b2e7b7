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

// The model card shows a linear model's structure selection from its
// artifact: method, chosen structure, every candidate with its score,
// skipped ones with the reason, and the estimated delays.
func TestModelCardShowsSelection(t *testing.T) {
	training := `{"selection":"block cross-validation: 5 contiguous blocks","chosen":"ARX(na=2 nb=[2 2 2] nk=[1 1 0] full) λ=0",
		"scores":[{"na":1,"nb":[1,1,1],"nk":[1,1,0],"lambda":0,"criterion":"simulation","start":2,"folds":5,"meanNrmse":0.3636},
		{"na":2,"nb":[2,2,2],"nk":[1,1,0],"lambda":0,"criterion":"simulation","start":2,"folds":5,"meanNrmse":0.0123},
		{"na":40,"nb":[40,40,40],"nk":[1,1,0],"lambda":0,"criterion":"simulation","start":2,"meanNrmse":null,"skipped":"161 regressors per output, fold 2 has 160 regression rows"}],
		"delays":{"method":"ARX(na=2 nb=2) sweep","inputs":["u1","u2","u3"],"estimated":[1,1,0],"scores":[{"input":"u3","nk":0,"meanNrmse":0.0112},{"input":"u3","nk":1,"meanNrmse":0.4116}]}}`
	out := String("model.show", nil, app.ModelShowResponse{Model: core.Model{ID: "m1"}, Training: []byte(training)})
	for _, want := range []string{"delays    u1 1, u2 1, u3 0 (estimated: ARX(na=2 nb=2) sweep)", "selection block cross-validation", "chosen    ARX(na=2 nb=[2 2 2] nk=[1 1 0] full) λ=0",
		"na=2 nb=[2,2,2] nk=[1,1,0] λ=0", "0.0123", "skipped: 161 regressors per output", "5-fold CV"} {
		if !strings.Contains(out, want) {
			t.Errorf("model card lacks %q:\n%s", want, out)
		}
	}
	ss := `{"selection":"validation on the val runs (1)","chosen":"order 2 (block rows 10)","scores":[{"order":1,"blockRows":10,"criterion":"simulation","start":5,"meanNrmse":0.5},{"order":10,"criterion":"simulation","start":5,"meanNrmse":null,"skipped":"order 10 needs NY·BlockRows > order (BlockRows=10)"}]}`
	out = String("model.show", nil, app.ModelShowResponse{Model: core.Model{ID: "m2"}, Training: []byte(ss)})
	for _, want := range []string{"chosen    order 2 (block rows 10)", "order 1 (i=10)", "skipped: order 10 needs"} {
		if !strings.Contains(out, want) {
			t.Errorf("model card lacks %q:\n%s", want, out)
		}
	}
	t.Log(out)
}
