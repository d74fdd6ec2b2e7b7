package guard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

const (
	line  = "line-injection-01"
	hSnap = "1111111111111111111111111111111111111111111111111111111111111111"
	hMod  = "2222222222222222222222222222222222222222222222222222222222222222"
	hObj  = "3333333333333333333333333333333333333333333333333333333333333333"
)

func frozenScene(t testing.TB) *contract.SceneContract {
	t.Helper()
	s := contract.DefaultInjectionScene()
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze("quality-lead", h, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	return s
}

func passedTrial() *contract.VirtualTrial {
	return &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: t0.Add(-time.Minute), CreatedBy: "twin-runtime",
		TrialID: "trial-1", SnapshotID: "snap-1", ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{
			{"hold_pressure": 65, "hold_time": 8, "melt_temperature_setpoint": 247},
			{"hold_pressure": 67, "hold_time": 8.5, "melt_temperature_setpoint": 248},
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

// fixture is a request that passes every check.
type fixture struct {
	key  *cert.KeyPair
	ch   *stubChannels
	hist *MemoryHistory
	req  Request
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	k, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s := frozenScene(t)
	c, err := cert.Issue(cert.IssueInput{RecommendationID: "rec-1", CreatedBy: "alice", Scene: s, Trial: passedTrial(), SnapshotHash: hSnap, ModelHash: hMod, ObjectiveHash: hObj}, k, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.Approve(c, "bob", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(5 * time.Minute)
	return &fixture{
		key:  k,
		ch:   &stubChannels{p: &contract.ChannelProfile{ChannelID: "ch-1", LineID: line, Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned}},
		hist: &MemoryHistory{},
		req: Request{
			LineID: line, RunID: "run-1", Scene: s, Cert: c, PublicKey: k.Public,
			Moves: []Move{
				{NodeID: "n-hp", VariableID: "hold_pressure", From: 64, To: 65},
				{NodeID: "n-ht", VariableID: "hold_time", From: 7.8, To: 8},
				{NodeID: "n-mt", VariableID: "melt_temperature_setpoint", From: 246, To: 247},
			},
			SnapshotAt: now.Add(-10 * time.Second),
			Now:        now,
		},
	}
}

func (f *fixture) check() Decision {
	return Check(context.Background(), f.ch, f.hist, f.req)
}

func (f *fixture) rec(node, certID, run string, ago time.Duration) {
	f.hist.Records = append(f.hist.Records, contract.WriteRecord{LineID: line, NodeID: node, CertificateID: certID, RunID: run, At: f.req.Now.Add(-ago), Value: 1})
}

type stubChannels struct {
	p     *contract.ChannelProfile
	err   error
	panic bool
}

func (s *stubChannels) Channel(_ context.Context, lineID string) (*contract.ChannelProfile, error) {
	if s.panic {
		panic("driver exploded")
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.p == nil {
		return nil, nil
	}
	p := *s.p
	return &p, nil
}

type errHistory struct{}

func (errHistory) Writes(context.Context, string, time.Time) ([]contract.WriteRecord, error) {
	return nil, errors.New("database is locked")
}

type historyFunc func() []contract.WriteRecord

func (h historyFunc) Writes(context.Context, string, time.Time) ([]contract.WriteRecord, error) {
	return h(), nil
}

type panicHistory struct{}

func (panicHistory) Writes(context.Context, string, time.Time) ([]contract.WriteRecord, error) {
	panic("panicHistory: simulated bug in the write history")
}

func TestHappyPathHITL(t *testing.T) {
	f := newFixture(t)
	d := f.check()
	if !d.Allowed || d.Reason != "" {
		t.Fatalf("want allowed, got %+v", d)
	}
}

func TestDenyReasons(t *testing.T) {
	cases := []struct {
		name   string
		want   string
		mutate func(t *testing.T, f *fixture)
	}{
		{"no line", ReasonInvalidRequest, func(_ *testing.T, f *fixture) { f.req.LineID = " " }},
		{"no run", ReasonInvalidRequest, func(_ *testing.T, f *fixture) { f.req.RunID = "" }},
		{"no channel", ReasonNoChannel, func(_ *testing.T, f *fixture) { f.ch.p = nil }},
		{"channel error", ReasonChannelError, func(_ *testing.T, f *fixture) { f.ch.err = errors.New("SQLITE_BUSY") }},
		{"channel of another line", ReasonLineMismatch, func(_ *testing.T, f *fixture) { f.ch.p.LineID = "line-2" }},
		{"legacy profile", ReasonProfileNotTwin, func(_ *testing.T, f *fixture) { f.ch.p.Profile = contract.ProfileLegacy }},
		{"empty profile", ReasonProfileNotTwin, func(_ *testing.T, f *fixture) { f.ch.p.Profile = "" }},
		{"recommendation only", ReasonPolicyRecommendationOnly, func(_ *testing.T, f *fixture) { f.ch.p.ControlPolicy = contract.PolicyRecommendationOnly }},
		{"empty policy", ReasonPolicyUnknown, func(_ *testing.T, f *fixture) { f.ch.p.ControlPolicy = "" }},
		{"unknown policy", ReasonPolicyUnknown, func(_ *testing.T, f *fixture) { f.ch.p.ControlPolicy = "HITL_GOVERNED" }},
		{"no scene", ReasonNoPolicy, func(_ *testing.T, f *fixture) { f.req.Scene = nil }},
		{"draft scene", ReasonNoPolicy, func(_ *testing.T, f *fixture) { f.req.Scene.Status = contract.SceneDraft }},
		{"empty write policy", ReasonNoPolicy, func(_ *testing.T, f *fixture) { f.req.Scene.WritePolicy = contract.WritePolicy{} }},
		{"scene of another line", ReasonLineMismatch, func(_ *testing.T, f *fixture) { f.req.Scene.LineID = "line-2" }},
		{"no certificate", ReasonNoCertificate, func(_ *testing.T, f *fixture) { f.req.Cert = nil }},
		{"tampered certificate", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.Cert.CandidateControlTrajectory[0]["hold_pressure"] = 66 }},
		{"wrong key", ReasonCertInvalid, func(t *testing.T, f *fixture) {
			k, err := cert.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			f.req.PublicKey = k.Public
		}},
		{"no key", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.PublicKey = nil }},
		{"issued only", ReasonCertNotApproved, func(_ *testing.T, f *fixture) {
			f.req.Cert.Status, f.req.Cert.ApprovedBy, f.req.Cert.ApprovedAt = contract.CertIssued, "", time.Time{}
		}},
		{"executed", ReasonCertNotApproved, func(_ *testing.T, f *fixture) { f.req.Cert.Status = contract.CertExecuted }},
		{"self approved (unsigned field forged)", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.Cert.ApprovedBy = "Alice" }},
		{"revoked", ReasonCertRevoked, func(t *testing.T, f *fixture) {
			if err := cert.Revoke(f.req.Cert, "carol", "line changed", t0.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired by clock", ReasonCertExpired, func(_ *testing.T, f *fixture) {
			f.req.Now = f.req.Cert.ExpiresAt
			f.req.SnapshotAt = f.req.Now.Add(-time.Second)
		}},
		{"marked expired", ReasonCertExpired, func(_ *testing.T, f *fixture) { cert.ExpireIfDue(f.req.Cert, f.req.Cert.ExpiresAt) }},
		{"scene other than certified", ReasonSceneMismatch, func(t *testing.T, f *fixture) {
			s := contract.DefaultInjectionScene()
			s.WritePolicy.MaxActionsPerRun = 100
			h, _ := s.Hash()
			if err := s.Freeze("mallory", h, t0); err != nil {
				t.Fatal(err)
			}
			f.req.Scene = s
		}},
		{"stale snapshot", ReasonSnapshotStale, func(_ *testing.T, f *fixture) { f.req.SnapshotAt = f.req.Now.Add(-61 * time.Second) }},
		{"no snapshot", ReasonSnapshotStale, func(_ *testing.T, f *fixture) { f.req.SnapshotAt = time.Time{} }},
		{"future snapshot", ReasonSnapshotStale, func(_ *testing.T, f *fixture) { f.req.SnapshotAt = f.req.Now.Add(time.Second) }},
		{"stale for custom max age", ReasonSnapshotStale, func(_ *testing.T, f *fixture) { f.req.SnapshotMaxAge = 5 * time.Second }},
		{"negative max age", ReasonSnapshotStale, func(_ *testing.T, f *fixture) { f.req.SnapshotMaxAge = -time.Second }},
		{"move missing", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves = f.req.Moves[:2] }},
		{"no moves", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves = nil }},
		{"wrong target", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[0].To = 65.5 }},
		{"second step target", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[0].To, f.req.Moves[0].From = 67, 66 }},
		{"variable twice", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[1] = f.req.Moves[0]; f.req.Moves[1].NodeID = "n-x" }},
		{"node twice", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[1].NodeID = "n-hp" }},
		{"not a control", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[2].VariableID = "weight" }},
		{"empty node", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[2].NodeID = "" }},
		{"delta too large", ReasonDeltaTooLarge, func(_ *testing.T, f *fixture) { f.req.Moves[0].From = 62.9 }},
		{"bounded_auto outside bounds", ReasonOutOfBounds, func(_ *testing.T, f *fixture) {
			f.ch.p.ControlPolicy = contract.PolicyBoundedAuto
			f.ch.p.Bounds = map[string]contract.Bound{"hold_pressure": {Min: 60, Max: 64.5}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}
		}},
		{"bounded_auto without bounds", ReasonOutOfBounds, func(_ *testing.T, f *fixture) { f.ch.p.ControlPolicy = contract.PolicyBoundedAuto }},
		{"bounded_auto inverted bounds", ReasonOutOfBounds, func(_ *testing.T, f *fixture) {
			f.ch.p.ControlPolicy = contract.PolicyBoundedAuto
			f.ch.p.Bounds = map[string]contract.Bound{"hold_pressure": {Min: 90, Max: 50}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}
		}},
		{"history error", ReasonHistoryError, func(_ *testing.T, f *fixture) { f.hist = nil }},
		{"node written recently", ReasonNodeInterval, func(_ *testing.T, f *fixture) { f.rec("n-ht", "rec-0", "run-0", 30*time.Second) }},
		{"node written just ahead (within the clock tolerance)", ReasonNodeInterval, func(_ *testing.T, f *fixture) { f.rec("n-ht", "rec-0", "run-0", -2*time.Second) }},
		// A future entry is a clock fault, never a misleading interval.
		{"node written in the future", ReasonClockFault, func(_ *testing.T, f *fixture) { f.rec("n-ht", "rec-0", "run-0", -time.Hour) }},
		{"claim in the future", ReasonClockFault, func(_ *testing.T, f *fixture) { f.rec("", "rec-0", "run-0", -time.Minute) }},
		{"line action recently", ReasonLineInterval, func(_ *testing.T, f *fixture) { f.rec("n-other", "rec-0", "run-0", 59*time.Second) }},
		{"certificate replayed", ReasonCertAlreadyUsed, func(_ *testing.T, f *fixture) { f.rec("n-hp", "rec-1", "run-0", 2*time.Hour) }},
		{"too many actions", ReasonTooManyActions, func(_ *testing.T, f *fixture) {
			for i, id := range []string{"rec-a", "rec-b", "rec-b", "rec-c"} { // 3 actions, one of two writes
				f.rec("n-"+string(rune('a'+i)), id, "run-1", time.Duration(2+i)*time.Hour)
			}
		}},
		{"too many actions, unattributed writes", ReasonTooManyActions, func(_ *testing.T, f *fixture) {
			for i := range 3 {
				f.rec("n-z", "", "run-1", time.Duration(2+i)*time.Hour)
			}
		}},
		{"envelope on hitl_governed", ReasonEnvelopeNotAllowed, func(t *testing.T, f *fixture) {
			toEnvelope(t, f)
			f.ch.p.ControlPolicy = contract.PolicyHITLGoverned
		}},
		{"envelope: target outside it", ReasonOutsideEnvelope, func(t *testing.T, f *fixture) { toEnvelope(t, f); f.req.Moves[0].From, f.req.Moves[0].To = 70, 70.5 }},
		{"envelope: rate exceeded", ReasonRateExceeded, func(t *testing.T, f *fixture) {
			toEnvelope(t, f)
			for i := range 4 {
				f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", time.Duration(50-i)*time.Minute)
			}
		}},
		{"step test: outside its slot", ReasonOutsideSlot, func(t *testing.T, f *fixture) { toStepTest(t, f); f.req.StepStart = f.req.Now.Add(-time.Hour) }},
		{"panic in channels", ReasonInternal, func(_ *testing.T, f *fixture) { f.ch.panic = true }},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.mutate(t, f)
			var d Decision
			if f.hist == nil {
				d = Check(context.Background(), f.ch, errHistory{}, f.req)
			} else {
				d = f.check()
			}
			if d.Allowed || d.Reason != tc.want {
				t.Fatalf("want denied %s, got allowed=%v reason=%s (%s)", tc.want, d.Allowed, d.Reason, d.Detail)
			}
			if d.Detail == "" {
				t.Fatal("denial without detail")
			}
			seen[tc.want] = true
		})
	}
	for _, r := range Reasons {
		if !seen[r] {
			t.Errorf("reason %s has no test case", r)
		}
	}
}

// TestHistoryOnWallClock: the history is measured on the wall clock
// (Request.WallNow), not on the clock the certificate and snapshot were
// stamped on (Now, which a demo runs at simulated time): a write 30 s
// ago on the wall clock blocks the node although the domain clock is 33
// minutes ahead; one 10 min ago does not; Execute stamps its records
// with the wall clock.
func TestHistoryOnWallClock(t *testing.T) {
	wall := t0.Add(5*time.Minute - 33*time.Minute)
	f := newFixture(t)
	f.req.WallNow = wall
	f.hist.Records = append(f.hist.Records, contract.WriteRecord{LineID: line, NodeID: "n-ht", CertificateID: "rec-0", RunID: "run-0", At: wall.Add(-30 * time.Second), Value: 1})
	if d := f.check(); d.Allowed || d.Reason != ReasonNodeInterval || !strings.Contains(d.Detail, "less than") {
		t.Fatalf("write 30 s ago on the wall clock: %+v", d)
	}
	f = newFixture(t)
	f.req.WallNow = wall
	f.hist.Records = append(f.hist.Records, contract.WriteRecord{LineID: line, NodeID: "n-ht", CertificateID: "rec-0", RunID: "run-0", At: wall.Add(-10 * time.Minute), Value: 1})
	d := f.check()
	if !d.Allowed {
		t.Fatalf("write 10 min ago on the wall clock: %+v", d)
	}
	w := NewRecordingWriter(map[string]float64{})
	for _, m := range f.req.Moves {
		w.Values[m.NodeID] = m.From
	}
	if _, err := Execute(context.Background(), w, f.hist, d, f.req); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.hist.Records[1:] {
		if !r.At.Equal(wall) {
			t.Fatalf("record stamped %v, want the wall clock %v", r.At, wall)
		}
	}
}

func TestNilPortsDeny(t *testing.T) {
	f := newFixture(t)
	if d := Check(context.Background(), nil, f.hist, f.req); d.Allowed || d.Reason != ReasonChannelError {
		t.Fatalf("nil channels: %+v", d)
	}
	if d := Check(context.Background(), f.ch, nil, f.req); d.Allowed || d.Reason != ReasonHistoryError {
		t.Fatalf("nil history: %+v", d)
	}
	if d := Check(context.Background(), f.ch, errHistory{}, f.req); d.Allowed || d.Reason != ReasonHistoryError {
		t.Fatalf("history error: %+v", d)
	}
	bad := historyFunc(func() []contract.WriteRecord {
		return []contract.WriteRecord{{LineID: "line-2", NodeID: "n-x", At: f.req.Now.Add(-time.Hour)}}
	})
	if d := Check(context.Background(), f.ch, bad, f.req); d.Allowed || d.Reason != ReasonHistoryError {
		t.Fatalf("history of another line: %+v", d)
	}
	undated := historyFunc(func() []contract.WriteRecord { return []contract.WriteRecord{{LineID: line, NodeID: "n-x"}} })
	if d := Check(context.Background(), f.ch, undated, f.req); d.Allowed || d.Reason != ReasonHistoryError {
		t.Fatalf("undated history: %+v", d)
	}
	if d := Check(context.Background(), f.ch, panicHistory{}, f.req); d.Allowed || d.Reason != ReasonInternal {
		t.Fatalf("panicking history: %+v", d)
	}
}

func TestBoundedAuto(t *testing.T) {
	f := newFixture(t)
	f.ch.p.ControlPolicy = contract.PolicyBoundedAuto
	f.ch.p.Bounds = map[string]contract.Bound{"hold_pressure": {Min: 60, Max: 65}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}
	if d := f.check(); !d.Allowed {
		t.Fatalf("inside bounds (target on the edge): %+v", d)
	}
	f.ch.p.Bounds["melt_temperature_setpoint"] = contract.Bound{Min: 248, Max: 260}
	if d := f.check(); d.Allowed || d.Reason != ReasonOutOfBounds {
		t.Fatalf("outside bounds: %+v", d)
	}
	// bounded_auto still needs an approved certificate.
	f = newFixture(t)
	f.ch.p.ControlPolicy = contract.PolicyBoundedAuto
	f.ch.p.Bounds = map[string]contract.Bound{"hold_pressure": {Min: 60, Max: 65}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}
	f.req.Cert.Status, f.req.Cert.ApprovedBy, f.req.Cert.ApprovedAt = contract.CertIssued, "", time.Time{}
	if d := f.check(); d.Allowed || d.Reason != ReasonCertNotApproved {
		t.Fatalf("bounded_auto with issued certificate: %+v", d)
	}
}

func TestHistoryBoundaries(t *testing.T) {
	f := newFixture(t)
	f.rec("n-hp", "rec-0", "run-1", 60*time.Second) // exactly the interval ago: allowed
	f.rec("n-a", "rec-a", "run-1", 2*time.Hour)     // 2 earlier actions in the run + this = 3 = max
	f.rec("n-b", "", "run-2", 3*time.Hour)          // other runs do not count
	f.rec("n-c", "", "run-3", 3*time.Hour)
	f.rec("n-d", "", "run-1", 48*time.Hour) // before the lookback: not returned
	if d := f.check(); !d.Allowed {
		t.Fatalf("want allowed, got %+v", d)
	}
}

func TestExecuteHappyPathRecordsAndBlocksReplay(t *testing.T) {
	f := newFixture(t)
	d := f.check()
	if !d.Allowed {
		t.Fatal(d)
	}
	w := NewRecordingWriter(map[string]float64{"n-hp": 64, "n-ht": 7.8, "n-mt": 246})
	out, err := Execute(context.Background(), w, f.hist, d, f.req)
	if err != nil || out.Status != OutcomeVerified || len(out.Results) != 3 {
		t.Fatalf("%v %+v", err, out)
	}
	for i, r := range out.Results {
		if !r.Written || !r.Verified || r.Readback != f.req.Moves[i].To {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if w.Values["n-hp"] != 65 || w.Values["n-ht"] != 8 || w.Values["n-mt"] != 247 || len(w.Writes) != 3 {
		t.Fatalf("writer: %+v", w.Values)
	}
	if len(f.hist.Records) != 3 || f.hist.Records[0].CertificateID != "rec-1" || f.hist.Records[0].RunID != "run-1" || f.hist.Records[0].Delta != 1 {
		t.Fatalf("history: %+v", f.hist.Records)
	}
	// The recorded writes now block the same request.
	if d := f.check(); d.Allowed || d.Reason != ReasonNodeInterval {
		t.Fatalf("after execution: %+v", d)
	}
	// And an hour later the certificate is still spent (and would be expired too).
	f.req.Now = f.req.Now.Add(30 * time.Minute)
	f.req.SnapshotAt = f.req.Now
	if d := f.check(); d.Allowed || d.Reason != ReasonCertAlreadyUsed {
		t.Fatalf("replay: %+v", d)
	}
}

func TestExecuteRefuses(t *testing.T) {
	f := newFixture(t)
	w := NewRecordingWriter(map[string]float64{"n-hp": 64, "n-ht": 7.8, "n-mt": 246})
	f.req.SnapshotAt = time.Time{}
	denied := f.check()
	if denied.Allowed {
		t.Fatal("expected denial")
	}
	f = newFixture(t)
	allowed := f.check()
	other := f.req
	other.Moves = append([]Move(nil), f.req.Moves...)
	other.Moves[0].To = 90
	otherRun := f.req
	otherRun.RunID = "run-9"
	for name, tc := range map[string]struct {
		d   Decision
		req Request
	}{
		"denied":         {denied, f.req},
		"forged allowed": {Decision{Allowed: true}, f.req},
		"other moves":    {allowed, other},
		"other run":      {allowed, otherRun},
		"no certificate": {allowed, Request{LineID: line, RunID: "run-1"}},
	} {
		out, err := Execute(context.Background(), w, f.hist, tc.d, tc.req)
		if !errors.Is(err, ErrNotAllowed) || out.Status != OutcomeRefused {
			t.Fatalf("%s: %v %+v", name, err, out)
		}
	}
	if len(w.Writes) != 0 || len(f.hist.Records) != 0 {
		t.Fatal("a refused execution wrote")
	}
	if _, err := Execute(context.Background(), nil, f.hist, allowed, f.req); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("nil writer: %v", err)
	}
}

func TestExecuteReadbackMismatchStops(t *testing.T) {
	f := newFixture(t)
	d := f.check()
	w := NewRecordingWriter(map[string]float64{"n-hp": 64, "n-ht": 7.8, "n-mt": 246})
	w.Distort = func(node string, v float64) float64 {
		if node == "n-ht" {
			return v + 0.1 // the PLC clamps or ignores the setpoint
		}
		return v
	}
	out, err := Execute(context.Background(), w, f.hist, d, f.req)
	if err == nil || out.Status != OutcomeFailed {
		t.Fatalf("%v %+v", err, out)
	}
	if len(out.Results) != 2 || !out.Results[0].Verified || out.Results[1].Verified || !out.Results[1].Written || !strings.Contains(out.Results[1].Err, "read back") {
		t.Fatalf("results: %+v", out.Results)
	}
	if w.Values["n-mt"] != 246 || len(w.Writes) != 2 {
		t.Fatalf("the move after the mismatch was written: %+v", w.Values)
	}
	if len(f.hist.Records) != 2 {
		t.Fatalf("history: %+v", f.hist.Records)
	}
}

func TestExecuteStopsWhenNodeMovedOrWriteFails(t *testing.T) {
	f := newFixture(t)
	d := f.check()
	w := NewRecordingWriter(map[string]float64{"n-hp": 63, "n-ht": 7.8, "n-mt": 246}) // n-hp moved since the snapshot
	out, err := Execute(context.Background(), w, f.hist, d, f.req)
	if err == nil || out.Status != OutcomeFailed || len(w.Writes) != 0 || out.Results[0].Written {
		t.Fatalf("moved node: %v %+v", err, out)
	}

	f = newFixture(t)
	d = f.check()
	w = NewRecordingWriter(map[string]float64{"n-hp": 64, "n-ht": 7.8, "n-mt": 246})
	w.FailWrite = func(node string) error {
		if node == "n-hp" {
			return errors.New("timeout")
		}
		return nil
	}
	out, err = Execute(context.Background(), w, f.hist, d, f.req)
	if err == nil || out.Status != OutcomeFailed || len(out.Results) != 1 || len(w.Writes) != 0 {
		t.Fatalf("failed write: %v %+v", err, out)
	}
	if len(f.hist.Records) != 1 { // an attempted write of unknown effect is recorded
		t.Fatalf("history: %+v", f.hist.Records)
	}
}

func TestReasonsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons {
		if seen[r] || r == "" || strings.ToUpper(r) != r {
			t.Fatalf("bad or duplicate reason %q", r)
		}
		seen[r] = true
	}
}
