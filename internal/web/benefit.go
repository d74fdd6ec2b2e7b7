package web

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/benefit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/web/plot"
)

// The benefit study's pages: /ui/benefit lists the studies kept
// (benefit.list) with the form that starts one (POST /ui/benefit,
// benefit.run: the line, runs, seed, wear, material lots; the op checks the
// line's scope and existence and the limits
// before work starts); /ui/benefit/{id} (benefit.show) shows a running
// study's progress (static/benefit.js follows the API's GET
// /api/v1/benefit-studies/{id} and reloads the page when it ends) and a
// finished one's report: the spec band and noise floor, the table per
// mode and, drawn with the vendored uPlot from the report's run means,
// the run-mean part weight per run of each mode against the target and
// the spec band, and |run mean − target| per run. The server's SVG
// drawing of the same series stays for a browser without scripts.

func (s *server) benefitRoutes(page func(string, func(http.ResponseWriter, *http.Request, auth.Principal) error)) {
	page("GET /ui/benefit", s.benefitPage)
	page("GET /ui/benefit/{id}", s.benefitStudyPage)
}

func (s *server) benefitPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.renderBenefit(w, r, p, http.StatusOK, url.Values{}, nil)
}

func (s *server) renderBenefit(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, form url.Values, fe *formError) error {
	l, err := s.app.BenefitList(r.Context(), p, app.BenefitListRequest{})
	if err != nil {
		return err
	}
	lines, err := s.app.LineList(r.Context(), p, app.LineListRequest{})
	if err != nil {
		return err
	}
	get := func(k, def string) string {
		if v := form.Get(k); v != "" {
			return v
		}
		return def
	}
	s.render(w, r, status, "benefit", &p, map[string]any{"Title": "Benefit studies", "Studies": l.Items, "Lines": lines.Items, "Line": form.Get("line"),
		"CanRun": p.Allow(auth.ActJob, "") == nil, "Err": fe, "MaxRuns": app.MaxBenefitRuns,
		"Runs": get("runs", "60"), "Seed": get("seed", "7"), "Wear": form.Get("wear") != "", "MaterialLots": form.Get("materialLots") != ""})
	return nil
}

// benefitRun is the form's action: benefit.run, then the study's page.
func (s *server) benefitRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	form := r.PostForm
	req := app.BenefitRunRequest{Line: strings.TrimSpace(form.Get("line")), Wear: form.Get("wear") != "", MaterialLots: form.Get("materialLots") != ""}
	for _, f := range []string{"runs", "seed"} {
		if v := strings.TrimSpace(form.Get(f)); v != "" {
			if err := app.SetParam(&req, f, v); err != nil {
				return s.renderBenefit(w, r, p, auth.StatusOf(err), form, toFormError(p, err))
			}
		}
	}
	st, err := invoke[app.BenefitStudy](s, r, p, "benefit.run", &req)
	if err != nil {
		return s.renderBenefit(w, r, p, auth.StatusOf(err), form, toFormError(p, err))
	}
	http.Redirect(w, r, "/ui/benefit/"+url.PathEscape(st.ID), http.StatusSeeOther)
	return nil
}

// benefitChart is one mode's series for static/benefit.js.
type benefitChart struct {
	Name     string    `json:"name"`
	RunMeans []float64 `json:"runMeans"`
	AbsError []float64 `json:"absError"`
}

type benefitCharts struct {
	Target   float64        `json:"target"`
	SpecLow  float64        `json:"specLow"`
	SpecHigh float64        `json:"specHigh"`
	Modes    []benefitChart `json:"modes"`
}

func (s *server) benefitStudyPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	st, err := s.app.BenefitShow(r.Context(), p, app.BenefitShowRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Benefit study " + st.ID, "S": st}
	if rep := st.Report; rep != nil {
		ch := benefitCharts{Target: rep.Target, SpecLow: rep.SpecLow, SpecHigh: rep.SpecHigh}
		for _, m := range rep.Modes {
			c := benefitChart{Name: m.Name, RunMeans: m.RunMeans, AbsError: make([]float64, len(m.RunMeans))}
			for i, v := range m.RunMeans {
				c.AbsError[i] = math.Abs(v - rep.Target)
			}
			ch.Modes = append(ch.Modes, c)
		}
		b, err := json.Marshal(ch)
		if err != nil {
			return core.Wrap(core.CodeInternal, err, "benefit charts")
		}
		data["Charts"] = string(b)
		data["SVG"] = benefitSVG(rep, ch)
	}
	s.render(w, r, http.StatusOK, "benefitstudy", &p, data)
	return nil
}

// benefitSVG draws the report's two charts on the server (for a browser
// without scripts).
func benefitSVG(rep *benefit.Result, ch benefitCharts) []*plot.Chart {
	means := &plot.Chart{Title: "Run-mean part weight per run", XLabel: "run", YLabel: "run-mean part weight", YUnit: "g",
		Limits: []plot.Limit{{Name: "target", Y: rep.Target, Color: "#009e73"}, {Name: "spec low", Y: rep.SpecLow, Color: "#c0392b"}, {Name: "spec high", Y: rep.SpecHigh, Color: "#c0392b"}}}
	errs := &plot.Chart{Title: "|run mean − target| per run", XLabel: "run", YLabel: "|run mean − target|", YUnit: "g",
		Limits: []plot.Limit{{Name: "spec half-width", Y: rep.SpecHigh - rep.Target, Color: "#c0392b"}}}
	for _, m := range ch.Modes {
		x := make([]float64, len(m.RunMeans))
		for i := range x {
			x[i] = float64(i + 1)
		}
		means.Series = append(means.Series, plot.Series{Name: m.Name, X: x, Y: m.RunMeans, Markers: len(x) < 30})
		errs.Series = append(errs.Series, plot.Series{Name: m.Name, X: x, Y: m.AbsError, Markers: len(x) < 30})
	}
	return []*plot.Chart{means, errs}
}
