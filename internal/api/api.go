package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/go-chi/chi/v5"
)

// Prefix is where the JSON API lives.
const Prefix = "/api/v1"

// Defaults of Options.
const (
	DefaultMaxBodyBytes    = app.DefaultMaxBodyBytes // JSON request bodies
	DefaultMaxCSVBytes     = app.DefaultMaxCSVBytes  // CSV uploads
	DefaultMaxBatchSamples = 100_000                 // samples in one JSON ingest batch
	DefaultRatePerSec      = 100                     // requests per second per token
	DefaultRateBurst       = 200
	DefaultHeavyConcurrent = app.DefaultHeavyConcurrent // trials, optimise, gate, dataset builds at once
	DefaultBodyTimeout     = time.Minute                // a JSON (or form, MCP) request body must arrive within
	DefaultCSVTimeout      = 30 * time.Minute           // a CSV upload must arrive within
	DefaultMaxStreams      = 8                          // event streams one token holds open at once
	DefaultStreamRecheck   = 30 * time.Second           // how often an open event stream re-verifies its token
)

// CodeRateLimited is a caller over its request rate (HTTP 429).
const CodeRateLimited = core.CodeRateLimited

// Options configure the handler beyond the shared dependencies.
type Options struct {
	// Verifier checks tokens (default: the store's API tokens).
	Verifier auth.Verifier
	// Dev lets tokenless loopback requests run as the dev admin — only
	// when their Host is a loopback name or address or one of
	// AllowedHosts, and they come from no other origin (DNS rebinding).
	Dev bool
	// AllowedHosts are further names this server is reached by (host, any
	// port, or host:port): dev mode accepts them as Host, and a browser
	// page served from one of them on the same port is not a foreign
	// origin. aml serve adds its listen address (--allowed-host).
	AllowedHosts []string
	// MCP is mounted at /mcp and UI at / (pages under /ui/) when non-nil.
	MCP http.Handler
	UI  http.Handler
	// Limits; zero values take the defaults above. RatePerSec < 0 turns
	// rate limiting off.
	MaxBodyBytes    int64
	MaxCSVBytes     int64
	MaxBatchSamples int
	RatePerSec      float64
	RateBurst       int
	HeavyConcurrent int
	// BodyTimeout bounds how long a request body may take to arrive
	// (slow clients must not hold a connection and a handler forever);
	// CSVTimeout replaces it for CSV uploads (POST /ingest/csv). A body
	// late is 408 AML_BODY_TIMEOUT. The deadline is lifted once the body
	// is read, so a long call after it is not cut.
	BodyTimeout time.Duration
	CSVTimeout  time.Duration
	// MaxStreams bounds the event streams (/events) one token (or the
	// dev admin) holds open at once: one more is 429 AML_STREAM_LIMIT.
	// < 0: no limit.
	MaxStreams int
	// StreamRecheck is how often an open event stream re-verifies its
	// token: one revoked by another process, or expired, ends its streams
	// within this time. A revoke through this server's App (DELETE
	// /tokens/{id}) ends them at once.
	StreamRecheck time.Duration
	// Now is the clock of certificates and trials (default time.Now);
	// used when App is nil.
	Now func() time.Time
	// App runs the use cases (default: app.New over the deps with Now and
	// HeavyConcurrent). Pass the process's App to share its heavy slots
	// with MCP and the UI.
	App *app.App
}

// Server is the API; it implements http.Handler.
type Server struct {
	d       *service.Deps
	app     *app.App
	o       Options
	router  chi.Router
	routes  []route
	metrics *metrics
	limiter *limiter
	streams *streams
	log     *slog.Logger

	closing   chan struct{}
	closeOnce sync.Once
	docOnce   sync.Once
	doc       map[string]any
}

// New returns the handler serving /api/v1/..., /metrics, /mcp and the UI.
func New(d *service.Deps, o Options) http.Handler { return NewServer(d, o) }

// NewServer is New returning the concrete server (tests and serve use its
// extra methods).
func NewServer(d *service.Deps, o Options) *Server {
	if o.Verifier == nil && d.Store != nil {
		o.Verifier = auth.NewTokens(d.Store.SQL())
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxCSVBytes <= 0 {
		o.MaxCSVBytes = DefaultMaxCSVBytes
	}
	if o.MaxBatchSamples <= 0 {
		o.MaxBatchSamples = DefaultMaxBatchSamples
	}
	if o.RatePerSec == 0 {
		o.RatePerSec = DefaultRatePerSec
	}
	if o.RateBurst <= 0 {
		o.RateBurst = DefaultRateBurst
	}
	if o.HeavyConcurrent <= 0 {
		o.HeavyConcurrent = DefaultHeavyConcurrent
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.CSVTimeout <= 0 {
		o.CSVTimeout = DefaultCSVTimeout
	}
	if o.MaxStreams == 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.StreamRecheck <= 0 {
		o.StreamRecheck = DefaultStreamRecheck
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.App == nil {
		o.App = app.New(d, app.Options{Now: o.Now, HeavyConcurrent: o.HeavyConcurrent, MaxBatchSamples: o.MaxBatchSamples, Version: Version})
	}
	s := &Server{d: d, app: o.App, o: o, log: log, streams: newStreams(), closing: make(chan struct{})}
	s.metrics = newMetrics(d)
	s.app.OnDone(s.metrics.observeOp)
	s.app.OnDone(s.tokenRevoked)
	if o.RatePerSec > 0 {
		s.limiter = newLimiter(o.RatePerSec, o.RateBurst)
	}
	if ui, ok := o.UI.(BodyLimited); ok {
		ui.SetBodyLimits(o.MaxBodyBytes, o.MaxCSVBytes)
	}
	s.routes = table()
	s.router = s.build()
	return s
}

// BodyLimited is a UI handler that takes the API's request body limits for
// its forms and uploads (internal/web's does): NewServer passes them on,
// so a form and an API call are held to the same limits.
type BodyLimited interface {
	SetBodyLimits(maxBody, maxCSV int64)
}

// UICSVPath is the UI's CSV upload, which gets the CSV body timeout.
const UICSVPath = "/ui/ingest/csv"

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Routes lists the API routes (method and chi pattern under Prefix).
func (s *Server) Routes() [][2]string {
	out := make([][2]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = [2]string{rt.Method, Prefix + rt.Path}
	}
	return out
}

func (s *Server) build() chi.Router {
	r := chi.NewRouter()
	r.Use(s.recoverer, s.bodyDeadline)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, core.Errorf(core.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		auth.WriteErrorStatus(w, http.StatusMethodNotAllowed, core.Errorf(core.CodeUsage, "method %s not allowed on %s", r.Method, r.URL.Path))
	})
	// Bearer tokens are checked as given; the session cookie and dev
	// mode's tokenless admin — credentials a browser adds by itself — also
	// need this server's Host and Origin, and the cookie a CSRF token on
	// every state-changing call (auth.CheckCSRF, the UI's check).
	hosts := auth.NewHosts(s.o.AllowedHosts...)
	authn := auth.MiddlewareWith(s.o.Verifier, auth.Options{Dev: s.o.Dev, Hosts: hosts, CSRF: true})

	r.Route(Prefix, func(api chi.Router) {
		// Public: the API description and a liveness probe.
		api.Get("/openapi.json", s.instrument("/openapi.json", s.openAPIHandler))
		api.Get("/health", s.instrument("/health", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
		}))
		api.Group(func(g chi.Router) {
			g.Use(authn, s.rateLimit)
			for _, rt := range s.routes {
				g.Method(rt.Method, rt.Path, s.instrument(rt.Path, s.handle(rt)))
			}
		})
	})
	r.Group(func(g chi.Router) {
		g.Use(authn, s.rateLimit)
		g.Method(http.MethodGet, "/metrics", s.instrument("/metrics", func(w http.ResponseWriter, r *http.Request) {
			// The figures are every line's together (no line label to
			// filter by): a caller scoped to some lines may not read them.
			p, _ := auth.FromContext(r.Context())
			if err := p.AllowEveryLine(auth.ActRead); err != nil {
				writeError(w, err)
				return
			}
			s.metrics.handler().ServeHTTP(w, r)
		}))
		if s.o.MCP != nil {
			mcp := s.mcpStreams(s.limitBody(s.o.MCP))
			g.Handle("/mcp", mcp)
			g.Handle("/mcp/*", mcp)
		}
	})
	if s.o.UI != nil {
		// The UI authenticates softly: a page without a principal sends
		// the browser to its login page (which, with its static assets,
		// needs none).
		// A request that carries one (the session cookie, a bearer token,
		// dev mode's admin) spends from the same per-token bucket as the
		// API's calls.
		ui := auth.OptionalMiddlewareWith(s.o.Verifier, auth.Options{Dev: s.o.Dev, Hosts: hosts})(s.rateLimitSignedIn(s.o.UI))
		r.Handle("/", ui)
		r.Handle("/ui", ui)
		r.Handle("/ui/*", ui)
	}
	return r
}

// recoverer turns a handler panic into a 500 for that request.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("api: panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, core.Errorf(core.CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody holds a request body for a handler that reads it itself (the
// MCP transport, whose library caps bodies at its own 4 MiB) to the
// server's JSON body limit, MaxBodyBytes: the body is read here, before
// the handler runs, and one over the limit — declared or sent chunked — is
// 413 AML_QUOTA_EXCEEDED (a body late is AML_BODY_TIMEOUT), as on every
// JSON route. The handler gets the body read.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		limit := s.o.MaxBodyBytes
		if r.ContentLength > limit {
			writeError(w, TooLarge(limit))
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			writeError(w, bodyError(err, limit))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline gives a request with a body until BodyTimeout (CSV
// uploads: CSVTimeout) to send it: the connection's read deadline, which
// net/http lifts once the body has been read to its end, so the call that
// follows (a trial, an optimisation) is not cut. Requests without a body
// (event streams) have none.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		d := s.o.BodyTimeout
		if r.URL.Path == Prefix+"/ingest/csv" || r.URL.Path == UICSVPath {
			d = s.o.CSVTimeout
		}
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)); err == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, timeout: d}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody turns a missed body deadline into AML_BODY_TIMEOUT.
type deadlineBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, bodyTimeout(b.timeout)
	}
	return n, err
}

func bodyTimeout(d time.Duration) error {
	return &core.Error{Code: core.CodeBodyTimeout, Field: "body",
		Message: fmt.Sprintf("the request body did not arrive within %s", d)}
}

// rateLimit refuses a caller over its rate with 429 AML_RATE_LIMITED.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	if s.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		if s.overRate(w, p) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rateLimitSignedIn is rateLimit for the UI, which authenticates softly: a
// request with a principal spends from that principal's bucket (the one
// its API calls spend from); one without (the login page, its assets)
// has no bucket and goes on to the UI, which asks it to log in.
func (s *Server) rateLimitSignedIn(next http.Handler) http.Handler {
	if s.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := auth.FromContext(r.Context()); ok && s.overRate(w, p) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// overRate takes one request from p's bucket (keyed by its token, else
// its name: dev mode's admin) and, when the bucket is empty, answers 429
// AML_RATE_LIMITED with Retry-After and reports true.
func (s *Server) overRate(w http.ResponseWriter, p auth.Principal) bool {
	key := p.TokenID
	if key == "" {
		key = "name:" + p.Name
	}
	wait, ok := s.limiter.allow(key, time.Now())
	if ok {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
	writeError(w, &core.Error{Code: CodeRateLimited, Message: fmt.Sprintf("more than %g requests per second; retry in %s", s.o.RatePerSec, wait.Round(time.Millisecond))})
	return true
}

// call is one request to a routed handler.
type call struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	p     auth.Principal
	ctx   context.Context
	wrote bool // the handler wrote the response itself (streams)
	// invoked: the op ran (its outcome reached the metrics through
	// App.OnDone); a request refused before is counted by handle.
	invoked bool
}

// param is a path parameter.
func (c *call) param(name string) string { return chi.URLParam(c.r, name) }

// decode reads the JSON body into v: unknown fields are refused (400), a
// body over the limit is 413. An empty body is an empty object (the
// request type's own validation names what is missing).
func (c *call) decode(v any) error {
	body := http.MaxBytesReader(c.w, c.r.Body, c.s.o.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return bodyError(err, c.s.o.MaxBodyBytes)
	}
	if _, err := dec.Token(); err != io.EOF {
		return core.FieldErrorf(core.CodeInvalidArgument, "body", "request body must be one JSON value")
	}
	return nil
}

// request builds the op's request from the path, the query string (GET,
// DELETE) or the JSON body (POST, PUT).
func (c *call) request(rt route, op *app.Op) (any, error) {
	req := op.NewRequest()
	switch rt.Method {
	case http.MethodPost, http.MethodPut:
		// Every field of a body route is in the body: a query parameter
		// would be ignored, so it is refused (a limit such as maxWindows
		// must not be lost silently).
		for name := range c.r.URL.Query() {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s belongs in the JSON body of %s %s, not in the query string", name, rt.Method, rt.Path)
		}
		if err := c.decode(req); err != nil {
			return nil, err
		}
	default:
		for name, vals := range c.r.URL.Query() {
			if err := app.SetParam(req, name, vals...); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
		if err := app.SetParam(req, m[1], c.param(m[1])); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// TooLarge is the 413 error of a body over limit bytes.
func TooLarge(limit int64) *core.Error {
	return &core.Error{Code: core.CodeQuotaExceeded, Field: "body",
		Message: fmt.Sprintf("request body larger than %d bytes", limit)}
}

func bodyError(err error, limit int64) error {
	if t := timeoutIn(err); t != nil {
		return t
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLarge(mbe.Limit)
	}
	var ae *core.Error
	if errors.As(err, &ae) {
		return err
	}
	if errors.Is(err, io.EOF) {
		return core.FieldErrorf(core.CodeInvalidArgument, "body", "request body is empty; a JSON object is required")
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return core.FieldErrorf(core.CodeInvalidArgument, "body", "invalid JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		return core.FieldErrorf(core.CodeInvalidArgument, te.Field, "%s: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return core.FieldErrorf(core.CodeInvalidArgument, strings.Trim(f, `"`), "unknown field %s", f)
	}
	return core.FieldErrorf(core.CodeInvalidArgument, "body", "invalid request body: %v", err)
}

// handle is the one adapter of every route: decode the request into the
// op's type, call the op (which checks role, validation, line scope and
// the heavy slots), encode the answer.
func (s *Server) handle(rt route) http.HandlerFunc {
	op, _ := app.Lookup(rt.Op)
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			writeError(w, auth.Unauthenticated("a token is required"))
			return
		}
		c := &call{s: s, w: w, r: r, p: p, ctx: r.Context()}
		var out any
		var err error
		switch {
		case rt.raw != nil:
			out, err = rt.raw(c, op)
		case op == nil:
			err = core.Errorf(core.CodeInternal, "route %s %s names no op %q", rt.Method, rt.Path, rt.Op)
		case p.Allow(op.Act, "") != nil:
			// The op's own role check, before the body is read: a caller
			// whose role may never take the action costs no decoding.
			err = p.Allow(op.Act, "")
		default:
			var req any
			if req, err = c.request(rt, op); err == nil {
				c.invoked = true
				out, err = op.Invoke(c.ctx, s.app, p, req)
			}
		}
		if c.wrote {
			return
		}
		if err != nil && !c.invoked && op != nil {
			s.metrics.refused(op.Name, err)
		}
		if err != nil {
			if rt.ErrResult && out != nil && !reflect.ValueOf(out).IsZero() {
				writeJSON(w, auth.StatusOf(err), errorWithResult(err, out))
				return
			}
			writeError(w, err)
			return
		}
		writeJSON(w, rt.status(), out)
	}
}

// errorWithResult is an error body that also carries the operation's
// report (a denied write, a failed verification), so the caller sees
// which check failed.
func errorWithResult(err error, result any) any {
	b := auth.BodyOf(err)
	return struct {
		auth.ErrorBody
		Result any `json:"result"`
	}{b, result}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, core.Wrap(core.CodeInternal, err, "encode response"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

// timeoutIn is the AML_BODY_TIMEOUT error anywhere in err's chain (an op
// reading a body may wrap it in its own code).
func timeoutIn(err error) *core.Error {
	for err != nil {
		var ae *core.Error
		if !errors.As(err, &ae) {
			return nil
		}
		if ae.Code == core.CodeBodyTimeout {
			return ae
		}
		err = ae.Err
	}
	return nil
}

func writeError(w http.ResponseWriter, err error) {
	if core.CodeOf(err) == core.CodeBodyTimeout {
		auth.WriteErrorStatus(w, http.StatusRequestTimeout, err)
		return
	}
	auth.WriteError(w, err)
}

// tokenRevoked ends the event streams of a token revoked through the App
// (any front door of this process) at once.
func (s *Server) tokenRevoked(op string, _ time.Duration, out any, err error) {
	if op != "token.revoke" || err != nil {
		return
	}
	if ti, ok := out.(auth.TokenInfo); ok {
		s.streams.endToken(ti.ID, "revoked")
	}
}

// CloseStreams ends every open event stream and refuses new ones, so a
// graceful http.Server.Shutdown does not wait for SSE clients that never
// hang up. Call it (http.Server.RegisterOnShutdown) when shutting down.
func (s *Server) CloseStreams() { s.closeOnce.Do(func() { close(s.closing) }) }
