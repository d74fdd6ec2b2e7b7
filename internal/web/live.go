package web

// The Live page: per line, the connectors feeding it (their status rows,
// written by the connector processes — see internal/connect, status.go)
// and a trend of the line's newest run over the last minutes of line
// time. static/linelive.js reloads the page body (/ui/live/fragment)
// every few seconds; the fragment is the same template the page renders,
// so a refresh shows exactly what a reload would.

import (
	"bytes"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/web/plot"
)

// Live page bounds.
const (
	liveDefaultMinutes = 10
	liveMaxMinutes     = 240
	liveMaxNodes       = 12
	liveMaxPoints      = 300 // points per chart (bucket means beyond)
	// LiveRefreshMs is how often the page reloads its body.
	LiveRefreshMs = 2000
)

// liveLine is one line's section of the Live page.
type liveLine struct {
	Line       string
	Connectors []connect.Status
	Run        *core.Run
	// FromMs, ToMs: the plotted window of line time (source timestamps).
	FromMs, ToMs int64
	Charts       []*plot.Chart
	Note         string
}

// liveData is what live.html and its fragment render.
type liveData struct {
	Title   string
	Lines   []liveLine
	Minutes int
	// FragmentURL is the page body's URL with the page's parameters.
	FragmentURL string
	RefreshMs   int
	Now         time.Time
}

func (s *server) livePage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := s.liveData(r, p)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "live", &p, d)
	return nil
}

// liveFragment is the page's body alone (no layout), for the refresh.
func (s *server) liveFragment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := s.liveData(r, p)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := templates()["live"].ExecuteTemplate(&buf, "livebody", d); err != nil {
		return core.Errorf(core.CodeInternal, "live fragment: %v", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
	return nil
}

// liveData collects the lines to show: ?line= (repeatable) or every line
// in the caller's scope that has a connector; ?minutes= sizes the window
// and ?node= (repeatable) picks the plotted nodes (default: the line's
// setpoints, then its measurements, at most liveMaxNodes).
func (s *server) liveData(r *http.Request, p auth.Principal) (*liveData, error) {
	ctx := r.Context()
	q := r.URL.Query()
	minutes := liveDefaultMinutes
	if v := q.Get("minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > liveMaxMinutes {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "minutes", "minutes must be 1..%d, got %q", liveMaxMinutes, v)
		}
		minutes = n
	}
	now := s.o.Now()
	all, err := s.app.ConnectorList(ctx, p, app.ConnectorListRequest{})
	if err != nil {
		return nil, err
	}
	byLine := map[string][]connect.Status{}
	var lines []string
	for _, st := range all.Items {
		if p.InScope(st.Line) {
			if _, ok := byLine[st.Line]; !ok {
				lines = append(lines, st.Line)
			}
			byLine[st.Line] = append(byLine[st.Line], st)
		}
	}
	if want := q["line"]; len(want) > 0 {
		lines = nil
		for _, l := range want {
			if err := p.Allow(auth.ActRead, l); err != nil {
				return nil, err
			}
			if !slices.Contains(lines, l) {
				lines = append(lines, l)
			}
		}
	}
	sort.Strings(lines)
	d := &liveData{Title: "Live", Minutes: minutes, FragmentURL: "/ui/live/fragment?" + q.Encode(), RefreshMs: LiveRefreshMs, Now: now}
	for _, l := range lines {
		ll, err := s.liveLine(r, p, l, byLine[l], q["node"], minutes)
		if err != nil {
			return nil, err
		}
		d.Lines = append(d.Lines, ll)
	}
	return d, nil
}

// liveLine plots the newest run of line over its last minutes.
func (s *server) liveLine(r *http.Request, p auth.Principal, line string, conns []connect.Status, want []string, minutes int) (liveLine, error) {
	ctx := r.Context()
	ll := liveLine{Line: line, Connectors: conns}
	rl, err := s.app.RunList(ctx, p, app.RunListRequest{Line: line})
	if err != nil {
		return ll, err
	}
	runs := rl.Items
	if len(runs) == 0 {
		ll.Note = "No run on this line yet."
		return ll, nil
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedMs > runs[j].StartedMs })
	run := runs[0]
	ll.Run = &run
	nl, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: line})
	if err != nil {
		return ll, err
	}
	nodes := nl.Items
	var pick []core.Node
	if len(want) > 0 {
		for _, n := range nodes {
			if slices.Contains(want, n.ID) {
				pick = append(pick, n)
			}
		}
	} else {
		// Setpoints first (what a certificate moves), then measurements.
		sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Kind == core.NodeDCW && nodes[j].Kind != core.NodeDCW })
		pick = nodes
	}
	if len(pick) > liveMaxNodes {
		pick = pick[:liveMaxNodes]
	}
	ids := make([]string, len(pick))
	for i, n := range pick {
		ids[i] = n.ID
	}
	end := int64(0)
	for _, id := range ids {
		lt, err := s.app.TSLatest(ctx, p, app.TSLatestRequest{Node: id, Run: run.ID})
		if err != nil {
			return ll, err
		}
		if lt.Sample != nil {
			end = max(end, core.UsToMs(lt.Sample.TsUs))
		}
	}
	if end == 0 {
		ll.Note = "Run " + run.ID + " has no samples yet."
		return ll, nil
	}
	from := max(run.StartedMs, end-int64(minutes)*60_000)
	ll.FromMs, ll.ToMs = from, end
	width := max(int64(1000), (end-from)/liveMaxPoints)
	width = (width + 999) / 1000 * 1000
	for _, n := range pick {
		fi, ti := app.Instant(from), app.Instant(end)
		ts, err := s.app.TSQuery(ctx, p, app.TSQueryRequest{Node: n.ID, Run: run.ID, From: &fi, To: &ti, Bucket: app.Duration(width * 1e6)})
		if err != nil {
			return ll, err
		}
		var bs []core.Bucket
		if ts.TSBuckets != nil {
			bs = ts.TSBuckets.Buckets
		}
		var x, y []float64
		for _, b := range bs {
			if b.Count == 0 {
				continue
			}
			x = append(x, float64(max(b.StartMs, from)-end)/60000)
			y = append(y, b.Avg)
		}
		if len(x) == 0 {
			continue
		}
		title := n.ID
		if n.Kind == core.NodeDCW {
			title += " (setpoint)"
		}
		c := &plot.Chart{Title: title, XLabel: "line time before the newest sample", XUnit: "min", YLabel: n.ID, YUnit: n.Unit, Width: 460, Height: 210,
			Series: []plot.Series{{Name: run.ID, X: x, Y: y, Markers: len(x) < 30}}}
		// No range lines: a node's range (e.g. 50–90 bar) would flatten the
		// minutes of movement this trend is for; the Lines page shows it.
		ll.Charts = append(ll.Charts, c)
	}
	return ll, nil
}
