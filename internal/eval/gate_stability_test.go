package eval

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// G7a and G7b (v2 model profiles): a diverged free run or a pole on or
// outside the unit circle fails, saying why; a stable model passes; a
// model without free run or poles passes as not applicable; missing
// evidence fails; v1 profiles are unchanged.
func TestGateStability(t *testing.T) {
	mpc, err := ProfileFor("mpc_surrogate")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := ProfileFor("quality_predict")
	diverged := stableEvidence()
	diverged.FreeRun.Diverged, diverged.FreeRun.DivergedSegments = true, 1
	diverged.FreeRun.Divergence = &Divergence{RunID: "r7", Segment: 1, Step: 42, Target: "y", Reason: "the simulation is +Inf"}
	unstable := stableEvidence()
	unstable.MaxPoleModulus = 1.03
	marginal := stableEvidence()
	marginal.MaxPoleModulus = 1
	noSim := stableEvidence()
	noSim.FreeRun = nil
	failed := stableEvidence()
	failed.FreeRun, failed.FreeRunError = nil, "SimulateRun: boom"
	notLinear := stableEvidence()
	notLinear.Linear, notLinear.Poles, notLinear.MaxPoleModulus = false, 0, math.NaN()
	static := stableEvidence()
	static.Poles, static.MaxPoleModulus = 0, 0
	for _, c := range []struct {
		name             string
		st               *Stability
		passA, passB     bool
		detailA, detailB string
	}{
		{"stable", stableEvidence(), true, true, "did not diverge (0): free run over 1 segment(s)", "inside the unit circle"},
		{"diverged free run", diverged, false, true, "run r7, segment 1, step 42, target y: the simulation is +Inf", ""},
		{"unstable pole", unstable, true, false, "", "on or outside the unit circle: the linear dynamics are unstable"},
		{"marginal pole", marginal, true, false, "", "unstable"},
		{"no free run: not applicable", noSim, true, true, "not applicable", ""},
		{"free run failed", failed, false, true, "SimulateRun: boom", ""},
		{"no poles: not applicable", notLinear, true, true, "", "not applicable"},
		{"no autoregressive part", static, true, true, "", "no poles"},
		{"no evidence", nil, false, false, "none was made", "none was made"},
	} {
		for _, p := range []Profile{mpc, q} {
			ev := synthetic(0.9, 1000, 1000)
			ev.Stability = c.st
			r := GateEvidence(p, passing(), ev)
			a, b := checkByID(r, "G7a"), checkByID(r, "G7b")
			if a.Passed != c.passA || b.Passed != c.passB || r.Passed != (c.passA && c.passB) {
				t.Fatalf("%s, %s: G7a %+v G7b %+v report %v", c.name, p.ID, a, b, r.Passed)
			}
			if !strings.Contains(a.Detail, c.detailA) || !strings.Contains(b.Detail, c.detailB) || a.Op != OpEQ || b.Op != OpLT || b.Threshold != 1 {
				t.Fatalf("%s, %s: details %q / %q", c.name, p.ID, a.Detail, b.Detail)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		v1, _ := LookupProfile(ProfileUpstreamMPCV1)
		ev := synthetic(0.9, 1000, 1000)
		ev.Stability = c.st
		if r := GateEvidence(v1, passing(), ev); !r.Passed || len(r.Checks) != 6 {
			t.Fatalf("%s under v1: %+v", c.name, r)
		}
	}
	js, err := json.Marshal(diverged)
	var back Stability
	if err != nil || json.Unmarshal(js, &back) != nil || !back.FreeRun.Diverged || back.FreeRun.Divergence.Step != 42 || back.MaxPoleModulus != 0.9 {
		t.Fatalf("stability JSON %s %v", js, err)
	}
	if js, err := json.Marshal(notLinear); err != nil || !strings.Contains(string(js), `"maxPoleModulus":null`) {
		t.Fatalf("NaN modulus JSON %s %v", js, err)
	}
}
