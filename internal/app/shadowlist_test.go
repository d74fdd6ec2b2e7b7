package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"

	"github.com/aml-project/aml/internal/twin/contract"
)

// TestShadowListFlags: shadow.list flags each run against the model's
// latest twin gate's profile, else (no gate, or a profile no longer
// published) the newest, and names it; a principal of another line sees
// nothing.
func TestShadowListFlags(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	for _, r := range []contract.ShadowRecord{
		{ModelID: "hybrid-1", RunID: "run-low-cov", CreatedAt: f.now, Steps: 100, NRMSE: 0.05, Coverage: 0.5, Evidence: []byte(`{}`)},
		{ModelID: "hybrid-1", RunID: "run-good", CreatedAt: f.now, Steps: 100, NRMSE: 0.05, Coverage: 0.92, Evidence: []byte(`{}`)},
	} {
		if err := f.st.PutShadow(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name, profile string, lowFlagged bool) {
		t.Helper()
		l, err := f.a.ShadowList(ctx, viewer, ShadowListRequest{Model: "hybrid-1"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.Profile != profile || l.Count != 2 || len(l.Items) != 2 {
			t.Fatalf("%s: profile %q, %d/%d items; want %s and 2", name, l.Profile, l.Count, len(l.Items), profile)
		}
		for _, it := range l.Items {
			want := lowFlagged && it.RunID == "run-low-cov"
			if got := len(it.Flags) > 0; got != want {
				t.Errorf("%s: %s flags %q, want flagged %v", name, it.RunID, it.Flags, want)
			}
			if want && !strings.Contains(it.Flags[0], "coverage 50.0% below the gate's 80% ("+profile+")") {
				t.Errorf("%s: flag %q", name, it.Flags[0])
			}
		}
	}
	check("no gate: the newest profile", "twin-v3", true)

	gate := func(id, profile string, at int64) {
		t.Helper()
		rep, _ := json.Marshal(map[string]any{"report": map[string]any{"profile": profile}})
		if err := f.st.PutGateEval(ctx, contract.GateEvalRecord{GateEvalID: id, ModelID: "hybrid-1", CreatedAt: f.now.Add(time.Duration(at) * time.Millisecond), CreatedBy: "t", Report: rep}); err != nil {
			t.Fatal(err)
		}
	}
	gate("gate-1", "twin-v1", 1) // twin-v1 has no shadow coverage minimum
	check("gated by twin-v1", "twin-v1", false)
	gate("gate-2", "twin-v9", 2) // not published: the newest applies
	check("gated by an unknown profile", "twin-v3", true)

	other := Principal{Name: "olga", Role: auth.RoleViewer, Lines: []string{"line-other"}}
	if _, err := f.a.ShadowList(ctx, other, ShadowListRequest{Model: "hybrid-1"}); err == nil {
		t.Fatal("a viewer of another line listed the model's shadow evidence")
	}
}
