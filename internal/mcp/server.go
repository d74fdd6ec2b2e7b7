package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/render"
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
no tool approves, revokes or executes certificates, promotes a model,
freezes a scene or sets a channel. Argument names are those of the AML API
(model, snapshot, objective, id, line, ...); durations are strings such as
"90s" or "15m", instants epoch milliseconds or RFC 3339. Errors carry an AML
code and the offending field ("AML_FORBIDDEN: lineId: ...").`

// MetaOp is the key of a tool's _meta that names the application operation
// (internal/app) the tool calls.
const MetaOp = "aml/op"

// NewServer returns an MCP server whose tools call a's operations as
// principal p. The application checks p's role and line scope, validates
// the request and takes a heavy-operation slot where the operation needs
// one, exactly as for the API and the CLI; p.Name is the actor recorded in
// the store and audit log.
func NewServer(a *app.App, p auth.Principal) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "aml", Title: "AML", Version: Version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       a.Deps().Log,
	})
	defs, err := toolDefs()
	if err != nil {
		// The table names this package's ops; a failure is a programming
		// error caught by the tests that list the tools.
		panic("mcp: " + err.Error())
	}
	for _, d := range defs {
		s.AddTool(d.tool, handler(a, p, d))
	}
	s.AddReceivingMiddleware(toolErrors)
	return s
}

// HTTPHandler serves MCP over streamable HTTP for the principal that the
// surrounding authentication middleware put into each request's context
// (auth.WithPrincipal). It runs stateless: every HTTP request gets a
// server for its own principal, so a session can never outlive or borrow
// another token's rights. A request without a principal is 401. Every
// server calls the same App, so the heavy-operation slots are shared by
// all requests (and with the other interfaces on a).
func HTTPHandler(a *app.App) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			return nil
		}
		return NewServer(a, p)
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: a.Deps().Log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.FromContext(r.Context()); !ok {
			auth.WriteError(w, auth.Unauthenticated("MCP needs an authenticated caller: Authorization: Bearer <token>"))
			return
		}
		h.ServeHTTP(w, r)
	})
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

// toolDef is a tool of the table bound to its op, with its schemas.
type toolDef struct {
	tool *sdk.Tool
	op   *app.Op
	// wrapped: the op's response is not a JSON object; the structured
	// content is {"result": response}.
	wrapped bool
}

var (
	defsOnce sync.Once
	defs     []toolDef
	defsErr  error
)

// toolDefs builds the tools of the table once (HTTPHandler builds a server
// per request; the tools and their schemas are shared and never changed).
func toolDefs() ([]toolDef, error) {
	defsOnce.Do(func() {
		for _, t := range tools {
			d, err := bindTool(t)
			if err != nil {
				defsErr = err
				return
			}
			defs = append(defs, d)
		}
	})
	return defs, defsErr
}

// bindTool looks up the op a row names and derives the tool's schemas from
// the op's request and response types.
func bindTool(t tool) (toolDef, error) {
	op, ok := app.Lookup(t.op)
	if !ok {
		return toolDef{}, fmt.Errorf("tool %s: no app op %q", t.name, t.op)
	}
	in, err := app.Schema(op.Req)
	if err != nil {
		return toolDef{}, fmt.Errorf("tool %s: input schema of %s: %w", t.name, op.Req, err)
	}
	out, wrapped, err := OutputSchema(op)
	if err != nil {
		return toolDef{}, fmt.Errorf("tool %s: output schema of %s: %w", t.name, op.Resp, err)
	}
	f := false
	destructive := t.hints.destructive
	return toolDef{op: op, wrapped: wrapped, tool: &sdk.Tool{
		Meta:        sdk.Meta{MetaOp: op.Name},
		Name:        t.name,
		Title:       t.title,
		Description: t.description,
		Annotations: &sdk.ToolAnnotations{
			Title:           t.title,
			ReadOnlyHint:    t.hints.readOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  t.hints.idempotent,
			OpenWorldHint:   &f,
		},
		InputSchema:  in,
		OutputSchema: out,
	}}, nil
}

// OutputSchema is the output schema of a tool that calls op: the schema of
// its response type (a pointer's element), or, when that is not a JSON
// object, an object {"result": response} (wrapped true), so that the
// structured content is always an object.
func OutputSchema(op *app.Op) (s *jsonschema.Schema, wrapped bool, err error) {
	t := op.Resp
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err = app.Schema(t)
	if err != nil {
		return nil, false, err
	}
	if s.Type == "object" {
		return s, false, nil
	}
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"result": s}, Required: []string{"result"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}, true, nil
}

// handler decodes the arguments into the op's request type, calls the op
// as p and returns its response as the structured content, that JSON as
// the first text block and, where the op has one, its rendering for
// people (internal/render: what the CLI prints) as the second.
func handler(a *app.App, p auth.Principal, d toolDef) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		in, err := decodeArgs(d.op, req.Params.Arguments)
		if err != nil {
			return failed(err), nil
		}
		out, err := d.op.Invoke(ctx, a, p, in)
		if err != nil {
			return failed(err), nil
		}
		// A nil pointer is the zero response, never null content.
		if v := reflect.ValueOf(out); v.Kind() == reflect.Pointer && v.IsNil() {
			out = reflect.Zero(v.Type().Elem()).Interface()
		}
		// The summary a person sees in the CLI, for the agent to quote.
		summary := render.String(d.op.Name, in, out)
		if d.wrapped {
			out = map[string]any{"result": out}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return failed(core.Wrap(core.CodeInternal, err, "%s: encode the result", d.tool.Name)), nil
		}
		res := &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
		if summary != "" {
			res.Content = append(res.Content, &sdk.TextContent{Text: summary})
		}
		return res, nil
	}
}

func failed(err error) *sdk.CallToolResult {
	r := &sdk.CallToolResult{}
	r.SetError(err)
	return r
}

// decodeArgs decodes a tool call's arguments into a new request of op's
// type: a JSON object whose fields are the request's json fields; unknown
// fields are refused. No arguments is the zero request (the op validates
// it).
func decodeArgs(op *app.Op, raw json.RawMessage) (any, error) {
	in := op.NewRequest()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return in, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return nil, argError(op, raw, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "arguments", "one JSON object expected")
	}
	return in, nil
}

// argError turns a decoding error into AML_INVALID_ARGUMENT (or the code
// a value's own decoder chose): on the offending field when it can be
// told, else on "arguments".
func argError(op *app.Op, raw json.RawMessage, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return core.FieldErrorf(core.CodeInvalidArgument, te.Field, "want %s, got %s", jsonKind(te.Type), te.Value)
	}
	var ae *core.Error
	if errors.As(err, &ae) && ae.Field != "" {
		return err // a document's own parser named the field (a spec, a scene)
	}
	if errors.As(err, &ae) {
		// A value's own decoder (a duration, an instant, a contract type)
		// does not name its field: find it by decoding field by field.
		return core.FieldErrorf(ae.Code, badField(op, raw), "%s", ae.Message)
	}
	return core.FieldErrorf(core.CodeInvalidArgument, "arguments", "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// badField is the name of the first top-level argument that does not
// decode into its request field on its own, or "arguments".
func badField(op *app.Op, raw json.RawMessage) string {
	var args map[string]json.RawMessage
	if json.Unmarshal(raw, &args) != nil {
		return "arguments"
	}
	for _, f := range app.Fields(op.Req) {
		v, ok := args[f.Name]
		if !ok {
			continue
		}
		if json.Unmarshal(v, reflect.New(f.Type).Interface()) != nil {
			return f.Name
		}
	}
	return "arguments"
}

// jsonKind names the JSON value a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
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
// message, field, status}. An error that is not an AML error (none should
// reach here: the handlers return AML errors) becomes AML_INVALID_ARGUMENT
// on field "arguments".
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
