package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
)

const certLine = "line-injection-01"

// seedTwin stores in data dir d a frozen default scene, a model, the
// default objective, a snapshot captured just now and passing trials
// trial-1 … trial-n starting from it.
// certBase is the instant of the seeded snapshot and trials. The CLI's
// clock (useCertClock) starts 2 s after it and steps one second per
// reading: the certificate commands see a fresh snapshot and a monotonic
// clock, whatever the wall clock says or how slow the machine is.
var certBase = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

func useCertClock(t *testing.T) {
	t.Helper()
	var mu sync.Mutex
	next := certBase.Add(2 * time.Second)
	subCLIClock = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		next = next.Add(time.Second)
		return next
	}
	t.Cleanup(func() { subCLIClock = nil })
}

func seedTwin(t *testing.T, d string, n int) {
	t.Helper()
	useCertClock(t)
	seedTwinAt(t, d, n, certBase)
}

// seedTwinAt is seedTwin with the snapshot and trials made at now.
func seedTwinAt(t *testing.T, d string, n int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	sc := contract.DefaultInjectionScene()
	if err := s.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if _, err := s.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: certLine, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, lineage_verified, created_at, stage_changed_at)
		VALUES ('hybrid-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/hybrid-1',?,1,1,1)`, certLine, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObjective(ctx, contract.DefaultInjectionObjective()); err != nil {
		t.Fatal(err)
	}
	snap := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: now, CreatedBy: "twin-runtime", SnapshotID: "snap-1",
		SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: certLine, Phase: "holding", CapturedAt: now.Add(-2 * time.Second), DAQWatermark: now.UnixMilli(),
		ControlValues: map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246},
		DataQuality:   contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1",
		Window: &contract.SnapshotWindow{BeatMs: 1000, EndMs: now.UnixMilli(), Steps: 1, Values: map[string][]*float64{}, RunID: "run-1"}}
	if err := snap.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(ctx, snap, false); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		tr := &contract.VirtualTrial{
			SchemaVersion: contract.TrialSchemaVersion, CreatedAt: now, CreatedBy: "twin-runtime",
			TrialID: "trial-" + string(rune('0'+i)), SnapshotID: "snap-1", ModelID: "hybrid-1", ObjectiveID: "weight-quality",
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
		if _, err := s.PutTrial(ctx, tr, contract.TrialManual, ""); err != nil {
			t.Fatal(err)
		}
	}
}

func certCLI(t *testing.T, d string, args ...string) (string, error) {
	t.Helper()
	out, _, err := subCLI(t, d, newCertCmd, args...)
	return out, err
}

func issueCLI(t *testing.T, d, trial string) string {
	t.Helper()
	out, err := certCLI(t, d, "--json", "issue", "--trial", trial, "--as", "alice")
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	var r contract.CertRecord
	mustJSON(t, out, &r)
	if r.Cert == nil || r.Cert.Status != contract.CertIssued {
		t.Fatalf("issue: %s", out)
	}
	return r.Cert.RecommendationID
}

func TestCertAndChannelCLI(t *testing.T) {
	d := t.TempDir()
	seedTwin(t, d, 1)

	// No channel yet: show says so, and an execute would be denied.
	if _, _, err := subCLI(t, d, newChannelCmd, "show", "--line", certLine); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("show without channel: %v", err)
	}
	if _, _, err := subCLI(t, d, newChannelCmd, "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "bounded_auto", "--bound", "hold_pressure=1", "--as", "ops"); err == nil {
		t.Fatal("bad --bound accepted")
	}
	out, _, err := subCLI(t, d, newChannelCmd, "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "hitl_governed",
		"--scene", "injection-hold-control@1.0.0", "--as", "ops")
	if err != nil || !strings.Contains(out, "policy hitl_governed") {
		t.Fatalf("channel set: %v\n%s", err, out)
	}
	out, _, err = subCLI(t, d, newChannelCmd, "--json", "show", "--line", certLine)
	var ch contract.ChannelRecord
	mustJSON(t, out, &ch)
	if err != nil || ch.Profile != "hybrid_twin" || ch.SceneID != "injection-hold-control" || ch.UpdatedBy != "ops" {
		t.Fatalf("channel show: %v %+v", err, ch)
	}

	id := issueCLI(t, d, "trial-1")
	// The requester cannot approve; usage errors.
	if _, err := certCLI(t, d, "approve", id, "--as", "Alice"); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := certCLI(t, d, "approve", id); err == nil {
		t.Fatal("approve without --as")
	}
	// Executing before approval is denied with its reason.
	out, err = certCLI(t, d, "execute", id, "--as", "carol")
	if core.CodeOf(err) != govern.CodeWriteDenied || !strings.Contains(out, "CERT_NOT_APPROVED") {
		t.Fatalf("execute unapproved: %v\n%s", err, out)
	}
	out, err = certCLI(t, d, "approve", id, "--as", "bob")
	if err != nil || !strings.Contains(out, "APPROVED") || !strings.Contains(out, "approved by bob") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	out, err = certCLI(t, d, "list", "--status", "approved")
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "yes") || !strings.Contains(out, "1 certificate(s)") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = certCLI(t, d, "show", id)
	if err != nil || !strings.Contains(out, "approved by bob") || !strings.Contains(out, "first step (what a write applies): hold_pressure=65 hold_time=8.5 melt_temperature_setpoint=247") {
		t.Fatalf("show: %v\n%s", err, out)
	}

	// Execute: one line per move, readback verified.
	out, err = certCLI(t, d, "execute", id, "--as", "carol")
	if err != nil || strings.Count(out, " verified\n") != 3 || !strings.Contains(out, "certificate EXECUTED") || !strings.Contains(out, "run run-1") {
		t.Fatalf("execute: %v\n%s", err, out)
	}
	out, err = certCLI(t, d, "--json", "verify", id)
	var rep govern.VerifyReport
	mustJSON(t, out, &rep)
	if err != nil || !rep.OK || rep.Status != "EXECUTED" || len(rep.Checks) != 9 {
		t.Fatalf("verify: %v\n%s", err, out)
	}

	// The public key is exportable and verifies the certificate.
	out, err = certCLI(t, d, "key")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cert.ParsePublicPEM([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.GetCertificate(context.Background(), id, pub)
	if cerr := s.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil || r.Cert.Status != contract.CertExecuted {
		t.Fatalf("%v", err)
	}
}

func TestCertVerifyDetectsTampering(t *testing.T) {
	cases := []struct {
		name, check string
		edit        []string
	}{
		{"signed field in the row", govern.CheckHash, []string{
			`UPDATE twin_certificates SET cert_json = replace(cert_json, '"hold_pressure":65', '"hold_pressure":67')`}},
		{"approval written behind the store's back", govern.CheckApproval, []string{
			`UPDATE twin_certificates SET approved_by='mallory', status='APPROVED',
			cert_json = replace(cert_json, '"status":"ISSUED"', '"status":"APPROVED","approvedBy":"mallory","approvedAt":"` + certBase.Add(time.Minute).Format(time.RFC3339) + `"')`}},
		{"audit entry edited", govern.CheckChain, []string{
			`DROP TRIGGER IF EXISTS audit_log_no_update`,
			`UPDATE audit_log SET actor='mallory' WHERE action='cert.issue'`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			seedTwin(t, d, 1)
			id := issueCLI(t, d, "trial-1")
			if _, err := certCLI(t, d, "verify", id); err != nil {
				t.Fatalf("untouched: %v", err)
			}
			if tc.check == govern.CheckChain {
				dropAuditTriggers(t, d)
			}
			execSQL(t, d, tc.edit...)
			out, err := certCLI(t, d, "verify", id)
			if core.CodeOf(err) != cert.CodeCertInvalid || !strings.Contains(err.Error(), tc.check) || !strings.Contains(out, "FAIL "+tc.check) {
				t.Fatalf("want %s to fail: %v\n%s", tc.check, err, out)
			}
			if tc.check == govern.CheckChain {
				_, _, err := subCLI(t, d, newAuditCmd, "verify")
				if core.CodeOf(err) != audit.CodeAuditTampered {
					t.Fatalf("aml audit verify: %v", err)
				}
			}
		})
	}
}

// dropAuditTriggers removes the audit log's SQL guards, as someone with
// write access to the file could.
func dropAuditTriggers(t *testing.T, d string) {
	t.Helper()
	s, err := sqlite.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	rows, err := s.DB().Query(`SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name='audit_log'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for _, n := range names {
		if _, err := s.DB().Exec(`DROP TRIGGER "` + n + `"`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCertCLIRevokeAndDeniedExecute(t *testing.T) {
	d := t.TempDir()
	seedTwin(t, d, 1)
	id := issueCLI(t, d, "trial-1")
	if _, err := certCLI(t, d, "revoke", id, "--as", "dave"); err == nil {
		t.Fatal("revoke without --reason")
	}
	out, err := certCLI(t, d, "revoke", id, "--as", "dave", "--reason", "mould changed")
	if err != nil || !strings.Contains(out, "REVOKED") {
		t.Fatalf("%v\n%s", err, out)
	}
	// No channel on this line: denied; --json gives the structured result.
	out, err = certCLI(t, d, "--json", "execute", id, "--as", "carol")
	var res govern.Result
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != "NO_CHANNEL" {
		t.Fatalf("%v %v\n%s", err, jerr, out)
	}
	if _, err := certCLI(t, d, "verify", id); err != nil {
		t.Fatalf("verify revoked: %v", err)
	}
	if _, err := certCLI(t, d, "list", "--status", "bogus"); err == nil {
		t.Fatal("bad status accepted")
	}
}
