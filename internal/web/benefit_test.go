package web

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/benefit"
	"github.com/aml-project/aml/internal/sim"
	"github.com/chromedp/chromedp"
)

// shortStudy is the fixture's benefit study: the shortest history and
// runs benefit.Run accepts, so that a study takes seconds, not minutes.
func shortStudy(o *benefit.Options) { o.HistoryRuns, o.RunSteps = 12, 120 }

var (
	studyOnce sync.Once
	studyID   string
	studyErr  error
)

// fixtureStudy is a finished benefit study on the fixture (2 runs per
// mode, run once per test binary through the served App's benefit.run).
func fixtureStudy(t *testing.T, f *fixture) string {
	t.Helper()
	studyOnce.Do(func() {
		var st app.BenefitStudy
		st, studyErr = f.app.BenefitRun(context.Background(), auth.Principal{Name: "eve", Role: auth.RoleEngineer}, app.BenefitRunRequest{Line: sim.DefaultLineID, Runs: 2, Wear: true, Wait: true})
		if studyErr == nil && st.Status != app.BenefitDone {
			studyErr = &studyFailed{st}
		}
		studyID = st.ID
	})
	if studyErr != nil {
		t.Fatalf("fixture benefit study: %v", studyErr)
	}
	return studyID
}

type studyFailed struct{ st app.BenefitStudy }

func (e *studyFailed) Error() string {
	if e.st.Error != nil {
		return e.st.Status + ": " + e.st.Error.Code + ": " + e.st.Error.Message
	}
	return e.st.Status
}

// TestBenefitPages: a viewer reads the studies and a study's report (the
// table per mode, the spec band and noise floor, the charts' data and the
// server's SVG plots); the form is there with the note that the role
// cannot start one. An approver scoped to another line neither lists the
// study nor opens its page (403).
func TestBenefitPages(t *testing.T) {
	f := getFixture(t)
	id := fixtureStudy(t, f)
	c := f.client(t, "victor")
	code, body, _ := get(t, c, f.srv.URL+"/ui/benefit")
	if code != http.StatusOK || !strings.Contains(body, `href="/ui/benefit/`+id+`"`) || !strings.Contains(body, `id="benefit-form"`) || !strings.Contains(body, `id="role-note"`) {
		t.Errorf("/ui/benefit: status %d: %s", code, excerpt(body))
	}
	code, body, _ = get(t, c, f.srv.URL+"/ui/benefit/"+id)
	if code != http.StatusOK {
		t.Fatalf("study page: status %d: %s", code, excerpt(body))
	}
	for _, mode := range []string{"fixed", "per_move", "envelope", "oracle"} {
		if !strings.Contains(body, `data-mode="`+mode+`"`) {
			t.Errorf("study page: no row for %s", mode)
		}
	}
	for _, want := range []string{"spec band 31.7–32.3 g", "noise floor of a run mean", `id="benefit-charts"`, "runMeans", "absError", "<svg", "Run-mean part weight per run"} {
		if !strings.Contains(body, want) {
			t.Errorf("study page lacks %q", want)
		}
	}
	// an id that is not a study's is refused; an unknown one is not found
	if code, body, _ := get(t, c, f.srv.URL+"/ui/benefit/..%2f..%2fetc"); code != http.StatusBadRequest || !strings.Contains(body, "AML_INVALID_ARGUMENT") {
		t.Errorf("traversal id: status %d: %s", code, excerpt(body))
	}
	if code, _, _ := get(t, c, f.srv.URL+"/ui/benefit/bs-20260101T000000.000-00000000"); code != http.StatusNotFound {
		t.Errorf("unknown study: status %d", code)
	}
	olga := f.client(t, "olga")
	if code, body, _ := get(t, olga, f.srv.URL+"/ui/benefit"); code != http.StatusOK || strings.Contains(body, id) || !strings.Contains(body, "No studies yet.") {
		t.Errorf("/ui/benefit for a caller of another line: status %d: %s", code, excerpt(body))
	}
	if code, body, _ := get(t, olga, f.srv.URL+"/ui/benefit/"+id); code != http.StatusForbidden || strings.Contains(body, sim.DefaultLineID) {
		t.Errorf("another line's study page: status %d: %s", code, excerpt(body))
	}
}

// TestBrowserBenefitStudy: an engineer starts a short study from the
// form, the study page shows its progress and follows it (benefit.show
// over the API) until it ends, then shows the table per mode, the spec
// band and noise floor, and the two uPlot charts (run means against the
// target and the spec band, |error| per run) in place of the SVG.
func TestBrowserBenefitStudy(t *testing.T) {
	f := getFixture(t)
	fixtureStudy(t, f) // the process's one study slot is free again
	ctx := longBrowser(t, 6*time.Minute)
	login(t, ctx, f, "eve", "/ui/benefit")
	run(t, ctx, "start a study",
		chromedp.SetValue(chromedp.ID("benefit-line"), sim.DefaultLineID),
		chromedp.SetValue(chromedp.ID("benefit-runs"), "2"),
		chromedp.SetValue(chromedp.ID("benefit-seed"), "5"),
		chromedp.Click(chromedp.ID("benefit-wear")),
		chromedp.Click(chromedp.ID("benefit-start")),
		chromedp.WaitVisible(chromedp.ID("benefit-status")),
	)
	loc := value(t, ctx, "location", chromedp.Location())
	if !regexp.MustCompile(`/ui/benefit/bs-[0-9T.]+-[0-9a-f]{8}$`).MatchString(loc) {
		t.Fatalf("after the form: %s", loc)
	}
	status := value(t, ctx, "status", chromedp.Evaluate[string](`document.getElementById("benefit-status").dataset.status`))
	if status == "running" {
		// the page shows the progress and follows the study
		value(t, ctx, "progress", chromedp.Evaluate[bool](`!!document.getElementById("benefit-progress") && document.getElementById("benefit-stage").textContent.length > 0`))
		screenshot(t, ctx, "benefit-running")
	}
	// The page reloads itself when the study ends (an evaluation caught
	// by the reload fails and is tried again).
	deadline := time.Now().Add(5 * time.Minute)
	for {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && !!document.getElementById("benefit-table")`))
		if err == nil && done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report 5 min after the study started (last error %v)", err)
		}
		time.Sleep(time.Second)
	}
	polls := value(t, ctx, "reloaded", chromedp.Evaluate[string](`document.getElementById("benefit-status").dataset.status`))
	if polls != "done" {
		t.Errorf("after the reload the study is %s", polls)
	}
	run(t, ctx, "charts", chromedp.WaitVisible(chromedp.ID("benefit-table")))
	type report struct {
		Status, Spec, ChartState string
		Modes                    []string
		Charts, SVGHidden        int
		Legends                  []string
	}
	r := value(t, ctx, "report", chromedp.Poll[report](`(() => {
		const box = document.getElementById("benefit-charts");
		if (!box || box.dataset.state !== "ready") return null;
		return {Status: document.getElementById("benefit-status").dataset.status,
			Spec: document.getElementById("benefit-spec").textContent,
			ChartState: box.dataset.state,
			Modes: [...document.querySelectorAll("#benefit-table tbody tr")].map(r => r.dataset.mode),
			Charts: box.querySelectorAll(".uplot").length,
			SVGHidden: getComputedStyle(document.getElementById("benefit-svg")).display === "none" ? 1 : 0,
			Legends: [...box.querySelectorAll(".u-legend .u-label")].map(e => e.textContent)};
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if r.Status != "done" || strings.Join(r.Modes, ",") != "fixed,per_move,envelope,oracle" {
		t.Errorf("report: status %s, modes %v", r.Status, r.Modes)
	}
	if !strings.Contains(r.Spec, "spec band") || !strings.Contains(r.Spec, "noise floor") {
		t.Errorf("spec line: %q", r.Spec)
	}
	if r.Charts != 2 || r.SVGHidden != 1 {
		t.Errorf("%d uPlot charts drawn (SVG hidden %d), want 2", r.Charts, r.SVGHidden)
	}
	legend := strings.Join(r.Legends, "|")
	for _, want := range []string{"fixed", "per_move", "envelope", "oracle", "target", "spec low", "spec high", "spec half-width"} {
		if !strings.Contains(legend, want) {
			t.Errorf("chart legends %v lack %q", r.Legends, want)
		}
	}
	screenshot(t, ctx, "benefit-report")
}
