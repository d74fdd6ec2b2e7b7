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
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/apiclient"
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
	c      *apiclient.Client
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
func (a *app) remoteClient(cmd *cobra.Command) (*apiclient.Client, error) {
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
	a.remote.c = apiclient.New(u.Scheme+"://"+u.Host, strings.TrimSpace(a.remote.token))
	return a.remote.c, nil
}

// whoami is the principal of the token (GET /info), cached.
func (a *app) whoami(ctx context.Context, c *apiclient.Client) (auth.Principal, error) {
	if a.remote.principal != nil {
		return *a.remote.principal, nil
	}
	var info amlapp.InfoResponse
	if err := c.Call(ctx, "info", &amlapp.InfoRequest{}, &info); err != nil {
		return auth.Principal{}, err
	}
	a.remote.principal = &info.Principal
	return info.Principal, nil
}

// remoteActor checks an actor flag (--as, --by) under --server: the server
// records the token's owner as the actor, so the flag may be left out, and
// naming anyone else is a usage error rather than a silent substitution.
func (a *app) remoteActor(ctx context.Context, c *apiclient.Client, cmd *cobra.Command, flag string) error {
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

// pollEvery is how often a job is re-read when the event stream is gone;
// recheckEvery how often while the stream is open (a safety net).
const (
	pollEvery    = 500 * time.Millisecond
	recheckEvery = 5 * time.Second
)

// waitJob returns job id once it is terminal: it follows the job's events
// on /api/v1/events (progress bar on a terminal) and falls back to polling
// the job when the stream cannot be opened or drops.
func (a *app) waitJob(ctx context.Context, c *apiclient.Client, id string) (core.Job, error) {
	get := func() (core.Job, error) {
		var j core.Job
		err := c.Call(ctx, "job.show", &amlapp.JobRequest{ID: id}, &j)
		return j, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	// Subscribe first, then read the state: an end between the submit and
	// the subscription is seen by the read, every later one by the stream.
	evs, serr := c.Events(sctx, url.Values{"kinds": {"job.state,job.progress"}, "id": {id}})
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
