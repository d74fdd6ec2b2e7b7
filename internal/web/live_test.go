package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/chromedp/chromedp"
)

// Its own line, nodes, recipe and run numbers: the fixture's demo line
// and runs stay as the other tests expect them.
const liveLineID = "line-live-ui"

// startLiveLine serves the simulated line over OPC UA in this process
// and runs the OPC UA connector into the fixture's store with its status
// reporter, as aml connect opcua does. It returns the connector's id.
//
// The line clock starts at a fixed instant (sim.DefaultStartMs), each
// call's a day after the previous one's: a node holds one value per
// instant, and two simulated servers on one clock would stamp the same
// instants.
func startLiveLine(t *testing.T, f *fixture, firstRun int) (string, *opcua.Connector) {
	t.Helper()
	srv, err := opcuasrv.Start(context.Background(), opcuasrv.Options{Addr: "127.0.0.1:0", Speed: 40, StartMs: sim.DefaultStartMs + int64(firstRun-9000)*86_400_000, RecipeID: "recipe-live-ui", FirstRun: firstRun})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the simulated line: %v", err)
		}
	})
	var nodes []map[string]any
	for _, n := range []string{"part_weight", "hold_pressure", "melt_temperature_setpoint"} {
		nodes = append(nodes, map[string]any{"opcua": srv.NodeID(n), "node": "live_" + n})
	}
	raw, _ := json.Marshal(map[string]any{"line": liveLineID, "product": "product-live-ui", "recipe": "recipe-live-ui",
		"runTag": srv.NodeID(opcuasrv.TagRunID), "cycleTag": srv.NodeID(opcuasrv.TagCycle), "publishingIntervalMs": 20, "nodes": nodes})
	m, err := opcua.ParseMap(raw)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := opcua.New(f.store, opcua.Options{Endpoint: srv.Endpoint(), Map: m, Audit: f.store, FlushEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conn.Reporter(connect.NewStatusStore(f.store.SQL()), 500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	repDone, connDone := make(chan struct{}), make(chan error, 1)
	go func() { rep.Run(ctx); close(repDone) }()
	go func() { connDone <- conn.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		err := <-connDone
		<-repDone
		if err := rep.Stop(context.Background(), err); err != nil {
			t.Errorf("stop the status reporter: %v", err)
		}
	})
	return "opcua:" + srv.Endpoint(), conn
}

// TestLivePageScope: the page and its fragment list the connector for a
// viewer; a caller scoped to another line is refused the line.
func TestLivePageScope(t *testing.T) {
	f := getFixture(t)
	id, conn := startLiveLine(t, f, 9000)
	deadline := time.Now().Add(30 * time.Second)
	for conn.Stats().Stored < 30 {
		if time.Now().After(deadline) {
			t.Fatalf("the connector stored %d samples", conn.Stats().Stored)
		}
		time.Sleep(50 * time.Millisecond)
	}
	get := func(user, path string) (int, string) {
		t.Helper()
		res, err := f.client(t, user).Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	cases := []struct {
		user, path string
		status     int
		has, lacks []string
	}{
		{"victor", "/ui/live", http.StatusOK, []string{`data-connector="` + id + `"`, `svg xmlns`, "live_part_weight", "live_hold_pressure (setpoint)", "Live</a>"}, []string{"has no samples yet"}}, // the newest sample's time (ts.latest) ends the plots
		{"victor", "/ui/live?line=" + liveLineID + "&minutes=5", http.StatusOK, []string{`data-src="/ui/live/fragment?line=` + liveLineID + `&amp;minutes=5"`}, nil},
		{"victor", "/ui/live/fragment?line=" + liveLineID, http.StatusOK, []string{`data-connector="` + id + `"`, `class="chart"`}, []string{"<html", "<header"}},
		{"olga", "/ui/live", http.StatusOK, []string{`id="live-empty"`}, []string{id}},
		{"olga", "/ui/live?line=" + liveLineID, http.StatusForbidden, nil, []string{id}},
		{"victor", "/ui/live?minutes=0", http.StatusBadRequest, []string{"minutes must be"}, nil},
	}
	for _, tc := range cases {
		code, body := get(tc.user, tc.path)
		if code != tc.status {
			t.Errorf("%s %s: %d\n%.400s", tc.user, tc.path, code, body)
			continue
		}
		for _, s := range tc.has {
			if !strings.Contains(body, s) {
				t.Errorf("%s %s lacks %q", tc.user, tc.path, s)
			}
		}
		for _, s := range tc.lacks {
			if strings.Contains(body, s) {
				t.Errorf("%s %s shows %q", tc.user, tc.path, s)
			}
		}
	}
}

// TestBrowserLivePage: a viewer opens the Live page while the OPC UA
// connector ingests from the simulated server: the connector's row shows
// connected with its counters, the trend SVGs carry data points, and the
// page refreshes itself with more data.
func TestBrowserLivePage(t *testing.T) {
	f := getFixture(t)
	id, _ := startLiveLine(t, f, 9100)
	ctx := browser(t)
	login(t, ctx, f, "victor", "/ui/live?line="+liveLineID)
	row := fmt.Sprintf(`tr[data-connector=%q]`, id)
	// The connector connects and stores; the page refreshes every 2 s.
	value(t, ctx, "connector connected with trend data", chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const tr = document.querySelector('%s');
		const svgs = [...document.querySelectorAll("#live-body svg.chart")];
		return !!tr && tr.getAttribute("data-state") === "connected" && svgs.length >= 3 && svgs.every(s => +s.getAttribute("data-points") > 0);
	})()`, row), chromedp.WithPollingTimeout(40*time.Second)))
	stored1 := value(t, ctx, "stored", chromedp.Text(chromedp.CSS(row+" .stored")))
	if e := value(t, ctx, "last error", chromedp.Text(chromedp.CSS(row+" td.error"))); e != "" {
		t.Fatalf("the connector reports an error: %s", e)
	}
	pts1 := charts(t, ctx, "#live-body svg.chart")
	to1 := value(t, ctx, "plotted up to", chromedp.Evaluate[string](`document.querySelector("#live-body .live-plots").getAttribute("data-to")`))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const el = document.querySelector('%s .stored');
		return !!el && +el.textContent > %s && +document.getElementById("live-refresh").getAttribute("data-refreshes") >= 2;
	})()`, row, stored1), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		info, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("live-refresh").outerHTML + " stored " + document.querySelector('`+row+` .stored').textContent`))
		screenshot(t, ctx, "live-page-stuck")
		t.Fatalf("no refresh with more samples (stored was %s): %v; %s", stored1, err, info)
	}
	pts2 := charts(t, ctx, "#live-body svg.chart")
	if pts1.Charts < 3 || pts1.MinPoints < 1 || pts2.Charts < 3 || pts2.MinPoints < 1 || pts2.Series < 3 {
		t.Errorf("trend charts before %+v, after %+v", pts1, pts2)
	}
	// the refreshed trend ends at a newer sample (the point count may
	// fall: the simulated line starts new runs and the page plots the
	// newest run)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`+document.querySelector("#live-body .live-plots").getAttribute("data-to") > %s`, to1),
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Errorf("the trend still ends at %s ms after the refresh: %v", to1, err)
	}
	titles := value(t, ctx, "chart titles", chromedp.TextContent(chromedp.CSS("#live-body .live-plots")))
	for _, s := range []string{"live_part_weight", "live_hold_pressure (setpoint)"} {
		if !strings.Contains(titles, s) {
			t.Errorf("charts lack %q", s)
		}
	}
	screenshot(t, ctx, "live-page")
}
