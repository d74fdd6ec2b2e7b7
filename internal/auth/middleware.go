package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
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
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, bad := Token(r)
			if bad != "" {
				WriteError(w, Unauthenticated(bad))
				return
			}
			if tok == "" {
				if dev && IsLoopback(r.RemoteAddr) {
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
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(rest) == "" {
			return "", "Authorization header must be \"Bearer <token>\""
		}
		return strings.TrimSpace(rest), ""
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return c.Value, ""
	}
	return "", ""
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
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, _ := Token(r)
			if tok == "" {
				if dev && IsLoopback(r.RemoteAddr) {
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
