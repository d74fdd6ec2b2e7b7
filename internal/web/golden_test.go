package web

import (
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// goldenBand: at each offset with two or more values, mean ± k·σ (sample
// standard deviation); offsets with fewer values are left out.
func TestGoldenBandMath(t *testing.T) {
	nan := math.NaN()
	b := goldenBand([][]float64{{1, 2, 3, nan}, {3, 2, nan, 7}, {2, 2}}, 2, 0.5)
	wantX := []float64{0, 0.5}
	if len(b.X) != 2 || b.X[0] != wantX[0] || b.X[1] != wantX[1] {
		t.Fatalf("x %v, want %v (offsets 2 and 3 have one value)", b.X, wantX)
	}
	// Offset 0: values 1, 3, 2: mean 2, sample σ 1.
	if b.Mean[0] != 2 || math.Abs(b.Lo[0]-0) > 1e-12 || math.Abs(b.Hi[0]-4) > 1e-12 || b.N[0] != 3 {
		t.Errorf("offset 0: mean %v lo %v hi %v n %v", b.Mean[0], b.Lo[0], b.Hi[0], b.N[0])
	}
	// Offset 1: all 2: no spread.
	if b.Mean[1] != 2 || b.Lo[1] != 2 || b.Hi[1] != 2 {
		t.Errorf("offset 1: %v %v %v", b.Mean[1], b.Lo[1], b.Hi[1])
	}
	if e := goldenBand(nil, 2, 1); len(e.X) != 0 || e.X == nil {
		t.Errorf("no runs: %+v", e)
	}
	for _, q := range []url.Values{{"golden": {"a"}}, {"golden": {"a", "b"}, "k": {"0"}}, {"golden": {"a", "b"}, "k": {"11"}}, {"golden": {"a", "b"}, "k": {"NaN"}}} {
		if _, _, err := goldenParams(q); err == nil {
			t.Errorf("%v accepted", q)
		}
	}
	if runs, k, err := goldenParams(url.Values{"golden": {"a", "b", "a"}}); err != nil || len(runs) != 2 || k != defaultGoldenK {
		t.Errorf("defaults: %v %v %v", runs, k, err)
	}
}

// TestGoldenBandData: the trend data with golden runs carries one band
// per node over the demo's runs, aligned at run start from offset 0, each
// offset's mean inside its band and over at least two runs; on the
// absolute axis a band is refused; in the browser the band is drawn
// (three extra series, filled) and the form keeps the choice.
func TestGoldenBandData(t *testing.T) {
	f := getFixture(t)
	runs := demoRuns(t, f)
	victor := f.client(t, "victor")
	g := []string{runs[1].ID, runs[2].ID, runs[3].ID}
	q := url.Values{"node": {"part_weight", "hold_pressure"}, "run": {runs[0].ID}, "align": {"start"}, "golden": g, "k": {"3"}}
	code, doc, body := getTrend(t, victor, f.srv.URL, q)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, excerpt(body))
	}
	if len(doc.Bands) != 2 {
		t.Fatalf("%d bands", len(doc.Bands))
	}
	for _, b := range doc.Bands {
		if b.K != 3 || len(b.X) < 10 || len(b.Mean) != len(b.X) || b.X[0] != 0 || len(b.Runs) != 3 {
			t.Fatalf("band %s: k %v, %d points, runs %v", b.Node, b.K, len(b.X), b.Runs)
		}
		for i := range b.X {
			if !(b.Lo[i] <= b.Mean[i] && b.Mean[i] <= b.Hi[i]) || b.N[i] < 2 {
				t.Fatalf("band %s at %d: %v %v %v n %d", b.Node, i, b.Lo[i], b.Mean[i], b.Hi[i], b.N[i])
			}
		}
	}
	q.Set("align", "time")
	if code, _, body := getTrend(t, victor, f.srv.URL, q); code != http.StatusBadRequest || !strings.Contains(body, "align=start") {
		t.Errorf("band on the absolute axis: %d %s", code, excerpt(body))
	}
	q.Set("align", "start")
	q["golden"] = []string{runs[1].ID}
	if code, _, body := getTrend(t, victor, f.srv.URL, q); code != http.StatusBadRequest || !strings.Contains(body, "golden") {
		t.Errorf("one golden run: %d %s", code, excerpt(body))
	}

	ctx := browser(t)
	target := "/ui/lines/line-injection-01/trend?node=part_weight&run=" + runs[0].ID + "&golden=" + g[0] + "&golden=" + g[1] + "&golden=" + g[2] + "&k=2.5"
	login(t, ctx, f, "victor", target)
	state := value(t, ctx, "chart drawn", chromedp.Poll[string](`(() => {
		const s = document.querySelector("#trend-plot").getAttribute("data-state");
		return s === "loading" ? null : s;
	})()`, chromedp.WithPollingTimeout(20*time.Second)))
	if state != "ready" {
		t.Fatalf("chart state %q", state)
	}
	type drawn struct {
		Series, Bands, Legend, Checked int
		K                              string
	}
	d := value(t, ctx, "band drawn", chromedp.Evaluate[drawn](`(() => {
		const fig = document.querySelector("#trend-plot");
		return {Series: +fig.getAttribute("data-series"), Bands: +fig.getAttribute("data-bands"),
			Legend: fig.querySelectorAll(".u-legend .u-series").length,
			Checked: document.querySelectorAll("#golden-pick input[name=golden]:checked").length,
			K: document.querySelector("#golden-pick input[name=k]").value};
	})()`))
	// Legend: x, the run's series, then high, low and mean of the band.
	if d.Series != 1 || d.Bands != 1 || d.Legend != 5 || d.Checked != 3 || d.K != "2.5" {
		t.Errorf("golden band in the browser: %+v", d)
	}
	screenshot(t, ctx, "trend-golden-band")
}
