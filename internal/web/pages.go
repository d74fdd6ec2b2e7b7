package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/web/plot"
)

// maxTrendBuckets bounds the points per run of a trend plot: a run is
// aggregated into at most this many buckets (mean, with the min–max
// envelope when one run is shown).
const maxTrendBuckets = 300

// maxOverlayRuns bounds how many runs one trend overlays.
const maxOverlayRuns = 12

func (s *server) home(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	lines, err := s.app.LineList(ctx, p, app.LineListRequest{})
	if err != nil {
		return err
	}
	type lineRow struct {
		core.Line
		Runs, Nodes int
	}
	var rows []lineRow
	for _, l := range lines.Items {
		runs, err := s.app.RunList(ctx, p, app.RunListRequest{Line: l.ID})
		if err != nil {
			return err
		}
		nodes, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: l.ID})
		if err != nil {
			return err
		}
		rows = append(rows, lineRow{l, runs.Count, nodes.Count})
	}
	// Certificates awaiting approval (cert.list verifies each; a process
	// without the certificate key has none to show).
	pending := 0
	if issued, err := s.app.CertList(ctx, p, app.CertListRequest{Status: "ISSUED", Limit: 1000}); err == nil {
		pending = issued.Count
	}
	s.render(w, r, http.StatusOK, "home", &p, map[string]any{"Title": "AML", "Lines": rows, "Pending": pending})
	return nil
}

func (s *server) linePage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	line := r.PathValue("line")
	rl, err := s.app.RunList(ctx, p, app.RunListRequest{Line: line})
	if err != nil {
		return err
	}
	nl, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: line})
	if err != nil {
		return err
	}
	runs, nodes := rl.Items, nl.Items
	if len(runs) == 0 && len(nodes) == 0 {
		return core.Errorf(core.CodeNotFound, "line %q has no runs or nodes", line)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedMs > runs[j].StartedMs })
	s.render(w, r, http.StatusOK, "line", &p, map[string]any{"Title": "Line " + line, "Line": line, "Runs": runs, "Nodes": nodes})
	return nil
}

// trendPage overlays the runs of one node: x is the time since each run's
// start, so runs of the same recipe line up.
func (s *server) trendPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	line := r.PathValue("line")
	if err := p.Allow(auth.ActRead, line); err != nil {
		return err
	}
	q := r.URL.Query()
	picked := compactVals(q["node"])
	if len(picked) == 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "node", "choose a node")
	}
	if len(picked) > maxChartNodes {
		picked = picked[:maxChartNodes]
	}
	nodeID := picked[0]
	nl, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: line})
	if err != nil {
		return err
	}
	lineNodes := nl.Items
	i := slices.IndexFunc(lineNodes, func(n core.Node) bool { return n.ID == nodeID })
	if i < 0 {
		return core.FieldErrorf(core.CodeNotFound, "node", "node %s is not on line %s", nodeID, line)
	}
	node := lineNodes[i]
	rl, err := s.app.RunList(ctx, p, app.RunListRequest{Line: line})
	if err != nil {
		return err
	}
	all := rl.Items
	sort.Slice(all, func(i, j int) bool { return all[i].StartedMs > all[j].StartedMs })
	want := q["run"]
	var runs []core.Run
	for _, run := range all {
		if (len(want) == 0 && len(runs) < 5) || slices.Contains(want, run.ID) {
			runs = append(runs, run)
		}
	}
	if len(runs) > maxOverlayRuns {
		runs = runs[:maxOverlayRuns]
	}
	chart, err := s.trendChart(r, p, node, runs)
	if err != nil {
		return err
	}
	align := "start"
	if q.Get("align") == "time" {
		align = "time"
	}
	var runIDs []string
	for _, run := range runs {
		runIDs = append(runIDs, run.ID)
	}
	golden, k, err := goldenParams(q)
	if err != nil {
		return err
	}
	if k == 0 {
		k = defaultGoldenK
	}
	s.render(w, r, http.StatusOK, "trend", &p, map[string]any{"Title": "Trend " + strings.Join(picked, ", "), "Line": line, "Node": node, "Runs": runs, "All": all, "Chart": chart,
		"Nodes": lineNodes, "Align": align, "DataURL": trendDataURL(picked, runIDs, align) + goldenQuery(golden, k), "K": k, "Golden": golden,
		"GoldenSelected": func(id string) bool { return slices.Contains(golden, id) },
		"NodeSelected":   func(id string) bool { return slices.Contains(picked, id) },
		"Selected":       func(id string) bool { return slices.ContainsFunc(runs, func(x core.Run) bool { return x.ID == id }) }})
	return nil
}

// trendChart is the server-drawn SVG of node over runs (the page's
// fallback without scripts), from ts.query's bucket aggregates; an active
// run is drawn up to now.
func (s *server) trendChart(r *http.Request, p auth.Principal, node core.Node, runs []core.Run) (*plot.Chart, error) {
	c := &plot.Chart{Title: node.ID + " by run", XLabel: "time since run start", XUnit: "min", YLabel: node.ID, YUnit: node.Unit}
	for _, run := range runs {
		from := run.StartedMs
		to := s.o.Now().UnixMilli()
		if run.EndedMs != nil {
			to = *run.EndedMs
		}
		to = max(to, from+1000)
		width := max(int64(1000), (to-from)/maxTrendBuckets)
		width = (width + 999) / 1000 * 1000
		fi, ti := app.Instant(from), app.Instant(to)
		ts, err := s.app.TSQuery(r.Context(), p, app.TSQueryRequest{Node: node.ID, Run: run.ID, From: &fi, To: &ti, Bucket: app.Duration(width * 1e6)})
		if err != nil {
			return nil, err
		}
		var bs []core.Bucket
		if ts.TSBuckets != nil {
			bs = ts.TSBuckets.Buckets
		}
		var x, avg, lo, hi []float64
		for _, b := range bs {
			if b.Count == 0 {
				continue
			}
			// Buckets are aligned to multiples of their width, so the first
			// may start before the run: place it at the run's start.
			x = append(x, float64(max(b.StartMs, from)-from)/60000)
			avg, lo, hi = append(avg, b.Avg), append(lo, b.Min), append(hi, b.Max)
		}
		c.Series = append(c.Series, plot.Series{Name: run.ID, X: x, Y: avg})
		if len(runs) == 1 {
			c.Bands = append(c.Bands, plot.Band{Name: fmt.Sprintf("min–max per %ds", width/1000), X: x, Lo: lo, Hi: hi})
		}
	}
	if node.Min != nil {
		c.Limits = append(c.Limits, plot.Limit{Name: "node min", Y: *node.Min, Color: "#777777"})
	}
	if node.Max != nil {
		c.Limits = append(c.Limits, plot.Limit{Name: "node max", Y: *node.Max, Color: "#777777"})
	}
	return c, nil
}

func (s *server) runPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	rs, err := s.app.RunShow(ctx, p, app.RunShowRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	run, counts, segs := rs.Run, rs.Samples, rs.Segments
	nl, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: run.LineID})
	if err != nil {
		return err
	}
	nodes := nl.Items
	type nodeRow struct {
		core.Node
		Samples int64
	}
	var rows []nodeRow
	for _, n := range nodes {
		if c := counts[n.ID]; c > 0 {
			rows = append(rows, nodeRow{n, c})
		}
	}
	picked := compactVals(r.URL.Query()["node"])
	sel := ""
	if len(picked) > 0 {
		sel = picked[0]
	}
	var chart *plot.Chart
	for _, n := range rows {
		if sel == "" || n.ID == sel {
			if chart, err = s.trendChart(r, p, n.Node, []core.Run{run}); err != nil {
				return err
			}
			sel = n.ID
			break
		}
	}
	// The interactive chart: the chosen signals (the first with samples
	// when none is chosen) on an absolute time axis, each with its axis.
	var plotted []string
	for _, n := range rows {
		if slices.Contains(picked, n.ID) || n.ID == sel {
			plotted = append(plotted, n.ID)
		}
	}
	if len(plotted) > maxChartNodes {
		plotted = plotted[:maxChartNodes]
	}
	dataURL := ""
	if len(plotted) > 0 {
		dataURL = trendDataURL(plotted, []string{run.ID}, "time")
	}
	s.render(w, r, http.StatusOK, "run", &p, map[string]any{"Title": "Run " + run.ID, "Run": run, "Nodes": rows, "Node": sel, "Chart": chart, "Segments": segs,
		"DataURL": dataURL, "Plotted": func(id string) bool { return slices.Contains(plotted, id) }})
	return nil
}

func (s *server) datasetsPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ds, err := s.app.DatasetList(r.Context(), p, app.DatasetListRequest{Line: r.URL.Query().Get("line")})
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "datasets", &p, map[string]any{"Title": "Datasets", "Datasets": ds.Items})
	return nil
}

// datasetPage is a dataset's report.json: summaries, cleaning counts, lag
// estimates, per-run target profiles, dropped runs.
func (s *server) datasetPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	shown, err := s.app.DatasetShow(ctx, p, app.DatasetRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	d := shown.Dataset
	rep, err := s.app.DatasetReport(ctx, p, app.DatasetRequest{ID: d.ID})
	if err != nil {
		return err
	}
	units := map[string]string{}
	for _, n := range rep.Nodes {
		units[n.NodeID] = n.ModelUnit
	}
	// Lag cross-correlation, one line per input → target pair.
	lag := &plot.Chart{Title: "lag cross-correlation (train runs)", XLabel: "lag (target follows input)", XUnit: "beats", YLabel: "correlation"}
	for _, l := range rep.Lags {
		x := make([]float64, len(l.Corr))
		for i := range x {
			x[i] = float64(i - l.MaxLag)
		}
		lag.Series = append(lag.Series, plot.Series{Name: fmt.Sprintf("%s → %s (best %d)", l.Input, l.Target, l.BestLag), X: x, Y: l.Corr})
	}
	// Target profiles: every used run, coloured by split.
	splitColor := map[string]string{"train": "#0072b2", "val": "#e69f00", "test": "#009e73"}
	var profiles []*plot.Chart
	targets := map[string]*plot.Chart{}
	var order []string
	for _, run := range rep.Runs {
		for _, t := range run.Targets {
			c := targets[t.NodeID]
			if c == nil {
				c = &plot.Chart{Title: t.NodeID + " profile per run", XLabel: "time since run start", XUnit: "min", YLabel: t.NodeID, YUnit: units[t.NodeID]}
				targets[t.NodeID] = c
				order = append(order, t.NodeID)
			}
			x := make([]float64, len(t.ProfileMs))
			for i, ms := range t.ProfileMs {
				x[i] = float64(ms-t.ProfileMs[0]) / 60000
			}
			c.Series = append(c.Series, plot.Series{Name: run.RunID + " (" + run.Split + ")", X: x, Y: t.Profile, Color: splitColor[run.Split]})
		}
	}
	for _, id := range order {
		profiles = append(profiles, targets[id])
	}
	s.render(w, r, http.StatusOK, "dataset", &p, map[string]any{"Title": "Dataset " + d.ID, "D": d, "R": rep, "Lag": lag, "Profiles": profiles})
	return nil
}

func (s *server) jobsPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	jobs, err := s.app.JobList(r.Context(), p, app.JobListRequest{Status: r.URL.Query().Get("status"), Limit: 200})
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "jobs", &p, map[string]any{"Title": "Jobs", "Jobs": jobs.Items, "Statuses": core.AllJobStatuses, "Status": r.URL.Query().Get("status")})
	return nil
}

func (s *server) jobPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	j, err := s.app.JobShow(r.Context(), p, app.JobRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	var gates app.GateReport
	hasGates := len(j.Gates) > 0 && json.Unmarshal(j.Gates, &gates) == nil
	s.render(w, r, http.StatusOK, "job", &p, map[string]any{"Title": "Job " + j.ID, "J": j, "Gates": gates, "HasGates": hasGates,
		"CanJob": auth.RoleAllows(p.Role, auth.ActJob), "Done": r.URL.Query().Get("done")})
	return nil
}

func (s *server) scenesPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sc, err := s.app.SceneList(r.Context(), p, app.SceneListRequest{})
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "scenes", &p, map[string]any{"Title": "Scenes", "Scenes": sc.Items})
	return nil
}

func (s *server) scenePage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	shown, err := s.app.SceneShow(r.Context(), p, app.SceneShowRequest{ID: r.PathValue("id"), Version: r.PathValue("version")})
	if err != nil {
		return err
	}
	sc, h := shown.Scene, shown.Hash
	type group struct {
		Name string
		Vars []sceneVar
	}
	groups := []group{{"Controls", sc.Controls}, {"States", sc.States}, {"Disturbances", sc.Disturbances}, {"Observations", sc.Observations}, {"Guards", sc.Guards}}
	sl, err := s.app.SnapshotList(r.Context(), p, app.SnapshotListRequest{Line: sc.LineID, Limit: 20})
	if err != nil {
		return err
	}
	snaps := slices.DeleteFunc(sl.Items, func(x contract.SnapshotInfo) bool {
		return x.SceneID != sc.SceneID || x.SceneVersion != sc.SceneVersion
	})
	s.render(w, r, http.StatusOK, "scene", &p, map[string]any{"Title": "Scene " + sc.SceneID + "@" + sc.SceneVersion, "S": sc, "Hash": h, "Groups": groups, "Snapshots": snaps,
		"Act": s.sceneActions(r, p, sc)})
	return nil
}

func (s *server) trialsPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	ts, err := s.app.TrialList(r.Context(), p, app.TrialListRequest{Model: q.Get("model"), Line: q.Get("line"), Limit: 200})
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "trials", &p, map[string]any{"Title": "Trials", "Trials": ts.Items})
	return nil
}

// auditPageSize is the default page of the audit page (?limit= picks
// 1..200).
const auditPageSize = 50

// auditPage is the audit log newest first, a page at a time, filtered by
// actor, action (exact, or a prefix ending in *), subject and time range:
// the application's audit.list with newest set (line scope and role are
// its rules).
func (s *server) auditPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	q := r.URL.Query()
	req := app.AuditListRequest{Newest: true, Limit: auditPageSize,
		Actor: strings.TrimSpace(q.Get("actor")), Action: strings.TrimSpace(q.Get("action")), Subject: strings.TrimSpace(q.Get("subject"))}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return core.FieldErrorf(core.CodeInvalidArgument, "limit", "limit must be an integer in 1..200, got %q", v)
		}
		req.Limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return core.FieldErrorf(core.CodeInvalidArgument, "before", "before must be a positive seq, got %q", v)
		}
		req.Before = n
	}
	var err error
	if req.From, err = formInstant("from", q.Get("from")); err != nil {
		return err
	}
	if req.To, err = formInstant("to", q.Get("to")); err != nil {
		return err
	}
	res, err := s.app.AuditList(ctx, p, req)
	if err != nil {
		return err
	}
	rows := make([]auditRow, 0, len(res.Items))
	for _, e := range res.Items {
		rows = append(rows, auditRow{e, string(e.Payload)})
	}
	filters := url.Values{}
	for _, k := range []string{"actor", "action", "subject", "from", "to", "limit"} {
		if v := strings.TrimSpace(q.Get(k)); v != "" {
			filters.Set(k, v)
		}
	}
	older := ""
	if res.NextBefore > 0 {
		o := url.Values{}
		for k, v := range filters {
			o[k] = v
		}
		o.Set("before", strconv.FormatInt(res.NextBefore, 10))
		older = "?" + o.Encode()
	}
	s.render(w, r, http.StatusOK, "audit", &p, map[string]any{"Title": "Audit log", "Rows": rows, "Older": older, "Newest": "?" + filters.Encode(), "Paged": req.Before > 0,
		"Actor": req.Actor, "Action": req.Action, "Subject": req.Subject, "From": q.Get("from"), "To": q.Get("to"), "HeadSeq": res.HeadSeq, "Head": res.Head})
	return nil
}

// formInstant reads a time field of a filter form: RFC 3339, epoch
// milliseconds, or what an <input type="datetime-local"> sends
// (2006-01-02T15:04[:05]), taken as UTC.
func formInstant(field, v string) (*app.Instant, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			i := app.Instant(t.UnixMilli())
			return &i, nil
		}
	}
	var i app.Instant
	if err := i.Set(v); err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, field, "%s: %q is not a time (YYYY-MM-DDTHH:MM in UTC, RFC 3339 or epoch ms)", field, v)
	}
	return &i, nil
}

type auditRow struct {
	auditEntry
	PayloadText string
}

// finite reports whether v is a number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
