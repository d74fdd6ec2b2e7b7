package guard

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// moveOne turns the step-test fixture into move 1 (hold_pressure back
// 66 → 64 at 60 s) asked at the start of its slot.
func moveOne(f *fixture) {
	f.req.StepIndex, f.req.StepStart = 1, f.req.Now.Add(-60*time.Second)
	f.req.Moves = []Move{{NodeID: "n-hp", VariableID: "hold_pressure", From: 66, To: 64}}
}

// TestStepTestMovesInOrder: a caller holding an approved step test
// cannot skip ahead. Move i is written only after move i−1 of the same
// test was written in the same run: a later move asked first (its slot
// picked by choosing StepStart), or after the earlier move was written
// under another run, is refused OUTSIDE_SLOT; in order it is allowed.
func TestStepTestMovesInOrder(t *testing.T) {
	cases := []struct {
		name, want string
		history    func(f *fixture)
	}{
		{"move 1 without move 0", ReasonOutsideSlot, func(f *fixture) {}},
		{"move 0 written under another run", ReasonOutsideSlot, func(f *fixture) {
			f.rec("n-hp", contract.StepTestActionID("st-1", 0), "run-other", 61*time.Second)
		}},
		{"move 0 of another test", ReasonOutsideSlot, func(f *fixture) {
			f.rec("n-hp", contract.StepTestActionID("st-2", 0), "run-1", 61*time.Second)
		}},
		{"move 0 written first", "", func(f *fixture) {
			f.rec("n-hp", contract.StepTestActionID("st-1", 0), "run-1", 61*time.Second)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			toStepTest(t, f)
			moveOne(f)
			tc.history(f)
			d := Check(context.Background(), f.ch, f.hist, f.req)
			if tc.want == "" {
				if !d.Allowed {
					t.Fatalf("in order, denied: %s %s", d.Reason, d.Detail)
				}
				return
			}
			if d.Allowed || d.Reason != tc.want {
				t.Fatalf("want %s, got allowed=%v %s (%s)", tc.want, d.Allowed, d.Reason, d.Detail)
			}
		})
	}
}
