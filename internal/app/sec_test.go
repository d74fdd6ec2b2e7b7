package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The security fixture (issue #16): a store with a frozen default scene, a
// model, the default objective, a hybrid_twin/hitl_governed channel and
// an active run, and an app over it on the fixed clock with the key.

const secLine = "line-injection-01"

var (
	secBaseline = map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246}
	secStep     = map[string]float64{"hold_pressure": 65, "hold_time": 8.5, "melt_temperature_setpoint": 247}
)

type secFixture struct {
	a     *App
	st    *sqlite.Store
	key   *cert.KeyPair
	scene *contract.SceneContract
	now   time.Time
}

func newSecFixture(t *testing.T) *secFixture {
	t.Helper()
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "test"); err != nil {
		t.Fatal(err)
	}
	sc := contract.DefaultInjectionScene()
	if err := st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if sc, err = st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: secLine, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, lineage_verified, created_at, stage_changed_at)
		VALUES ('hybrid-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/hybrid-1',?,1,1,1)`, secLine, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObjective(ctx, contract.DefaultInjectionObjective()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetChannel(ctx, contract.ChannelRecord{LineID: secLine, Profile: "hybrid_twin", ControlPolicy: contract.PolicyHITLGoverned}, "ops"); err != nil {
		t.Fatal(err)
	}
	f := &secFixture{st: st, key: key, scene: sc, now: fixed}
	f.a = New(&service.Deps{Store: st, DataDir: dir, Key: key}, Options{Now: func() time.Time { return f.now }, WallNow: func() time.Time { return f.now }})
	return f
}

// trial stores a snapshot captured 5 s before the fixture's clock (window
// run runID, none when empty) and a passing trial moving to first; it
// returns the trial id.
func (f *secFixture) trial(t *testing.T, name, runID string, first map[string]float64) string {
	t.Helper()
	ctx := context.Background()
	at := f.now.Add(-5 * time.Second)
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: at, CreatedBy: "twin-runtime", SnapshotID: "snap-" + name,
		SceneID: f.scene.SceneID, SceneVersion: f.scene.SceneVersion, LineID: secLine, Phase: "holding", CapturedAt: at,
		DAQWatermark: at.UnixMilli(), ControlValues: secBaseline, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	if runID != "" {
		s.Window = &contract.SnapshotWindow{BeatMs: 1000, EndMs: at.UnixMilli(), Steps: 1, Values: map[string][]*float64{}, RunID: runID}
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutSnapshot(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	second := map[string]float64{}
	for k, v := range first {
		second[k] = v
	}
	second["hold_pressure"]++
	tr := &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: at, CreatedBy: "twin-runtime",
		TrialID: "trial-" + name, SnapshotID: "snap-" + name, ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{first, second},
		Uncertainty:                contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:          contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []contract.ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"}, {ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"}, {ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
	if _, err := f.st.PutTrial(ctx, tr, contract.TrialManual, ""); err != nil {
		t.Fatal(err)
	}
	return tr.TrialID
}

// TestSec12_FourEyesNormalisedNames: the four-eyes rule compares names
// after NFC normalisation and case folding, and a name with a
// default-ignorable or control character never enters (principal of an
// op, token name).
func TestSec12_FourEyesNormalisedNames(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	requester := Principal{Name: "josé", Role: auth.RoleEngineer} // NFC é
	r, err := f.a.CertIssue(ctx, requester, CertIssueRequest{Trial: f.trial(t, "a", "", secStep)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Cert.RecommendationID
	// The same person, spelt differently.
	for _, name := range []string{"jose\u0301", "JOSÉ", "Jose\u0301"} {
		_, err := f.a.CertApprove(ctx, Principal{Name: name, Role: auth.RoleApprover}, CertRequest{ID: id})
		if core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("approval by %q (%+q): %v", name, name, err)
		}
	}
	// A name hiding a zero-width, bidi or control character is refused
	// wherever it enters: as an op's principal …
	for _, name := range []string{"jos\u00e9\u200b", "\u200bjosé", "jo\u00adsé", "josé\u202e", "jos\u00e9\x00", "jos\u00e9\ufeff", "jos\u00e9\u2060"} {
		_, err := f.a.CertApprove(ctx, Principal{Name: name, Role: auth.RoleApprover}, CertRequest{ID: id})
		if core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("approval by %+q: %v", name, err)
		}
		// … and as a token's name.
		_, err = f.a.TokenCreate(ctx, admin, TokenCreateRequest{Name: name, Role: auth.RoleApprover})
		if core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("token %+q: %v", name, err)
		}
	}
	if got, err := f.st.GetCertificate(ctx, id, f.key.Public); err != nil || got.Cert.Status != contract.CertIssued {
		t.Fatalf("after refused approvals: %v %+v", err, got)
	}
	// Another person still can.
	if r, err := f.a.CertApprove(ctx, Principal{Name: "erin", Role: auth.RoleApprover}, CertRequest{ID: id}); err != nil || r.Cert.Status != contract.CertApproved {
		t.Fatalf("approval by erin: %v", err)
	}
}

// certified issues a certificate for a new trial (by eve) and approves it
// (by erin) on the fixture's clock; it returns the certificate id.
func (f *secFixture) certified(t *testing.T, name, runID string) string {
	t.Helper()
	ctx := context.Background()
	r, err := f.a.CertIssue(ctx, Principal{Name: "eve", Role: auth.RoleEngineer}, CertIssueRequest{Trial: f.trial(t, name, runID, secStep)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Cert.RecommendationID
	if _, err := f.a.CertApprove(ctx, Principal{Name: "erin", Role: auth.RoleApprover}, CertRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	return id
}

var operator = Principal{Name: "olga", Role: auth.RoleApprover}

// TestSec5_MadeUpRunIDs: the run an action counts against is the run the
// certified snapshot was taken in (else the line's active run), never the
// caller's: a made-up run id is refused, and the scene's
// maxActionsPerRun (3) holds.
func TestSec5_MadeUpRunIDs(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	executed := 0
	for i := range 5 {
		f.now = fixed.Add(time.Duration(i) * 2 * time.Minute) // past both write intervals
		id := f.certified(t, fmt.Sprintf("r%d", i), "run-1")
		res, err := f.a.CertExecute(ctx, operator, CertExecuteRequest{ID: id, Run: fmt.Sprintf("invented-%d", i)})
		if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != "RUN_MISMATCH" || res.Executed {
			t.Fatalf("execution %d under a made-up run: %v %+v", i, err, res)
		}
		res, err = f.a.CertExecute(ctx, operator, CertExecuteRequest{ID: id, Run: "run-1"}) // the real run may be named
		if i < 3 {
			if err != nil || !res.Executed || res.RunID != "run-1" {
				t.Fatalf("execution %d: %v %+v", i, err, res)
			}
			executed++
			continue
		}
		if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != guard.ReasonTooManyActions {
			t.Fatalf("execution %d beyond maxActionsPerRun: %v %+v", i, err, res)
		}
	}
	if executed != 3 {
		t.Fatalf("%d executions", executed)
	}
}

// TestSec5_RunFromStore: a snapshot without a run counts against the
// line's active run in the store; with none, the write is denied.
func TestSec5_RunFromStore(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	id := f.certified(t, "norun", "")
	res, err := f.a.CertExecute(ctx, operator, CertExecuteRequest{ID: id, Run: "invented"})
	if core.CodeOf(err) != govern.CodeWriteDenied || res.Executed {
		t.Fatalf("no run anywhere, a made-up one given: %v %+v", err, res)
	}
	if err := f.st.CreateRun(ctx, core.Run{ID: "run-active", LineID: secLine, ProductID: "P", RecipeID: "R", StartedMs: 1, Status: core.RunActive}); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Second)
	id = f.certified(t, "active", "")
	res, err = f.a.CertExecute(ctx, operator, CertExecuteRequest{ID: id, Run: "invented"})
	if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != "RUN_MISMATCH" {
		t.Fatalf("made-up run beside the active run: %v %+v", err, res)
	}
	res, err = f.a.CertExecute(ctx, operator, CertExecuteRequest{ID: id})
	if err != nil || res.RunID != "run-active" {
		t.Fatalf("active run: %v %+v", err, res)
	}
}

// TestSec11_RewrittenChainAndAnchor: a rewritten audit log whose hashes
// were recomputed, with the certificate's (unsigned) audit anchor edited
// to match, fails audit verify and cert verify, each naming the check —
// the signed checkpoints and the signed anchor keep the original hashes.
func TestSec11_RewrittenChainAndAnchor(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	id := f.certified(t, "a", "run-1")
	if _, err := f.a.AuditVerify(ctx, viewer, AuditVerifyRequest{}); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.a.CertVerify(ctx, viewer, CertRequest{ID: id}); err != nil || !rep.OK {
		t.Fatalf("%v %+v", err, rep)
	}
	rec, err := f.st.LoadCertificate(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker: rewrite the issue entry (a better improvement) and
	// every entry after it, recomputing the chain; point the anchor at
	// the rewritten issue entry.
	db := f.st.DB()
	for _, q := range []string{`DROP TRIGGER audit_log_no_update`, `DROP TRIGGER twin_certificates_hash_fixed`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	es, err := f.st.AuditLog().List(ctx, 0, audit.MaxListLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	prev, anchor := audit.GenesisHash, ""
	for _, e := range es {
		if e.Seq < rec.AuditSeq {
			prev = e.Hash
			continue
		}
		if e.Seq == rec.AuditSeq {
			var p map[string]any
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			p["improvement"] = 0.9
			if e.Payload, err = core.CanonicalJSON(p); err != nil {
				t.Fatal(err)
			}
		}
		e.PrevHash = prev
		if e.Hash, err = audit.ComputeHash(e); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE audit_log SET payload=?, prev_hash=?, hash=? WHERE seq=?`, string(e.Payload), e.PrevHash, e.Hash, e.Seq); err != nil {
			t.Fatal(err)
		}
		if e.Seq == rec.AuditSeq {
			anchor = e.Hash
		}
		prev = e.Hash
	}
	if _, err := db.Exec(`UPDATE twin_certificates SET audit_hash=? WHERE certificate_id=?`, anchor, id); err != nil {
		t.Fatal(err)
	}

	res, err := f.a.AuditVerify(ctx, viewer, AuditVerifyRequest{})
	if core.CodeOf(err) != audit.CodeAuditTampered || res.OK || !strings.Contains(res.Problem, "checkpoint") {
		t.Fatalf("audit verify of the rewritten log: %v %+v", err, res)
	}
	t.Logf("audit verify: %v", err)
	rep, err := f.a.CertVerify(ctx, viewer, CertRequest{ID: id})
	if core.CodeOf(err) != core.CodeCertInvalid || rep.OK || !strings.Contains(err.Error(), "audit-anchor") {
		t.Fatalf("cert verify of the rewritten log: %v %+v", err, rep)
	}
	failed := map[string]bool{}
	for _, ch := range rep.Checks {
		if !ch.OK {
			failed[ch.Name] = true
		}
	}
	if !failed["audit-anchor"] || !failed["audit-chain"] {
		t.Fatalf("failed checks %v: %+v", failed, rep.Checks)
	}
	t.Logf("cert verify: %v", err)
}

// A passing trial of a model whose dataset lineage is not verified is not
// certified: the refusal says how to verify it, and nothing is issued.
func TestCertRefusedForUnverifiedLineage(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	id := f.trial(t, "lin", "", secStep)
	if _, err := f.st.DB().Exec(`UPDATE models SET lineage_verified = 0 WHERE id = 'hybrid-1'`); err != nil {
		t.Fatal(err)
	}
	_, err := f.a.CertIssue(ctx, Principal{Name: "eve", Role: auth.RoleEngineer}, CertIssueRequest{Trial: id})
	if core.CodeOf(err) != core.CodeLineageUnverified || !strings.Contains(err.Error(), "aml runs events") {
		t.Fatalf("cert of an unverified model: %v", err)
	}
	if l, err := f.a.CertList(ctx, Principal{Name: "eve", Role: auth.RoleEngineer}, CertListRequest{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("certificates after the refusal: %v %v", l.Items, err)
	}
}
