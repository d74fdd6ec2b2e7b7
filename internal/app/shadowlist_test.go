package app

import (
	"context"
	"encoding/json"
	"math"
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

// TestShadowListEncodesUnscoredRun: a stored run with no scored step has
// NaN figures (stored as NULL); shadow.list still encodes as JSON (null
// figures, the same camelCase names as every other response) and a
// client decodes the NaN back, instead of the whole list failing to
// encode.
func TestShadowListEncodesUnscoredRun(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	for _, r := range []contract.ShadowRecord{
		{ModelID: "hybrid-1", RunID: "run-unscored", CreatedAt: f.now, Steps: 0, NRMSE: math.NaN(), Coverage: math.NaN(), Evidence: []byte(`{"steps":0}`)},
		{ModelID: "hybrid-1", RunID: "run-good", CreatedAt: f.now, Steps: 100, NRMSE: 0.05, Coverage: 0.5, Evidence: []byte(`{}`)},
	} {
		if err := f.st.PutShadow(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	l, err := f.a.ShadowList(ctx, viewer, ShadowListRequest{Model: "hybrid-1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatalf("shadow.list does not encode: %v", err)
	}
	var raw struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Items) != 2 {
		t.Fatalf("%s: %v", b, err)
	}
	for _, it := range raw.Items {
		for _, k := range []string{"modelId", "runId", "createdAt", "steps", "nrmse", "coverage", "evidence"} {
			if _, ok := it[k]; !ok {
				t.Errorf("item %v lacks %q", it, k)
			}
		}
		if it["runId"] == "run-unscored" && (it["nrmse"] != nil || it["coverage"] != nil) {
			t.Errorf("unscored run's figures %v, %v: want null", it["nrmse"], it["coverage"])
		}
	}
	var back ShadowListResponse
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for i, it := range back.Items {
		want := l.Items[i]
		if it.RunID != want.RunID || it.Steps != want.Steps || !sameNum(it.NRMSE, want.NRMSE) || !sameNum(it.Coverage, want.Coverage) ||
			!it.CreatedAt.Equal(want.CreatedAt) || strings.Join(it.Flags, "|") != strings.Join(want.Flags, "|") || string(it.Evidence) != string(want.Evidence) {
			t.Errorf("round trip %+v, want %+v", it, want)
		}
	}
}

func sameNum(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
