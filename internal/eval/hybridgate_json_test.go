package eval

import (
	"encoding/json"
	"math"
	"testing"
)

// A gate input without shadow evidence or rolled-out trials (NaN
// measurements) encodes as null and reads back as NaN.
func TestTwinGateInputJSON(t *testing.T) {
	in := TwinInputFromMeasurements(nil, nil, nil, []TrialOutcome{{ID: "t1", OODAccepted: true}}, math.NaN())
	in.Rows, in.ShadowRuns = 10, 2
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back TwinGateInput
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Rows != 10 || back.ShadowRuns != 2 || !math.IsNaN(back.ShadowErrorRatio) || !math.IsNaN(back.PhysicsSolverFailureRate) || len(back.Trials) != 1 {
		t.Fatalf("round trip %s → %+v", b, back)
	}
}
