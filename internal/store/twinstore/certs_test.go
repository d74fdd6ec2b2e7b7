package twinstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

var twT0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

const twLine = "line-injection-01"

// twFixture stores a frozen default scene, a model, the default objective
// and snapshot snap-1, and returns the store and a signing key.
func twFixture(t *testing.T, b backend) (store.Store, *cert.KeyPair) {
	t.Helper()
	ctx := context.Background()
	s := b.open(t)
	k, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sc := contract.DefaultInjectionScene()
	if err := s.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", sceneHash(t, sc)); err != nil {
		t.Fatal(err)
	}
	seedModel(t, s)
	if _, err := s.PutObjective(ctx, contract.DefaultInjectionObjective()); err != nil {
		t.Fatal(err)
	}
	snap := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: twT0, CreatedBy: "twin-runtime", SnapshotID: "snap-1",
		SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: twLine, Phase: "holding", CapturedAt: twT0, DAQWatermark: twT0.UnixMilli(),
		ControlValues: map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246},
		DataQuality:   contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	if err := snap.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(ctx, snap, false); err != nil {
		t.Fatal(err)
	}
	return s, k
}

// seedModel registers model hybrid-1 (artifact hash "c"×64, line twLine)
// through the core.Store job API — dataset, job, claim, training,
// evaluation, finish — so the fixture is the same rows on both back-ends.
// The certificate records only the model's artifact hash.
func seedModel(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: twLine, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}))
	must(s.CreateJob(ctx, core.Job{ID: "job-1", DatasetID: "ds", DatasetSHA256: strings.Repeat("b", 64), TrainerRef: "hybrid_residual@1",
		MaxRetries: 2, TimeoutSec: 60, StallSec: 60}, core.JobLimits{}))
	if _, err := s.ClaimJob(ctx, "job-1", "worker"); err != nil {
		t.Fatal(err)
	}
	must(s.TransitionJob(ctx, "job-1", "worker", core.JobProvisioning, core.JobTraining, ""))
	must(s.TransitionJob(ctx, "job-1", "worker", core.JobTraining, core.JobEvaluating, ""))
	must(s.FinishJob(ctx, "job-1", "worker", core.JobEvaluating, nil, nil, true, "models/hybrid-1", &core.Model{ID: "hybrid-1", JobID: "job-1", DatasetID: "ds",
		LineID: twLine, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate", TrainerRef: "hybrid_residual@1",
		ArtifactKind: "aml.hybrid/1", ArtifactPath: "models/hybrid-1", ArtifactHash: strings.Repeat("c", 64), GatePassed: true}))
	if m, err := s.GetModel(ctx, "hybrid-1"); err != nil || m.Stage != core.StageCandidate || m.ArtifactHash != strings.Repeat("c", 64) {
		t.Fatalf("seeded model: %v %+v", err, m)
	}
}

func twTrial(id string) *contract.VirtualTrial {
	return &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: twT0, CreatedBy: "twin-runtime",
		TrialID: id, SnapshotID: "snap-1", ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{
			{"hold_pressure": 65, "hold_time": 8.5, "melt_temperature_setpoint": 247},
			{"hold_pressure": 66, "hold_time": 8.5, "melt_temperature_setpoint": 248},
		},
		Uncertainty:       contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution: contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []contract.ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"}, {ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"}, {ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
}

func twIssue(t *testing.T, s store.Store, k *cert.KeyPair, trialID string) *contract.CertRecord {
	t.Helper()
	ctx := context.Background()
	if _, err := s.PutTrial(ctx, twTrial(trialID), contract.TrialManual, ""); err != nil {
		t.Fatal(err)
	}
	r, err := s.IssueCertificate(ctx, trialID, "alice", k, time.Hour, twT0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if core.CodeOf(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func TestCertificateIssueFromStoredRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		r := twIssue(t, s, k, "trial-1")
		c := r.Cert
		snap, _ := s.GetSnapshot(ctx, "snap-1")
		_, objHash, _ := s.GetObjective(ctx, "weight-quality")
		tr, _ := s.GetTrial(ctx, "trial-1")
		sc, _ := s.GetScene(ctx, c.SceneID, c.SceneVersion)
		if c.SnapshotHash != snap.SnapshotHash || c.ModelHash != strings.Repeat("c", 64) || c.ObjectiveHash != objHash || c.TrialHash != tr.Hash ||
			c.SceneHash != sceneHash(t, sc) || r.LineID != twLine || c.Status != contract.CertIssued {
			t.Fatalf("%+v", c)
		}
		got, err := s.GetCertificate(ctx, c.RecommendationID, k.Public)
		if err != nil || got.AuditSeq != r.AuditSeq || got.AuditHash != r.AuditHash || got.Cert.CertificateHash != c.CertificateHash {
			t.Fatalf("%v %+v", err, got)
		}
		// The issue entry is in the chain at the recorded head.
		if _, err := s.AuditLog().VerifyHead(ctx, r.AuditSeq, r.AuditHash); err != nil {
			t.Fatal(err)
		}
		// Another key: AML_CERT_INVALID.
		other, _ := cert.GenerateKey()
		_, err = s.GetCertificate(ctx, c.RecommendationID, other.Public)
		wantCode(t, err, cert.CodeCertInvalid)
	})
}

func TestCertificateIssueRefusals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		failed := twTrial("trial-failed")
		n := 1
		failed.ConstraintResults[0] = contract.ConstraintResult{ID: "weight", Passed: false, Detail: "34.2 > 34", FirstViolationStep: &n}
		noGain := twTrial("trial-nogain")
		noGain.BaselineComparison = contract.BaselineComparison{BaselineCost: 1, CandidateCost: 1}
		ood := twTrial("trial-ood")
		ood.OutOfDistribution = contract.OutOfDistribution{Distance: 9, Disagreement: 1, Accepted: false, RejectCode: "OOD_DISTANCE"}
		noModel := twTrial("trial-nomodel")
		noModel.ModelID = "ghost"
		for _, tr := range []*contract.VirtualTrial{failed, noGain, ood, noModel} {
			rec, err := s.PutTrial(ctx, tr, contract.TrialOptimize, "")
			if err != nil {
				t.Fatal(err)
			}
			if tr == failed && (rec.Passed || rec.RejectCode != contract.RejectConstraint || rec.HardViolations != 1) {
				t.Fatalf("%+v", rec)
			}
			if tr == ood && (rec.Passed || rec.RejectCode != contract.RejectOOD || rec.OODAccepted) {
				t.Fatalf("%+v", rec)
			}
		}
		for id, code := range map[string]string{"trial-failed": cert.CodeCertRefused, "trial-nogain": cert.CodeCertRefused, "trial-ood": cert.CodeCertRefused,
			"trial-nomodel": core.CodeNotFound, "trial-missing": core.CodeNotFound} {
			_, err := s.IssueCertificate(ctx, id, "alice", k, time.Hour, twT0)
			wantCode(t, err, code)
		}
		var n2 int
		if err := s.SQL().QueryRowContext(ctx, `SELECT count(*) FROM twin_certificates`).Scan(&n2); err != nil {
			t.Fatal(err)
		}
		if n2 != 0 {
			t.Fatalf("%d certificates stored", n2)
		}
	})
}

func TestCertificateLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		id := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		now := twT0.Add(time.Minute)
		// The requester can never approve.
		_, err := s.ApproveCertificate(ctx, id, " ALICE ", k.Public, now)
		wantCode(t, err, core.CodeForbidden)
		_, err = s.MarkCertificateExecuted(ctx, id, "carol", k.Public, now, nil)
		wantCode(t, err, core.CodeConflict)
		r, err := s.ApproveCertificate(ctx, id, "bob", k.Public, now)
		if err != nil || r.Cert.Status != contract.CertApproved || r.Cert.ApprovedBy != "bob" {
			t.Fatalf("%v %+v", err, r)
		}
		if _, err := s.MarkCertificateExecuted(ctx, id, "carol", k.Public, now.Add(time.Second), map[string]any{"outcome": "readback-verified"}); err != nil {
			t.Fatal(err)
		}
		// Terminal: no further transition, at the store or in SQL.
		_, err = s.RevokeCertificate(ctx, id, "dave", "late", k.Public, now.Add(2*time.Second))
		wantCode(t, err, core.CodeConflict)
		if _, err := s.SQL().ExecContext(ctx, `UPDATE twin_certificates SET status='APPROVED' WHERE certificate_id=?`, id); !sqldb.IsConstraint(err) {
			t.Fatalf("a terminal certificate changed in SQL: %v", err)
		}
		items, err := s.ListCertificates(ctx, contract.CertFilter{Status: contract.CertExecuted, LineID: twLine}, k.Public)
		if err != nil || len(items) != 1 || !items[0].Verified {
			t.Fatalf("%v %+v", err, items)
		}
		es, _ := s.AuditLog().List(ctx, 0, 100, id)
		var acts []string
		for _, e := range es {
			acts = append(acts, e.Action)
		}
		if strings.Join(acts, ",") != "cert.issue,cert.approve,cert.execute" {
			t.Fatalf("%v", acts)
		}
	})
}

func TestCertificateApproveRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		ctx := context.Background()
		id := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.ApproveCertificate(ctx, id, []string{"bob", "carol", "dave", "erin"}[i%4], k.Public, twT0.Add(time.Minute))
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch core.CodeOf(err) {
			case "":
				ok++
			case core.CodeConflict:
			default:
				t.Fatal(err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d approvals won", ok)
		}
		es, _ := s.AuditLog().List(ctx, 0, 100, id)
		if len(es) != 2 {
			t.Fatalf("%d audit entries", len(es))
		}
	})
}

func TestCertificateExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s, k := twFixture(t, be)
		ctx := context.Background()
		a := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		b := twIssue(t, s, k, "trial-2").Cert.RecommendationID
		// Approving after expiry marks it EXPIRED and refuses.
		_, err := s.ApproveCertificate(ctx, a, "bob", k.Public, twT0.Add(2*time.Hour))
		wantCode(t, err, cert.CodeCertExpired)
		r, err := s.GetCertificate(ctx, a, k.Public)
		if err != nil || r.Cert.Status != contract.CertExpired {
			t.Fatalf("%v %+v", err, r)
		}
		ids, err := s.ExpireDue(ctx, twT0.Add(30*time.Minute))
		if err != nil || len(ids) != 0 {
			t.Fatalf("early sweep: %v %v", err, ids)
		}
		ids, err = s.ExpireDue(ctx, twT0.Add(2*time.Hour))
		if err != nil || len(ids) != 1 || ids[0] != b {
			t.Fatalf("sweep: %v %v", err, ids)
		}
		if r, _ := s.GetCertificate(ctx, b, k.Public); r.Cert.Status != contract.CertExpired || r.Cert.ExpiredAt.IsZero() {
			t.Fatalf("%+v", r.Cert)
		}
	})
}

func TestCertificateTamperDetectedOnRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		cases := map[string]string{
			"signed field in JSON": `UPDATE twin_certificates SET cert_json = replace(cert_json, '"hold_pressure":65', '"hold_pressure":67')`,
			"status column only":   `UPDATE twin_certificates SET status='APPROVED'`,
			"approver in JSON and column": `UPDATE twin_certificates SET approved_by='bob', status='APPROVED',
				cert_json = replace(cert_json, '"status":"ISSUED"', '"status":"APPROVED","approvedBy":"bob","approvedAt":"2026-03-01T08:01:00Z"')`,
			"signature": `UPDATE twin_certificates SET cert_json = replace(cert_json, '"signature":"', '"signature":"A')`,
		}
		for name, q := range cases {
			t.Run(name, func(t *testing.T) {
				s, k := twFixture(t, b)
				ctx := context.Background()
				id := twIssue(t, s, k, "trial-1").Cert.RecommendationID
				if _, err := s.SQL().ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
				_, err := s.GetCertificate(ctx, id, k.Public)
				if name == "approver in JSON and column" {
					// Lifecycle fields are not signed: the row is consistent and the
					// signature verifies; only the audit trail shows it (see
					// govern.VerifyCertificate). The store still reads it.
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				wantCode(t, err, cert.CodeCertInvalid)
				items, err := s.ListCertificates(ctx, contract.CertFilter{}, k.Public)
				if err != nil || len(items) != 1 || items[0].Verified || items[0].Problem == "" {
					t.Fatalf("%v %+v", err, items)
				}
				_, err = s.ApproveCertificate(ctx, id, "bob", k.Public, twT0.Add(time.Minute))
				wantCode(t, err, cert.CodeCertInvalid)
			})
		}
	})
}

func TestTrialStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _ := twFixture(t, b)
		ctx := context.Background()
		rec, err := s.PutTrial(ctx, twTrial("trial-1"), contract.TrialGate, "gate-7")
		if err != nil || !rec.Passed || rec.RejectCode != "" || rec.LineID != twLine || rec.Improvement != 0.4 {
			t.Fatalf("%v %+v", err, rec)
		}
		_, err = s.PutTrial(ctx, twTrial("trial-1"), contract.TrialGate, "gate-7")
		wantCode(t, err, core.CodeConflict)
		_, err = s.PutTrial(ctx, twTrial("trial-2"), "bogus", "")
		wantCode(t, err, core.CodeInvalidArgument)
		got, err := s.GetTrial(ctx, "trial-1")
		if err != nil || got.Hash != rec.Hash || got.GateEvalID != "gate-7" || got.Purpose != contract.TrialGate {
			t.Fatalf("%v %+v", err, got)
		}
		l, err := s.ListTrials(ctx, contract.TrialFilter{GateEvalID: "gate-7"})
		if err != nil || len(l) != 1 {
			t.Fatalf("%v %d", err, len(l))
		}
		if l, _ := s.ListTrials(ctx, contract.TrialFilter{ModelID: "other"}); len(l) != 0 {
			t.Fatal("filter")
		}
		// candidate_executed can never be 1, and trials never change.
		if _, err := s.SQL().ExecContext(ctx, `UPDATE twin_trials SET passed=0`); !sqldb.IsConstraint(err) {
			t.Fatalf("trial updated: %v", err)
		}
		mustExec(t, s, b.dropTrigger("twin_trials_no_update", "twin_trials"))
		if _, err := s.SQL().ExecContext(ctx, `UPDATE twin_trials SET candidate_executed=1`); !sqldb.IsConstraint(err) {
			t.Fatalf("candidate_executed=1 accepted: %v", err)
		}
		// Tampering detected on read: the JSON, or a derived column.
		for _, q := range []string{
			`UPDATE twin_trials SET passed=0`,
			`UPDATE twin_trials SET trial_json = replace(trial_json, '"improvement":0.4', '"improvement":0.5')`,
		} {
			if _, err := s.SQL().ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
			_, err := s.GetTrial(ctx, "trial-1")
			wantCode(t, err, twinstore.CodeTrialTampered)
			mustExec(t, s, `UPDATE twin_trials SET passed=1, trial_json=? WHERE trial_id='trial-1'`, mustCanon(t, twTrial("trial-1")))
			if _, err := s.GetTrial(ctx, "trial-1"); err != nil {
				t.Fatalf("restored: %v", err)
			}
		}
		// Objectives: stored, replaced, verified.
		o := contract.DefaultInjectionObjective()
		h1, _ := s.PutObjective(ctx, o)
		o.Targets["weight"] = 32.5
		h2, err := s.PutObjective(ctx, o)
		if err != nil || h1 == h2 {
			t.Fatalf("%v", err)
		}
		if _, h, err := s.GetObjective(ctx, o.ObjectiveID); err != nil || h != h2 {
			t.Fatalf("%v", err)
		}
		mustExec(t, s, `UPDATE twin_objectives SET objective_json = replace(objective_json, '32.5', '33')`)
		_, _, err = s.GetObjective(ctx, o.ObjectiveID)
		wantCode(t, err, twinstore.CodeObjectiveTampered)
	})
}

func mustCanon(t *testing.T, v any) string {
	b, err := core.CanonicalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestChannelsAndWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _ := twFixture(t, b)
		ctx := context.Background()
		// No channel: the guard's "none" (nil, nil).
		if p, err := s.Channel(ctx, twLine); p != nil || err != nil {
			t.Fatalf("%+v %v", p, err)
		}
		bad := []contract.ChannelRecord{
			{LineID: twLine, Profile: "auto", ControlPolicy: "hitl_governed"},
			{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "yolo"},
			{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "bounded_auto"},
			{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "bounded_auto", Bounds: map[string]contract.ChannelBound{"hold_pressure": {Min: 70, Max: 60}}},
			{LineID: "", Profile: "hybrid_twin", ControlPolicy: "hitl_governed"},
			{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "hitl_governed", SceneID: "injection-hold-control"},
		}
		for i, c := range bad {
			if _, err := s.SetChannel(ctx, c, "ops"); core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("%d: %v", i, err)
			}
		}
		_, err := s.SetChannel(ctx, contract.ChannelRecord{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "bounded_auto", SceneID: "injection-hold-control", SceneVersion: "1.0.0",
			Bounds: map[string]contract.ChannelBound{"not_a_control": {Min: 0, Max: 1}}}, "ops")
		wantCode(t, err, core.CodeInvalidArgument)
		_, err = s.SetChannel(ctx, contract.ChannelRecord{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "hitl_governed", SceneID: "nope", SceneVersion: "1.0.0"}, "ops")
		wantCode(t, err, core.CodeNotFound)
		c, err := s.SetChannel(ctx, contract.ChannelRecord{LineID: twLine, Profile: "hybrid_twin", ControlPolicy: "bounded_auto", SceneID: "injection-hold-control", SceneVersion: "1.0.0",
			Bounds: map[string]contract.ChannelBound{"hold_pressure": {Min: 55, Max: 70}}}, "ops")
		if err != nil || c.ChannelID != "ch-"+twLine {
			t.Fatalf("%v %+v", err, c)
		}
		p, err := s.Channel(ctx, twLine)
		if err != nil || p.Profile != contract.ProfileHybridTwin || p.ControlPolicy != "bounded_auto" || p.Bounds["hold_pressure"] != (contract.Bound{Min: 55, Max: 70}) {
			t.Fatalf("%v %+v", err, p)
		}
		// Corrupt stored bounds: an error (the guard denies CHANNEL_ERROR).
		mustExec(t, s, `UPDATE twin_channels SET bounds_json='{' WHERE line_id=?`, twLine)
		if _, err := s.Channel(ctx, twLine); err == nil {
			t.Fatal("corrupt bounds accepted")
		}

		// Writes: recorded, read back by line and time, append-only.
		for i := range 3 {
			if _, err := s.RecordWrite(ctx, "ops", contract.WriteRow{WriteRecord: contract.WriteRecord{LineID: twLine, NodeID: "hold_pressure", CertificateID: "rec-1", RunID: "r",
				At: twT0.Add(time.Duration(i) * time.Minute), Value: 64 + float64(i), Delta: 1}, VariableID: "hold_pressure"}); err != nil {
				t.Fatal(err)
			}
		}
		ws, err := s.Writes(ctx, twLine, twT0.Add(time.Minute))
		if err != nil || len(ws) != 2 || ws[0].Value != 65 || !ws[0].At.Equal(twT0.Add(time.Minute)) {
			t.Fatalf("%v %+v", err, ws)
		}
		if ws, _ := s.Writes(ctx, "other-line", time.Time{}); len(ws) != 0 {
			t.Fatal("other line")
		}
		for _, q := range []string{`UPDATE twin_writes SET value=0`, `DELETE FROM twin_writes`} {
			if _, err := s.SQL().ExecContext(ctx, q); !sqldb.IsConstraint(err) {
				t.Fatalf("%s accepted: %v", q, err)
			}
		}
		// TRUNCATE differs by back-end: PostgreSQL has it, and it bypasses
		// row triggers, so 0006 refuses it with a statement trigger (a
		// constraint error, as the row triggers give); SQLite has no TRUNCATE
		// statement at all (a syntax error). Either way the history stays.
		_, err = s.SQL().ExecContext(ctx, `TRUNCATE twin_writes`)
		switch b.name {
		case "postgres":
			if !sqldb.IsConstraint(err) {
				t.Fatalf("TRUNCATE twin_writes accepted: %v", err)
			}
		default:
			if err == nil || sqldb.IsConstraint(err) {
				t.Fatalf("TRUNCATE on SQLite: want a syntax error, got %v", err)
			}
		}
		if ws, err := s.Writes(ctx, twLine, time.Time{}); err != nil || len(ws) != 3 {
			t.Fatalf("history after TRUNCATE: %v %d rows, want 3", err, len(ws))
		}
		// A claim fails when the history grew since the check.
		last, _ := s.LastWriteID(ctx, twLine)
		_, err = s.ClaimWrite(ctx, contract.WriteClaimRequest{LineID: twLine, CertificateID: "rec-2", Actor: "carol", At: twT0.Add(time.Hour), ExpectLastWriteID: last - 1})
		wantCode(t, err, core.CodeConflict)
		if _, err := s.ClaimWrite(ctx, contract.WriteClaimRequest{LineID: twLine, CertificateID: "rec-2", Actor: "carol", At: twT0.Add(time.Hour), ExpectLastWriteID: last}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuditLog().Verify(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
