package render

import (
	"strings"
	"testing"
)

// The model card prints the free run's segments and a divergence, and the
// largest pole.
func TestPrintStability(t *testing.T) {
	var b strings.Builder
	printStability(&b, []byte(`{"stability":{"freeRun":{"split":"test","meanNrmse":348,"initSteps":8,"segments":3,"skippedSegments":1,"notScored":12,`+
		`"diverged":true,"divergedSegments":2,"divergence":{"runId":"r2","segment":1,"step":40,"target":"y","reason":"the simulation is +Inf"}},`+
		`"linear":true,"poles":4,"maxPoleModulus":1.2}}`))
	out := b.String()
	for _, want := range []string{"free run over 3 segment(s) (1 skipped, 12 samples not scored", "NRMSE 348.0000", "DIVERGED in 2 segment(s), first run r2, segment 1, step 40",
		"largest |pole| 1.2000 (UNSTABLE)"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	b.Reset()
	printStability(&b, []byte(`{"stability":{"freeRun":null,"linear":false,"poles":0,"maxPoleModulus":null}}`))
	printStability(&b, []byte(`{"test":{}}`))
	if b.Len() != 0 {
		t.Errorf("nothing to print, got %q", b.String())
	}
}
