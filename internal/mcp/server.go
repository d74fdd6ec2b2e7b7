package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is reported as the server implementation's version.
var Version = "dev"

// instructions tell a model what the server is for and what it cannot do.
const instructions = `AML tools: build datasets from production-line time series, train and rank
process models, and run virtual trials on the digital twin. Nothing here
writes to a machine: trials and optimisations are simulations
(candidateExecuted is always false). twin_certificate_request only queues a
signed recommendation (status ISSUED) for a person with the approver role;
no tool approves, revokes or executes certificates, promotes a model to
production or freezes a scene. Errors carry an AML code and the offending
field ("AML_FORBIDDEN: lineId: ...").`

// NewServer returns an MCP server whose tools act on d as principal p:
// every tool checks p's role and line scope before it reads or changes
// anything, and p.Name is the actor recorded in the store and audit log.
func NewServer(d *service.Deps, p auth.Principal) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "aml", Title: "AML", Version: Version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       d.Log,
		SchemaCache:  schemaCache,
	})
	t := &toolbox{d: d, p: p, now: time.Now}
	t.register(s)
	s.AddReceivingMiddleware(toolErrors)
	return s
}

// HTTPHandler serves MCP over streamable HTTP for the principal that the
// surrounding authentication middleware put into each request's context
// (auth.WithPrincipal). It runs stateless: every HTTP request gets a
// server for its own principal, so a session can never outlive or borrow
// another token's rights. A request without a principal is 401.
func HTTPHandler(d *service.Deps) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			return nil
		}
		return NewServer(d, p)
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: d.Log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.FromContext(r.Context()); !ok {
			auth.WriteError(w, auth.Unauthenticated("MCP needs an authenticated caller: Authorization: Bearer <token>"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// toolbox carries what every tool handler needs.
type toolbox struct {
	d   *service.Deps
	p   auth.Principal
	now func() time.Time
}

// hints are a tool's behaviour annotations. Every AML tool acts only on
// AML's own store and files (openWorldHint false).
type hints struct {
	readOnly, destructive, idempotent bool
}

var (
	readOnly = hints{readOnly: true, idempotent: true}
	additive = hints{}
)

// toolDef names and describes one tool.
type toolDef struct {
	name, title, description string
	hints                    hints
}

// add registers a typed tool. The input schema is inferred by the SDK from
// In (jsonschema tags are the descriptions); the output schema from Out
// with outputSchema. fn's errors become tool errors (see toolErrors).
func add[In, Out any](s *sdk.Server, def toolDef, fn func(ctx context.Context, in In) (Out, error)) {
	f := false
	destructive := def.hints.destructive
	tool := &sdk.Tool{
		Name:        def.name,
		Title:       def.title,
		Description: def.description,
		Annotations: &sdk.ToolAnnotations{
			Title:           def.title,
			ReadOnlyHint:    def.hints.readOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  def.hints.idempotent,
			OpenWorldHint:   &f,
		},
		OutputSchema: outputSchema[Out](),
	}
	sdk.AddTool(s, tool, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		out, err := fn(ctx, in)
		if err != nil {
			var zero Out
			var ae *core.Error
			if !errors.As(err, &ae) {
				err = core.Wrap(core.CodeInternal, err, "%s", def.name)
			}
			return nil, zero, err
		}
		return nil, out, nil
	})
}

// ToolError is the structured content of a failed tool call: the AML
// error's code, its kind (docs/errors.md), message, offending field and
// HTTP-equivalent status.
type ToolError struct {
	Code     string         `json:"code"`
	Kind     core.Kind      `json:"kind"`
	Message  string         `json:"message"`
	Field    string         `json:"field,omitempty"`
	Status   int            `json:"status"`
	Problems []core.Problem `json:"problems,omitempty"`
}

// toolErrors rewrites failed tool calls so a client sees the AML error:
// text "CODE: field: message" and structured content {code, kind,
// message, field, status}. Errors the SDK raises before a handler runs (arguments
// that do not match the input schema) become AML_INVALID_ARGUMENT on field
// "arguments".
func toolErrors(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/call" {
			return res, err
		}
		r, ok := res.(*sdk.CallToolResult)
		if !ok || !r.IsError {
			return res, err
		}
		var ae *core.Error
		if e := r.GetError(); e != nil && !errors.As(e, &ae) {
			ae = core.FieldErrorf(core.CodeInvalidArgument, "arguments", "%v", e)
		}
		if ae == nil {
			return res, err
		}
		te := ToolError{Code: ae.Code, Kind: ae.Kind(), Message: ae.Message, Field: ae.Field, Status: auth.StatusOf(ae), Problems: ae.Problems}
		r.Content = []sdk.Content{&sdk.TextContent{Text: ae.Error()}}
		r.StructuredContent = te
		return r, nil
	}
}

var schemaCache = sdk.NewSchemaCache()

var (
	outSchemaMu sync.Mutex
	outSchemas  = map[reflect.Type]*jsonschema.Schema{}
)

// outputSchema infers the output schema of T once. Two things differ from
// the SDK's own inference so that the schema describes what encoding/json
// actually writes: a type with its own MarshalJSON (json.RawMessage
// metrics, numbers that encode NaN as null, …) accepts any value, and a
// map may be null (a nil map encodes as null).
func outputSchema[T any]() *jsonschema.Schema {
	rt := reflect.TypeFor[T]()
	outSchemaMu.Lock()
	defer outSchemaMu.Unlock()
	if s, ok := outSchemas[rt]; ok {
		return s
	}
	over := map[reflect.Type]*jsonschema.Schema{}
	collectOverrides(rt, over, map[reflect.Type]bool{})
	s, err := jsonschema.ForType(rt, &jsonschema.ForOptions{TypeSchemas: over})
	if err != nil {
		// Output types are this package's own; a failure is a programming
		// error caught by the tests that list the tools.
		panic("mcp: output schema of " + rt.String() + ": " + err.Error())
	}
	outSchemas[rt] = s
	return s
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	timeType      = reflect.TypeFor[time.Time]()
)

func collectOverrides(t reflect.Type, over map[reflect.Type]*jsonschema.Schema, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	if t != timeType && t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface &&
		(t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)) {
		over[t] = &jsonschema.Schema{}
		return
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		collectOverrides(t.Elem(), over, seen)
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			over[t] = &jsonschema.Schema{Types: []string{"null", "object"}}
		} else {
			over[t] = &jsonschema.Schema{}
		}
	case reflect.Struct:
		if t == timeType {
			return
		}
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				collectOverrides(f.Type, over, seen)
			}
		}
	}
}
