package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/sim"
	"github.com/chromedp/chromedp"
)

// TestTwinFormsRoles: on the demo line, the scene editor drafts from a
// model and its live check lists every finding; an engineer saves a
// draft but its freeze is refused on the scene page (approvers freeze);
// an agent's token sees the approve and execute confirmation pages
// without a button, and its posted approval and execution are refused
// with the rule, the certificate unchanged.
func TestTwinFormsRoles(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	eve, bot, alice := f.client(t, "eve"), f.client(t, "bot"), f.client(t, "alice")
	etok, btok := csrfForUser(t, f, "eve"), csrfForUser(t, f, "bot")

	code, body, _ := post(t, eve, base+"/ui/scenes/draft", url.Values{"csrf": {etok}, "model": {f.demo.ModelID}, "id": {"web-roles-scene"}})
	m := regexp.MustCompile(`(?s)<textarea name="document" id="scene-doc"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	if code != 200 || m == nil || !strings.Contains(m[1], "sceneId: web-roles-scene") {
		t.Fatalf("draft: %d %s", code, excerpt(body))
	}
	doc := htmlUnescape(m[1])
	var chk sceneCheckResult
	code, body, _ = post(t, eve, base+"/ui/scenes/check", url.Values{"csrf": {etok}, "live": {"1"}, "model": {f.demo.ModelID}, "document": {doc + "\nbogus: 1\n"}})
	if err := json.Unmarshal([]byte(body), &chk); err != nil || code != 200 || chk.OK || len(chk.Problems) == 0 || !strings.Contains(body, "bogus") {
		t.Errorf("check of a broken file: %d %s", code, body)
	}
	code, body, _ = post(t, eve, base+"/ui/scenes/check", url.Values{"csrf": {etok}, "live": {"1"}, "model": {f.demo.ModelID}, "document": {doc}})
	if err := json.Unmarshal([]byte(body), &chk); err != nil || code != 200 || !chk.OK {
		t.Errorf("check of the draft: %d %s", code, body)
	}
	code, body, h := post(t, eve, base+"/ui/scenes", url.Values{"csrf": {etok}, "document": {doc}})
	loc := h.Get("Location")
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/scenes/web-roles-scene/") {
		t.Fatalf("save: %d %s %s", code, loc, excerpt(body))
	}
	scenePath := strings.Split(loc, "?")[0]
	code, body = get2(t, eve, base+scenePath)
	if code != 200 || !strings.Contains(body, `id="freeze-note"`) || strings.Contains(body, `id="freeze-form"`) || !strings.Contains(body, `id="snapshot-form"`) {
		t.Errorf("the engineer's scene page: %d %s", code, excerpt(body))
	}
	code, body, _ = post(t, eve, base+scenePath+"/freeze", url.Values{"csrf": {etok}, "expectHash": {"00"}})
	if code != http.StatusForbidden || !strings.Contains(body, `id="scene-actions"`) || !strings.Contains(body, "form-error") || !strings.Contains(body, "eve has role engineer") {
		t.Errorf("the engineer's freeze: %d %s", code, excerpt(body))
	}
	if code, body = get2(t, alice, base+scenePath); !strings.Contains(body, `id="freeze-form"`) {
		t.Errorf("the approver's scene page has no freeze form: %d %s", code, excerpt(body))
	}

	id := f.issueCert(t)
	for _, do := range []string{"approve", "execute"} {
		code, body = get2(t, bot, base+"/ui/certificates/"+id+"/confirm?do="+do)
		if code != 200 || !strings.Contains(body, `id="confirm-refused"`) || strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "bot has role agent") {
			t.Errorf("the agent's %s confirmation: %d %s", do, code, excerpt(body))
		}
		code, body, _ = post(t, bot, base+"/ui/certificates/"+id+"/"+do, url.Values{"csrf": {btok}})
		if code != http.StatusForbidden || !strings.Contains(body, "AML_FORBIDDEN") || !strings.Contains(body, "agent") {
			t.Errorf("the agent's %s: %d %s", do, code, excerpt(body))
		}
	}
	if st := f.certStatus(t, id); st != "ISSUED" {
		t.Errorf("certificate %s is %s after the agent's refused posts", id, st)
	}
	code, body = get2(t, alice, base+"/ui/certificates/"+id+"/confirm?do=approve")
	if code != 200 || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, `class="targets cert-targets"`) || !strings.Contains(body, `class="evidence"`) {
		t.Errorf("the approver's confirmation: %d %s", code, excerpt(body))
	}
	if code, body = get2(t, eve, base+"/ui/batch?line=line-injection-01"); code != 200 || !strings.Contains(body, `id="recipe-form"`) || !strings.Contains(body, `id="events-form"`) {
		t.Errorf("the batch records page: %d %s", code, excerpt(body))
	}
	code, body = get2(t, alice, base+"/ui/certificates")
	if code != 200 || !strings.Contains(body, `data-review="`+id+`"`) {
		t.Errorf("the inbox row's review: %d %s", code, excerpt(body))
	}
}

// discard runs a and drops its value.
func discard[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&quot;", `"`, "&amp;", "&").Replace(s)
}

// stepClock is the served application's clock, moved by the test as the
// plant's line runs on (TestOwnLine's clocks).
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// longBrowser is browser with a longer bound: the whole workflow trains
// two models.
func longBrowser(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1366, 768),
		chromedp.Flag("user-data-dir", t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// TestBrowserWholeOwnLineWorkflow is TestOwnLine (cmd/aml) done only
// through the browser at 1366×768, by three people: the engineer eve
// uploads the plant's CSV exports (local times, ';', decimal commas),
// applies its line file, records its batch records, builds a dataset,
// trains two models, compares them on a run and promotes one; drafts a
// scene from it, breaks and mends it under the live check and saves it.
// The approver alice freezes it and lets it govern the line's writes.
// Eve snapshots the live run, tries a move with the sliders, optimises
// and requests a certificate; the agent bot is refused on approve and
// execute; alice approves and executes it ten minutes later (after
// re-validation) and sees the write read back. A screenshot per step goes
// to the artifacts folder. The served application's clock is the test's
// (TestOwnLine's clocks).
func TestBrowserWholeOwnLineWorkflow(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	ex, err := sim.WritePlantExports(dir, sim.PlantConfig{Seed: 3, LiveMinutes: 12})
	if err != nil {
		t.Fatal(err)
	}
	tMade := ex.StartsUTC[len(ex.StartsUTC)-1].Add(4 * time.Hour)
	t0 := ex.LiveEnd[0].Add(5 * time.Second)
	clk := &stepClock{t: tMade}
	a := app.New(f.deps, app.Options{Now: clk.Now})
	srv := httptest.NewServer(api.New(f.deps, api.Options{UI: New(f.deps, Options{App: a, Now: clk.Now}), App: a, RatePerSec: -1}))
	defer srv.Close()
	base := srv.URL

	ctx := longBrowser(t, 12*time.Minute)
	run(t, ctx, "viewport", chromedp.EmulateViewport(1366, 768))
	step := 0
	shot := func(name string) {
		t.Helper()
		step++
		screenshot(t, ctx, fmt.Sprintf("whole-flow-%02d-%s", step, name))
	}
	fits := func(what string) {
		t.Helper()
		over := value(t, ctx, what+": overflow", chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
		if over > 0 {
			t.Errorf("%s: the page is %d px wider than the 1366 px viewport", what, over)
		}
	}
	// until waits for the element sel, or fails at once with what the
	// page says when it shows an error instead.
	until := func(what, sel string) chromedp.Action[chromedp.Void] {
		return func(c context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			js := fmt.Sprintf(`(() => { if (document.querySelector(%q)) return "ok"; const e = document.querySelector(".form-error, #error"); return e ? e.innerText : ""; })()`, sel)
			deadline := time.Now().Add(5 * time.Minute)
			for {
				got, err := chromedp.Evaluate[string](js)(c, tg)
				if err == nil && got == "ok" {
					return chromedp.Void{}, nil
				}
				if err == nil && got != "" {
					return chromedp.Void{}, fmt.Errorf("%s: the page shows: %s", what, got)
				}
				if time.Now().After(deadline) {
					body, _ := chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`)(c, tg)
					return chromedp.Void{}, fmt.Errorf("%s: no %s after 5 min; the page: %s", what, sel, body)
				}
				time.Sleep(300 * time.Millisecond)
			}
		}
	}
	loginAs := func(user, target string) {
		t.Helper()
		run(t, ctx, "log in as "+user,
			chromedp.Navigate(base+target),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), f.tokens[user]),
			chromedp.Submit(chromedp.ID("login")),
			chromedp.WaitVisible(chromedp.ID("who")))
	}
	logout := func() {
		t.Helper()
		run(t, ctx, "log out", chromedp.Click(chromedp.CSS("header form.who button")), chromedp.WaitVisible(chromedp.ID("token")))
	}
	upload := func(file, runID string) {
		t.Helper()
		run(t, ctx, "upload "+filepath.Base(file),
			chromedp.Navigate(base+"/ui/ingest"),
			chromedp.WaitVisible(chromedp.ID("csv-form")),
			chromedp.SetValue(chromedp.ID("csv-line"), "tank-line"),
			chromedp.SetValue(chromedp.ID("csv-product"), "tank"),
			chromedp.SetValue(chromedp.ID("csv-recipe"), "tank-level"),
			chromedp.SetValue(chromedp.ID("csv-run"), runID),
			chromedp.SetValue(chromedp.CSS(`#csv-form input[name=tz]`), "Europe/Berlin"),
			chromedp.SetValue(chromedp.CSS(`#csv-form select[name=delimiter]`), ";"),
			discard(chromedp.Evaluate[bool](`document.querySelector('#csv-form input[name=decimalComma]').checked = true`)),
			chromedp.SetUploadFiles(chromedp.ID("csv-file"), []string{file}),
			chromedp.Click(chromedp.ID("csv-submit")),
			until("ingest-report", "#ingest-report"))
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// poll waits for the JS condition js, through navigations (an
	// evaluation in a page being left is tried again).
	poll := func(what, js string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
				t.Fatalf("%s: %s never held (%v); the page: %s", what, js, err, body)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	// flash waits for the page's notice to say want (the page a form
	// was posted from may have had a notice of its own).
	flash := func(what, want string) {
		t.Helper()
		poll(what, fmt.Sprintf(`(() => { const e = document.getElementById("flash"); return !!e && e.textContent.includes(%q); })()`, want))
	}

	// 1. The engineer uploads the history runs (run id = file name).
	loginAs("eve", "/ui/ingest")
	for _, file := range ex.Runs {
		upload(file, strings.TrimSuffix(filepath.Base(file), ".csv"))
	}
	fits("ingest page")
	shot("upload")

	// 2. The line file: the setpoints are writable, with units and ranges.
	run(t, ctx, "line file",
		chromedp.SetValue(chromedp.ID("line-file"), read(ex.LineFile)),
		chromedp.Click(chromedp.ID("line-submit")),
		until("line-applied", "#line-applied"))
	if kind := value(t, ctx, "heater_sp kind", chromedp.Text(chromedp.CSS(`#line-applied tr[data-node="heater_sp"] .kind`))); kind != "dcw" {
		t.Errorf("heater_sp after the line file: kind %q", kind)
	}
	shot("line-file")

	// 3. The batch records: the recipe version and the runs' records.
	run(t, ctx, "batch records",
		chromedp.Click(chromedp.ID("batch-link")),
		until("recipe-form", "#recipe-form"),
		chromedp.SetValue(chromedp.ID("recipe-line"), "tank-line"),
		chromedp.SetValue(chromedp.ID("recipe-product"), "tank"),
		chromedp.SetValue(chromedp.ID("recipe-recipe"), "tank-level"),
		chromedp.SetValue(chromedp.ID("recipe-params"), read(ex.Recipe)),
		chromedp.Click(chromedp.ID("recipe-submit")),
		until("recipe-done", "#recipe-done"),
		chromedp.SetValue(chromedp.ID("events-line"), "tank-line"),
		chromedp.SetValue(chromedp.ID("events-text"), read(ex.Batch)),
		chromedp.Click(chromedp.ID("events-submit")),
		until("events-done", "#events-done"))
	shot("batch-records")

	// 4. The dataset (examples/own-line/spec.json) from the node catalog.
	run(t, ctx, "dataset form",
		chromedp.Navigate(base+"/ui/datasets/new?line=tank-line"),
		chromedp.WaitVisible(chromedp.ID("dataset-form")),
		chromedp.SetValue(chromedp.ID("role-heater_sp"), "control"),
		chromedp.SetValue(chromedp.ID("role-feed_sp"), "control"),
		chromedp.SetValue(chromedp.ID("role-level"), "target"),
		chromedp.SetValue(chromedp.ID("ds-beat"), "5s"),
		chromedp.SetValue(chromedp.ID("ds-history"), "24"),
		chromedp.SetValue(chromedp.ID("ds-horizon"), "12"),
		chromedp.SetValue(chromedp.CSS(`#dataset-form select[name=mode]`), "by_run"))
	poll("live check passes", `(() => { const e = document.getElementById("spec-check"); e.closest("form").dispatchEvent(new Event("change")); return e.dataset.ok === "true"; })()`)
	run(t, ctx, "build", chromedp.Click(chromedp.ID("ds-build")), until("dataset-built", "#dataset-built"))
	ds := value(t, ctx, "dataset id", chromedp.Text(chromedp.ID("built-link")))
	if d, err := f.store.GetDataset(t.Context(), ds); err != nil || !d.LineageVerified {
		t.Fatalf("dataset %s: lineage verified %v (%v)", ds, d.LineageVerified, err)
	}
	shot("dataset")

	// 5. Train two models from the trainers' schema forms.
	train := func(trainer string) string {
		t.Helper()
		run(t, ctx, "job form "+trainer,
			chromedp.Navigate(base+"/ui/jobs/new?datasetId="+ds+"&trainer="+trainer),
			chromedp.WaitVisible(chromedp.ID("job-form")),
			chromedp.Click(chromedp.ID("job-submit")),
			until("job submitted", "#flash"))
		loc := value(t, ctx, "job page", chromedp.Location())
		return waitJob(t, f, strings.TrimPrefix(strings.Split(loc, "?")[0], base+"/ui/jobs/"))
	}
	model := train("linear_state_space@1")
	arx := train("one_step@1")
	shot("trained")

	// 6. Compare the two on a run, then promote the first to shadow.
	run(t, ctx, "compare",
		chromedp.Navigate(base+"/ui/models?dataset="+ds),
		chromedp.WaitVisible(chromedp.ID("compare-form")),
		chromedp.Click(chromedp.CSS(`input[name=model][value="`+model+`"]`)),
		chromedp.Click(chromedp.CSS(`input[name=model][value="`+arx+`"]`)),
		chromedp.Submit(chromedp.ID("compare-form")),
		until("compare", "#compare"))
	if fits := value(t, ctx, "fit cells", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#compare tbody tr td.fit")].map(td => td.textContent)`)); len(fits) < 2 {
		t.Errorf("compare: fit cells %v", fits)
	}
	shot("compare")
	run(t, ctx, "promote",
		chromedp.Navigate(base+"/ui/models/"+model),
		until("stage-card", "#stage-card"),
		chromedp.SetValue(chromedp.ID("promote-to"), "shadow"),
		chromedp.SendKeys(chromedp.CSS(`#promote-form input[name=reason]`), "own line through the browser"),
		chromedp.Click(chromedp.ID("promote")))
	flash("promoted", "shadow")
	shot("promoted")

	// 7. Draft a scene from the model; the live check lists a finding
	// of a broken edit, then passes; save it as a draft.
	run(t, ctx, "draft",
		chromedp.Navigate(base+"/ui/scenes/new?model="+model),
		chromedp.WaitVisible(chromedp.ID("draft-form")),
		chromedp.SetValue(chromedp.ID("draft-id"), "tank"),
		chromedp.Click(chromedp.ID("draft-submit")),
		until("the drafted file", "#scene-doc:not(:empty)"))
	poll("the draft checks", `document.getElementById("scene-check").dataset.ok === "true"`)
	value(t, ctx, "break it", chromedp.Evaluate[bool](`(() => { const d = document.getElementById("scene-doc"); window.amlDoc = d.value; d.value = d.value + "\nbogus: 1\n"; d.dispatchEvent(new Event("input")); return true; })()`))
	poll("a finding", `document.getElementById("scene-check").dataset.ok === "false" && document.querySelectorAll("#scene-problems li").length > 0`)
	fits("scene editor")
	shot("scene-finding")
	value(t, ctx, "mend it", chromedp.Evaluate[bool](`(() => { const d = document.getElementById("scene-doc"); d.value = window.amlDoc; d.dispatchEvent(new Event("input")); return true; })()`))
	poll("checks again", `document.getElementById("scene-check").dataset.ok === "true"`)
	run(t, ctx, "save", chromedp.Click(chromedp.ID("scene-save")))
	flash("saved", "saved as a draft")
	scenePath := strings.TrimPrefix(strings.Split(value(t, ctx, "scene page", chromedp.Location()), "?")[0], base)
	if n := value(t, ctx, "freeze note", chromedp.Evaluate[int](`document.querySelectorAll("#freeze-note").length - document.querySelectorAll("#freeze-form").length`)); n != 1 {
		t.Errorf("the engineer's draft page: a freeze button or no note (%d)", n)
	}
	shot("scene-draft")

	// 8. The approver freezes it and lets it govern the line's writes.
	logout()
	loginAs("alice", scenePath)
	run(t, ctx, "freeze", chromedp.Click(chromedp.ID("freeze")))
	flash("frozen", "frozen")
	run(t, ctx, "channel", chromedp.Click(chromedp.ID("channel-set")))
	flash("channel", "governs the writes of line tank-line")
	shot("scene-frozen")
	logout()

	// 9. The live run: a snapshot at t0, a trial with the sliders, the
	// optimiser, a certificate request.
	clk.set(t0)
	loginAs("eve", "/ui/ingest")
	upload(ex.Live[0], "live")
	run(t, ctx, "snapshot",
		chromedp.Navigate(base+scenePath),
		chromedp.WaitVisible(chromedp.ID("snapshot-form")),
		chromedp.SetValue(chromedp.ID("snap-model"), model),
		chromedp.SetValue(chromedp.ID("snap-run"), "live"),
		chromedp.Click(chromedp.ID("snapshot")),
		until("trial-form", "#trial-form"))
	snapURL := value(t, ctx, "snapshot page", chromedp.Location())
	fits("snapshot page")
	shot("snapshot")
	value(t, ctx, "move the heater slider", chromedp.Evaluate[bool](`(() => { const s = document.querySelector('input.move-slider[data-for="move-heater_sp"]');
		s.value = String(+document.getElementById("move-heater_sp").value + 0.5); s.dispatchEvent(new Event("input")); return true; })()`))
	run(t, ctx, "trial", chromedp.Click(chromedp.ID("trial-run")), until("trial plots", "#trial-plots svg"))
	if tr := charts(t, ctx, "#trial-plots svg.chart"); tr.Charts < 1 || tr.Series < 2 {
		t.Errorf("trial tube: %+v", tr)
	}
	poll("the tube redrawn", `document.querySelectorAll('#trial-tube[data-state="ready"] .tube-chart canvas').length > 0`)
	shot("trial")
	run(t, ctx, "optimise", chromedp.Navigate(snapURL), until("optimize-form", "#optimize-form"),
		chromedp.SetValue(chromedp.ID("opt-mode"), "precise_search"), chromedp.Click(chromedp.ID("optimize")), until("opt-verdict", "#opt-verdict"))
	if v := value(t, ctx, "verdict", chromedp.Text(chromedp.ID("opt-verdict"))); !strings.HasPrefix(v, "Best passing move") {
		t.Fatalf("optimise: %q", v)
	}
	if tv := value(t, ctx, "target", chromedp.Text(chromedp.CSS(`#opt-targets tr[data-target="level"] .target-value`))); !strings.HasSuffix(tv, " cm") {
		t.Errorf("the target in its unit: %q", tv)
	}
	fits("optimisation")
	shot("optimised")
	run(t, ctx, "request", chromedp.Click(chromedp.ID("cert-request")))
	flash("requested", "requested")
	cert := strings.TrimPrefix(strings.Split(value(t, ctx, "certificate page", chromedp.Location()), "?")[0], base+"/ui/certificates/")
	shot("requested")
	// Ten minutes later the line has run on.
	clk.set(t0.Add(10 * time.Minute))
	upload(ex.Live[1], "live")
	logout()

	// 10. The agent is refused on approve, in the page and when it posts.
	forge := func(do string) {
		t.Helper()
		js := fmt.Sprintf(`(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/ui/certificates/%s/%s";
			const i = document.createElement("input"); i.type = "hidden"; i.name = "csrf"; i.value = document.querySelector('meta[name="csrf"]').content;
			f.appendChild(i); document.body.appendChild(f); f.submit(); return true; })()`, cert, do)
		value(t, ctx, "forged "+do, chromedp.Evaluate[bool](js))
		run(t, ctx, "refusal of "+do, chromedp.WaitVisible(chromedp.ID("error")))
		if code := value(t, ctx, "code", chromedp.AttributeValue(chromedp.ID("error"), "data-code")).Value; code != "AML_FORBIDDEN" {
			t.Errorf("the agent's %s: %s", do, code)
		}
	}
	agent := func(do string) {
		t.Helper()
		loginAs("bot", "/ui/certificates/"+cert+"/confirm?do="+do)
		if n := value(t, ctx, "buttons", chromedp.Evaluate[int](`document.querySelectorAll("#confirm").length`)); n != 0 {
			t.Errorf("the agent sees a %s button", do)
		}
		if msg := value(t, ctx, "refusal", chromedp.Text(chromedp.ID("confirm-refused"))); !strings.Contains(msg, "bot has role agent") {
			t.Errorf("the agent's %s page: %q", do, msg)
		}
		shot("agent-" + do + "-refused")
		forge(do)
		logout()
	}
	agent("approve")
	if st := f.certStatus(t, cert); st != "ISSUED" {
		t.Fatalf("certificate %s is %s after the agent's approval", cert, st)
	}

	// 11. The approver reviews it in the inbox and approves it.
	loginAs("alice", "/ui/certificates")
	row := fmt.Sprintf(`tr[data-review=%q]`, cert)
	run(t, ctx, "review", chromedp.WaitVisible(chromedp.CSS(row+" .cert-targets")))
	if band := value(t, ctx, "band", chromedp.Text(chromedp.CSS(row+` .cert-targets .band`))); !strings.HasSuffix(band, " cm") {
		t.Errorf("the band in its unit: %q", band)
	}
	fits("inbox")
	shot("inbox")
	run(t, ctx, "approve", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-cert=%q] a.approve`, cert))), until("confirm", "#confirm"))
	shot("approve-confirm")
	run(t, ctx, "confirm approval", chromedp.Click(chromedp.ID("confirm")))
	flash("approved", "approved")
	logout()
	agent("execute")
	if st := f.certStatus(t, cert); st != "APPROVED" {
		t.Fatalf("certificate %s is %s after the agent's execution", cert, st)
	}

	// 12. The approver executes it: re-validated from a fresh snapshot,
	// written and read back.
	loginAs("alice", "/ui/certificates/"+cert)
	run(t, ctx, "execute", chromedp.Click(chromedp.CSS("a.execute")), until("confirm", "#confirm"))
	shot("execute-confirm")
	run(t, ctx, "confirm execution", chromedp.Click(chromedp.ID("confirm")), until("exec-result", "#exec-result"))
	if res := value(t, ctx, "result", chromedp.Text(chromedp.ID("exec-result"))); !strings.HasPrefix(res, "Written and read back") {
		t.Errorf("execute: %q", res)
	}
	if rv := value(t, ctx, "revalidation", chromedp.Text(chromedp.ID("revalidation"))); !strings.HasPrefix(rv, "passed") {
		t.Errorf("re-validation: %q", rv)
	}
	nodes := value(t, ctx, "writes", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#readback tbody tr[data-node]")].filter(r => r.querySelector(".verified").textContent.startsWith("yes")).map(r => r.dataset.node)`))
	if len(nodes) == 0 {
		t.Errorf("no verified readback")
	}
	for _, n := range nodes {
		if n != "heater_sp" && n != "feed_sp" {
			t.Errorf("write to %s", n)
		}
	}
	if st := f.certStatus(t, cert); st != "EXECUTED" {
		t.Errorf("certificate %s is %s after the execution", cert, st)
	}
	fits("execution")
	shot("executed")
}
