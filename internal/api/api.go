package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/go-chi/chi/v5"
)

// Prefix is where the JSON API lives.
const Prefix = "/api/v1"

// Defaults of Options.
const (
	DefaultMaxBodyBytes    = 8 << 20   // JSON request bodies
	DefaultMaxCSVBytes     = 512 << 20 // CSV uploads
	DefaultMaxBatchSamples = 100_000   // samples in one JSON ingest batch
	DefaultRatePerSec      = 100       // requests per second per token
	DefaultRateBurst       = 200
	DefaultHeavyConcurrent = 4 // trials, optimise, gate, dataset builds at once
)

// CodeRateLimited is a caller over its request rate (HTTP 429).
const CodeRateLimited = core.CodeRateLimited

// Options configure the handler beyond the shared dependencies.
type Options struct {
	// Verifier checks tokens (default: the store's API tokens).
	Verifier auth.Verifier
	// Dev lets tokenless loopback requests run as the dev admin.
	Dev bool
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
	// Now is the clock of certificates and trials (default time.Now).
	Now func() time.Time
}

// Server is the API; it implements http.Handler.
type Server struct {
	d       *service.Deps
	o       Options
	router  chi.Router
	routes  []route
	metrics *metrics
	limiter *limiter
	heavy   chan struct{}
	log     *slog.Logger

	jobLines  sync.Map // job id → line id (SSE line filter of events without a line)
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
	if o.Now == nil {
		o.Now = time.Now
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{d: d, o: o, log: log, heavy: make(chan struct{}, o.HeavyConcurrent), closing: make(chan struct{})}
	s.metrics = newMetrics(d)
	if o.RatePerSec > 0 {
		s.limiter = newLimiter(o.RatePerSec, o.RateBurst)
	}
	s.routes = s.table()
	s.router = s.build()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Routes lists the API routes (method and chi pattern under Prefix).
func (s *Server) Routes() [][2]string {
	out := make([][2]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = [2]string{rt.method, Prefix + rt.path}
	}
	return out
}

func (s *Server) build() chi.Router {
	r := chi.NewRouter()
	r.Use(s.recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, core.Errorf(core.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		auth.WriteErrorStatus(w, http.StatusMethodNotAllowed, core.Errorf(core.CodeUsage, "method %s not allowed on %s", r.Method, r.URL.Path))
	})
	authn := auth.Middleware(s.o.Verifier, s.o.Dev)

	r.Route(Prefix, func(api chi.Router) {
		// Public: the API description and a liveness probe.
		api.Get("/openapi.json", s.instrument("/openapi.json", s.openAPIHandler))
		api.Get("/health", s.instrument("/health", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
		}))
		api.Group(func(g chi.Router) {
			g.Use(authn, s.rateLimit)
			for _, rt := range s.routes {
				g.Method(rt.method, rt.path, s.instrument(rt.path, s.handle(rt)))
			}
		})
	})
	r.Group(func(g chi.Router) {
		g.Use(authn, s.rateLimit)
		g.Method(http.MethodGet, "/metrics", s.instrument("/metrics", func(w http.ResponseWriter, r *http.Request) {
			p, _ := auth.FromContext(r.Context())
			if err := p.Allow(auth.ActRead, ""); err != nil {
				writeError(w, err)
				return
			}
			s.metrics.handler().ServeHTTP(w, r)
		}))
		if s.o.MCP != nil {
			g.Handle("/mcp", s.o.MCP)
			g.Handle("/mcp/*", s.o.MCP)
		}
	})
	if s.o.UI != nil {
		// The UI authenticates softly: a page without a principal sends
		// the browser to its login page (which, with its static assets,
		// needs none).
		ui := auth.OptionalMiddleware(s.o.Verifier, s.o.Dev)(s.o.UI)
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

// rateLimit refuses a caller over its rate with 429 AML_RATE_LIMITED.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	if s.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		key := p.TokenID
		if key == "" {
			key = "name:" + p.Name
		}
		if wait, ok := s.limiter.allow(key, time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
			writeError(w, &core.Error{Code: CodeRateLimited, Message: fmt.Sprintf("more than %g requests per second; retry in %s", s.o.RatePerSec, wait.Round(time.Millisecond))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// call is one request to a routed handler.
type call struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	p     auth.Principal
	act   auth.Action
	ctx   context.Context
	wrote bool // the handler wrote the response itself (streams)
}

// line checks the caller's line scope for the resource's line.
func (c *call) line(lineID string) error { return c.p.Allow(c.act, lineID) }

// param is a path parameter.
func (c *call) param(name string) string { return chi.URLParam(c.r, name) }

// q is a query parameter.
func (c *call) q(name string) string { return c.r.URL.Query().Get(name) }

func (c *call) qInt(name string, def, lo, hi int) (int, error) {
	v := c.q(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, core.FieldErrorf(core.CodeInvalidArgument, name, "%s must be an integer in %d..%d, got %q", name, lo, hi, v)
	}
	return n, nil
}

func (c *call) qBool(name string) (bool, error) {
	v := c.q(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, core.FieldErrorf(core.CodeInvalidArgument, name, "%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// qTime parses epoch milliseconds or RFC 3339.
func (c *call) qTime(name string) (*int64, error) {
	v := c.q(name)
	if v == "" {
		return nil, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return &n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: %q is neither epoch milliseconds nor RFC 3339", name, v)
	}
	ms := t.UnixMilli()
	return &ms, nil
}

// decode reads the JSON body into v: unknown fields are refused (400), a
// body over the limit is 413.
func (c *call) decode(v any) error {
	body := http.MaxBytesReader(c.w, c.r.Body, c.s.o.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err, c.s.o.MaxBodyBytes)
	}
	if _, err := dec.Token(); err != io.EOF {
		return core.FieldErrorf(core.CodeInvalidArgument, "body", "request body must be one JSON value")
	}
	return nil
}

// rawBody reads the whole (limited) body, for documents parsed by their
// own contract parser.
func (c *call) rawBody() ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, c.s.o.MaxBodyBytes))
	if err != nil {
		return nil, bodyError(err, c.s.o.MaxBodyBytes)
	}
	return b, nil
}

// TooLarge is the 413 error of a body over limit bytes.
func TooLarge(limit int64) *core.Error {
	return &core.Error{Code: core.CodeQuotaExceeded, Field: "body",
		Message: fmt.Sprintf("request body larger than %d bytes", limit)}
}

func bodyError(err error, limit int64) error {
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

// handle wraps a routed handler: role check, then the handler, then the
// JSON response.
func (s *Server) handle(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			writeError(w, auth.Unauthenticated("a token is required"))
			return
		}
		if err := p.Allow(rt.act, ""); err != nil {
			writeError(w, err)
			return
		}
		c := &call{s: s, w: w, r: r, p: p, act: rt.act, ctx: r.Context()}
		if rt.heavy {
			select {
			case s.heavy <- struct{}{}:
				defer func() { <-s.heavy }()
			case <-r.Context().Done():
				writeError(w, core.Wrap(core.CodeStoreUnavailable, r.Context().Err(), "request cancelled while waiting for a compute slot"))
				return
			}
		}
		out, err := rt.h(c)
		if c.wrote {
			return
		}
		if err != nil {
			writeError(w, err)
			return
		}
		status := rt.status
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, out)
	}
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

func writeError(w http.ResponseWriter, err error) { auth.WriteError(w, err) }

// list is the envelope of every list response.
type list[T any] struct {
	Items []T `json:"items"`
	Count int `json:"count"`
}

func listOf[T any](items []T) list[T] {
	if items == nil {
		items = []T{}
	}
	return list[T]{Items: items, Count: len(items)}
}

// CloseStreams ends every open event stream and refuses new ones, so a
// graceful http.Server.Shutdown does not wait for SSE clients that never
// hang up. Call it (http.Server.RegisterOnShutdown) when shutting down.
func (s *Server) CloseStreams() { s.closeOnce.Do(func() { close(s.closing) }) }
