package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// The interactive time-series charts (static/chart.js over the vendored
// uPlot) read their data as JSON from GET /ui/data/trend. The handler is
// an adapter over the application's use cases — run.show for each run
// (line scope), node.list for units and limits, ts.query with a bucket
// width for the aggregates — so a chart shows what the API and the CLI
// would answer to the same principal.

// maxChartNodes bounds the signals on one chart (each has its own axis).
const maxChartNodes = 4

// trendDoc is the JSON a chart is drawn from.
type trendDoc struct {
	// Align is "start" (x: minutes since each run's start, so runs
	// overlay) or "time" (x: epoch seconds, an absolute UTC axis).
	Align  string        `json:"align"`
	Nodes  []trendNode   `json:"nodes"`
	Series []trendSeries `json:"series"`
	// Bands are golden-run bands (?golden=R…&k=K; golden.go).
	Bands []trendBand `json:"bands,omitempty"`
}

type trendNode struct {
	ID   string   `json:"id"`
	Unit string   `json:"unit,omitempty"`
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
}

// trendSeries is one node in one run: bucket means at x.
type trendSeries struct {
	Node     string    `json:"node"`
	Run      string    `json:"run"`
	Label    string    `json:"label"`
	BucketMs int64     `json:"bucketMs"`
	X        []float64 `json:"x"`
	Y        []float64 `json:"y"`
	Lo       []float64 `json:"lo"`
	Hi       []float64 `json:"hi"`
}

// trendDataURL is the data address of a chart of nodes over runs.
func trendDataURL(nodes, runs []string, align string) string {
	v := url.Values{"node": nodes, "run": runs}
	v.Set("align", align)
	return "/ui/data/trend?" + v.Encode()
}

// dataAPI wraps a JSON handler: no redirect to the login page (a script
// asked), errors as the API's error body with its status.
func (s *server) dataAPI(h func(r *http.Request, p auth.Principal) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var out any
		p, ok := auth.FromContext(r.Context())
		var err error = auth.Unauthenticated("log in first")
		if ok {
			out, err = h(r, p)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			status := auth.StatusOf(err)
			if status >= 500 {
				s.log("data error", "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": auth.BodyOf(err)})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}
}

// trendData answers GET /ui/data/trend?node=A[&node=B…]&run=R[&run=S…]&align=start|time
// [&golden=G&golden=H…&k=K] (a golden band per node, golden.go).
func (s *server) trendData(r *http.Request, p auth.Principal) (any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	nodes, runs := compactVals(q["node"]), compactVals(q["run"])
	align := q.Get("align")
	switch {
	case len(nodes) == 0 || len(nodes) > maxChartNodes:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "node", "choose 1 to %d nodes, got %d", maxChartNodes, len(nodes))
	case len(runs) == 0 || len(runs) > maxOverlayRuns:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "choose 1 to %d runs, got %d", maxOverlayRuns, len(runs))
	case align == "":
		align = "start"
	case align != "start" && align != "time":
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "align", "align is start or time, got %q", align)
	}
	golden, k, err := goldenParams(q)
	if err != nil {
		return nil, err
	}
	doc := trendDoc{Align: align, Nodes: []trendNode{}, Series: []trendSeries{}}
	lineNodes := map[string]map[string]core.Node{}
	for _, runID := range runs {
		rs, err := s.app.RunShow(ctx, p, app.RunShowRequest{ID: runID})
		if err != nil {
			return nil, err
		}
		run := rs.Run
		known, ok := lineNodes[run.LineID]
		if !ok {
			nl, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: run.LineID})
			if err != nil {
				return nil, err
			}
			known = map[string]core.Node{}
			for _, n := range nl.Items {
				known[n.ID] = n
			}
			lineNodes[run.LineID] = known
		}
		from := run.StartedMs
		to := s.o.Now().UnixMilli() // an active run: up to now
		if run.EndedMs != nil {
			to = *run.EndedMs
		}
		to = max(to, from+1000)
		width := max(int64(1000), (to-from)/maxTrendBuckets)
		width = (width + 999) / 1000 * 1000
		for _, id := range nodes {
			n, ok := known[id]
			if !ok {
				return nil, core.FieldErrorf(core.CodeNotFound, "node", "node %s is not on line %s (run %s)", id, run.LineID, run.ID)
			}
			if !slices.ContainsFunc(doc.Nodes, func(x trendNode) bool { return x.ID == id }) {
				doc.Nodes = append(doc.Nodes, trendNode{ID: n.ID, Unit: n.Unit, Min: n.Min, Max: n.Max})
			}
			if rs.Samples[id] == 0 {
				continue
			}
			fi, ti := app.Instant(from), app.Instant(to)
			ts, err := s.app.TSQuery(ctx, p, app.TSQueryRequest{Node: id, Run: run.ID, From: &fi, To: &ti, Bucket: app.Duration(width * 1e6)})
			if err != nil {
				return nil, err
			}
			doc.Series = append(doc.Series, bucketSeries(n.ID, run, ts.TSBuckets, align))
		}
	}
	if len(golden) > 0 {
		if err := s.goldenBands(r, p, &doc, nodes, golden, k); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// bucketSeries places a node's buckets of one run on the chart's x axis.
// Buckets are aligned to multiples of their width, so the first may start
// before the run: it is placed at the run's start.
func bucketSeries(node string, run core.Run, b *app.TSBuckets, align string) trendSeries {
	s := trendSeries{Node: node, Run: run.ID, Label: run.ID + " · " + node, X: []float64{}, Y: []float64{}, Lo: []float64{}, Hi: []float64{}}
	if b == nil {
		return s
	}
	s.BucketMs = b.BucketMs
	for _, k := range b.Buckets {
		if k.Count == 0 || !finite(k.Avg) {
			continue
		}
		at := max(k.StartMs, run.StartedMs)
		x := float64(at) / 1000
		if align == "start" {
			x = float64(at-run.StartedMs) / 60000
		}
		s.X, s.Y, s.Lo, s.Hi = append(s.X, x), append(s.Y, k.Avg), append(s.Lo, k.Min), append(s.Hi, k.Max)
	}
	return s
}

// compactVals drops empty and repeated values, keeping the order.
func compactVals(v []string) []string {
	var out []string
	for _, s := range v {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
