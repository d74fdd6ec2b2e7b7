package recal

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/contract"
)

func openStore(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	st, dir := testfix.SQLite(t)
	return st, dir
}

func sig(line, recipe string, newRuns int) Signal {
	return Signal{SceneID: "scene-a", LineID: line, RecipeID: recipe, ModelID: "m1", NewRuns: newRuns, NewRunIDs: []string{}}
}

func fp(v float64) *float64 { return &v }

func TestTriggers(t *testing.T) {
	p := DefaultPolicy()
	cases := []struct {
		name string
		s    Signal
		want string
	}{
		{"nothing new", Signal{}, ""},
		{"2 runs, 499 rows", Signal{NewRuns: 2, NewRows: 499}, ""},
		{"3 runs", Signal{NewRuns: 3}, "newRuns"},
		{"500 rows", Signal{NewRows: 500}, "newRows"},
		{"drift at threshold does not trigger", Signal{DriftScore: fp(0.2)}, ""},
		{"drift above", Signal{DriftScore: fp(0.21)}, "drift"},
		{"error at threshold does not trigger", Signal{ErrorScore: fp(0.15)}, ""},
		{"error above", Signal{ErrorScore: fp(0.5)}, "error"},
		{"undefined scores never trigger", Signal{DriftScore: nil, ErrorScore: nil, NewRuns: 1}, ""},
		{"disturbance at threshold does not trigger", Signal{DisturbanceScore: fp(DisturbanceScoreMax)}, ""},
		{"disturbance above", Signal{DisturbanceScore: fp(2.5)}, "disturbance"},
	}
	for _, c := range cases {
		if got := strings.Join(Triggers(c.s, p), ","); got != c.want {
			t.Errorf("%s: triggers %q, want %q", c.name, got, c.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Policy){
		"maxConcurrentRuns": func(p *Policy) { p.MaxConcurrentRuns = 0 },
		"shadowRequired":    func(p *Policy) { p.ShadowRequired = false },
		"approvalRequired":  func(p *Policy) { p.ApprovalRequired = false },
		"policyVersion":     func(p *Policy) { p.PolicyVersion = "a:b" },
		"cooldownSec":       func(p *Policy) { p.CooldownSec = -1 },
	} {
		p := DefaultPolicy()
		mut(&p)
		err := p.Validate()
		if core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRequestThresholdNotReached(t *testing.T) {
	st, _ := openStore(t)
	d, err := RequestAt(context.Background(), st, sig("L", "R", 1), DefaultPolicy(), "ann", time.UnixMilli(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	if d.Accepted || d.Reason != ReasonThresholdNotMet {
		t.Fatalf("%+v", d)
	}
	if l, _ := st.ListCalibrations(context.Background(), time.UnixMilli(1_000_000)); len(l) != 0 {
		t.Fatalf("a refused request was stored: %+v", l)
	}
}

// The second request for the same key is refused while the first is
// queued, running and cooling down; the cooldown runs from COMPLETION
// (not creation); after it the key is free. Other keys are independent.
func TestDedupAndCooldownAfterCompletion(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	p := DefaultPolicy() // cooldown 1 h
	t0 := time.UnixMilli(1_700_000_000_000)
	s := sig("L", "R", 3)
	d1, err := RequestAt(ctx, st, s, p, "ann", t0)
	if err != nil || !d1.Accepted || d1.Reason != ReasonQueued {
		t.Fatalf("first: %+v %v", d1, err)
	}
	if d1.DedupKey != "scene-a:L:R:twin-calibration-v1" {
		t.Fatalf("key %s", d1.DedupKey)
	}
	refused := func(at time.Time, state string) {
		t.Helper()
		d, err := RequestAt(ctx, st, s, p, "bob", at)
		if err != nil {
			t.Fatal(err)
		}
		if d.Accepted || d.Reason != ReasonActiveOrCooldown || d.RequestID != d1.RequestID || d.State != state {
			t.Fatalf("at %v: %+v, want refused by %s in state %s", at, d, d1.RequestID, state)
		}
	}
	refused(t0.Add(time.Minute), contract.CalibrationQueued)
	// Another line is not blocked.
	if d, _ := RequestAt(ctx, st, sig("L2", "R", 3), p, "ann", t0.Add(time.Second)); !d.Accepted {
		t.Fatalf("other key: %+v", d)
	}
	// Run it for 3 h (longer than the cooldown).
	c, _, err := st.ClaimCalibration(ctx, 5, "w", t0.Add(time.Minute))
	if err != nil || c == nil || c.RequestID != d1.RequestID {
		t.Fatalf("claim: %+v %v", c, err)
	}
	refused(t0.Add(2*time.Hour), contract.CalibrationRunning)
	done := t0.Add(3 * time.Hour)
	if err := st.CompleteCalibration(ctx, d1.RequestID, "m2", done, time.Duration(p.CooldownSec)*time.Second, "w"); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetCalibration(ctx, d1.RequestID)
	if got.CooldownUntil == nil || !got.CooldownUntil.Equal(done.Add(time.Hour)) || got.NewModelID != "m2" {
		t.Fatalf("cooldown until %v (want completion + 1 h = %v), %+v", got.CooldownUntil, done.Add(time.Hour), got)
	}
	// Upstream's cooldown (creation + 1 h) would be over here; ours is not.
	refused(done.Add(59*time.Minute), contract.CalibrationCooldown)
	d3, err := RequestAt(ctx, st, s, p, "bob", done.Add(time.Hour))
	if err != nil || !d3.Accepted {
		t.Fatalf("after the cooldown: %+v %v", d3, err)
	}
	if got, _ := st.GetCalibration(ctx, d1.RequestID); got.State != contract.CalibrationDone {
		t.Fatalf("expired cooldown is %s", got.State)
	}
	// A failed request frees its key at once.
	if err := st.FailCalibration(ctx, d3.RequestID, "boom", done.Add(time.Hour), "w"); err != nil {
		t.Fatal(err)
	}
	if d, _ := RequestAt(ctx, st, s, p, "bob", done.Add(time.Hour)); !d.Accepted {
		t.Fatalf("after a failure: %+v", d)
	}
	// Every accepted request and transition is in the audit log.
	es, err := audit.New(st.SQL()).List(ctx, 0, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range es {
		count[e.Action]++
	}
	if count[twinstore.AuditCalibrationRequest] != 4 || count[twinstore.AuditCalibrationStart] != 1 || count[twinstore.AuditCalibrationComplete] != 1 || count[twinstore.AuditCalibrationFail] != 1 {
		t.Fatalf("audit actions %v", count)
	}
}

// Concurrent requests for one key: exactly one is accepted.
func TestDedupUnderRace(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	acc := make(chan bool, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := Request(ctx, st, sig("L", "R", 3), DefaultPolicy(), "ann")
			if err != nil {
				t.Error(err)
				return
			}
			acc <- d.Accepted
		}()
	}
	wg.Wait()
	close(acc)
	n := 0
	for a := range acc {
		if a {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d requests accepted, want 1", n)
	}
	// The index itself refuses a second active row.
	_, err := st.DB().Exec(`INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, state, created_at) VALUES ('x','scene-a:L:R:twin-calibration-v1','s','L','cooldown',1)`)
	if err == nil {
		t.Fatal("a second active row for the key was accepted by SQL")
	}
}

// At most maxConcurrent requests run: a claim beyond that claims nothing
// until one ends.
func TestMaxConcurrent(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, l := range []string{"L1", "L2", "L3"} {
		if d, err := RequestAt(ctx, st, sig(l, "R", 3), DefaultPolicy(), "ann", t0); err != nil || !d.Accepted {
			t.Fatalf("%s: %+v %v", l, d, err)
		}
	}
	c1, n, err := st.ClaimCalibration(ctx, 1, "w", t0)
	if err != nil || c1 == nil || n != 0 {
		t.Fatalf("first claim %+v %d %v", c1, n, err)
	}
	c2, n, err := st.ClaimCalibration(ctx, 1, "w", t0)
	if err != nil || c2 != nil || n != 1 {
		t.Fatalf("second claim with max 1: %+v %d %v", c2, n, err)
	}
	c2, n, err = st.ClaimCalibration(ctx, 2, "w", t0)
	if err != nil || c2 == nil || n != 1 {
		t.Fatalf("claim with max 2: %+v %d %v", c2, n, err)
	}
	if err := st.CompleteCalibration(ctx, c1.RequestID, "", t0, time.Hour, "w"); err != nil {
		t.Fatal(err)
	}
	c3, n, err := st.ClaimCalibration(ctx, 2, "w", t0)
	if err != nil || c3 == nil || n != 1 {
		t.Fatalf("claim after one ended: %+v %d %v", c3, n, err)
	}
	// A finished request cannot be completed twice.
	if err := st.CompleteCalibration(ctx, c1.RequestID, "", t0, time.Hour, "w"); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("second completion: %v", err)
	}
}
