package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/envelope"
	"github.com/aml-project/aml/internal/twin/guard"
)

// TestEnvelopeOps: the envelope use cases end to end on a store with a
// frozen scene and a registered model: refused on a hitl_governed line;
// proposed by an engineer, approval refused to the engineer's role, an
// agent and the proposer, approved by an approver; shown and listed
// within line scope; a cycle whose model has no passing gate stops the
// envelope (event, revoked), after which cycles are refused.
func TestEnvelopeOps(t *testing.T) {
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "ops"); err != nil {
		t.Fatal(err)
	}
	bus := events.New()
	sub := bus.Subscribe(16, func(e events.Event) bool { return strings.HasPrefix(e.Kind, "envelope.") })
	a := New(&service.Deps{Store: st, DataDir: dir, Key: key, Bus: bus}, Options{Now: func() time.Time { return fixed }, WallNow: func() time.Time { return fixed }})
	const line = "line-injection-01"
	sc := envelopeFixture(t, st, line)
	bob := Principal{Name: "bob", Role: auth.RoleApprover}
	req := EnvelopeIssueRequest{Scene: sc.SceneID, Model: "hybrid-1", MaxMovesPerHour: 6, TTL: Duration(2 * time.Hour),
		Bounds: map[string]EnvelopeBound{"hold_pressure": {Min: 60, Max: 70}, "hold_time": {Min: 6, Max: 10}}}
	if _, err := a.EnvelopeIssue(ctx, engineer, req); core.CodeOf(err) != cert.CodeCertRefused || !strings.Contains(err.Error(), "hitl_governed") {
		t.Fatalf("envelope on hitl_governed: %v", err)
	}
	if _, err := a.ChannelSet(ctx, admin, ChannelSetRequest{Line: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyBoundedAuto,
		Bounds: map[string]contract.ChannelBound{"hold_pressure": {Min: 50, Max: 90}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}}); err != nil {
		t.Fatal(err)
	}
	bad := req
	bad.Bounds = map[string]EnvelopeBound{"hold_pressure": {Min: 40, Max: 70}} // below the control's minimum 50
	if _, err := a.EnvelopeIssue(ctx, engineer, bad); core.CodeOf(err) != cert.CodeCertRefused {
		t.Fatalf("bounds outside the control's range: %v", err)
	}
	if _, err := a.EnvelopeIssue(ctx, agent, req); err != nil {
		t.Fatalf("an agent proposes (a person approves): %v", err)
	}
	r, err := a.EnvelopeIssue(ctx, admin, req)
	if err != nil || r.Envelope.Status != contract.CertIssued || r.Envelope.CreatedBy != admin.Name {
		t.Fatalf("issue: %v %+v", err, r)
	}
	id := r.Envelope.EnvelopeID
	for _, p := range []Principal{engineer, agent, admin} { // admin proposed it
		if _, err := a.EnvelopeApprove(ctx, p, EnvelopeRequest{ID: id}); core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("%s (%s) approved: %v", p.Name, p.Role, err)
		}
	}
	if r, err = a.EnvelopeApprove(ctx, bob, EnvelopeRequest{ID: id}); err != nil || r.Envelope.Status != contract.CertApproved || r.Envelope.ApprovedBy != "bob" {
		t.Fatalf("approve: %v %+v", err, r)
	}
	if s, err := a.EnvelopeShow(ctx, viewer, EnvelopeRequest{ID: id}); err != nil || s.Envelope.Status != contract.CertApproved {
		t.Fatalf("show: %v", err)
	}
	other := Principal{Name: "sam", Role: auth.RoleViewer, Lines: []string{"other"}}
	if _, err := a.EnvelopeShow(ctx, other, EnvelopeRequest{ID: id}); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("another line's viewer: %v", err)
	}
	if l, err := a.EnvelopeList(ctx, viewer, EnvelopeListRequest{}); err != nil || l.Count != 2 {
		t.Fatalf("list: %v %+v", err, l)
	}
	if l, err := a.EnvelopeList(ctx, other, EnvelopeListRequest{}); err != nil || l.Count != 0 {
		t.Fatalf("scoped list: %v %+v", err, l)
	}
	// No writes for an agent, whatever the envelope.
	if _, err := a.EnvelopeCycle(ctx, agent, EnvelopeCycleRequest{ID: id}); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("agent cycle: %v", err)
	}
	w := guard.NewRecordingWriter(map[string]float64{"hold_pressure": 64, "hold_time": 8})
	res, err := a.EnvelopeCycle(ctx, bob, EnvelopeCycleRequest{ID: id, Writer: w})
	if core.CodeOf(err) != core.CodeWriteDenied || res.Status != envelope.StatusStopped || res.Reason != envelope.ReasonGateFailed || len(w.Writes) != 0 {
		t.Fatalf("cycle without a passing gate: %v %+v", err, res)
	}
	if s, _ := a.EnvelopeShow(ctx, viewer, EnvelopeRequest{ID: id}); s.Envelope.Status != contract.CertRevoked || s.Stop == "" {
		t.Fatalf("after the stop: %+v", s)
	}
	res, err = a.EnvelopeCycle(ctx, bob, EnvelopeCycleRequest{ID: id, Writer: w})
	if core.CodeOf(err) != core.CodeWriteDenied || res.Status != envelope.StatusRefused || res.Reason != guard.ReasonCertRevoked {
		t.Fatalf("cycle after the stop: %v %+v", err, res)
	}
	var kinds []string
	for len(sub.C) > 0 {
		kinds = append(kinds, (<-sub.C).Kind)
	}
	if got := strings.Join(kinds, ","); got != "envelope.status,envelope.status,envelope.status,envelope.stopped" {
		t.Fatalf("events %s", got)
	}
}

// envelopeFixture stores a frozen default scene of line, a model of it
// with verified lineage and a hybrid_twin/hitl_governed channel.
func envelopeFixture(t *testing.T, st *sqlite.Store, line string) *contract.SceneContract {
	t.Helper()
	ctx := context.Background()
	sc := contract.DefaultInjectionScene()
	if err := st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	sc, err := st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: line, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, created_at, stage_changed_at, lineage_verified)
		VALUES ('hybrid-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/hybrid-1',?,1,1,1)`, line, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetChannel(ctx, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyHITLGoverned}, "ops"); err != nil {
		t.Fatal(err)
	}
	return sc
}
