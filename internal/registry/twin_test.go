package registry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/contract"
)

// A twin model in shadow goes to production only with stored shadow
// evidence and a latest twin gate evaluation that passed; a model that is
// not a twin is promoted as before.
func TestTwinPromotionNeedsShadowAndGate(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	reg := New(st, dir, nil)
	tw := registered(t, st, dir, "j1", true, true)
	if _, err := reg.Move(ctx, tw.ID, core.StageShadow, "ann", "", ""); err != nil {
		t.Fatal(err)
	}
	gate := func(id string, passed int, at int64) {
		if _, err := st.DB().Exec(`INSERT INTO twin_gate_evals(gate_eval_id, model_id, created_at, passed, report_json) VALUES (?,?,?,?,'{}')`, id, tw.ID, at, passed); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		prep func()
		want string
	}{
		{"no shadow evidence, no gate", func() {}, CodeShadowMissing},
		{"shadow evidence, no gate", func() {
			if err := st.PutShadow(ctx, contract.ShadowRecord{ModelID: tw.ID, RunID: "r1", Steps: 10, NRMSE: 0.1, Coverage: 0.9, Evidence: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}, CodeTwinGateFailed},
		{"failed gate", func() { gate("g1", 0, 1000) }, CodeTwinGateFailed},
		{"passed, then failed again (latest counts)", func() { gate("g2", 1, 2000); gate("g3", 0, 3000) }, CodeTwinGateFailed},
		{"latest passed", func() { gate("g4", 1, 4000) }, ""},
	}
	for _, s := range steps {
		s.prep()
		_, err := reg.Move(ctx, tw.ID, core.StageProduction, "ann", "", core.StageShadow)
		if got := core.CodeOf(err); got != s.want {
			t.Fatalf("%s: got %q (%v), want %q", s.name, got, err, s.want)
		}
	}
	if m, _ := st.GetModel(ctx, tw.ID); m.Stage != core.StageProduction {
		t.Fatalf("stage %s", m.Stage)
	}
	// Not a twin: no evidence needed.
	plain := registered(t, st, dir, "j2", true, false)
	if IsTwin(plain) {
		t.Fatal("aml.mean/1 model counted as twin")
	}
	if _, err := reg.Move(ctx, plain.ID, core.StageProduction, "ann", "", ""); err != nil {
		t.Fatalf("plain model: %v", err)
	}
	if !IsTwin(core.Model{ArtifactKind: FormatHybrid}) {
		t.Fatal("hybrid model not a twin")
	}
}

// A twin model whose dataset lineage is not verified does not go to
// production, whatever its evidence: the refusal says how to verify it.
// Linear models made for the twin are twin models; static ones are not.
func TestTwinPromotionNeedsLineage(t *testing.T) {
	st, dir := testfix.SQLite(t)
	ctx := context.Background()
	reg := New(st, dir, nil)
	tw := registered(t, st, dir, "j1", true, true)
	if _, err := st.DB().Exec(`UPDATE models SET lineage_verified = 0 WHERE id = ?`, tw.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Move(ctx, tw.ID, core.StageShadow, "ann", "", ""); err != nil {
		t.Fatalf("shadow needs no lineage (it only compares): %v", err)
	}
	if err := st.PutShadow(ctx, contract.ShadowRecord{ModelID: tw.ID, RunID: "r1", Steps: 10, NRMSE: 0.1, Coverage: 0.9, Evidence: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO twin_gate_evals(gate_eval_id, model_id, created_at, passed, report_json) VALUES ('g1',?,1,1,'{}')`, tw.ID); err != nil {
		t.Fatal(err)
	}
	_, err := reg.Move(ctx, tw.ID, core.StageProduction, "ann", "", core.StageShadow)
	if core.CodeOf(err) != core.CodeLineageUnverified || !strings.Contains(err.Error(), "aml runs events") || !strings.Contains(err.Error(), "aml recipe put") {
		t.Fatalf("unverified lineage: %v", err)
	}
	if m, _ := st.GetModel(ctx, tw.ID); m.Stage != core.StageShadow {
		t.Fatalf("stage %s after the refusal", m.Stage)
	}
	for _, c := range []struct {
		m    core.Model
		twin bool
	}{
		{core.Model{ArtifactKind: "aml.statespace/1", Purpose: "mpc_surrogate"}, true},
		{core.Model{ArtifactKind: "aml.arx/1", Purpose: "mpc_surrogate"}, true},
		{core.Model{ArtifactKind: "aml.arx/1", Purpose: "quality_predict"}, false},
		{core.Model{ArtifactKind: "aml.narx/1", Purpose: "mpc_surrogate"}, true},
		{core.Model{ArtifactKind: "aml.narx/1", Purpose: "quality_predict"}, false},
		{core.Model{ArtifactKind: "aml.nss/1", Purpose: "mpc_surrogate"}, true},
		{core.Model{ArtifactKind: "aml.nss/1", Purpose: "quality_predict"}, false},
		{core.Model{ArtifactKind: "aml.static-response/1", Purpose: "static_response"}, false},
	} {
		if IsTwin(c.m) != c.twin {
			t.Errorf("%s/%s: twin %v", c.m.ArtifactKind, c.m.Purpose, !c.twin)
		}
	}
}
