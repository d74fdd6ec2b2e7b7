package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// TestJobSubmitGateProfile: job.submit refuses an unknown gate profile
// (AML_INVALID_ARGUMENT on field gateProfile, naming the known ones) and
// one of another purpose before anything is queued; a named profile is
// stored with the job and audited with its version; a submit without one
// is judged by the purpose's default and writes no audit entry.
func TestJobSubmitGateProfile(t *testing.T) {
	a, _, _, ds := jobApp(t)
	ctx := context.Background()
	for _, bad := range []string{"upstream-mpc-v7", "upstream-mpc-v2 ", "twin-v2", "static-v1", "upstream-quality-v1"} {
		_, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "linear_state_space@1", GateProfile: bad})
		ce, ok := err.(*core.Error)
		if core.CodeOf(err) != core.CodeInvalidArgument || !ok || ce.Field != "gateProfile" {
			t.Fatalf("gate profile %q: %v", bad, err)
		}
		if strings.HasPrefix(bad, "upstream-mpc-v") || strings.HasPrefix(bad, "twin") {
			for _, known := range []string{"upstream-mpc-v2", "upstream-mpc-v1", "static-v1"} {
				if !strings.Contains(err.Error(), known) {
					t.Fatalf("gate profile %q: the error does not name %s: %v", bad, known, err)
				}
			}
		}
	}
	if js, _ := a.JobList(ctx, admin, JobListRequest{}); js.Count != 0 {
		t.Fatalf("%d job(s) queued with a refused profile", js.Count)
	}

	j, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "linear_state_space@1", GateProfile: "upstream-mpc-v1"})
	if err != nil || j.GateProfile != "upstream-mpc-v1" {
		t.Fatalf("named v1: %+v %v", j, err)
	}
	if got, err := a.JobShow(ctx, viewer, JobRequest{ID: j.ID}); err != nil || got.GateProfile != "upstream-mpc-v1" {
		t.Fatalf("stored job %+v %v", got, err)
	}
	d, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "linear_state_space@1"})
	if err != nil || d.GateProfile != "" {
		t.Fatalf("default: %+v %v", d, err)
	}
	l, err := a.AuditList(ctx, admin, AuditListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, e := range l.Items {
		if e.Action != "job.submit" {
			continue
		}
		subs = append(subs, e.Subject)
		var p map[string]any
		if err := json.Unmarshal(e.Payload, &p); err != nil || e.Actor != "eve" || p["gateProfile"] != "upstream-mpc-v1" || p["gateProfileVersion"] != 1.0 || p["dataset"] != ds {
			t.Fatalf("audit entry %+v: %v %v", e, p, err)
		}
	}
	if len(subs) != 1 || subs[0] != j.ID {
		t.Fatalf("job.submit audit entries for %v, want only %s", subs, j.ID)
	}
}
