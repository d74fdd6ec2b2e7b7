package web

// The operator overview: one line as a DCS faceplate shows it — each
// node's newest value (setpoints first) against its normal range with an
// alarm, the connectors feeding the line, the certificates awaiting
// approval or execution and the last governed writes with their readback.
// Everything on it is the application's line.overview answer (role and
// line scope are the op's); static/linelive.js reloads the page body
// (/ui/operator/{line}/fragment, the same template) every few seconds.

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// operatorData is what operator.html and its fragment render.
type operatorData struct {
	Title       string
	O           app.LineOverview
	StaleAfter  string
	FragmentURL string
	RefreshMs   int
}

// operatorRoutes are the operator overview's pages (mounted by New).
func (s *server) operatorRoutes(page func(string, func(http.ResponseWriter, *http.Request, auth.Principal) error)) {
	page("GET /ui/operator", s.operatorIndex)
	page("GET /ui/operator/{line}", s.operatorPage)
	page("GET /ui/operator/{line}/fragment", s.operatorFragment)
}

// operatorIndex lists the lines in scope (line.list); with one line it
// goes straight to its overview.
func (s *server) operatorIndex(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	lines, err := invoke[app.List[core.Line]](s, r, p, "line.list", &app.LineListRequest{})
	if err != nil {
		return err
	}
	if len(lines.Items) == 1 {
		http.Redirect(w, r, "/ui/operator/"+lines.Items[0].ID, http.StatusSeeOther)
		return nil
	}
	s.render(w, r, http.StatusOK, "operators", &p, map[string]any{"Title": "Operator", "Lines": lines.Items})
	return nil
}

func (s *server) operatorData(r *http.Request, p auth.Principal) (*operatorData, error) {
	line := r.PathValue("line")
	req := app.LineOverviewRequest{Line: line}
	stale := r.URL.Query().Get("stale")
	if stale != "" {
		d, err := time.ParseDuration(stale)
		if err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "stale", "stale must be a duration (e.g. 30s, 5m), got %q", stale)
		}
		req.StaleAfter = app.Duration(d)
	}
	o, err := invoke[app.LineOverview](s, r, p, "line.overview", &req)
	if err != nil {
		return nil, err
	}
	if stale == "" {
		stale = app.DefaultOverviewStaleAfter.String()
	}
	frag := "/ui/operator/" + line + "/fragment"
	if q := r.URL.RawQuery; q != "" {
		frag += "?" + q
	}
	return &operatorData{Title: "Operator · line " + line, O: o, StaleAfter: stale, FragmentURL: frag, RefreshMs: LiveRefreshMs}, nil
}

func (s *server) operatorPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := s.operatorData(r, p)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "operator", &p, d)
	return nil
}

// operatorFragment is the page body alone, for the refresh.
func (s *server) operatorFragment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := s.operatorData(r, p)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := templates()["operator"].ExecuteTemplate(&buf, "operatorbody", d); err != nil {
		return core.Errorf(core.CodeInternal, "operator fragment: %v", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
	return nil
}

func init() {
	// ago prints an age in ms as a short duration ("4s", "12m3s").
	funcs["ago"] = func(ms *int64) string {
		if ms == nil {
			return "–"
		}
		d := time.Duration(*ms) * time.Millisecond
		if d < 0 {
			return "in " + (-d).Round(time.Second).String()
		}
		return d.Round(time.Second).String()
	}
}
