package web

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/web/plot"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	fsrv := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		fsrv.ServeHTTP(w, r)
	})
}

var funcs = template.FuncMap{
	"num": func(v any) string {
		switch x := v.(type) {
		case float64:
			return fmtNum(x)
		case *float64:
			if x == nil {
				return "–"
			}
			return fmtNum(*x)
		case float32:
			return fmtNum(float64(x))
		case int:
			return strconv.Itoa(x)
		case int64:
			return strconv.FormatInt(x, 10)
		}
		return fmt.Sprint(v)
	},
	"pct": func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "–"
		}
		return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ms": func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z") },
	"msp": func(ms *int64) string {
		if ms == nil {
			return "–"
		}
		return time.UnixMilli(*ms).UTC().Format("2006-01-02 15:04:05Z")
	},
	"fp": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmtNum(*v)
	},
	"json": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err.Error()
		}
		return string(b)
	},
	"rawjson": func(b json.RawMessage) string {
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") != nil {
			return string(b)
		}
		return buf.String()
	},
	"svg":  func(c *plot.Chart) template.HTML { return template.HTML(c.SVG()) }, // our renderer escapes every text it writes
	"join": strings.Join,
	"strs": func(v ...string) []string { return v },
	"mib":  func(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" },
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12] + "…"
		}
		return s
	},
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"list":     func(v ...*splitMetrics) []*splitMetrics { return v },
	"progress": func(v float64) string { return strconv.FormatFloat(100*v, 'f', 0, 64) },
	"fit":      fitCell,
	"list2":    func(v ...string) []string { return v },
	"finite":   finite,
	"day":      func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"clock":    func(t time.Time) string { return t.UTC().Format("15:04:05Z") },
	"derefT":   func(t *time.Time) time.Time { return *t },
	"deref": func(v *float64) float64 {
		if v == nil {
			return math.NaN()
		}
		return *v
	},
	// fpv is a sort key: the number in full, empty when missing.
	"fpv": func(v *float64) string {
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	},
	"bytes": func(n *int64) string {
		if n == nil {
			return "–"
		}
		switch v := float64(*n); {
		case v >= 1<<20:
			return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
		case v >= 1<<10:
			return strconv.FormatFloat(v/(1<<10), 'f', 1, 64) + " KiB"
		}
		return strconv.FormatInt(*n, 10) + " B"
	},
}

// fmtNum prints a figure with about 5 significant digits.
func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	if math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 5, 64)
}

var (
	tmplOnce sync.Once
	tmpls    map[string]*template.Template
)

// templates parses layout.html with each page once.
func templates() map[string]*template.Template {
	tmplOnce.Do(func() {
		tmpls = map[string]*template.Template{}
		entries, err := fs.Glob(templateFS, "templates/*.html")
		if err != nil {
			panic(err)
		}
		// layout.html and the partials (_*.html) are shared by every page.
		base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html"))
		for _, e := range entries {
			name := strings.TrimSuffix(strings.TrimPrefix(e, "templates/"), ".html")
			if name == "layout" || strings.HasPrefix(name, "_") {
				continue
			}
			tmpls[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, e))
		}
	})
	return tmpls
}

// pageData is what every page template sees.
type pageData struct {
	Title string
	User  *auth.Principal
	CSRF  string
	Data  any
	Nav   string
}

// render executes page name into a buffer first, so a template error is
// an error page instead of half a page.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, p *auth.Principal, data any) {
	t, ok := templates()[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	title := name
	if m, ok := data.(map[string]any); ok {
		if v, ok := m["Title"].(string); ok {
			title = v
		}
	}
	pd := pageData{Title: title, User: p, CSRF: csrfToken(r), Data: data, Nav: name}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", pd); err != nil {
		s.log("template", "page", name, "err", err)
		http.Error(w, "template error: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// errorPage shows err with its code and status; a refusal names what the
// role may not do.
func (s *server) errorPage(w http.ResponseWriter, r *http.Request, p *auth.Principal, err error) {
	body := auth.BodyOf(err)
	status := auth.StatusOf(err)
	if status >= 500 {
		s.log("page error", "path", r.URL.Path, "err", err)
	}
	s.render(w, r, status, "error", p, map[string]any{"Title": "Error " + strconv.Itoa(status), "Status": status, "Code": body.Code, "Message": body.Message, "Field": body.Field,
		"Forbidden": body.Code == core.CodeForbidden})
}

func (s *server) log(msg string, args ...any) {
	if s.d != nil && s.d.Log != nil {
		s.d.Log.Warn("web: "+msg, args...)
	}
}
