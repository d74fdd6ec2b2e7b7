package benefit

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/twin/contract"
)

// The envelope mode's governed path: a move inside the envelope is
// written through envelope.Cycle and audited; a move outside it is not
// written, stops the envelope, and the next write needs (and counts) a
// new approval.
func TestGovernorWritesOnlyInsideTheEnvelope(t *testing.T) {
	ctx := context.Background()
	g, o, scene, obj := studyGovernor(t, Options{}, nil)
	l := &loop{o: o, name: ModeEnvelope, scene: g.scene, res: &ModeResult{Name: ModeEnvelope}, u: nominal(), gov: g}
	start := time.UnixMilli(studyStartMs).UTC()
	n := 0
	try := func(at time.Time, hp float64) bool {
		t.Helper()
		n++
		id := fmt.Sprintf("s%d", n)
		snap := holdingSnapshot(scene, id, at, controlsMap(l.u), &contract.SnapshotWindow{RunID: fmt.Sprintf("run-%d", n)})
		step := controlsMap(l.u)
		step[sim.NodeHoldPressure] = hp
		tr := passingTrial(id, at, obj, step, contract.ConstraintResult{ID: "weight", Passed: true, Detail: "ok"})
		ok, err := g.cycle(ctx, l, at, snap, tr)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	hp := l.u.HoldPressure
	hi := *scene.Control(sim.NodeHoldPressure).Max
	if !try(start, hp+1) || l.u.HoldPressure != hp+1 {
		t.Fatalf("a move inside the envelope was not written: %+v", l.res)
	}
	// the scene's maxDeltaPerAction lets the supervisor ask for a target
	// just past the envelope's upper bound only from next to it
	l.u.HoldPressure = hi - 0.5
	if try(start.Add(2*time.Minute), hi+0.5) || l.u.HoldPressure != hi-0.5 {
		t.Fatalf("a move outside the envelope was written: %+v", l.res)
	}
	if l.res.Stops["OUTSIDE_ENVELOPE"] != 1 || l.res.Refused != 1 || l.res.Approvals != 1 {
		t.Fatalf("stop not counted: %+v", l.res)
	}
	if !try(start.Add(4*time.Minute), hi-1) || l.res.Approvals != 2 || g.n != 2 {
		t.Fatalf("after a stop a new approved envelope should write: %+v", l.res)
	}
	audited, err := g.auditedWrites(ctx, studyStartMs, math.MaxInt64)
	if err != nil || audited != l.res.Moves || l.res.Moves != 2 || l.res.OutsideEnvelope != 0 {
		t.Fatalf("audited %d (%v), %+v", audited, err, l.res)
	}
}
