package govern_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// wallOpts are opts at domain time now with the wall clock wall.
func wallOpts(now, wall time.Time) govern.Options {
	o := opts(now)
	o.WallNow = wall
	return o
}

// freshSnapshot stores a snapshot of the fixture's scene captured at at
// with controls and returns it.
func (f *fixture) freshSnapshot(t *testing.T, id string, at time.Time, controls map[string]float64) *contract.TwinSnapshot {
	t.Helper()
	f.snapshot(t, id, at, controls)
	s, err := f.st.GetSnapshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWritesOnTheWallClock: the domain clock (the certificate's, the
// snapshot's) runs 33 minutes ahead of the wall clock, as in the demo:
// the claim and every write are recorded at the wall clock, never at the
// domain clock, so no entry is dated after the wall clock.
func TestWritesOnTheWallClock(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, true)
	wall := t0.Add(-33 * time.Minute)
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, writer(), wallOpts(t0, wall))
	if err != nil || !res.Executed {
		t.Fatalf("%v %+v", err, res)
	}
	rows, err := f.st.WriteRows(ctx, line, time.Time{})
	if err != nil || len(rows) != 4 {
		t.Fatalf("%v %+v", err, rows)
	}
	for _, r := range rows {
		if !r.At.Equal(wall) {
			t.Fatalf("history row %d (%s) dated %v, want the wall clock %v", r.ID, r.Outcome, r.At, wall)
		}
	}
}

// TestFutureHistoryIsClockFault: a write-history entry dated after the
// wall clock (stored behind the store's back: the store refuses one) is
// reported as a clock fault — AML_CLOCK_FAULT, reason CLOCK_FAULT — not
// as a NODE_INTERVAL on a node written "in the future"; nothing is
// written.
func TestFutureHistoryIsClockFault(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, true)
	if _, err := f.st.DB().Exec(`INSERT INTO twin_writes(line_id, node_id, variable_id, certificate_id, run_id, at, value, delta, outcome) VALUES (?,?,?,?,?,?,?,?,?)`,
		line, "hold_time", "hold_time", "rec-demo", "run-1", t0.Add(33*time.Minute).UnixMilli(), 8.5, 0.5, contract.WriteAttempted); err != nil {
		t.Fatal(err)
	}
	w := writer()
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, wallOpts(t0, t0))
	if core.CodeOf(err) != govern.CodeClockFault || res.Reason != guard.ReasonClockFault || res.Executed || len(w.Writes) != 0 {
		t.Fatalf("want AML_CLOCK_FAULT: %v %+v", err, res)
	}
	if strings.Contains(res.Detail, "less than") || !strings.Contains(res.Detail, "after the wall clock") || !strings.Contains(res.Detail, "33m0s") {
		t.Fatalf("detail %q", res.Detail)
	}
}

// TestExecuteFromFreshSnapshot: with a re-validated fresh snapshot the
// certified snapshot may be old: the moves start from the fresh values,
// the freshness check applies to the fresh snapshot, the result names it
// and carries the revalidation.
func TestExecuteFromFreshSnapshot(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	id := f.certify(t, "a", baseline, step0, true)
	now := t0.Add(10 * time.Minute)
	moved := map[string]float64{"hold_pressure": 64.5, "hold_time": 8, "melt_temperature_setpoint": 246}
	fresh := f.freshSnapshot(t, "snap-fresh", now.Add(-2*time.Second), moved)
	rv := &govern.Revalidation{CertifiedSnapshotID: "snap-a", SnapshotID: fresh.SnapshotID, TrialID: "trial-rerun", Passed: true, Improvement: 0.3, OK: true}

	// Without it the old snapshot is stale.
	if res, err := govern.Execute(ctx, f.st, f.key.Public, id, writer(), opts(now)); core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != guard.ReasonSnapshotStale {
		t.Fatalf("no revalidation: %v %+v", err, res)
	}
	o := opts(now)
	o.Snapshot, o.Revalidation = fresh, rv
	w := guard.NewRecordingWriter(moved)
	res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, o)
	if err != nil || !res.Executed || res.SnapshotID != "snap-fresh" || res.Revalidation == nil || res.Revalidation.TrialID != "trial-rerun" {
		t.Fatalf("%v %+v", err, res)
	}
	for _, m := range res.Writes {
		if m.From != moved[m.VariableID] || m.To != step0[m.VariableID] {
			t.Fatalf("move %+v: want from the fresh %v to the certified %v", m, moved[m.VariableID], step0[m.VariableID])
		}
	}
}

// TestFreshSnapshotRefusals: a failed revalidation is refused
// AML_CERT_REVALIDATION_FAILED with its reason; a fresh snapshot from
// which the certified setpoint is a larger step than the scene allows is
// DELTA_TOO_LARGE; a stale fresh snapshot is SNAPSHOT_STALE; a fresh
// snapshot of another scene is refused. Nothing is written.
func TestFreshSnapshotRefusals(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		name     string
		controls map[string]float64
		at       time.Time
		rv       govern.Revalidation
		code     string
		reason   string
		scene    string
	}{
		{"revalidation failed", baseline, now.Add(-time.Second), govern.Revalidation{Reason: "constraint weight failed at step 12"}, govern.CodeCertRevalidationFailed, govern.ReasonRevalidationFailed, ""},
		{"line moved too far", map[string]float64{"hold_pressure": 60, "hold_time": 8, "melt_temperature_setpoint": 246}, now.Add(-time.Second), govern.Revalidation{OK: true, Passed: true}, govern.CodeWriteDenied, guard.ReasonDeltaTooLarge, ""},
		{"fresh snapshot stale", baseline, now.Add(-2 * time.Minute), govern.Revalidation{OK: true, Passed: true}, govern.CodeWriteDenied, guard.ReasonSnapshotStale, ""},
		{"other scene", baseline, now.Add(-time.Second), govern.Revalidation{OK: true, Passed: true}, govern.CodeWriteDenied, govern.ReasonFreshSnapshotInvalid, "other-scene"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			ctx := context.Background()
			id := f.certify(t, "a", baseline, step0, true)
			fresh := f.freshSnapshot(t, "snap-fresh", tc.at, tc.controls)
			if tc.scene != "" {
				c := *fresh
				c.SceneID = tc.scene
				fresh = &c
			}
			rv := tc.rv
			rv.SnapshotID = fresh.SnapshotID
			o := opts(now)
			o.Snapshot, o.Revalidation = fresh, &rv
			w := guard.NewRecordingWriter(tc.controls)
			res, err := govern.Execute(ctx, f.st, f.key.Public, id, w, o)
			if core.CodeOf(err) != tc.code || res.Reason != tc.reason || res.Executed || len(w.Writes) != 0 {
				t.Fatalf("want %s %s: %v %+v", tc.code, tc.reason, err, res)
			}
			if tc.rv.Reason != "" && !strings.Contains(err.Error(), tc.rv.Reason) {
				t.Fatalf("error %v lacks the reason %q", err, tc.rv.Reason)
			}
			if rows, _ := f.st.WriteRows(ctx, line, time.Time{}); len(rows) != 0 {
				t.Fatalf("history %+v", rows)
			}
		})
	}
}
