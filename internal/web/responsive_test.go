package web

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// everyPage is every GET page of the UI on the fixture (the demo's line,
// run, dataset, job, model, scene, trial and certificate), as a viewer
// reads it.
func everyPage(t *testing.T, f *fixture) []string {
	t.Helper()
	runs := demoRuns(t, f)
	_, list, _ := get(t, f.client(t, "victor"), f.srv.URL+"/ui/scenes")
	m := regexp.MustCompile(`href="(/ui/scenes/[^"]+/[^"]+)"`).FindStringSubmatch(list)
	if m == nil {
		t.Fatal("no scene link")
	}
	const line = "line-injection-01"
	return []string{
		"/ui/", "/ui/lines/" + line, "/ui/lines/" + line + "/trend?node=part_weight&node=hold_pressure",
		"/ui/runs/" + runs[0].ID, "/ui/live?line=" + line, "/ui/operator", "/ui/operator/" + line,
		"/ui/ingest", "/ui/datasets", "/ui/datasets/" + f.demo.DatasetID, "/ui/datasets/new?line=" + line,
		"/ui/jobs", "/ui/jobs/" + f.demo.JobID, "/ui/jobs/new?datasetId=" + f.demo.DatasetID,
		"/ui/models", "/ui/models?dataset=" + f.demo.DatasetID, "/ui/models/" + f.demo.ModelID,
		"/ui/scenes", m[1], "/ui/trials", "/ui/trials/" + f.demo.TrialID,
		"/ui/certificates", "/ui/certificates/" + f.demo.CertificateID, "/ui/audit",
		"/ui/benefit", "/ui/benefit/" + fixtureStudy(t, f),
	}
}

// externalRef finds src, href, action and CSS url() references that leave
// the server: an absolute http(s) or protocol-relative address (the SVG
// namespace is a name, not a fetch).
var externalRef = regexp.MustCompile(`(?i)(?:\b(?:src|href|action|srcset|poster|data)\s*=\s*["']?|url\(\s*["']?|@import\s+["'])\s*((?:https?:)?//[^"'\s)>]+)`)

// TestNoExternalResources: no page, script or stylesheet of the UI
// refers to another host (every asset is embedded and served by AML).
func TestNoExternalResources(t *testing.T) {
	f := getFixture(t)
	c := f.client(t, "victor")
	check := func(what, body string) {
		for _, m := range externalRef.FindAllStringSubmatch(body, -1) {
			u, err := url.Parse(m[1])
			if err != nil || u.Host != strings.TrimPrefix(f.srv.URL, "http://") {
				t.Errorf("%s refers to %s", what, m[1])
			}
		}
	}
	pages := append(everyPage(t, f), "/ui/login")
	static := map[string]bool{}
	for _, p := range pages {
		code, body, _ := get(t, c, f.srv.URL+p)
		if code != http.StatusOK && code != http.StatusSeeOther {
			t.Errorf("%s: status %d", p, code)
			continue
		}
		check(p, body)
		for _, m := range regexp.MustCompile(`(?:src|href)="(/ui/static/[^"]+)"`).FindAllStringSubmatch(body, -1) {
			static[m[1]] = true
		}
	}
	if len(static) < 4 {
		t.Fatalf("only %d static assets referenced", len(static))
	}
	for s := range static {
		code, body, _ := get(t, c, f.srv.URL+s)
		if code != http.StatusOK {
			t.Errorf("%s: status %d", s, code)
		}
		check(s, body)
	}
	// The detector finds what it is for.
	for _, bad := range []string{`<script src="https://cdn.example/x.js">`, `<link href="//fonts.example/css">`, `background: url(http://img.example/a.png)`, `@import "https://x.example/a.css"`} {
		if !externalRef.MatchString(bad) {
			t.Errorf("detector misses %s", bad)
		}
	}
	if externalRef.MatchString(`<svg xmlns="http://www.w3.org/2000/svg">`) || externalRef.MatchString(`<a href="/ui/models">`) {
		t.Error("detector flags a same-origin reference or the SVG namespace")
	}
}

// TestBrowserEveryPageFits opens every page at 1366×768 (a laptop) and
// 768×1024 (a tablet held upright): the page never scrolls sideways (wide
// tables scroll inside themselves), every control is reachable with the
// keyboard (none taken out of the tab order, and Tab moves through
// distinct controls), and the browser loaded nothing from another origin;
// the operator overview refreshes its body by itself.
func TestBrowserEveryPageFits(t *testing.T) {
	f := getFixture(t)
	pages := everyPage(t, f)
	ctx := browser(t)
	login(t, ctx, f, "victor", "/ui/")
	type check struct {
		Over, Controls, Unreachable, Foreign int
		Wide                                 []string
		Unreach                              []string
	}
	const probe = `(() => {
		const doc = document.documentElement;
		const ctl = [...document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, [tabindex]")]
			.filter(e => e.getClientRects().length > 0);
		const unreach = ctl.filter(e => e.tabIndex < 0 || e.disabled && e.tagName !== "BUTTON" && e.tagName !== "INPUT");
		const wide = [...document.querySelectorAll("main *")].filter(e => e.getBoundingClientRect().right > doc.clientWidth + 1)
			.filter(e => !e.closest(".table-wrap, .plot, pre, .ichart-plot, .uplot"))
			.slice(0, 5).map(e => e.tagName + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.split(" ")[0] : ""));
		const foreign = performance.getEntriesByType("resource").filter(r => new URL(r.name).origin !== location.origin).length;
		return {Over: doc.scrollWidth - doc.clientWidth, Controls: ctl.length, Unreachable: unreach.length, Foreign: foreign,
			Wide: wide, Unreach: unreach.slice(0, 5).map(e => e.outerHTML.slice(0, 80))};
	})()`
	for _, size := range []struct{ w, h int64 }{{1366, 768}, {768, 1024}} {
		run(t, ctx, "viewport", chromedp.EmulateViewport(size.w, size.h))
		for _, p := range pages {
			what := fmt.Sprintf("%s at %dx%d", p, size.w, size.h)
			run(t, ctx, what, chromedp.Navigate(f.srv.URL+p), chromedp.WaitReady(chromedp.CSS("main")))
			// Charts and live bodies settle (scripts draw after load).
			time.Sleep(300 * time.Millisecond)
			c := value(t, ctx, what, chromedp.Evaluate[check](probe))
			if c.Over > 0 {
				t.Errorf("%s: the page is %d px wider than the viewport (%v)", what, c.Over, c.Wide)
			}
			if c.Unreachable > 0 {
				t.Errorf("%s: %d controls out of the tab order: %v", what, c.Unreachable, c.Unreach)
			}
			if c.Foreign > 0 {
				t.Errorf("%s: %d resources from another origin", what, c.Foreign)
			}
			if c.Controls == 0 {
				t.Errorf("%s: no controls at all", what)
			}
			// Tab walks distinct controls from the top of the page.
			n := min(c.Controls, 8)
			seen := map[string]bool{}
			value(t, ctx, what+": blur", chromedp.Evaluate[bool](`(() => { if (document.activeElement) document.activeElement.blur(); return true; })()`))
			for i := 0; i < n; i++ {
				run(t, ctx, what+": tab", chromedp.KeyEvent("\t"))
				id := value(t, ctx, what+": focused", chromedp.Evaluate[string](`(() => { const e = document.activeElement; if (!e || e === document.body) return ""; const all = [...document.querySelectorAll("*")]; return e.tagName + ":" + all.indexOf(e); })()`))
				if id != "" {
					seen[id] = true
				}
			}
			if len(seen) < n {
				t.Errorf("%s: %d presses of Tab focused %d distinct controls", what, n, len(seen))
			}
		}
		run(t, ctx, "operator page", chromedp.Navigate(f.srv.URL+"/ui/operator/line-injection-01"), chromedp.WaitVisible(chromedp.ID("operator-nodes")))
		// The overview reloads its body from line.overview by itself
		// every 2 s; the wait is generous for a loaded machine (one
		// refresh took over 15 s there while a whole package ran).
		value(t, ctx, "operator refresh", chromedp.Poll[bool](`+(document.getElementById("live-refresh").getAttribute("data-refreshes") || 0) >= 1 && !!document.getElementById("operator-nodes")`,
			chromedp.WithPollingTimeout(45*time.Second)))
		screenshot(t, ctx, fmt.Sprintf("operator-%dx%d", size.w, size.h))
	}
}
