package web

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/events"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's headless Chromium (installed by
// .ci/run) against the served app: log in, open a model card and a trial
// view and check that the plots drew data, approve a certificate as an
// approver, see an agent refused, and watch a job's progress arrive over
// the event stream. Screenshots are written to testdata/artifacts (git
// ignores it; AML_UI_ARTIFACTS overrides the folder) and their paths
// logged.

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	// In CI (.ci/run sets CI) a missing browser is a failure: the browser
	// tests must run there, not skip silently.
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on PATH in CI: .ci/run must install Debian's chromium")
	}
	t.Skip("no Chromium on PATH: the browser tests need Debian's chromium (apt-get install -y chromium; .ci/run does)")
	return ""
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AML_UI_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// browser is one headless Chromium (its own cookie jar) for one test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("user-data-dir", t.TempDir()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil { // start the browser
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// run runs steps, failing the test with the page's address on an error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, loc, err)
	}
}

// value runs one action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, loc, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(artifactsDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// login fills in the login form (reached by opening target without a
// session) and lands on target.
func login(t *testing.T, ctx context.Context, f *fixture, user, target string) {
	t.Helper()
	run(t, ctx, "log in as "+user,
		chromedp.Navigate(f.srv.URL+target),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), f.tokens[user]),
		chromedp.Submit(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("who")),
	)
	loc := value(t, ctx, "location", chromedp.Location())
	if !strings.HasSuffix(loc, target) {
		t.Fatalf("after login at %s, want %s", loc, target)
	}
}

// chartStats counts what the charts under sel drew.
type chartStats struct {
	Charts, Series, Bands, Limits, MaxPoints, MinPoints int
}

func charts(t *testing.T, ctx context.Context, sel string) chartStats {
	t.Helper()
	js := fmt.Sprintf(`(() => {
		const svgs = [...document.querySelectorAll(%q)];
		const pts = svgs.map(s => +s.getAttribute("data-points"));
		const q = c => svgs.reduce((n, s) => n + s.querySelectorAll(c).length, 0);
		return {Charts: svgs.length, Series: q("path.series"), Bands: q("path.band"), Limits: q("line.limit"),
			MaxPoints: pts.length ? Math.max(...pts) : 0, MinPoints: pts.length ? Math.min(...pts) : 0};
	})()`, sel)
	return value(t, ctx, "count chart elements", chromedp.Evaluate[chartStats](js))
}

func TestBrowserModelCardAndTrial(t *testing.T) {
	f := getFixture(t)
	ctx := browser(t)
	login(t, ctx, f, "alice", "/ui/models/"+f.demo.ModelID)

	run(t, ctx, "model card plots", chromedp.WaitVisible(chromedp.CSS(".pva-plot svg")))
	pva := charts(t, ctx, ".pva-plot svg.chart")
	if pva.Charts < 1 || pva.MinPoints < 100 || pva.Series < 2 || pva.Bands < 1 {
		t.Errorf("predicted vs actual plot: %+v (want ≥1 chart, actual and predicted lines, the conformal band, ≥100 points)", pva)
	}
	legend := value(t, ctx, "legend", chromedp.TextContent(chromedp.CSS(".pva-plot svg .legend")))
	for _, s := range []string{"actual", "predicted", "conformal band"} {
		if !strings.Contains(legend, s) {
			t.Errorf("legend %q lacks %q", legend, s)
		}
	}
	screenshot(t, ctx, "model-card")

	// The interactive tube (uPlot) replaces the server's SVG plots, which
	// stay in the page, hidden, for a browser without scripts.
	run(t, ctx, "trial view", chromedp.Navigate(f.srv.URL+"/ui/trials/"+f.demo.TrialID), chromedp.WaitReady(chromedp.CSS("#trial-plots svg")),
		chromedp.WaitVisible(chromedp.CSS(`#trial-tube[data-state="ready"] canvas`)))
	if n := value(t, ctx, "interactive charts", chromedp.Evaluate[int](`document.querySelectorAll("#trial-tube .tube-chart canvas").length`)); n < 3 {
		t.Errorf("%d interactive trial charts", n)
	}
	tr := charts(t, ctx, "#trial-plots svg.chart")
	if tr.Charts < 3 || tr.MinPoints < 1 || tr.Bands < 1 || tr.Limits < 1 || tr.Series < 2*tr.Charts {
		t.Errorf("trial plots: %+v (want candidate and baseline per chart, a tube, a limit line)", tr)
	}
	verdict := value(t, ctx, "verdict", chromedp.Text(chromedp.ID("verdict")))
	note := value(t, ctx, "note", chromedp.Text(chromedp.ID("recompute-note")))
	if !strings.Contains(verdict, "PASSED") || !strings.Contains(note, "hashes to the stored record") {
		t.Errorf("verdict %q, note %q", verdict, note)
	}
	screenshot(t, ctx, "trial-view")
}

func TestBrowserCertificateApproval(t *testing.T) {
	f := getFixture(t)
	ctx := browser(t)
	id := f.issueCert(t)
	login(t, ctx, f, "alice", "/ui/certificates")
	row := fmt.Sprintf(`tr[data-cert=%q]`, id)
	screenshot(t, ctx, "certificate-inbox")
	// Approve opens the confirmation page (what is decided, and one
	// button that posts it).
	run(t, ctx, "approve",
		chromedp.WaitVisible(chromedp.CSS(row+" a.approve")),
		chromedp.Click(chromedp.CSS(row+" a.approve")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	)
	screenshot(t, ctx, "certificate-confirm")
	run(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	flash := value(t, ctx, "flash", chromedp.Text(chromedp.ID("flash")))
	if !strings.Contains(flash, "approved") {
		t.Errorf("flash %q", flash)
	}
	if got := f.certStatus(t, id); got != "APPROVED" {
		t.Fatalf("certificate %s is %s after the approver confirmed approve", id, got)
	}
	status := value(t, ctx, "status on its page", chromedp.Text(chromedp.CSS("#cert-status .status")))
	if status != "APPROVED" {
		t.Errorf("the certificate page shows %q", status)
	}
	screenshot(t, ctx, "certificate-approved")

	// Log out; the agent sees no buttons and a forged approval is refused.
	run(t, ctx, "log out", chromedp.Click(chromedp.CSS("header form.who button")), chromedp.WaitVisible(chromedp.ID("token")))
	id2 := f.issueCert(t)
	login(t, ctx, f, "bot", "/ui/certificates/"+id2)
	buttons := value(t, ctx, "decision buttons", chromedp.Evaluate[int](`document.querySelectorAll("a.approve, a.revoke, a.execute, #confirm").length`))
	note := value(t, ctx, "role note", chromedp.Text(chromedp.ID("role-note")))
	if buttons != 0 || !strings.Contains(note, "role (agent) cannot approve") {
		t.Errorf("agent sees %d decision buttons, note %q", buttons, note)
	}
	// The agent posts the approval anyway (a form built in the page with
	// the session's own CSRF token): the server refuses it.
	forge := fmt.Sprintf(`(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/ui/certificates/%s/approve";
		const i = document.createElement("input"); i.type = "hidden"; i.name = "csrf"; i.value = document.querySelector('meta[name="csrf"]').content;
		f.appendChild(i); document.body.appendChild(f); f.submit(); return true; })()`, id2)
	value(t, ctx, "forged approval", chromedp.Evaluate[bool](forge))
	run(t, ctx, "refusal page", chromedp.WaitVisible(chromedp.ID("error")))
	msg := value(t, ctx, "refusal message", chromedp.Text(chromedp.CSS("#error .error-message")))
	code := value(t, ctx, "refusal code", chromedp.AttributeValue(chromedp.ID("error"), "data-code")).Value
	if code != "AML_FORBIDDEN" || !strings.Contains(msg, "approver") || !strings.Contains(msg, "bot") {
		t.Errorf("agent approval: code %q message %q", code, msg)
	}
	if got := f.certStatus(t, id2); got != "ISSUED" {
		t.Errorf("certificate %s is %s after the agent's refused approval", id2, got)
	}
	screenshot(t, ctx, "certificate-refused-agent")
}

func TestBrowserLiveJobProgress(t *testing.T) {
	f := getFixture(t)
	ctx := browser(t)
	login(t, ctx, f, "eve", "/ui/jobs")
	row := fmt.Sprintf(`tr[data-job=%q]`, f.demo.JobID)
	run(t, ctx, "jobs page", chromedp.WaitVisible(chromedp.CSS(row)))
	value(t, ctx, "event stream connected", chromedp.Poll[bool](`document.getElementById("live-status").textContent.includes("connected.")`, chromedp.WithPollingTimeout(20*time.Second)))
	// A progress event for the job (what a worker publishes) moves the bar.
	f.deps.Bus.Publish(events.Event{Kind: events.JobProgress, Line: "line-injection-01", ID: f.demo.JobID, Data: map[string]any{"progress": 0.42, "stage": "training"}})
	value(t, ctx, "progress update", chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('%s .pct').textContent === "42%%"`, row), chromedp.WithPollingTimeout(20*time.Second)))
	pct := value(t, ctx, "percent", chromedp.Text(chromedp.CSS(row+" .pct")))
	stage := value(t, ctx, "stage", chromedp.Text(chromedp.CSS(row+" .stage")))
	if pct != "42%" || stage != "training" {
		t.Errorf("after the event: %q %q", pct, stage)
	}
	screenshot(t, ctx, "jobs-live")
}

// The interactive trend chart: uPlot draws two signals over two runs,
// each signal with its own axis, and the legend shows the values under
// the cursor with their units; the keyboard zooms and resets.
func TestBrowserInteractiveTrend(t *testing.T) {
	f := getFixture(t)
	runs := demoRuns(t, f)
	ctx := browser(t)
	target := "/ui/lines/line-injection-01/trend?node=part_weight&node=hold_pressure&run=" + runs[0].ID + "&run=" + runs[1].ID
	login(t, ctx, f, "victor", target)
	state := value(t, ctx, "chart drawn", chromedp.Poll[string](`(() => {
		const s = document.querySelector("#trend-plot").getAttribute("data-state");
		return s === "loading" ? null : s;
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if state != "ready" {
		t.Fatalf("chart state %q: %s", state, value(t, ctx, "status", chromedp.Evaluate[string](`document.querySelector("#trend-plot .ichart-status").textContent`)))
	}
	type drawn struct {
		Series, Points, Canvases, Axes, Fallbacks int
		Labels                                    []string
	}
	d := value(t, ctx, "what the chart drew", chromedp.Evaluate[drawn](`(() => {
		const fig = document.querySelector("#trend-plot");
		return {Series: +fig.getAttribute("data-series"), Points: +fig.getAttribute("data-points"),
			Canvases: fig.querySelectorAll(".uplot canvas").length, Axes: fig.querySelectorAll(".u-axis").length,
			Fallbacks: fig.querySelectorAll(".ichart-fallback").length,
			Labels: [...fig.querySelectorAll(".u-legend .u-series .u-label")].map(e => e.textContent)};
	})()`))
	if d.Series != 4 || d.Points < 50 || d.Canvases < 1 || d.Axes != 3 || d.Fallbacks != 0 {
		t.Errorf("chart: %+v (want 4 series, an x axis and one axis per signal, the SVG fallback replaced)", d)
	}
	// Hover the middle of the plot: every series shows its value and unit.
	vals := value(t, ctx, "hover", chromedp.Poll[[]string](`(() => {
		const over = document.querySelector("#trend-plot .u-over");
		const r = over.getBoundingClientRect();
		over.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true}));
		const v = [...document.querySelectorAll("#trend-plot .u-legend .u-series .u-value")].map(e => e.textContent);
		return v.length && v.slice(1).every(s => /\d/.test(s)) ? v : null;
	})()`, chromedp.WithPollingTimeout(10*time.Second)))
	if len(vals) != 5 || !strings.HasSuffix(vals[0], " min") {
		t.Errorf("legend values %q: want the time since start and 4 values", vals)
	}
	units := 0
	for _, v := range vals[1:] {
		if strings.Contains(v, " ") { // "value unit"
			units++
		}
	}
	if units != 4 {
		t.Errorf("legend values %q: want each with its unit", vals)
	}
	screenshot(t, ctx, "trend-interactive")

	// The keyboard: focus the plot, zoom in, reset.
	full := value(t, ctx, "x range", chromedp.Evaluate[string](`document.querySelector("#trend-plot").getAttribute("data-x")`))
	run(t, ctx, "zoom in with +", chromedp.Focus(chromedp.CSS("#trend-plot .ichart-plot")), chromedp.KeyEvent("+"))
	zoomed := value(t, ctx, "x range", chromedp.Evaluate[string](`document.querySelector("#trend-plot").getAttribute("data-x")`))
	run(t, ctx, "reset with 0", chromedp.KeyEvent("0"))
	back := value(t, ctx, "x range", chromedp.Evaluate[string](`document.querySelector("#trend-plot").getAttribute("data-x")`))
	if full == "" || zoomed == full || back != full {
		t.Errorf("x range: full %q, zoomed %q, reset %q", full, zoomed, back)
	}
}

// The models table at 1366×768: no page-wide horizontal scrolling, the
// keyboard sorts a column (the headings are buttons), and two ticked
// models are compared on a test run of their dataset.
func TestBrowserModelsCompare1366(t *testing.T) {
	f := getFixture(t)
	second := oneStepModel(t, f)
	ctx := browser(t)
	run(t, ctx, "viewport", chromedp.EmulateViewport(1366, 768))
	login(t, ctx, f, "victor", "/ui/models?dataset="+f.demo.DatasetID)
	fits := func(what string) {
		t.Helper()
		over := value(t, ctx, what+": overflow", chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
		if over > 0 {
			t.Errorf("%s: the page is %d px wider than the 1366 px viewport", what, over)
		}
	}
	fits("models table")
	// Sort by test NRMSE with the keyboard, then again (descending).
	run(t, ctx, "sort by test NRMSE", chromedp.Focus(chromedp.CSS(`#models th:nth-child(8) button.sort`)), chromedp.KeyEvent("\r"))
	type sorted struct {
		Sort string
		Keys []string
	}
	read := `(() => ({Sort: document.querySelector("#models th:nth-child(8)").getAttribute("aria-sort") || "",
		Keys: [...document.querySelectorAll("#models tbody tr")].map(r => r.cells[7].getAttribute("data-v"))}))()`
	s := value(t, ctx, "sorted", chromedp.Evaluate[sorted](read))
	if s.Sort != "ascending" || len(s.Keys) < 2 {
		t.Fatalf("after one press: %+v", s)
	}
	for i := 1; i < len(s.Keys); i++ {
		if s.Keys[i] != "" && s.Keys[i-1] != "" && parseF(s.Keys[i]) < parseF(s.Keys[i-1]) {
			t.Errorf("not ascending: %v", s.Keys)
		}
	}
	run(t, ctx, "sort again", chromedp.KeyEvent("\r"))
	if s := value(t, ctx, "sorted", chromedp.Evaluate[sorted](read)); s.Sort != "descending" {
		t.Errorf("after two presses: %+v", s)
	}
	screenshot(t, ctx, "models-1366")

	// Tick the two models and compare them on the first test run.
	run(t, ctx, "compare",
		chromedp.Click(chromedp.CSS(`input[name=model][value="`+f.demo.ModelID+`"]`)),
		chromedp.Click(chromedp.CSS(`input[name=model][value="`+second+`"]`)),
		chromedp.Submit(chromedp.ID("compare-form")),
		chromedp.WaitVisible(chromedp.ID("compare")))
	rows := value(t, ctx, "compare rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#compare tbody tr td.fit")].map(td => td.textContent)`))
	if len(rows) < 2 {
		t.Errorf("fit cells %v", rows)
	}
	for _, r := range rows {
		if !strings.HasSuffix(r, "%") {
			t.Errorf("fit cell %q", r)
		}
	}
	fits("compare page")
	screenshot(t, ctx, "compare-1366")

	run(t, ctx, "audit page", chromedp.Navigate(f.srv.URL+"/ui/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	fits("audit page")
	run(t, ctx, "trend page", chromedp.Navigate(f.srv.URL+"/ui/lines/line-injection-01/trend?node=part_weight&align=time"), chromedp.WaitVisible(chromedp.CSS("#trend-plot")))
	value(t, ctx, "chart drawn", chromedp.Poll[bool](`document.querySelector("#trend-plot").getAttribute("data-state") === "ready"`, chromedp.WithPollingTimeout(20*time.Second)))
	fits("trend page")
	screenshot(t, ctx, "trend-absolute-1366")
}

func parseF(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
