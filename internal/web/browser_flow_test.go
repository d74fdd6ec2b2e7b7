package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserCSV is the browser test's own line: columns of its own (node ids
// are global), a setpoint stepping every 20 s and its response.
func browserCSV(n int) string {
	return strings.NewReplacer("time;sp;pv", "time;sp_b;pv_b").Replace(ownLineCSV(n, 1))
}

// TestBrowserOwnLineWorkflow drives the engineer's own-line workflow only
// through the browser at 1366×768: upload a CSV with plant options, apply
// the line file, build a dataset from the node catalog (the live check
// says the spec is valid), submit a job from the trainer's schema form,
// follow it to its model and promote it to shadow with the gate result in
// view. A screenshot per step goes to the artifacts folder.
func TestBrowserOwnLineWorkflow(t *testing.T) {
	f := getFixture(t)
	ctx := browser(t)
	run(t, ctx, "viewport", chromedp.EmulateViewport(1366, 768))
	csv := filepath.Join(t.TempDir(), "own-line.csv")
	if err := os.WriteFile(csv, []byte(browserCSV(300)), 0o600); err != nil {
		t.Fatal(err)
	}
	fits := func(what string) {
		t.Helper()
		over := value(t, ctx, what+": overflow", chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
		if over > 0 {
			t.Errorf("%s: the page is %d px wider than the 1366 px viewport", what, over)
		}
	}
	login(t, ctx, f, "eve", "/ui/ingest")
	fits("ingest page")

	// 1. Upload the CSV with its plant options.
	run(t, ctx, "fill the upload form",
		chromedp.SendKeys(chromedp.ID("csv-line"), "line-web-browser"),
		chromedp.SendKeys(chromedp.ID("csv-product"), "pb"),
		chromedp.SendKeys(chromedp.ID("csv-recipe"), "rb"),
		chromedp.SendKeys(chromedp.ID("csv-run"), "web-browser-run-1"),
		chromedp.SetValue(chromedp.CSS(`#csv-form select[name=delimiter]`), ";"),
		chromedp.Click(chromedp.CSS(`#csv-form input[name=decimalComma]`)),
		chromedp.SetUploadFiles(chromedp.ID("csv-file"), []string{csv}),
		chromedp.Click(chromedp.ID("csv-submit")),
		chromedp.WaitVisible(chromedp.ID("ingest-report")),
	)
	if got := value(t, ctx, "samples", chromedp.Text(chromedp.CSS("#ingest-report .samples"))); got != "600" {
		t.Errorf("ingested %s samples, want 600", got)
	}
	screenshot(t, ctx, "own-line-1-upload")

	// 2. Apply the line file (pasted): sp_b is a writable setpoint.
	file := "line: line-web-browser\nnodes:\n  - id: sp_b\n    writable: true\n    unit: bar\n    min: 5\n    max: 20\n  - id: pv_b\n    unit: degC\n    physicalMeaning: response\n"
	run(t, ctx, "apply the line file",
		chromedp.SetValue(chromedp.ID("line-file"), file),
		chromedp.Click(chromedp.ID("line-submit")),
		chromedp.WaitVisible(chromedp.ID("line-applied")),
	)
	if kind := value(t, ctx, "sp_b kind", chromedp.Text(chromedp.CSS(`#line-applied tr[data-node="sp_b"] .kind`))); kind != "dcw" {
		t.Errorf("sp_b after the line file: kind %q", kind)
	}
	screenshot(t, ctx, "own-line-2-line-file")

	// 3. The dataset form from the node catalog, checked live.
	run(t, ctx, "dataset form",
		chromedp.Navigate(f.srv.URL+"/ui/datasets/new?line=line-web-browser"),
		chromedp.WaitVisible(chromedp.ID("dataset-form")),
		chromedp.SetValue(chromedp.ID("role-sp_b"), "control"),
		chromedp.SetValue(chromedp.ID("ds-history"), "4"),
		chromedp.SetValue(chromedp.ID("ds-horizon"), "2"),
	)
	// Only a control: the live check names the missing target.
	value(t, ctx, "live check refuses", chromedp.Poll[bool](`(() => { const e = document.getElementById("spec-check"); e.closest("form").dispatchEvent(new Event("change")); return e.dataset.ok === "false" && e.textContent.includes("target"); })()`,
		chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(500*time.Millisecond)))
	run(t, ctx, "pick the target", chromedp.SetValue(chromedp.ID("role-pv_b"), "target"))
	value(t, ctx, "live check passes", chromedp.Poll[bool](`(() => { const e = document.getElementById("spec-check"); e.closest("form").dispatchEvent(new Event("change")); return e.dataset.ok === "true"; })()`,
		chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(500*time.Millisecond)))
	fits("dataset form")
	screenshot(t, ctx, "own-line-3-dataset-form")
	run(t, ctx, "build", chromedp.Click(chromedp.ID("ds-build")), chromedp.WaitVisible(chromedp.ID("dataset-built")))
	screenshot(t, ctx, "own-line-4-dataset-built")

	// 4. Train: the job form from the trainer's schema.
	run(t, ctx, "job form",
		chromedp.Click(chromedp.ID("train-link")),
		chromedp.WaitVisible(chromedp.ID("job-form")),
	)
	// Choosing the trainer reloads the form with its schema's fields
	// (static/forms.js submits the picker on change).
	value(t, ctx, "choose the trainer", chromedp.Evaluate[bool](`(() => { const s = document.getElementById("trainer-select"); s.value = "linear_state_space@1"; s.dispatchEvent(new Event("change")); return true; })()`))
	// The poll may be cut by the navigation it waits for: poll again.
	for try := 0; ; try++ {
		ok, err := chromedp.Run(ctx, chromedp.Poll[bool](`location.search.includes("trainer=linear_state_space") && document.readyState === "complete" && !!document.querySelector('#job-params [data-param="initSteps"] input')`,
			chromedp.WithPollingTimeout(20*time.Second)))
		if err == nil && ok {
			break
		}
		if try == 5 {
			t.Fatalf("the trainer's fields never showed: %v", err)
		}
	}
	run(t, ctx, "job params",
		chromedp.SetValue(chromedp.CSS(`#job-params [data-param="initSteps"] input`), "2"),
		chromedp.SendKeys(chromedp.CSS(`#job-form input[name=note]`), "own line from the browser"),
	)
	fits("job form")
	screenshot(t, ctx, "own-line-5-job-form")
	run(t, ctx, "submit", chromedp.Click(chromedp.ID("job-submit")), chromedp.WaitVisible(chromedp.ID("flash")))
	loc := value(t, ctx, "job page", chromedp.Location())
	jobID := strings.TrimPrefix(strings.Split(loc, "?")[0], f.srv.URL+"/ui/jobs/")
	model := waitJob(t, f, jobID)
	run(t, ctx, "job done", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#jobs .model a`)))
	screenshot(t, ctx, "own-line-6-job-done")

	// 5. Promote to shadow with the gate result in view.
	run(t, ctx, "model card", chromedp.Click(chromedp.CSS(`#jobs .model a`)), chromedp.WaitVisible(chromedp.ID("stage-card")))
	if gate := value(t, ctx, "gate summary", chromedp.Text(chromedp.ID("gate-summary"))); !strings.Contains(gate, "Acceptance gates") && !strings.Contains(gate, "No gate report") {
		t.Errorf("gate summary beside the buttons: %q", gate)
	}
	run(t, ctx, "promote",
		chromedp.SetValue(chromedp.ID("promote-to"), "shadow"),
		chromedp.SendKeys(chromedp.CSS(`#promote-form input[name=reason]`), "browser workflow"),
		chromedp.Click(chromedp.ID("promote")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if st := value(t, ctx, "stage", chromedp.Text(chromedp.ID("stage-now"))); st != "shadow" {
		t.Errorf("model %s stage %q after promote", model, st)
	}
	screenshot(t, ctx, "own-line-7-promoted")
}
