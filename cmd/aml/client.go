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
	"net/url"
	"os"
	"strings"

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
	by := cmd.Flags().Lookup("by")
	if f == nil || !(f.Changed || by != nil && by.Changed) || strings.TrimSpace(f.Value.String()) == "" {
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

// waitJob returns job id once it is terminal on the server, with a
// progress bar fed by the job's events (apiclient.WaitJob).
func (a *app) waitJob(ctx context.Context, c *apiclient.Client, id string) (core.Job, error) {
	bar := a.newProgress(100, "queued", false)
	defer bar.finish()
	return c.WaitJob(ctx, id, func(data map[string]any) { bar.job(data) }, a.log)
}
