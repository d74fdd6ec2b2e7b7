package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/aml-project/aml/internal/core"
)

// CookieName is the web UI's session cookie carrying the token.
const CookieName = "aml_token"

// DevPrincipal is the caller of tokenless loopback requests in dev mode.
var DevPrincipal = Principal{Name: "dev", Role: RoleAdmin}

// Verifier resolves a presented token to its principal.
type Verifier interface {
	VerifyToken(ctx context.Context, token string) (Principal, error)
}

// Middleware authenticates "Authorization: Bearer <token>" (or the UI's
// cookie aml_token) with v and puts the Principal into the request context.
// A missing or invalid token is 401 AML_UNAUTHENTICATED as JSON
// {code,message,field}. With dev=true, a request from a loopback address
// without any token runs as DevPrincipal; a request that presents a token
// is always verified, so dev mode can still be used to test roles.
func Middleware(v Verifier, dev bool) func(http.Handler) http.Handler {
	return MiddlewareWith(v, Options{Dev: dev})
}

// Options configure MiddlewareWith and OptionalMiddlewareWith.
type Options struct {
	// Dev lets tokenless loopback requests run as DevPrincipal, when their
	// Host is on Hosts and they come from no other origin (CheckDevHost).
	Dev bool
	// Hosts is the Host allow-list of dev mode and the other origins
	// trusted (default: NewHosts(), the loopback names).
	Hosts *Hosts
	// CSRF: a request authenticated by the session cookie (not a bearer
	// token) that changes state must pass CheckCSRF with the X-CSRF-Token
	// header (the API; the UI checks its forms' field itself).
	CSRF bool
}

// MiddlewareWith is Middleware with options.
func MiddlewareWith(v Verifier, o Options) func(http.Handler) http.Handler {
	if o.Hosts == nil {
		o.Hosts = NewHosts()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, cookie, bad := tokenFrom(r)
			if bad != "" {
				WriteError(w, Unauthenticated(bad))
				return
			}
			if tok == "" {
				if o.Dev && IsLoopback(r.RemoteAddr) {
					if err := o.Hosts.CheckDevHost(r); err != nil {
						WriteError(w, err)
						return
					}
					next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), DevPrincipal)))
					return
				}
				WriteError(w, Unauthenticated("a token is required: Authorization: Bearer <token>"))
				return
			}
			p, err := v.VerifyToken(r.Context(), tok)
			if err != nil {
				var ae *core.Error
				if errors.As(err, &ae) && ae.Code == CodeUnauthenticated {
					WriteError(w, ae)
					return
				}
				WriteError(w, err)
				return
			}
			if cookie && o.CSRF && Unsafe(r.Method) {
				if err := o.Hosts.CheckCSRF(r, r.Header.Get(CSRFHeader)); err != nil {
					WriteError(w, err)
					return
				}
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}

// CodeUnauthenticated is a missing, unknown or revoked token (HTTP 401).
const CodeUnauthenticated = core.CodeUnauthenticated

// Unauthenticated returns a 401 AML_UNAUTHENTICATED error (field "token").
func Unauthenticated(msg string) *core.Error {
	return &core.Error{Code: CodeUnauthenticated, Message: msg, Field: "token"}
}

// Token extracts the presented token: the Authorization bearer token, else
// the aml_token cookie. bad is a message when the header is present but
// malformed.
func Token(r *http.Request) (tok, bad string) {
	tok, _, bad = tokenFrom(r)
	return tok, bad
}

// tokenFrom is Token that also says whether the token came from the
// cookie (which a browser adds by itself).
func tokenFrom(r *http.Request) (tok string, cookie bool, bad string) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(rest) == "" {
			return "", false, "Authorization header must be \"Bearer <token>\""
		}
		return strings.TrimSpace(rest), false, ""
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return c.Value, true, ""
	}
	return "", false, ""
}

// IsLoopback reports whether a RemoteAddr ("host:port") is a loopback
// address.
func IsLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// kindStatus is the HTTP status of each error kind: the one place where
// AML's errors meet HTTP (docs/errors.md shows it per code).
var kindStatus = map[core.Kind]int{
	core.KindInvalid:         http.StatusBadRequest,
	core.KindUsage:           http.StatusBadRequest,
	core.KindUnauthenticated: http.StatusUnauthorized,
	core.KindForbidden:       http.StatusForbidden,
	core.KindNotFound:        http.StatusNotFound,
	core.KindConflict:        http.StatusConflict,
	core.KindExpired:         http.StatusGone,
	core.KindTooLarge:        http.StatusRequestEntityTooLarge,
	core.KindUnprocessable:   http.StatusUnprocessableEntity,
	core.KindRateLimited:     http.StatusTooManyRequests,
	core.KindInternal:        http.StatusInternalServerError,
	core.KindFailed:          http.StatusInternalServerError,
	core.KindUpstream:        http.StatusBadGateway,
	core.KindUnavailable:     http.StatusServiceUnavailable,
}

// HTTPStatus is the HTTP status of errors of kind k (500 for an unknown
// kind).
func HTTPStatus(k core.Kind) int {
	if s, ok := kindStatus[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// StatusOf is the HTTP status of err: that of its code's kind; 500 for an
// error without an AML code.
func StatusOf(err error) int { return HTTPStatus(core.KindOf(err)) }

// BodyOf is the error body of err.
func BodyOf(err error) ErrorBody {
	var ae *core.Error
	if errors.As(err, &ae) {
		return ErrorBody{Code: ae.Code, Message: ae.Message, Field: ae.Field}
	}
	return ErrorBody{Code: core.CodeInternal, Message: err.Error()}
}

// WriteError writes err as {code,message,field} with its HTTP status. It is
// shared by the API, MCP over HTTP and the UI so errors look the same.
func WriteError(w http.ResponseWriter, err error) { WriteErrorStatus(w, StatusOf(err), err) }

// WriteErrorStatus is WriteError with a status the transport chose itself
// rather than the one of err's kind (405 for a method a route does not
// allow, whose code is AML_USAGE).
func WriteErrorStatus(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The body is plain strings, so only the write can fail: the client is
	// gone and the status already sent.
	_ = json.NewEncoder(w).Encode(BodyOf(err))
}

// OptionalMiddleware is Middleware for pages that handle the anonymous
// case themselves (the web UI sends them to its login page): a valid token
// puts its Principal into the context, dev mode on loopback the
// DevPrincipal; a missing or invalid token passes through without one.
// Store failures are still errors (503), never a silent anonymous request.
func OptionalMiddleware(v Verifier, dev bool) func(http.Handler) http.Handler {
	return OptionalMiddlewareWith(v, Options{Dev: dev})
}

// OptionalMiddlewareWith is OptionalMiddleware with options (CSRF is the
// pages' own business and ignored here). A dev-mode tokenless request
// with a foreign Host or Origin is refused (403), not served anonymously.
func OptionalMiddlewareWith(v Verifier, o Options) func(http.Handler) http.Handler {
	if o.Hosts == nil {
		o.Hosts = NewHosts()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, _ := Token(r)
			if tok == "" {
				if o.Dev && IsLoopback(r.RemoteAddr) {
					if err := o.Hosts.CheckDevHost(r); err != nil {
						WriteError(w, err)
						return
					}
					r = r.WithContext(WithPrincipal(r.Context(), DevPrincipal))
				}
				next.ServeHTTP(w, r)
				return
			}
			p, err := v.VerifyToken(r.Context(), tok)
			if err != nil {
				var ae *core.Error
				if errors.As(err, &ae) && ae.Code == CodeUnauthenticated {
					next.ServeHTTP(w, r)
					return
				}
				WriteError(w, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}

// Browser requests are checked here, once for the API, MCP over HTTP and
// the web UI:
//
//   - Host: a tokenless request in dev mode runs as admin, so its Host must
//     be one this server is known by (Hosts.AllowHost) — a page on another
//     site that rebinds its DNS name to 127.0.0.1 sends its own name and is
//     refused (DNS rebinding).
//   - Origin (CheckOrigin): a request a browser sent from another site is
//     refused whenever a credential the browser adds by itself (the session
//     cookie, or dev mode's "loopback is admin") would authenticate it.
//   - CSRF token (CSRFToken, CheckCSRF): state-changing requests
//     authenticated by the cookie also carry a token derived from the
//     session, which a page on another site cannot know: the UI's forms
//     as the "csrf" field, API calls as the X-CSRF-Token header.
//
// A bearer token is never added by a browser, so bearer requests are not
// subject to these checks (CLI and scripted clients send no Origin).

// CSRFHeader carries the CSRF token of a cookie-authenticated API call.
const CSRFHeader = "X-CSRF-Token"

// Hosts is the allow-list of Host names a dev-mode tokenless request may
// name: the loopback names and addresses, plus the server's listen
// address and names configured with aml serve --allowed-host.
type Hosts struct {
	names map[string]bool // host names (any port)
	exact map[string]bool // host:port entries
}

// NewHosts returns the loopback names (localhost, 127.0.0.0/8, ::1) plus
// extra: each a host name or IP ("aml.local": any port) or host:port
// ("aml.local:8443": only that port). Unspecified addresses (0.0.0.0, ::)
// name no host and are skipped.
func NewHosts(extra ...string) *Hosts {
	h := &Hosts{names: map[string]bool{"localhost": true}, exact: map[string]bool{}}
	for _, e := range extra {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(e); err == nil {
			if !unspecified(host) && host != "" {
				h.exact[net.JoinHostPort(host, port)] = true
			}
			continue
		}
		e = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")
		if !unspecified(e) {
			h.names[e] = true
		}
	}
	return h
}

func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// splitHost splits a Host header (or URL host) into a lower-case name
// without brackets and its port ("" when none).
func splitHost(hostport string) (host, port string) {
	hostport = strings.ToLower(hostport)
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

// AllowHost reports whether hostport (a request's Host) is on the list.
func (h *Hosts) AllowHost(hostport string) bool {
	host, port := splitHost(hostport)
	if host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	if h == nil {
		return host == "localhost"
	}
	return h.names[host] || (port != "" && h.exact[net.JoinHostPort(host, port)])
}

// sameOrigin reports whether the host of an Origin or Referer URL is the
// request's own Host, or an allowed host on the same port (localhost and
// 127.0.0.1 name the same server; another port is another origin).
func (h *Hosts) sameOrigin(r *http.Request, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	host, port := splitHost(u.Host)
	_, rport := splitHost(r.Host)
	if port != rport {
		return h != nil && h.exact[net.JoinHostPort(host, port)]
	}
	return h.AllowHost(u.Host)
}

// Origin refusals, AML_FORBIDDEN with the field naming the check.
func originError(field, format string, args ...any) error {
	return core.FieldErrorf(core.CodeForbidden, field, format, args...)
}

// CheckOrigin refuses a request a browser sent on behalf of another site:
// an Origin header, when present, must be this server's origin (Host) or an
// allowed host on the same port — "null" (sandboxed frames, file: pages) is
// refused; without Origin, Sec-Fetch-Site must not say cross-site or
// same-site, and a Referer, when present, must be of this origin. A
// request with none of these headers is not from a browser and passes.
func (h *Hosts) CheckOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		if !h.sameOrigin(r, o) {
			return originError("origin", "request from another origin (%s) refused", o)
		}
		return nil
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return originError("origin", "request from another site (Sec-Fetch-Site: %s) refused", site)
	}
	if ref := r.Header.Get("Referer"); ref != "" && !h.sameOrigin(r, ref) {
		return originError("origin", "request from another origin (Referer %s) refused", ref)
	}
	return nil
}

// CheckDevHost refuses a dev-mode tokenless request whose Host is not on
// the list, or that a browser sent from another origin.
func (h *Hosts) CheckDevHost(r *http.Request) error {
	if !h.AllowHost(r.Host) {
		return originError("host", "dev mode: Host %q is not this server (allowed: loopback names and addresses, the listen address, --allowed-host); present a token", r.Host)
	}
	return h.CheckOrigin(r)
}

// CSRFToken is the token that proves a form or call came from a page
// served to the holder of the session: a hash of the session's token (the
// cookie, or a bearer token), which a page on another site cannot know.
// Without a token (dev mode) it is keyed by a random secret of the process
// instead, so it is not a constant anyone could compute.
func CSRFToken(r *http.Request) string {
	tok, _ := Token(r)
	if tok == "" {
		m := hmac.New(sha256.New, devCSRFKey)
		m.Write([]byte("aml-ui-csrf-dev"))
		return hex.EncodeToString(m.Sum(nil)[:16])
	}
	s := sha256.Sum256([]byte("aml-ui-csrf\x00" + tok))
	return hex.EncodeToString(s[:16])
}

// devCSRFKey keys the CSRF token of tokenless (dev mode) sessions.
var devCSRFKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
}()

// CheckCSRF refuses a state-changing request of a browser session: one
// from another origin (CheckOrigin) or whose token got is not the
// session's (CSRFToken).
func (h *Hosts) CheckCSRF(r *http.Request, got string) error {
	if err := h.CheckOrigin(r); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(CSRFToken(r))) != 1 {
		return originError("csrf", "the CSRF token is missing or not this session's (forms: reload the page; API calls with the session cookie: send the page's token in %s)", CSRFHeader)
	}
	return nil
}

// Unsafe reports whether method changes state (anything but GET, HEAD,
// OPTIONS, TRACE).
func Unsafe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}
