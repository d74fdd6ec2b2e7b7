package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
)

// Prefix is where the UI lives. The API mounts Handler at "/" and sends
// "/" here.
const Prefix = "/ui/"

// Options configure the UI beyond the shared dependencies.
type Options struct {
	// Verifier checks the token typed on the login page before it is put
	// into the cookie (default: the store's API tokens, app.TokenVerifier).
	Verifier auth.Verifier
	// Now is the clock of approvals and revocations (default time.Now).
	Now func() time.Time
	// SecureCookie marks the session cookie Secure (serve over TLS).
	SecureCookie bool
	// AllowedHosts are further names of this server whose pages are not a
	// foreign origin (as api.Options.AllowedHosts; aml serve passes the
	// same list).
	AllowedHosts []string
	// MaxBodyBytes and MaxCSVBytes limit form bodies and CSV uploads
	// (default app.DefaultMaxBodyBytes, app.DefaultMaxCSVBytes; mounted
	// by the API, its own limits: api.NewServer calls SetBodyLimits).
	MaxBodyBytes, MaxCSVBytes int64
	// App runs the UI's actions (default: app.New over the deps with
	// Now). Pass the process's App to share its heavy slots.
	App *app.App
}

// Handler is the web UI on d (see the package doc). It expects the request
// context to carry the caller's auth.Principal (auth.Middleware puts it
// there); pages without one redirect to the login page.
func Handler(d *service.Deps) http.Handler { return New(d, Options{}) }

// New is Handler with options.
func New(d *service.Deps, o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.App == nil {
		o.App = app.New(d, app.Options{Now: o.Now})
	}
	if o.Verifier == nil {
		o.Verifier = o.App.TokenVerifier()
	}
	s := &server{d: d, app: o.App, o: o, hosts: auth.NewHosts(o.AllowedHosts...), cache: newCache(32)}
	s.lim.body.Store(app.DefaultMaxBodyBytes)
	s.lim.csv.Store(app.DefaultMaxCSVBytes)
	if o.MaxBodyBytes > 0 {
		s.lim.body.Store(o.MaxBodyBytes)
	}
	if o.MaxCSVBytes > 0 {
		s.lim.csv.Store(o.MaxCSVBytes)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, Prefix, http.StatusSeeOther) })
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, Prefix, http.StatusSeeOther) })
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticHandler()))
	mux.HandleFunc("GET /ui/login", s.loginPage)
	mux.HandleFunc("POST /ui/login", s.login)
	mux.HandleFunc("POST /ui/logout", s.logout)

	page := func(pattern string, h func(w http.ResponseWriter, r *http.Request, p auth.Principal) error) {
		mux.HandleFunc(pattern, s.authed(h))
	}
	page("GET /ui/{$}", s.home)
	page("GET /ui/lines/{line}", s.linePage)
	page("GET /ui/lines/{line}/trend", s.trendPage)
	page("GET /ui/runs/{id}", s.runPage)
	page("GET /ui/datasets", s.datasetsPage)
	page("GET /ui/datasets/{id}", s.datasetPage)
	page("GET /ui/jobs", s.jobsPage)
	page("GET /ui/jobs/{id}", s.jobPage)
	page("GET /ui/models", s.modelsPage)
	page("GET /ui/models/compare", s.comparePage)
	page("GET /ui/models/{id}", s.modelPage)
	page("GET /ui/scenes", s.scenesPage)
	page("GET /ui/scenes/{id}/{version}", s.scenePage)
	page("GET /ui/trials", s.trialsPage)
	page("GET /ui/trials/{id}", s.trialPage)
	page("GET /ui/certificates", s.certsPage)
	page("GET /ui/certificates/{id}", s.certPage)
	page("GET /ui/ingest", s.ingestPage)
	page("GET /ui/datasets/new", s.datasetNewPage)
	page("GET /ui/jobs/new", s.jobNewPage)
	for route, h := range twinPages(s) {
		page(route, h)
	}
	for _, a := range actionRoutes(s) {
		if a.Upload {
			mux.HandleFunc(a.Route, s.authedUpload(a.h))
		} else {
			page(a.Route, a.h)
		}
	}
	page("GET /ui/audit", s.auditPage)
	mux.HandleFunc("GET /ui/data/trend", s.dataAPI(s.trendData))
	page("GET /ui/live", s.livePage)
	page("GET /ui/live/fragment", s.liveFragment)
	s.operatorRoutes(page)
	s.benefitRoutes(page)
	return &ui{Handler: securityHeaders(mux), s: s}
}

type server struct {
	d     *service.Deps
	app   *app.App
	o     Options
	hosts *auth.Hosts
	cache *cache
	lim   limits
}

// securityHeaders: the UI loads nothing from elsewhere, so the content
// security policy says so (and no page may frame it).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// authed wraps a page: it needs a principal allowed to read, and turns
// errors into an error page with the error's status.
func (s *server) authed(h func(w http.ResponseWriter, r *http.Request, p auth.Principal) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.errorPage(w, r, nil, auth.Unauthenticated("log in first"))
			return
		}
		if err := p.Allow(auth.ActRead, ""); err != nil {
			s.errorPage(w, r, &p, err)
			return
		}
		if r.Method == http.MethodPost {
			// A form is held to the body limit before a byte of it is
			// read (the CSRF token is in the body).
			r.Body = http.MaxBytesReader(w, r.Body, s.lim.body.Load())
			if err := parseForm(r); err != nil {
				s.errorPage(w, r, &p, err)
				return
			}
			if err := s.checkCSRF(r); err != nil {
				s.errorPage(w, r, &p, err)
				return
			}
		}
		if err := h(w, r, p); err != nil {
			s.errorPage(w, r, &p, err)
		}
	}
}

// authedUpload wraps an upload action: the principal as in authed, the
// body under the CSV limit; the action reads the multipart stream and
// checks the CSRF token (its first part) before the file (readUpload).
func (s *server) authedUpload(h func(w http.ResponseWriter, r *http.Request, p auth.Principal) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			s.errorPage(w, r, nil, auth.Unauthenticated("log in first"))
			return
		}
		if err := p.Allow(auth.ActRead, ""); err != nil {
			s.errorPage(w, r, &p, err)
			return
		}
		if err := s.hosts.CheckOrigin(r); err != nil {
			s.errorPage(w, r, &p, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.lim.csv.Load())
		if err := h(w, r, p); err != nil {
			s.errorPage(w, r, &p, err)
		}
	}
}

// parseForm reads a form body (urlencoded or multipart, under the limit
// the caller set): a body over it is the API's 413.
func parseForm(r *http.Request) error {
	var err error
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
		err = r.ParseMultipartForm(1 << 20)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		return bodyErr(err)
	}
	return nil
}

// csrfToken is what forms carry to prove they were served to the holder
// of the session (auth.CSRFToken: a hash of the session's token, which a
// page on another site cannot know).
func csrfToken(r *http.Request) string { return auth.CSRFToken(r) }

// checkCSRF refuses a POST whose form token is not the session's or that
// a browser sent from another origin (auth.Hosts.CheckCSRF, the check the
// API applies to cookie-authenticated calls). The cookie is SameSite=Strict
// as well; the token also covers dev mode, where no cookie is involved.
func (s *server) checkCSRF(r *http.Request) error {
	return s.hosts.CheckCSRF(r, r.PostFormValue("csrf"))
}

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", nil, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

// login checks the token and stores it in the HttpOnly session cookie the
// auth middleware reads.
//
// A login posted from another origin is refused before the token is read
// (login CSRF: a page elsewhere must not log the browser in as the
// attacker's token): the same Origin / Sec-Fetch-Site / Referer rule as
// every other form (auth.Hosts.CheckOrigin). There is no session yet, so
// there is no CSRF token to check.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.hosts.CheckOrigin(r); err != nil {
		s.errorPage(w, r, nil, err)
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	fail := func(status int, msg string) {
		s.render(w, r, status, "login", nil, map[string]any{"Next": next, "Error": msg})
	}
	if tok == "" {
		fail(http.StatusBadRequest, "Paste your API token (aml token create prints it once).")
		return
	}
	if s.o.Verifier == nil {
		fail(http.StatusServiceUnavailable, "This server cannot verify tokens.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	p, err := s.o.Verifier.VerifyToken(ctx, tok)
	if err != nil {
		var ae *core.Error
		if errors.As(err, &ae) && ae.Code == auth.CodeUnauthenticated {
			fail(http.StatusUnauthorized, "That token is unknown, expired or revoked.")
			return
		}
		fail(http.StatusInternalServerError, err.Error())
		return
	}
	_ = p
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.o.SecureCookie,
		MaxAge: int((12 * time.Hour).Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.hosts.CheckOrigin(r); err != nil {
		s.errorPage(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect inside the UI.
func safeNext(n string) string {
	if strings.HasPrefix(n, Prefix) && !strings.HasPrefix(n, "//") && !strings.Contains(n, "\\") {
		return n
	}
	return Prefix
}

// cache keeps computed plots (predicted vs actual, recomputed trials):
// they depend only on immutable records, so an entry never goes stale.
type cache struct {
	mu    sync.Mutex
	max   int
	order []string
	m     map[string]any
}

func newCache(n int) *cache { return &cache{max: n, m: map[string]any{}} }

func (c *cache) get(k string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *cache) put(k string, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		c.order = append(c.order, k)
	}
	c.m[k] = v
	for len(c.order) > c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}
