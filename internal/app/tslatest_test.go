package app

import (
	"context"
	"errors"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// TestTSLatest: a node's newest sample, of one run or of any; none for a
// run without it; refused on lineId outside the caller's scope.
func TestTSLatest(t *testing.T) {
	a := newApp(t, Options{})
	ctx := context.Background()
	for _, r := range []struct {
		run string
		ts  []int64
	}{{"r1", []int64{1000, 3000}}, {"r2", []int64{2000}}} {
		var ss []IngestSample
		for _, ts := range r.ts {
			ss = append(ss, IngestSample{Node: "n", TsMs: ts, Value: float64(ts)})
		}
		if _, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{Line: "L", Product: "p", Recipe: "r", Run: r.run, Samples: ss}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{Line: "L", Product: "p", Recipe: "r", Run: "r3", Samples: []IngestSample{{Node: "m", TsMs: 5000}}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		run  string
		want int64 // ms; 0: no sample
	}{{"", 3000}, {"r1", 3000}, {"r2", 2000}, {"r3", 0}}
	for _, c := range cases {
		got, err := a.TSLatest(ctx, viewer, TSLatestRequest{Node: "n", Run: c.run})
		if err != nil || got.Node != "n" {
			t.Fatalf("run %q: %+v %v", c.run, got, err)
		}
		switch {
		case c.want == 0 && got.Sample != nil:
			t.Errorf("run %q: %+v, want none", c.run, *got.Sample)
		case c.want != 0 && (got.Sample == nil || core.UsToMs(got.Sample.TsUs) != c.want || got.Sample.Value != float64(c.want)):
			t.Errorf("run %q: %+v, want the sample at %d ms", c.run, got.Sample, c.want)
		}
	}
	scoped := Principal{Name: "sam", Role: auth.RoleViewer, Lines: []string{"other"}}
	var ae *core.Error
	if _, err := a.TSLatest(ctx, scoped, TSLatestRequest{Node: "n"}); !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != "lineId" {
		t.Errorf("out of scope: %v", err)
	}
	if _, err := a.TSLatest(ctx, viewer, TSLatestRequest{}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Errorf("no node: %v", err)
	}
}
