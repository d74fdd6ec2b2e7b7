package main

// The CLI as a client of a running "aml serve": with --server URL (env
// AML_SERVER) and --token T (env AML_TOKEN) a command that calls an app op
// (invoke.go) sends its request to the op's API route instead of opening
// --data.
//
// bindRemote wraps every runnable command of the tree once: a command that
// calls its op through a.invoke (annotated with the op) runs unchanged and
// invoke picks local or remote; any other command refuses --server with
// AML_REMOTE_UNSUPPORTED naming itself (exit 1): it needs the data
// directory (sim, demo, worker, ...). Flag combinations that cannot mean
// anything with a server (--db, an explicit --data, --token without
// --server, an actor flag naming someone other than the token's owner) are
// usage errors (exit 2).
//
// Errors from the server arrive as {code, message, field} and become the
// same *core.Error the local command would return, so run() prints them as
// "error: CODE: message" with exit status 1.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/spf13/cobra"
)

// CodeRemoteUnsupported refuses a command that has no API route when
// --server is given (it needs the data directory itself).
const CodeRemoteUnsupported = core.CodeRemoteUnsupported

// remoteConfig is the client side of the global flags.
type remoteConfig struct {
	server string
	token  string
	c      *client
	// principal is the token's owner, read once from GET /info when an
	// actor flag has to be checked against it.
	principal *auth.Principal
}

// bindRemote declares --server and --token on root and wraps every
// runnable command of the tree (see the file comment).
func (a *app) bindRemote(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&a.remote.server, "server", os.Getenv("AML_SERVER"), "talk to a running 'aml serve' at this URL instead of opening --data (env AML_SERVER)")
	pf.StringVar(&a.remote.token, "token", os.Getenv("AML_TOKEN"), "API token for --server (env AML_TOKEN)")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.RunE == nil || c == root {
			return
		}
		local, routed := c.RunE, c.Annotations[annotOp] != ""
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if a.remote.server == "" {
				// Only the global --token: a command may define its own
				// (aml mcp --token verifies a token on the local store).
				if f := cmd.Flags().Lookup("token"); f != nil && f.Changed && f == root.PersistentFlags().Lookup("token") {
					return usagef("--token needs --server URL (a token is only sent to a server)")
				}
				return local(cmd, args)
			}
			if _, err := a.remoteClient(cmd); err != nil {
				return err
			}
			if routed { // a.invoke sends the op to the server itself
				return local(cmd, args)
			}
			return core.Errorf(CodeRemoteUnsupported, "aml %s has no API route: it needs the data directory; run it on the server's machine without --server", path)
		}
	}
	walk(root)
}

// remoteClient validates the remote flags and returns the client.
func (a *app) remoteClient(cmd *cobra.Command) (*client, error) {
	if a.remote.c != nil {
		return a.remote.c, nil
	}
	if a.dbURL != "" {
		return nil, usagef("--server and --db (or AML_DB) exclude each other: the server has its own database")
	}
	if f := cmd.Flags().Lookup("data"); f != nil && f.Changed {
		return nil, usagef("--server and --data exclude each other: the server has its own data directory")
	}
	u, err := url.Parse(strings.TrimRight(a.remote.server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, usagef("--server %q: want http://HOST:PORT or https://HOST:PORT", a.remote.server)
	}
	a.remote.c = &client{base: u.Scheme + "://" + u.Host, token: strings.TrimSpace(a.remote.token), hc: &http.Client{}}
	return a.remote.c, nil
}

// whoami is the principal of the token (GET /info), cached.
func (a *app) whoami(ctx context.Context, c *client) (auth.Principal, error) {
	if a.remote.principal != nil {
		return *a.remote.principal, nil
	}
	var info amlapp.InfoResponse
	if err := c.call(ctx, "info", &amlapp.InfoRequest{}, &info); err != nil {
		return auth.Principal{}, err
	}
	a.remote.principal = &info.Principal
	return info.Principal, nil
}

// remoteActor checks an actor flag (--as, --by) under --server: the server
// records the token's owner as the actor, so the flag may be left out, and
// naming anyone else is a usage error rather than a silent substitution.
func (a *app) remoteActor(ctx context.Context, c *client, cmd *cobra.Command, flag string) error {
	f := cmd.Flags().Lookup(flag)
	if f == nil || !f.Changed || strings.TrimSpace(f.Value.String()) == "" {
		return nil
	}
	p, err := a.whoami(ctx, c)
	if err != nil {
		return err
	}
	if strings.TrimSpace(f.Value.String()) != p.Name {
		return usagef("--%s %q: with --server the actor is the token's owner %q; leave --%s out or use that person's token", flag, f.Value.String(), p.Name, flag)
	}
	return nil
}

// client is a small JSON client of the API under /api/v1.
type client struct {
	base  string
	token string
	hc    *http.Client
}

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

func (c *client) newRequest(ctx context.Context, r req) (*http.Request, error) {
	u := c.base + "/api/v1" + r.path
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
		return nil, usagef("--server: %v", err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", ct)
	}
	hr.Header.Set("Accept", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	return hr, nil
}

// send performs a request and returns the response when its status is
// 2xx; otherwise the server's error as a *core.Error.
func (c *client) send(ctx context.Context, r req) (*http.Response, error) {
	hr, err := c.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "server %s unreachable", c.base)
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
			Message: fmt.Sprintf("server %s answered %s %s with HTTP %d: %s", c.base, r.method, r.path, res.StatusCode, msg)}
	}
	if r.result != nil && len(eb.Result) > 0 && string(eb.Result) != "null" {
		_ = json.Unmarshal(eb.Result, r.result)
	}
	return nil, &core.Error{Code: eb.Code, Message: eb.Message, Field: eb.Field}
}

// do sends r and decodes a JSON answer into out (nil: discard).
func (c *client) do(ctx context.Context, r req, out any) error {
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

// sseEvent is one event of /api/v1/events.
type sseEvent struct {
	Kind string
	Data []byte
}

// events opens the event stream with the query q. The channel closes when
// the stream ends for any reason (server shutdown, a dropped slow client,
// a network error, ctx); the caller then re-reads what it follows.
func (c *client) events(ctx context.Context, q url.Values) (<-chan sseEvent, error) {
	res, err := c.send(ctx, req{method: http.MethodGet, path: "/events", query: q})
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		res.Body.Close()
		return nil, core.Errorf(core.CodeStoreUnavailable, "server %s: /events is not an event stream (%s)", c.base, res.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 64)
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
					ev := sseEvent{Kind: kind, Data: bytes.Clone(data.Bytes())}
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

// pollEvery is how often a job is re-read when the event stream is gone;
// recheckEvery how often while the stream is open (a safety net).
const (
	pollEvery    = 500 * time.Millisecond
	recheckEvery = 5 * time.Second
)

// waitJob returns job id once it is terminal: it follows the job's events
// on /api/v1/events (progress bar on a terminal) and falls back to polling
// the job when the stream cannot be opened or drops.
func (a *app) waitJob(ctx context.Context, c *client, id string) (core.Job, error) {
	get := func() (core.Job, error) {
		var j core.Job
		err := c.call(ctx, "job.show", &amlapp.JobRequest{ID: id}, &j)
		return j, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	// Subscribe first, then read the state: an end between the submit and
	// the subscription is seen by the read, every later one by the stream.
	evs, serr := c.events(sctx, url.Values{"kinds": {"job.state,job.progress"}, "id": {id}})
	if serr != nil {
		a.log.Debug("event stream unavailable; polling", "err", serr)
	}
	j, err := get()
	if err != nil {
		return j, err
	}
	bar := a.newProgress(100, string(j.Status), false)
	defer bar.finish()
	bar.set(int64(100 * j.Progress))
	// The stream carries the events of the serve's own process (and, on
	// PostgreSQL, those its relay receives from workers elsewhere); a job
	// run by a worker whose events do not reach the serve (another process
	// on the embedded store) is still seen to end: the job is re-read now
	// and then while waiting on the stream.
	recheck := time.NewTicker(recheckEvery)
	defer recheck.Stop()
	for evs != nil && !j.Status.Terminal() {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-recheck.C:
			if j, err = get(); err != nil {
				return j, err
			}
			bar.set(int64(100 * j.Progress))
		case ev, ok := <-evs:
			if !ok {
				a.log.Debug("event stream ended; polling", "job", id)
				evs = nil
				break
			}
			var e struct {
				Data map[string]any `json:"data"`
			}
			if ev.Kind == "overflow" || ev.Kind == "shutdown" {
				evs = nil
				break
			}
			if json.Unmarshal(ev.Data, &e) != nil {
				continue
			}
			if core.JobStatus(bar.job(e.Data)).Terminal() {
				return get()
			}
		}
	}
	for !j.Status.Terminal() {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(pollEvery):
		}
		if j, err = get(); err != nil {
			return j, err
		}
		bar.describe(string(j.Status))
		bar.set(int64(100 * j.Progress))
	}
	return j, nil
}
