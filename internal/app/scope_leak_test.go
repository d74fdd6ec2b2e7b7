package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// TestForeignLineNotRevealed (attack): a caller scoped to line A hands
// the twin ops the id of a snapshot, trial or model of line B. Every op
// refuses (AML_FORBIDDEN on lineId, the refusal of any object outside the
// scope) and no refusal names line B — the caller learns nothing of the
// lines it may not see. A caller who may see both lines still gets the
// specific conflict.
func TestForeignLineNotRevealed(t *testing.T) {
	f := newSecFixture(t)
	ctx := context.Background()
	const own = "line-a"
	sc := contract.DefaultInjectionScene()
	sc.SceneID, sc.LineID = "scene-a", own
	if err := f.st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if _, err := f.st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	trialID := f.trial(t, "x", "", secStep) // snapshot snap-x and trial trial-x, of secLine
	mallory := Principal{Name: "mallory", Role: auth.RoleEngineer, Lines: []string{own}}
	bounds := map[string]EnvelopeBound{"hold_pressure": {Min: 60, Max: 70}}

	ops := []struct {
		name string
		call func(p Principal) error
	}{
		{"steptest.plan", func(p Principal) error {
			_, err := f.a.StepTestPlan(ctx, p, StepTestPlanRequest{Scene: "scene-a", Snapshot: "snap-x"})
			return err
		}},
		{"snapshot.show", func(p Principal) error {
			_, err := f.a.SnapshotShow(ctx, p, SnapshotShowRequest{ID: "snap-x"})
			return err
		}},
		{"trial.run", func(p Principal) error {
			_, err := f.a.TrialRun(ctx, p, TrialRunRequest{Model: "hybrid-1", Snapshot: "snap-x", Set: secStep})
			return err
		}},
		{"optimise", func(p Principal) error {
			_, err := f.a.Optimize(ctx, p, OptimizeRequest{Model: "hybrid-1", Snapshot: "snap-x"})
			return err
		}},
		{"cert.issue", func(p Principal) error {
			_, err := f.a.CertIssue(ctx, p, CertIssueRequest{Trial: trialID})
			return err
		}},
		{"trial.recompute", func(p Principal) error {
			_, err := f.a.TrialRecompute(ctx, p, TrialRecomputeRequest{ID: trialID})
			return err
		}},
		{"envelope.issue", func(p Principal) error {
			_, err := f.a.EnvelopeIssue(ctx, p, EnvelopeIssueRequest{Scene: "scene-a", Model: "hybrid-1", Bounds: bounds, MaxMovesPerHour: 6})
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			err := op.call(mallory)
			var ae *core.Error
			if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != "lineId" {
				t.Fatalf("%v, want AML_FORBIDDEN on lineId", err)
			}
			if s := fmt.Sprintf("%v %+v", err, *ae); strings.Contains(s, secLine) {
				t.Errorf("the refusal names the foreign line: %s", s)
			}
		})
	}

	// A caller who sees both lines is told why precisely.
	_, err := f.a.StepTestPlan(ctx, admin, StepTestPlanRequest{Scene: "scene-a", Snapshot: "snap-x"})
	if core.CodeOf(err) != core.CodeConflict || !strings.Contains(err.Error(), secLine) {
		t.Errorf("admin: %v, want the conflict naming both lines", err)
	}
}
