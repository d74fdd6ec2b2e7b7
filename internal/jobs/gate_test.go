package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/eval"
)

// TestJobGateProfile: a job judged by the purpose's default profile has
// the interval rule G6 in its model's gate report, with the coverage the
// evaluation measured on test; a job naming upstream-mpc-v1 is judged by
// it (recorded with its version, on the job and its retry); an unknown
// profile, or one of another purpose, is refused at submit.
func TestJobGateProfile(t *testing.T) {
	st, dir, ds := fixture(t)
	r := NewRunner(st, Options{DataDir: dir, Trainers: NewTrainers(TestMeanTrainer{}), HeartbeatEvery: 100 * time.Millisecond})
	ctx := context.Background()
	for _, bad := range []string{"upstream-mpc-v9", "Upstream-MPC-v2", "twin-v1", "static-v1", "upstream-quality-v2"} {
		_, err := r.Submit(ctx, SubmitRequest{DatasetID: ds, TrainerRef: "test_mean@1", GateProfile: bad})
		var ce *core.Error
		if core.CodeOf(err) != core.CodeInvalidArgument || !errors.As(err, &ce) || ce.Field != "gateProfile" {
			t.Fatalf("gate profile %q: %v", bad, err)
		}
		if !strings.Contains(bad, "static") && !strings.Contains(bad, "quality") && !strings.Contains(err.Error(), "upstream-mpc-v2, upstream-quality-v2, static-v1, upstream-mpc-v1, upstream-quality-v1") {
			t.Fatalf("gate profile %q: the error does not name the known profiles: %v", bad, err)
		}
	}
	if js, err := st.ListJobs(ctx, core.JobFilter{}); err != nil || len(js) != 0 {
		t.Fatalf("refused submits queued %d job(s) %v", len(js), err)
	}

	run := func(profile string) (core.Job, eval.GateReport) {
		t.Helper()
		j, err := r.Submit(ctx, SubmitRequest{DatasetID: ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":1,"stepMs":1}`), GateProfile: profile})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(ctx, j.ID, 0); err != nil {
			t.Fatal(err)
		}
		j, err = st.GetJob(ctx, j.ID)
		if err != nil || j.Status != core.JobDone || j.GateProfile != profile {
			t.Fatalf("job %+v %v", j, err)
		}
		m, err := st.GetModel(ctx, j.ModelID)
		if err != nil {
			t.Fatal(err)
		}
		var g eval.GateReport
		if err := json.Unmarshal(m.Gates, &g); err != nil {
			t.Fatal(err)
		}
		return j, g
	}
	_, g := run("")
	if g.Profile != "upstream-mpc-v2" || g.Version != 2 {
		t.Fatalf("default profile: %s v%d", g.Profile, g.Version)
	}
	g6 := check(g, "G6")
	t.Logf("G6 of the mean model: %s (passed %v)", g6.Detail, g6.Passed)
	if g6.ID != "G6" || g6.Threshold < eval.CoverageToleranceMin || !strings.Contains(g6.Detail, "coverage") {
		t.Fatalf("G6 %+v", g6)
	}
	// the mean model neither simulates runs nor has poles: the stability
	// rules do not apply and say so
	for _, id := range []string{"G7a", "G7b"} {
		if c := check(g, id); c.ID != id || !c.Passed || !strings.Contains(c.Detail, "not applicable") {
			t.Fatalf("%s %+v", id, c)
		}
	}

	j, g := run("upstream-mpc-v1")
	if g.Profile != "upstream-mpc-v1" || g.Version != 1 || check(g, "G6").ID != "" || len(g.Checks) != 6 {
		t.Fatalf("named v1: %+v", g)
	}
	rj, err := r.Retry(ctx, j.ID, "tester")
	if err != nil || rj.GateProfile != "upstream-mpc-v1" {
		t.Fatalf("retry %+v %v", rj, err)
	}
}

func check(g eval.GateReport, id string) eval.Check {
	for _, c := range g.Checks {
		if c.ID == id {
			return c
		}
	}
	return eval.Check{}
}
