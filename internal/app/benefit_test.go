package app

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/benefit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/testfix"
)

// benefitLine is the line benefitApp's store has.
const benefitLine = "press-1"

// benefitApp is an App whose process has the native trainers (as aml
// serve's), its studies shortened by o.BenefitStudy when set; its store
// has line benefitLine.
func benefitApp(t *testing.T, o Options) (*App, string) {
	t.Helper()
	st, dir := testfix.SQLite(t)
	if err := st.EnsureLine(context.Background(), core.Line{ID: benefitLine}); err != nil {
		t.Fatal(err)
	}
	r := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats())})
	if o.Now == nil {
		o.Now = func() time.Time { return fixed }
	}
	return New(&service.Deps{Store: st, DataDir: dir, Runner: r}, o), dir
}

// noStudyDir: nothing was started (no study directory was made).
func noStudyDir(t *testing.T, what, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "benefit")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: the benefit directory exists (%v): work started before the refusal", what, err)
	}
}

// TestBenefitRunRefusedBeforeWork: a viewer, a runs count outside
// 1..MaxBenefitRuns, a process without trainers and a second study while
// one runs are refused before a study directory exists or anything is
// simulated.
func TestBenefitRunRefusedBeforeWork(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, code, field string
		p                 Principal
		req               BenefitRunRequest
	}{
		{"viewer", core.CodeForbidden, "role", viewer, BenefitRunRequest{Line: benefitLine, Runs: 2}},
		{"runs over the cap", core.CodeInvalidArgument, "runs", engineer, BenefitRunRequest{Line: benefitLine, Runs: MaxBenefitRuns + 1}},
		{"negative runs", core.CodeInvalidArgument, "runs", engineer, BenefitRunRequest{Line: benefitLine, Runs: -1}},
	} {
		a, dir := benefitApp(t, Options{})
		_, err := a.BenefitRun(ctx, tc.p, tc.req)
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || ae.Field != tc.field {
			t.Errorf("%s: %v, want %s on %s", tc.name, err, tc.code, tc.field)
		}
		noStudyDir(t, tc.name, dir)
	}

	// A process without the native trainers cannot train the study's twin.
	st, dir := testfix.SQLite(t)
	if err := st.EnsureLine(ctx, core.Line{ID: benefitLine}); err != nil {
		t.Fatal(err)
	}
	bare := New(&service.Deps{Store: st, DataDir: dir}, Options{Now: func() time.Time { return fixed }})
	if _, err := bare.BenefitRun(ctx, engineer, BenefitRunRequest{Line: benefitLine, Runs: 2}); core.CodeOf(err) != core.CodeUsage {
		t.Errorf("no trainers: %v, want AML_USAGE", err)
	}
	noStudyDir(t, "no trainers", dir)

	// One study at a time: with the process's slot taken, a second is
	// refused at once.
	a, dir := benefitApp(t, Options{})
	benefitSlot <- struct{}{}
	_, err := a.BenefitRun(ctx, engineer, BenefitRunRequest{Line: benefitLine, Runs: 2})
	<-benefitSlot
	if core.CodeOf(err) != core.CodeQueueFull {
		t.Errorf("second study: %v, want AML_QUEUE_FULL", err)
	}
	noStudyDir(t, "second study", dir)
}

// TestBenefitStudiesBelongToALine (attack): a study is for a line. A
// caller scoped to one line lists only that line's studies, and showing
// another line's study (or one kept before studies had a line) is
// refused AML_FORBIDDEN on lineId naming none of it; before, any viewer
// listed and read every study. benefit.run needs the line in the
// caller's scope and existing (AML_NOT_FOUND, after the scope: a scoped
// caller learns nothing of other lines), refused before a study
// directory exists.
func TestBenefitStudiesBelongToALine(t *testing.T) {
	wall := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	a, dataDir := benefitApp(t, Options{WallNow: func() time.Time { return wall }})
	ctx := context.Background()
	const other = "press-secret-9"
	ids := map[string]string{
		benefitLine: "bs-20261205T110000.000-0000000a",
		other:       "bs-20261205T110100.000-0000000b",
		"":          "bs-20261205T110200.000-0000000c", // kept before studies had a line
	}
	for line, id := range ids {
		dir := filepath.Join(dataDir, "benefit", id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeStudy(dir, &BenefitStudy{ID: id, Line: line, Status: BenefitDone, Runs: 2, Seed: 7, UpdatedAt: wall}); err != nil {
			t.Fatal(err)
		}
	}
	scopedViewer := Principal{Name: "sue", Role: viewer.Role, Lines: []string{benefitLine}}
	l, err := a.BenefitList(ctx, scopedViewer, BenefitListRequest{})
	if err != nil || l.Count != 1 || l.Items[0].ID != ids[benefitLine] || l.Items[0].Line != benefitLine {
		t.Errorf("scoped list: %+v, %v; want the study of %s only", l, err, benefitLine)
	}
	if _, err := a.BenefitList(ctx, scopedViewer, BenefitListRequest{Line: other}); core.CodeOf(err) != core.CodeForbidden {
		t.Errorf("scoped list of another line: %v, want AML_FORBIDDEN", err)
	}
	if st, err := a.BenefitShow(ctx, scopedViewer, BenefitShowRequest{ID: ids[benefitLine]}); err != nil || st.Line != benefitLine {
		t.Errorf("own study: %+v, %v", st, err)
	}
	// Another line's study, one without a line and one that does not
	// exist: one refusal, so the scoped caller cannot tell them apart.
	_, missing := a.BenefitShow(ctx, scopedViewer, BenefitShowRequest{ID: "bs-20260101T000000.000-00000000"})
	for _, line := range []string{other, ""} {
		_, err := a.BenefitShow(ctx, scopedViewer, BenefitShowRequest{ID: ids[line]})
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != "lineId" || strings.Contains(err.Error(), other) {
			t.Errorf("show the study of line %q: %v, want AML_FORBIDDEN on lineId naming no other line", line, err)
		}
		if err == nil || missing == nil || err.Error() != missing.Error() {
			t.Errorf("show the study of line %q: %v; a missing study: %v; want the same refusal", line, err, missing)
		}
	}
	if l, err := a.BenefitList(ctx, viewer, BenefitListRequest{}); err != nil || l.Count != 3 {
		t.Errorf("a viewer of every line lists %d studies (%v), want 3", l.Count, err)
	}
	if l, err := a.BenefitList(ctx, viewer, BenefitListRequest{Line: other}); err != nil || l.Count != 1 || l.Items[0].ID != ids[other] {
		t.Errorf("list of line %s: %+v, %v", other, l, err)
	}

	if err := os.RemoveAll(filepath.Join(dataDir, "benefit")); err != nil {
		t.Fatal(err)
	}
	scopedEngineer := Principal{Name: "sam", Role: engineer.Role, Lines: []string{benefitLine}}
	for _, tc := range []struct {
		name, code, field string
		p                 Principal
		line              string
	}{
		{"no line", core.CodeInvalidArgument, "line", engineer, ""},
		{"another line", core.CodeForbidden, "lineId", scopedEngineer, other},
		{"a line out of scope that does not exist", core.CodeForbidden, "lineId", scopedEngineer, "ghost"},
		{"a line that does not exist", core.CodeNotFound, "line", engineer, "ghost"},
	} {
		_, err := a.BenefitRun(ctx, tc.p, BenefitRunRequest{Line: tc.line, Runs: 2})
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || ae.Field != tc.field {
			t.Errorf("%s: %v, want %s on %s", tc.name, err, tc.code, tc.field)
		}
		noStudyDir(t, tc.name, dataDir)
	}
}

// TestBenefitShowNamesNoPath: a study id is a directory name the server
// made; anything else (a path, a traversal) is refused before a file is
// opened, and an unknown id is not found.
func TestBenefitShowNamesNoPath(t *testing.T) {
	a, dir := benefitApp(t, Options{})
	ctx := context.Background()
	// a file outside the studies' directory that a traversal would reach
	if err := os.WriteFile(filepath.Join(dir, "study.json"), []byte(`{"id":"x","status":"done"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "..", "../", "bs-../..", "/etc", "bs-20261205T122256.000-abcd123/../..", "bs-20261205T122256.000-ABCDEF12"} {
		_, err := a.BenefitShow(ctx, viewer, BenefitShowRequest{ID: id})
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != "id" {
			t.Errorf("show %q: %v, want AML_INVALID_ARGUMENT on id", id, err)
		}
	}
	if _, err := a.BenefitShow(ctx, viewer, BenefitShowRequest{ID: "bs-20261205T122256.000-abcd1234"}); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("unknown study: %v, want AML_NOT_FOUND", err)
	}
	if _, err := a.BenefitList(ctx, viewer, BenefitListRequest{Limit: 201}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Errorf("list limit 201: %v", err)
	}
	l, err := a.BenefitList(ctx, viewer, BenefitListRequest{})
	if err != nil || l.Count != 0 || l.Items == nil {
		t.Errorf("empty list: %+v, %v", l, err)
	}
}

// TestBenefitInterrupted: a study record left running by a process that
// ended (its heartbeat stale) reads as interrupted; a fresh heartbeat is
// still running.
func TestBenefitInterrupted(t *testing.T) {
	wall := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	a, dataDir := benefitApp(t, Options{WallNow: func() time.Time { return wall }})
	ctx := context.Background()
	for _, tc := range []struct {
		id   string
		age  time.Duration
		want string
	}{
		{"bs-20261205T110000.000-0000000a", benefitStale + time.Second, BenefitInterrupted},
		{"bs-20261205T115900.000-0000000b", benefitBeat, BenefitRunning},
	} {
		dir := filepath.Join(dataDir, "benefit", tc.id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeStudy(dir, &BenefitStudy{ID: tc.id, Status: BenefitRunning, Runs: 2, Seed: 7, UpdatedAt: wall.Add(-tc.age)}); err != nil {
			t.Fatal(err)
		}
		st, err := a.BenefitShow(ctx, viewer, BenefitShowRequest{ID: tc.id})
		if err != nil || st.Status != tc.want {
			t.Errorf("heartbeat %s old: %s (%v), want %s", tc.age, st.Status, err, tc.want)
		}
		if tc.want == BenefitInterrupted && (st.Error == nil || st.Error.Code != core.CodeWorkerLost) {
			t.Errorf("interrupted study without its reason: %+v", st.Error)
		}
	}
	l, err := a.BenefitList(ctx, viewer, BenefitListRequest{})
	if err != nil || l.Count != 2 || l.Items[0].ID != "bs-20261205T115900.000-0000000b" {
		t.Errorf("list, newest first: %+v, %v", l, err)
	}
}

// shortStudy is a study small enough for a test: the shortest history
// and runs benefit.Run accepts.
func shortStudy(o *benefit.Options) { o.HistoryRuns, o.RunSteps = 12, 120 }

// TestBenefitStudyRuns starts a short study in the background (an
// engineer, as the UI's form does), follows it with benefit.show until
// it ends, and reads its report: the four modes, a run mean per run in
// each, the spec band and noise floor; the scratch store is gone and the
// list has the study without its per-run series.
func TestBenefitStudyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the study's twin and simulates 4 × 2 runs (~30 s)")
	}
	a, dataDir := benefitApp(t, Options{BenefitStudy: shortStudy})
	ctx := context.Background()
	st, err := a.BenefitRun(ctx, engineer, BenefitRunRequest{Line: benefitLine, Runs: 2, Seed: 3, Wear: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != BenefitRunning || st.Line != benefitLine || st.RequestedBy != "eve" || st.Runs != 2 || st.Seed != 3 || !st.Wear {
		t.Fatalf("started: %+v", st)
	}
	// a second study is refused while this one runs
	if _, err := a.BenefitRun(ctx, engineer, BenefitRunRequest{Line: benefitLine, Runs: 1}); core.CodeOf(err) != core.CodeQueueFull {
		t.Errorf("second study while one runs: %v, want AML_QUEUE_FULL", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for st.Status == BenefitRunning {
		if time.Now().After(deadline) {
			t.Fatalf("the study did not end: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
		if st, err = a.BenefitShow(ctx, viewer, BenefitShowRequest{ID: st.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if st.Status != BenefitDone || st.Report == nil || st.Progress != 1 || st.FinishedAt == nil {
		t.Fatalf("ended: %s %+v (error %+v)", st.Status, st, st.Error)
	}
	r := st.Report
	if r.Runs != 2 || r.Seed != 3 || !r.Wear || !(r.SpecLow < r.Target && r.Target < r.SpecHigh) || !(r.NoiseFloor > 0) {
		t.Errorf("report: %+v", r)
	}
	want := []string{benefit.ModeFixed, benefit.ModePerMove, benefit.ModeEnvelope, benefit.ModeOracle}
	if len(r.Modes) != len(want) {
		t.Fatalf("modes: %+v", r.Modes)
	}
	for i, m := range r.Modes {
		if m.Name != want[i] || len(m.RunMeans) != 2 {
			t.Errorf("mode %d: %s with %d run means, want %s with 2", i, m.Name, len(m.RunMeans), want[i])
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "benefit", st.ID, "data")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the scratch store is still there: %v", err)
	}
	l, err := a.BenefitList(ctx, viewer, BenefitListRequest{})
	if err != nil || l.Count != 1 || l.Items[0].ID != st.ID || l.Items[0].Report == nil || l.Items[0].Report.Modes[0].RunMeans != nil {
		t.Errorf("list: %+v, %v", l, err)
	}
	// the slot is free again: the next study would start
	select {
	case benefitSlot <- struct{}{}:
		<-benefitSlot
	default:
		t.Error("the study's slot was not released")
	}
}

// TestBenefitStudyStoppedByShutdown: the process shutting down while a
// study runs in the background (App.Shutdown, as serve does on a signal)
// stops the study and waits for its record: it reads interrupted, with
// AML_WORKER_LOST, not running for a stale-heartbeat period after the
// process has gone; its scratch store is removed and the slot is free.
// A study asked for after Shutdown is refused before anything is made.
func TestBenefitStudyStoppedByShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the study's simulation and training (~10 s) before the shutdown stops it")
	}
	a, dataDir := benefitApp(t, Options{BenefitStudy: shortStudy})
	ctx := context.Background()
	st, err := a.BenefitRun(ctx, engineer, BenefitRunRequest{Line: benefitLine, Runs: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := a.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	got, err := a.BenefitShow(ctx, viewer, BenefitShowRequest{ID: st.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != BenefitInterrupted || got.Error == nil || got.Error.Code != core.CodeWorkerLost || got.FinishedAt == nil {
		t.Fatalf("after shutdown: status %s, error %+v, finished %v; want interrupted (AML_WORKER_LOST)", got.Status, got.Error, got.FinishedAt)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "benefit", st.ID, "data")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the scratch store is still there: %v", err)
	}
	select {
	case benefitSlot <- struct{}{}:
		<-benefitSlot
	default:
		t.Error("the study's slot was not released")
	}
	if _, err := a.BenefitRun(ctx, engineer, BenefitRunRequest{Line: benefitLine, Runs: 2}); core.CodeOf(err) != core.CodeWorkerLost {
		t.Errorf("a study after shutdown: %v, want AML_WORKER_LOST", err)
	}
	l, err := a.BenefitList(ctx, viewer, BenefitListRequest{})
	if err != nil || l.Count != 1 {
		t.Errorf("after shutdown the list has %d studies (%v), want the one interrupted", l.Count, err)
	}
}
