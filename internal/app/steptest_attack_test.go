package app

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/twin/guard"
)

// revokingLine is the tank line on which, once the first move was
// written, a person revokes the running step test (the line's next
// sampling period).
type revokingLine struct {
	*sim.TankLine
	writes  int
	revoke  func() error
	revoked bool
	err     error
}

func (l *revokingLine) Write(ctx context.Context, node string, v float64) error {
	l.writes++
	return l.TankLine.Write(ctx, node, v)
}

func (l *revokingLine) Step() (time.Time, float64) {
	if l.writes > 0 && !l.revoked {
		l.revoked, l.err = true, l.revoke()
	}
	return l.TankLine.Step()
}

// TestStepTestRevokedWhileRunning: revoking a step test is how a person
// stops it. A test revoked while it runs writes no further move: the
// next move is refused CERT_REVOKED and the test stops (WRITE_DENIED),
// the setpoints left where the last verified move put them.
func TestStepTestRevokedWhileRunning(t *testing.T) {
	ctx := context.Background()
	a, _ := tankApp(t, 70)
	r, err := a.StepTestIssue(ctx, engineer, StepTestIssueRequest{StepTestPlanRequest: StepTestPlanRequest{Scene: "tank-level",
		Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15}, Hold: Duration(5 * time.Minute), OneAtATime: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Test.TestID
	bob := Principal{Name: "bob", Role: auth.RoleApprover}
	if _, err := a.StepTestApprove(ctx, bob, StepTestRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	line := &revokingLine{TankLine: sim.NewTankLine(11, 1, fixed)}
	line.revoke = func() error {
		_, err := a.StepTestRevoke(ctx, engineer, StepTestRevokeRequest{ID: id, Reason: "level alarm on the tank"})
		return err
	}
	out, err := a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: id, Line: line})
	if line.err != nil {
		t.Fatalf("revoke while running: %v", line.err)
	}
	ex := out.Execution
	if core.CodeOf(err) != core.CodeWriteDenied || ex == nil || ex.Completed || len(ex.Moves) != 2 || ex.Moves[1].Reason != guard.ReasonCertRevoked {
		t.Fatalf("a revoked test kept writing: %v, %d moves, completed %v", err, len(ex.Moves), ex.Completed)
	}
	if line.writes != 1 {
		t.Fatalf("%d writes, only move 0 was before the revocation", line.writes)
	}
	if s, err := a.StepTestShow(ctx, viewer, StepTestRequest{ID: id}); err != nil || s.Moves != 1 || s.Refused != 1 {
		t.Fatalf("show: %v %+v", err, s)
	}
}

// TestStepTestLongerThanItsLife: a step test whose last move comes
// after its certificate expires (8 moves 1 h apart, a 4 h life) is
// refused at issue, before anything is stored: it would otherwise be
// approved, start and be cut off by its expiry halfway, the line left
// off its operating point.
func TestStepTestLongerThanItsLife(t *testing.T) {
	ctx := context.Background()
	a, _ := tankApp(t, 70)
	req := StepTestIssueRequest{StepTestPlanRequest: StepTestPlanRequest{Scene: "tank-level",
		Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15}, Hold: Duration(time.Hour), OneAtATime: true}, TTL: Duration(4 * time.Hour)}
	if r, err := a.StepTestIssue(ctx, engineer, req); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("an 8 h test issued with a 4 h life: %v %+v", err, r)
	}
	if l, err := a.StepTestList(ctx, viewer, StepTestListRequest{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("stored: %v %+v", err, l.Items)
	}
	req.TTL = Duration(8 * time.Hour)
	if _, err := a.StepTestIssue(ctx, engineer, req); err != nil {
		t.Fatalf("an 8 h test with an 8 h life: %v", err)
	}
}
