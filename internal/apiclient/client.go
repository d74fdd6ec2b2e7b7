// Package apiclient is a Go client of AML's HTTP API driven by its route
// table (api.RouteTable): Call sends an op's request — a value of the
// internal/app request type — to the route that names the op, with the
// fields in the path, the query string or the JSON body as the server
// decodes them (app.ParamValues is the one URL codec of both sides), and
// decodes the answer into the op's response type. An error answer becomes
// the *core.Error the op returned on the server (code, message, field); a
// denied write's or a failed verification's report is decoded into the
// answer too. Events follows the server's event stream. The CLI's --server
// mode is this client.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/api"
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// Client is a JSON client of the API under /api/v1 at Base, sending Token
// as the bearer token.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// New returns a client of the server at base (scheme://host:port).
func New(base, token string) *Client { return &Client{Base: base, Token: token, HTTP: &http.Client{}} }

// req is one API request. body is nil, an io.Reader (a CSV upload) or a
// value encoded as JSON.
type req struct {
	method, path string
	query        url.Values
	body         any
	// result decodes the "result" member of an error body (a denied write,
	// a failed verification) so the caller can print it before the error.
	result any
}

// apiErrorBody is the API's error body, with the optional operation
// report.
type apiErrorBody struct {
	auth.ErrorBody
	Result json.RawMessage `json:"result,omitempty"`
}

func (c *Client) newRequest(ctx context.Context, r req) (*http.Request, error) {
	u := c.Base + "/api/v1" + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	ct := "application/json"
	switch b := r.body.(type) {
	case nil:
	case io.Reader:
		body, ct = b, "text/csv"
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "encode request")
		}
		body = bytes.NewReader(js)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, core.FieldErrorf(core.CodeUsage, "server", "--server: %v", err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", ct)
	}
	hr.Header.Set("Accept", "application/json")
	if c.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return hr, nil
}

// send performs a request and returns the response when its status is
// 2xx; otherwise the server's error as a *core.Error.
func (c *Client) send(ctx context.Context, r req) (*http.Response, error) {
	hr, err := c.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	res, err := c.HTTP.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "server %s unreachable", c.Base)
	}
	if res.StatusCode/100 == 2 {
		return res, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var eb apiErrorBody
	if json.Unmarshal(b, &eb) != nil || eb.Code == "" {
		// Not an AML error body (a proxy, a wrong URL): say what came back.
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return nil, &core.Error{Code: codeForStatus(res.StatusCode),
			Message: fmt.Sprintf("server %s answered %s %s with HTTP %d: %s", c.Base, r.method, r.path, res.StatusCode, msg)}
	}
	if r.result != nil && len(eb.Result) > 0 && string(eb.Result) != "null" {
		_ = json.Unmarshal(eb.Result, r.result)
	}
	return nil, &core.Error{Code: eb.Code, Message: eb.Message, Field: eb.Field}
}

// do sends r and decodes a JSON answer into out (nil: discard).
func (c *Client) do(ctx context.Context, r req, out any) error {
	res, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, res.Body)
		return err
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return core.Wrap(core.CodeInternal, err, "decode the answer of %s %s", r.method, r.path)
	}
	return nil
}

// codeForStatus names a non-AML error answer by its status.
func codeForStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return auth.CodeUnauthenticated
	case http.StatusForbidden:
		return core.CodeForbidden
	case http.StatusNotFound:
		return core.CodeNotFound
	case http.StatusRequestEntityTooLarge:
		return core.CodeQuotaExceeded
	}
	if status >= 500 {
		return core.CodeStoreUnavailable
	}
	return core.CodeInvalidArgument
}

// Event is one event of /api/v1/events.
type Event struct {
	Kind string
	Data []byte
}

// Events opens the event stream with the query q. The channel closes when
// the stream ends for any reason (server shutdown, a dropped slow client,
// a network error, ctx); the caller then re-reads what it follows.
func (c *Client) Events(ctx context.Context, q url.Values) (<-chan Event, error) {
	res, err := c.send(ctx, req{method: http.MethodGet, path: "/events", query: q})
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		res.Body.Close()
		return nil, core.Errorf(core.CodeStoreUnavailable, "server %s: /events is not an event stream (%s)", c.Base, res.Header.Get("Content-Type"))
	}
	ch := make(chan Event, 64)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var kind string
		var data bytes.Buffer
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if kind != "" || data.Len() > 0 {
					ev := Event{Kind: kind, Data: bytes.Clone(data.Bytes())}
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				kind = ""
				data.Reset()
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event:"):
				kind = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
	}()
	return ch, nil
}

// routes indexes the API route table by op (the route of each op).
var routes = func() map[string]api.Route {
	m := map[string]api.Route{}
	for _, r := range api.RouteTable() {
		if _, dup := m[r.Op]; r.Op != "" && !dup {
			m[r.Op] = r
		}
	}
	return m
}()

// Call sends in (a pointer to the op's request type) to the route of op name and decodes the answer into out.
func (c *Client) Call(ctx context.Context, name string, in, out any) error {
	rt, ok := routes[name]
	if !ok {
		return core.Errorf(core.CodeRemoteUnsupported, "operation %s has no API route: run it on the server's machine without --server", name)
	}
	path, inPath, err := fillPath(rt.Path, in)
	if err != nil {
		return err
	}
	r := req{method: rt.Method, path: path, result: out}
	if (rt.Method == http.MethodPost || rt.Method == http.MethodPut) && !rt.Raw {
		r.body = in
	} else {
		r.query = amlapp.ParamValues(in, func(n string) bool { return !inPath[n] })
	}
	if f := reflect.Indirect(reflect.ValueOf(in)).FieldByName("Body"); rt.Raw && f.IsValid() {
		// A streamed upload (CSV): the fields go in the query, Body is the body.
		r.body, _ = f.Interface().(io.Reader)
	}
	return c.do(ctx, r, out)
}

// fillPath substitutes the route's {name} segments with the request's
// fields of those json names.
func fillPath(pattern string, reqv any) (string, map[string]bool, error) {
	vals := amlapp.ParamValues(reqv, nil)
	in := map[string]bool{}
	var b strings.Builder
	for rest := pattern; rest != ""; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest, '}')
		name := rest[i+1 : j]
		v := vals.Get(name)
		if v == "" {
			return "", nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s is required", name)
		}
		in[name] = true
		b.WriteString(rest[:i])
		b.WriteString(url.PathEscape(v))
		rest = rest[j+1:]
	}
	return b.String(), in, nil
}

// Job-following intervals: how often a job is re-read when the event
// stream is gone (PollEvery), and while it is open (RecheckEvery, a safety
// net for a worker whose events do not reach the server).
const (
	PollEvery    = 500 * time.Millisecond
	RecheckEvery = 5 * time.Second
)

// WaitJob returns job id once it is terminal: it follows the job's events
// on /api/v1/events (each event's data, and the job's state on each
// re-read, go to progress: "progress", "status", "stage") and falls back
// to polling the job when the stream cannot be opened or drops.
func (c *Client) WaitJob(ctx context.Context, id string, progress func(data map[string]any), log *slog.Logger) (core.Job, error) {
	if progress == nil {
		progress = func(map[string]any) {}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	get := func() (core.Job, error) {
		var j core.Job
		err := c.Call(ctx, "job.show", &amlapp.JobRequest{ID: id}, &j)
		if err == nil {
			progress(map[string]any{"progress": j.Progress, "status": string(j.Status)})
		}
		return j, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	// Subscribe first, then read the state: an end between the submit and
	// the subscription is seen by the read, every later one by the stream.
	evs, serr := c.Events(sctx, url.Values{"kinds": {"job.state,job.progress"}, "id": {id}})
	if serr != nil {
		log.Debug("event stream unavailable; polling", "err", serr)
	}
	j, err := get()
	if err != nil {
		return j, err
	}
	recheck := time.NewTicker(RecheckEvery)
	defer recheck.Stop()
	for evs != nil && !j.Status.Terminal() {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-recheck.C:
			if j, err = get(); err != nil {
				return j, err
			}
		case ev, ok := <-evs:
			if !ok || ev.Kind == "overflow" || ev.Kind == "shutdown" {
				log.Debug("event stream ended; polling", "job", id)
				evs = nil
				break
			}
			var e struct {
				Data map[string]any `json:"data"`
			}
			if json.Unmarshal(ev.Data, &e) != nil {
				continue
			}
			progress(e.Data)
			if st, _ := e.Data["status"].(string); core.JobStatus(st).Terminal() {
				return get()
			}
		}
	}
	for !j.Status.Terminal() {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(PollEvery):
		}
		if j, err = get(); err != nil {
			return j, err
		}
	}
	return j, nil
}
