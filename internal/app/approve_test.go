package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/demo"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/render"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Human-time approvals: a certificate approved minutes after its issue is
// executed by re-validating it from a fresh snapshot; writes are recorded
// at the wall clock. The fixture is the demo (aml demo --seed 7 --runs
// 24) on an injected wall clock, then later runs of the simulated line
// written into its store, certified through the application on an
// injected domain clock.

// wall0 is the injected wall clock of the demo: months before any real
// clock a test runs at, so the store's own clock check never trips.
var wall0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

var (
	engineer = auth.Principal{Name: "eve", Role: auth.RoleEngineer}
	approver = auth.Principal{Name: "erin", Role: auth.RoleApprover}
	operator = auth.Principal{Name: "olga", Role: auth.RoleApprover}
)

// humanTime is the demo's store with an App on injectable clocks.
type humanTime struct {
	st        *sqlite.Store
	key       *cert.KeyPair
	demo      *demo.Result
	scene     *contract.SceneContract
	a         *amlapp.App
	now, wall time.Time
}

func newHumanTime(t *testing.T) *humanTime {
	t.Helper()
	if testing.Short() {
		t.Skip("the fixture runs the demo (trains the twin); runs without -short")
	}
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := demo.Run(ctx, demo.Options{Store: st, DataDir: dir, Key: key, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()),
		Seed: 7, Runs: 24, Now: func() time.Time { return wall0 }})
	if err != nil {
		t.Fatal(err)
	}
	if res.CertStatus != string(contract.CertExecuted) || res.Written == 0 {
		t.Fatalf("demo: %+v", res)
	}
	h := &humanTime{st: st, key: key, demo: res}
	h.a = amlapp.New(&service.Deps{Store: st, DataDir: dir, Key: key}, amlapp.Options{Now: func() time.Time { return h.now }, WallNow: func() time.Time { return h.wall }})
	sc, err := st.GetScene(ctx, "injection-hold-control", "")
	if err != nil {
		t.Fatal(err)
	}
	h.scene = sc
	return h
}

// certified is a certificate issued and approved on a later run of the
// line: the same simulated run (FirstRun 200) each time, named name,
// starting days days and two hours after the demo's clock (the same time
// of day: the same ambient); the snapshot at the run's end (replayed), a
// held move of one control that passes and improves, issued then,
// approved 10 minutes later. It returns the certificate, the run and the
// instant of the snapshot.
func (h *humanTime) certified(t *testing.T, name string, days int) (*contract.CertRecord, sim.RunData, *sim.Output, time.Time) {
	t.Helper()
	ctx := context.Background()
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.FirstRun = 1, 7, 200
	cfg.RunDuration = 20 * time.Minute
	cfg.StartMs = h.demo.DemoClock.Add(time.Duration(days)*24*time.Hour + 2*time.Hour).Truncate(time.Second).UnixMilli()
	out := testfix.Injection(t, cfg)
	rd := &out.Runs[0]
	rd.Run.ID += "-" + name
	for i := range rd.Samples {
		rd.Samples[i].Run = rd.Run.ID
	}
	if _, err := out.Write(ctx, h.st, nil); err != nil {
		t.Fatal(err)
	}
	run := out.Runs[0]
	at := time.UnixMilli(*run.Run.EndedMs + 1000).UTC()
	h.now = at
	inst := amlapp.Instant(at.UnixMilli())
	snap, err := h.a.SnapshotTake(ctx, engineer, amlapp.SnapshotTakeRequest{Scene: h.scene.SceneID, SceneVersion: h.scene.SceneVersion, Run: run.Run.ID,
		At: &inst, Model: h.demo.ModelID, Phase: "holding"})
	if err != nil {
		t.Fatal(err)
	}
	var trialID string
	cv := snap.Snapshot.ControlValues
	for _, mv := range []struct {
		c string
		d float64
	}{{"hold_pressure", 1}, {"hold_pressure", -1}, {"hold_time", 0.5}, {"hold_time", -0.5}, {"melt_temperature_setpoint", 1}, {"melt_temperature_setpoint", -1}} {
		tr, err := h.a.TrialRun(ctx, engineer, amlapp.TrialRunRequest{Model: h.demo.ModelID, Snapshot: snap.Snapshot.SnapshotID, Set: map[string]float64{mv.c: cv[mv.c] + mv.d}})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Record.Passed && tr.Record.Improvement > 0 {
			trialID = tr.Record.Trial.TrialID
			break
		}
	}
	if trialID == "" {
		t.Fatalf("no held move of one control passes and improves from snapshot %s", snap.Snapshot.SnapshotID)
	}
	r, err := h.a.CertIssue(ctx, engineer, amlapp.CertIssueRequest{Trial: trialID})
	if err != nil {
		t.Fatal(err)
	}
	h.now = at.Add(10 * time.Minute)
	if r, err = h.a.CertApprove(ctx, approver, amlapp.CertRequest{ID: r.Cert.RecommendationID}); err != nil {
		t.Fatal(err)
	}
	return r, run, out, at
}

// later writes the line's state at the certified snapshot again as a new
// run shifted by d (the line ran on at the same setpoints), each sample
// through change (nil: unchanged).
func (h *humanTime) later(t *testing.T, out *sim.Output, run sim.RunData, d time.Duration, change func(node string, v float64) float64) map[string]float64 {
	t.Helper()
	r := run
	r.Run.ID = run.Run.ID + "-later"
	end := *run.Run.EndedMs
	from := end - (10 * time.Minute).Milliseconds()
	r.Run.StartedMs = from + d.Milliseconds()
	ended := end + d.Milliseconds()
	r.Run.EndedMs = &ended
	r.Samples = nil
	last := map[string]float64{}
	for _, s := range run.Samples {
		if s.TsUs < from*1000 {
			continue
		}
		s.TsUs += d.Microseconds()
		s.Run = r.Run.ID
		if change != nil {
			s.Value = change(s.Node, s.Value)
		}
		last[s.Node] = s.Value
		r.Samples = append(r.Samples, s)
	}
	o := *out
	o.Runs = []sim.RunData{r}
	if _, err := o.Write(context.Background(), h.st, nil); err != nil {
		t.Fatal(err)
	}
	return last
}

// machine is a recording writer holding the line's current setpoints.
func machine(last map[string]float64) *guard.RecordingWriter {
	return guard.NewRecordingWriter(map[string]float64{
		"hold_pressure": last["hold_pressure"], "hold_time": last["hold_time"], "melt_temperature_setpoint": last["melt_temperature_setpoint"]})
}

func TestHumanTimeApproval(t *testing.T) {
	h := newHumanTime(t)
	ctx := context.Background()
	line := h.scene.LineID

	// The demo recorded its write at the wall clock, not at its own
	// (simulated) clock: no entry of the history is after the wall clock.
	t.Run("demo writes at the wall clock", func(t *testing.T) {
		rows, err := h.st.WriteRows(ctx, line, time.Time{})
		if err != nil || len(rows) == 0 {
			t.Fatalf("%v %+v", err, rows)
		}
		for _, r := range rows {
			if r.At.After(wall0) {
				t.Fatalf("history row %d (%s) dated %v, after the wall clock %v (the demo's clock: %v)", r.ID, r.Outcome, r.At, wall0, h.demo.DemoClock)
			}
		}
	})

	// Approved 10 minutes after issue: the certified snapshot is stale,
	// execute re-validates from a fresh one and writes the certified
	// setpoints from the fresh values.
	t.Run("approved 10 min after issue", func(t *testing.T) {
		r, run, out, at := h.certified(t, "approved", 0)
		id := r.Cert.RecommendationID
		exec := at.Add(10*time.Minute + 5*time.Second)
		last := h.later(t, out, run, exec.Sub(at), nil)
		h.now, h.wall = exec, wall0.Add(time.Hour)

		// The show carries the predicted target against its target, in g.
		show, err := h.a.CertShow(ctx, approver, amlapp.CertRequest{ID: id})
		if err != nil || len(show.Targets) != 1 {
			t.Fatalf("show: %v %+v", err, show.Targets)
		}
		tg := show.Targets[0]
		if tg.VariableID != "weight" || tg.Unit != "g" || len(tg.Mean) != len(r.Cert.CandidateControlTrajectory) || len(tg.Baseline) != len(tg.Mean) {
			t.Fatalf("target %+v", tg)
		}
		if txt := render.String("cert.show", amlapp.CertRequest{ID: id}, show); !strings.Contains(txt, "weight [g]: target ") || !strings.Contains(txt, "; baseline ") {
			t.Fatalf("show text:\n%s", txt)
		} else {
			t.Logf("cert show:\n%s", txt)
		}

		// Without re-validation the old snapshot is stale.
		w := machine(last)
		res, err := govern.Execute(ctx, h.st, h.key.Public, id, w, govern.Options{Now: exec, WallNow: h.wall, Actor: operator.Name})
		if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != guard.ReasonSnapshotStale || len(w.Writes) != 0 {
			t.Fatalf("without re-validation: %v %+v", err, res)
		}
		// A future entry in the history (the wall clock an hour before the
		// demo's write) is a clock fault, after a passing re-validation.
		h.wall = wall0.Add(-time.Hour)
		res, err = h.a.CertExecute(ctx, operator, amlapp.CertExecuteRequest{ID: id, Writer: w})
		if core.CodeOf(err) != govern.CodeClockFault || res.Reason != guard.ReasonClockFault || len(w.Writes) != 0 || res.Revalidation == nil || !res.Revalidation.OK {
			t.Fatalf("future history: %v %+v", err, res)
		}

		h.wall = wall0.Add(time.Hour)
		res, err = h.a.CertExecute(ctx, operator, amlapp.CertExecuteRequest{ID: id, Writer: w})
		if err != nil || !res.Executed {
			t.Fatalf("execute: %v %+v", err, res)
		}
		rv := res.Revalidation
		if rv == nil || !rv.OK || !rv.Passed || !(rv.Improvement > 0) || rv.TrialID == "" || rv.SnapshotID == "" || rv.SnapshotID != res.SnapshotID || rv.CertifiedSnapshotID == res.SnapshotID {
			t.Fatalf("revalidation %+v (result snapshot %s)", rv, res.SnapshotID)
		}
		if len(rv.Targets) != 1 || rv.Targets[0].VariableID != "weight" || rv.Targets[0].Step != len(r.Cert.CandidateControlTrajectory)-1 {
			t.Fatalf("revalidation targets %+v", rv.Targets)
		}
		// The fresh snapshot and the re-run are stored.
		if _, err := h.a.SnapshotShow(ctx, approver, amlapp.SnapshotShowRequest{ID: rv.SnapshotID}); err != nil {
			t.Fatal(err)
		}
		if tr, err := h.a.TrialShow(ctx, approver, amlapp.TrialShowRequest{ID: rv.TrialID}); err != nil || tr.Trial.SnapshotID != rv.SnapshotID || !tr.Passed {
			t.Fatalf("re-run %v %+v", err, tr)
		}
		step := r.Cert.CandidateControlTrajectory[0]
		for _, m := range res.Writes {
			if m.From != last[m.NodeID] || m.To != step[m.VariableID] || w.Values[m.NodeID] != step[m.VariableID] {
				t.Fatalf("write %+v: want %v → %v", m, last[m.NodeID], step[m.VariableID])
			}
		}
		rows, err := h.st.WriteRows(ctx, line, wall0.Add(time.Minute))
		if err != nil || len(rows) != 1+len(step) {
			t.Fatalf("%v %+v", err, rows)
		}
		for _, row := range rows {
			if !row.At.Equal(h.wall) || row.CertificateID != id {
				t.Fatalf("row %+v, want at the wall clock %v", row, h.wall)
			}
		}
		if txt := render.String("cert.execute", amlapp.CertExecuteRequest{ID: id}, res); !strings.Contains(txt, "re-validated from fresh snapshot "+rv.SnapshotID) {
			t.Fatalf("execute text:\n%s", txt)
		} else {
			t.Logf("cert execute:\n%s", txt)
		}
	})

	// The line moved (the parts weigh 2 g less than at the snapshot, below
	// the scene's hard part_weight range but still inside the model's
	// training distribution): the re-run fails scene constraints; refused
	// with the figures, nothing written. (A shift upwards leaves the
	// training distribution and is refused as OOD before any constraint.)
	t.Run("line moved, re-run fails a constraint", func(t *testing.T) {
		r, run, out, at := h.certified(t, "moved", 1)
		id := r.Cert.RecommendationID
		exec := at.Add(10*time.Minute + 5*time.Second)
		last := h.later(t, out, run, exec.Sub(at), func(node string, v float64) float64 {
			if node == "part_weight" {
				return v - 2
			}
			return v
		})
		h.now, h.wall = exec, wall0.Add(3*time.Hour)
		w := machine(last)
		res, err := h.a.CertExecute(ctx, operator, amlapp.CertExecuteRequest{ID: id, Writer: w})
		refused(t, h, id, w, res, err, "constraint ", "at step ")
		if res.Revalidation.Passed || res.Revalidation.RejectCode != contract.RejectConstraint {
			t.Fatalf("revalidation %+v", res.Revalidation)
		}
	})

	// The line moved onto the certified setpoints: holding them is the
	// certified trajectory, the re-run no longer improves.
	t.Run("re-run no longer improves", func(t *testing.T) {
		r, run, out, at := h.certified(t, "held", 2)
		id := r.Cert.RecommendationID
		step := r.Cert.CandidateControlTrajectory[0]
		exec := at.Add(10*time.Minute + 5*time.Second)
		last := h.later(t, out, run, exec.Sub(at), func(node string, v float64) float64 {
			if x, ok := step[node]; ok {
				return x
			}
			return v
		})
		h.now, h.wall = exec, wall0.Add(5*time.Hour)
		w := machine(last)
		res, err := h.a.CertExecute(ctx, operator, amlapp.CertExecuteRequest{ID: id, Writer: w})
		refused(t, h, id, w, res, err, "no longer improves", "improvement ")
		if !res.Revalidation.Passed || res.Revalidation.Improvement > 0 {
			t.Fatalf("revalidation %+v", res.Revalidation)
		}
	})
}

// refused checks an execution refused AML_CERT_REVALIDATION_FAILED whose
// message holds want, with nothing written, and audited.
func refused(t *testing.T, h *humanTime, id string, w *guard.RecordingWriter, res govern.Result, err error, want ...string) {
	t.Helper()
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != govern.CodeCertRevalidationFailed || res.Reason != govern.ReasonRevalidationFailed || res.Executed || len(w.Writes) != 0 || res.Revalidation == nil || res.Revalidation.OK {
		t.Fatalf("want AML_CERT_REVALIDATION_FAILED: %v %+v", err, res)
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("message lacks %q: %v", s, err)
		}
	}
	rows, _ := h.st.WriteRows(context.Background(), h.scene.LineID, time.Time{})
	for _, r := range rows {
		if r.CertificateID == id {
			t.Fatalf("a refused certificate wrote %+v", r)
		}
	}
	es, _ := h.st.AuditLog().List(context.Background(), 0, 1000, id)
	if len(es) == 0 || es[len(es)-1].Action != "write.denied" {
		t.Fatalf("refusal not audited: %+v", es)
	}
	t.Logf("refused: %v", err)
}

// A certificate's execution state: its expiry only while it can still
// execute or be approved; an expired, final or unverified one says why it
// cannot, with no countdown.
func TestCertExecutionState(t *testing.T) {
	h := newHumanTime(t)
	ctx := context.Background()
	r, _, _, _ := h.certified(t, "exec-state", 0)
	id := r.Cert.RecommendationID

	// Approved 10 minutes after its snapshot: executable by re-validating.
	e := h.a.CertExecutionOf(ctx, r, true, "")
	if e.State != amlapp.CertRevalidates || !e.Executable || e.ExpiresAt == nil || !e.ExpiresAt.Equal(r.Cert.ExpiresAt) {
		t.Errorf("approved, stale snapshot: %+v", e)
	}
	show, err := h.a.CertShow(ctx, approver, amlapp.CertRequest{ID: id})
	if err != nil || show.Execution.State != amlapp.CertRevalidates {
		t.Errorf("cert.show execution %+v %v", show.Execution, err)
	}
	if e := h.a.CertExecutionOf(ctx, r, false, "bad signature"); e.State != amlapp.CertUnverified || e.Executable || e.ExpiresAt != nil || !strings.Contains(e.Reason, "bad signature") {
		t.Errorf("unverified: %+v", e)
	}

	// Another certificate of the same trial, not yet approved.
	r2, err := h.a.CertIssue(ctx, engineer, amlapp.CertIssueRequest{Trial: r.Cert.TrialID})
	if err != nil {
		t.Fatal(err)
	}
	if e := h.a.CertExecutionOf(ctx, r2, true, ""); e.State != amlapp.CertAwaitingApproval || e.Executable || e.ExpiresAt == nil {
		t.Errorf("issued: %+v", e)
	}

	// Past its expiry: no countdown, the reason instead.
	saved := h.now
	h.now = r.Cert.ExpiresAt.Add(time.Second)
	if e := h.a.CertExecutionOf(ctx, r, true, ""); e.State != amlapp.CertExpiredState || e.Executable || e.ExpiresAt != nil || !strings.Contains(e.Reason, "expired at") {
		t.Errorf("expired: %+v", e)
	}
	h.now = saved

	// Revoked: final.
	rv, err := h.a.CertRevoke(ctx, approver, amlapp.CertRevokeRequest{ID: id, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if e := h.a.CertExecutionOf(ctx, rv, true, ""); e.State != amlapp.CertFinal || e.Executable || e.ExpiresAt != nil || !strings.Contains(e.Reason, "REVOKED") {
		t.Errorf("revoked: %+v", e)
	}
}
