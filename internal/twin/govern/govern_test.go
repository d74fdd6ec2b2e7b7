package govern_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

func writer() *guard.RecordingWriter { return guard.NewRecordingWriter(baseline) }

func opts(now time.Time) govern.Options {
	return govern.Options{Now: now, Actor: "carol", RunID: "run-1"}
}

func TestExecuteVerified(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, true)
	w := writer()
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, opts(t0))
	if err != nil {
		t.Fatalf("%v\n%+v", err, res)
	}
	if !res.Allowed || !res.Executed || res.Status != guard.OutcomeVerified || res.Written() != 3 || len(w.Writes) != 3 {
		t.Fatalf("%+v", res)
	}
	for v, want := range step0 {
		if w.Values[v] != want {
			t.Fatalf("%s = %v, want %v", v, w.Values[v], want)
		}
	}
	r, err := f.st.GetCertificate(ctx, id, f.key.Public)
	if err != nil || r.Cert.Status != contract.CertExecuted {
		t.Fatalf("%v %+v", err, r)
	}
	// History: one claim and three attempted writes, with variables.
	rows, err := f.st.WriteRows(ctx, line, t0.Add(-time.Hour))
	if err != nil || len(rows) != 4 || rows[0].Outcome != contract.WriteClaim || rows[1].VariableID == "" || rows[1].CertificateID != id || rows[1].RunID != "run-1" {
		t.Fatalf("%v %+v", err, rows)
	}
	got := actions(entries(t, f.st, id))
	want := []string{"cert.issue", "cert.approve", "write.start", "write.attempt", "write.attempt", "write.attempt", "write.executed", "cert.execute"}
	if len(got) != len(want) {
		t.Fatalf("audit %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("audit %v, want %v", got, want)
		}
	}
	rep, err := govern.VerifyCertificate(ctx, f.st, f.key.Public, id)
	if err != nil || !rep.OK || rep.Status != "EXECUTED" {
		t.Fatalf("%v %+v", err, rep)
	}
	// The executed certificate cannot be used again.
	res, err = govern.Execute(ctx, f.st, f.key.Public, id, writer(), opts(t0.Add(2*time.Minute)))
	if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != guard.ReasonCertNotApproved {
		t.Fatalf("reuse: %v %+v", err, res)
	}
}

// failingHistory is the real store whose write history cannot be read.
type failingHistory struct{ *sqlite.Store }

func (failingHistory) Writes(context.Context, string, time.Time) ([]contract.WriteRecord, error) {
	return nil, errors.New("disk I/O error")
}

// failingChannels is the real store whose channel lookup fails.
type failingChannels struct{ *sqlite.Store }

func (failingChannels) Channel(context.Context, string) (*contract.ChannelProfile, error) {
	return nil, errors.New("database is locked")
}

// TestExecuteDenyPaths drives every deny path through the store-backed
// path: the denial's reason, nothing written to the line, and a
// "write.denied" audit entry naming the reason.
func TestExecuteDenyPaths(t *testing.T) {
	cases := []struct {
		name      string
		noChannel bool
		// setup prepares the fixture and returns the certificate, the
		// store to execute against and the time to execute at.
		setup  func(t *testing.T, fx *fixture) (string, govern.Store, time.Time)
		reason string
	}{
		{"no channel", true, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0
		}, guard.ReasonNoChannel},
		{"channel lookup error", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, true), failingChannels{fx.st}, t0
		}, guard.ReasonChannelError},
		{"history error", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, true), failingHistory{fx.st}, t0
		}, guard.ReasonHistoryError},
		{"expired", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0.Add(20 * time.Minute)
		}, guard.ReasonCertExpired},
		{"revoked", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			id := fx.certify(t, "a", baseline, step0, true)
			if _, err := fx.st.RevokeCertificate(context.Background(), id, "dave", "line changed", fx.key.Public, t0.Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			return id, fx.st, t0
		}, guard.ReasonCertRevoked},
		{"unapproved", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, false), fx.st, t0
		}, guard.ReasonCertNotApproved},
		{"unknown certificate", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return "rec-missing", fx.st, t0
		}, guard.ReasonNoCertificate},
		{"stale snapshot", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0.Add(2 * time.Minute)
		}, guard.ReasonSnapshotStale},
		{"node interval (recorded history)", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			id := fx.certify(t, "a", baseline, step0, true)
			if _, err := fx.st.RecordWrite(context.Background(), "ops", contract.WriteRow{WriteRecord: contract.WriteRecord{LineID: line, NodeID: "hold_time",
				CertificateID: "rec-earlier", RunID: "run-1", At: t0.Add(-30 * time.Second), Value: 8, Delta: 0.2}}); err != nil {
				t.Fatal(err)
			}
			return id, fx.st, t0
		}, guard.ReasonNodeInterval},
		{"line interval (recorded history)", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			id := fx.certify(t, "a", baseline, step0, true)
			if _, err := fx.st.RecordWrite(context.Background(), "ops", contract.WriteRow{WriteRecord: contract.WriteRecord{LineID: line, NodeID: "other_node",
				CertificateID: "rec-earlier", RunID: "run-1", At: t0.Add(-30 * time.Second), Value: 1, Delta: 0.1}}); err != nil {
				t.Fatal(err)
			}
			return id, fx.st, t0
		}, guard.ReasonLineInterval},
		{"too many actions per run", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			id := fx.certify(t, "a", baseline, step0, true)
			for i, c := range []string{"rec-1", "rec-2", "rec-3"} { // MaxActionsPerRun is 3
				if _, err := fx.st.RecordWrite(context.Background(), "ops", contract.WriteRow{WriteRecord: contract.WriteRecord{LineID: line, NodeID: "hold_pressure",
					CertificateID: c, RunID: "run-1", At: t0.Add(-time.Duration(3-i) * time.Hour / 2), Value: 64, Delta: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			return id, fx.st, t0
		}, guard.ReasonTooManyActions},
		{"delta too large", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			far := map[string]float64{"hold_pressure": 60, "hold_time": 8, "melt_temperature_setpoint": 246}
			return fx.certify(t, "a", far, step0, true), fx.st, t0
		}, guard.ReasonDeltaTooLarge},
		{"recommendation_only", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			fx.channel(t, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyRecommendationOnly})
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0
		}, guard.ReasonPolicyRecommendationOnly},
		{"legacy profile", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			fx.channel(t, contract.ChannelRecord{LineID: line, Profile: "legacy", ControlPolicy: contract.PolicyHITLGoverned})
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0
		}, guard.ReasonProfileNotTwin},
		{"bounded_auto out of bounds", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			fx.channel(t, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyBoundedAuto, Bounds: map[string]contract.ChannelBound{
				"hold_pressure": {Min: 55, Max: 64.5}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}})
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0
		}, guard.ReasonOutOfBounds},
		{"bounded_auto control without bounds", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			fx.channel(t, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyBoundedAuto, Bounds: map[string]contract.ChannelBound{
				"hold_pressure": {Min: 55, Max: 70}}})
			return fx.certify(t, "a", baseline, step0, true), fx.st, t0
		}, guard.ReasonOutOfBounds},
		{"certificate row tampered", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			id := fx.certify(t, "a", baseline, step0, true)
			// Edit a signed field in the stored JSON (raise the certified hold pressure).
			if _, err := fx.st.DB().Exec(`UPDATE twin_certificates SET cert_json = replace(cert_json, '"hold_pressure":65', '"hold_pressure":66') WHERE certificate_id=?`, id); err != nil {
				t.Fatal(err)
			}
			return id, fx.st, t0
		}, guard.ReasonCertInvalid},
		{"trial tampered after issue", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			id := fx.certify(t, "a", baseline, step0, true)
			if _, err := fx.st.DB().Exec(`DROP TRIGGER twin_trials_no_update`); err != nil {
				t.Fatal(err)
			}
			if _, err := fx.st.DB().Exec(`UPDATE twin_trials SET trial_json = replace(trial_json, '"createdBy":"twin-runtime"', '"createdBy":"mallory"') WHERE trial_id='trial-a'`); err != nil {
				t.Fatal(err)
			}
			return id, fx.st, t0
		}, govern.ReasonRecordTampered},
		{"no actor", false, func(t *testing.T, fx *fixture) (string, govern.Store, time.Time) {
			return fx.certify(t, "a", baseline, step0, true), fx.st, time.Time{}
		}, guard.ReasonInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, tc.noChannel)
			id, st, now := tc.setup(t, fx)
			o := opts(now)
			if tc.reason == guard.ReasonInvalidRequest {
				o = govern.Options{Now: t0, RunID: "run-1"}
			}
			before, _ := fx.st.LastWriteID(context.Background(), line)
			w := writer()
			res, err := govern.Execute(context.Background(), st, fx.key.Public, id, w, o)
			if core.CodeOf(err) != govern.CodeWriteDenied || res.Allowed || res.Reason != tc.reason || res.Status != govern.StatusDenied {
				t.Fatalf("want %s, got %v\n%+v", tc.reason, err, res)
			}
			if len(w.Writes) != 0 || res.Executed {
				t.Fatalf("denied but wrote: %+v", w.Writes)
			}
			if after, _ := fx.st.LastWriteID(context.Background(), line); after != before {
				t.Fatalf("denied but recorded writes (%d → %d)", before, after)
			}
			es := entries(t, fx.st, id)
			last := es[len(es)-1]
			var p map[string]any
			_ = json.Unmarshal(last.Payload, &p)
			if last.Action != twinstore.AuditWriteDenied || p["reason"] != tc.reason {
				t.Fatalf("last audit entry %s %s", last.Action, last.Payload)
			}
			if tc.reason == guard.ReasonCertExpired {
				if r, err := fx.st.GetCertificate(context.Background(), id, fx.key.Public); err != nil || r.Cert.Status != contract.CertExpired {
					t.Fatalf("expired certificate not marked: %v %+v", err, r)
				}
			}
			if _, err := fx.st.AuditLog().Verify(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestExecuteBoundedAutoWithinBounds(t *testing.T) {
	fx := newFixture(t, false)
	fx.channel(t, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyBoundedAuto, Bounds: map[string]contract.ChannelBound{
		"hold_pressure": {Min: 55, Max: 70}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}})
	id := fx.certify(t, "a", baseline, step0, true)
	res, err := govern.Execute(context.Background(), fx.st, fx.key.Public, id, writer(), opts(t0))
	if err != nil || !res.Executed {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestExecuteClosedStore(t *testing.T) {
	fx := newFixture(t, false)
	id := fx.certify(t, "a", baseline, step0, true)
	if err := fx.st.Close(); err != nil {
		t.Fatal(err)
	}
	w := writer()
	res, err := govern.Execute(context.Background(), fx.st, fx.key.Public, id, w, opts(t0))
	if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != govern.ReasonStoreError || len(w.Writes) != 0 {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestExecuteReadbackMismatch(t *testing.T) {
	fx := newFixture(t, false)
	ctx := context.Background()
	id := fx.certify(t, "a", baseline, step0, true)
	w := writer()
	w.Distort = func(node string, v float64) float64 {
		if node == "hold_time" {
			return v - 0.25 // the node does not take the value
		}
		return v
	}
	res, err := govern.Execute(ctx, fx.st, fx.key.Public, id, w, opts(t0))
	if core.CodeOf(err) != govern.CodeWriteFailed || res.Status != guard.OutcomeFailed || res.Executed {
		t.Fatalf("%v %+v", err, res)
	}
	// Moves in variable order: hold_pressure verified, hold_time failed, the rest not attempted.
	if len(res.Writes) != 2 || !res.Writes[0].Verified || res.Writes[1].Verified || res.Writes[1].Error == "" {
		t.Fatalf("%+v", res.Writes)
	}
	es := entries(t, fx.st, id)
	last := es[len(es)-1]
	if last.Action != twinstore.AuditWriteFailed {
		t.Fatalf("last audit entry %s", last.Action)
	}
	r, _ := fx.st.GetCertificate(ctx, id, fx.key.Public)
	if r.Cert.Status != contract.CertApproved {
		t.Fatalf("status %s", r.Cert.Status)
	}
	// It was claimed (a signed execution statement) and its writes are in
	// the history: it cannot be retried.
	res, err = govern.Execute(ctx, fx.st, fx.key.Public, id, writer(), opts(t0.Add(30*time.Second)))
	if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != guard.ReasonCertAlreadyUsed {
		t.Fatalf("retry: %v %+v", err, res)
	}
}

// TestExecuteRace: two approved certificates for the same line executed
// at once — exactly one writes, the other is denied.
func TestExecuteRace(t *testing.T) {
	fx := newFixture(t, false)
	a := fx.certify(t, "a", baseline, step0, true)
	b := fx.certify(t, "b", baseline, step0, true)
	w := writer()
	var wg sync.WaitGroup
	results := make([]govern.Result, 2)
	errs := make([]error, 2)
	for i, id := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = govern.Execute(context.Background(), fx.st, fx.key.Public, id, w, opts(t0))
		}()
	}
	wg.Wait()
	ok := 0
	for i := range results {
		if errs[i] == nil && results[i].Executed {
			ok++
			continue
		}
		switch results[i].Reason {
		case govern.ReasonConcurrentWrite, guard.ReasonNodeInterval, guard.ReasonLineInterval:
			// Denied by the claim, or by the history the winner wrote
			// (whichever interval check the guard reaches first).
		default:
			t.Fatalf("loser: %v %+v", errs[i], results[i])
		}
	}
	if ok != 1 || len(w.Writes) != 3 {
		t.Fatalf("%d winners, %d writes", ok, len(w.Writes))
	}
}
