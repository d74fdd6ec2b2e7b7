package render

import (
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// A step test's progress prints its lease while it runs, and where an
// execution that ended early left the setpoints.
func TestPrintStepTestProgress(t *testing.T) {
	at := time.Date(2026, 1, 5, 6, 0, 0, 0, time.UTC)
	hb := at.Add(25 * time.Second)
	var b strings.Builder
	printStepTestProgress(&b, &steptest.Progress{Status: steptest.StatusRunning, Stage: steptest.StageMoving, StartedBy: "bob", StartedAt: at, Planned: 8, Heartbeat: &hb})
	if out := b.String(); !strings.Contains(out, "lease last renewed at "+certTime(hb)) || strings.Contains(out, "last written") {
		t.Errorf("running:\n%s", out)
	}
	b.Reset()
	printStepTestProgress(&b, &steptest.Progress{Status: steptest.StatusInterrupted, Stage: steptest.StageMoving, StartedBy: "bob", StartedAt: at, Planned: 8, Written: 1, Heartbeat: &hb,
		LastWritten: &steptest.WrittenMove{Index: 0, Set: map[string]float64{"heater": 54, "feed": 15}, At: at.Add(2 * time.Second)},
		Error:       &auth.ErrorBody{Code: "AML_WORKER_LOST", Message: "interrupted"}})
	out := b.String()
	for _, want := range []string{"interrupted (moving), 1 of 8 moves written", "last written: move 0 (feed 15, heater 54) at " + certTime(at.Add(2*time.Second)), "error: AML_WORKER_LOST: interrupted"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "lease last renewed") {
		t.Errorf("an interrupted execution prints its lease as if running:\n%s", out)
	}
}
