package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	amlmcp "github.com/aml-project/aml/internal/mcp"
	"github.com/aml-project/aml/internal/web"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/spf13/cobra"
)

// serveOptions are aml serve's flags.
type serveOptions struct {
	addr       string
	dev        bool
	workers    int
	rate       float64
	burst      int
	maxCSVMiB  int64
	maxBodyMiB int64
	grace      time.Duration
	hosts      []string
	maxStreams int
	bodyTO     time.Duration
	csvTO      time.Duration
	lines      string
}

func newServeCmd(a *app) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8080] [--dev] [--workers N] [--line-writers FILE]",
		Short: "Serve the HTTP API, MCP, the web UI and /metrics, and run job workers",
		Args:  argsExact(0),
		RunE:  func(cmd *cobra.Command, args []string) error { return a.serve(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address")
	f.BoolVar(&o.dev, "dev", false, "allow tokenless requests from loopback addresses (as admin \"dev\")")
	f.IntVar(&o.workers, "workers", 2, "jobs run at once by this process (0: no workers, API only)")
	f.Float64Var(&o.rate, "rate-limit", api.DefaultRatePerSec, "requests per second per token (negative: no limit)")
	f.IntVar(&o.burst, "rate-burst", api.DefaultRateBurst, "requests a token may make at once above the rate")
	f.Int64Var(&o.maxCSVMiB, "max-csv-mib", api.DefaultMaxCSVBytes>>20, "largest CSV upload")
	f.Int64Var(&o.maxBodyMiB, "max-body-mib", api.DefaultMaxBodyBytes>>20, "largest request body: JSON API calls and MCP messages")
	f.StringArrayVar(&o.hosts, "allowed-host", nil, "a further name this server is reached by (host or host:port; repeatable): accepted as Host of --dev tokenless requests and as a browser Origin (loopback names and the listen address always are)")
	f.DurationVar(&o.bodyTO, "body-timeout", api.DefaultBodyTimeout, "how long a request body (JSON, form, MCP) may take to arrive (late: 408)")
	f.DurationVar(&o.csvTO, "csv-timeout", api.DefaultCSVTimeout, "how long a CSV upload's body may take to arrive")
	f.IntVar(&o.maxStreams, "max-streams", api.DefaultMaxStreams, "event streams (/api/v1/events) one token may hold open at once (negative: no limit)")
	f.StringVar(&o.lines, "line-writers", "", "JSON file naming each line's governed OPC UA writer (endpoint, map, security, step-test sampling; see docs/security.md): cert.execute, steptest.execute and the envelope cycle write to the line through it; without one a line's certificates are executed with the recording writer")
	f.DurationVar(&o.grace, "grace", 30*time.Second, "how long shutdown waits for in-flight requests, running jobs and running step tests (stopped before their next move, their end recorded)")
	return cmd
}

func (a *app) serve(ctx context.Context, o serveOptions) error {
	if o.workers < 0 {
		return usagef("--workers must be ≥ 0")
	}
	if o.bodyTO <= 0 || o.csvTO <= 0 {
		return usagef("--body-timeout and --csv-timeout must be positive")
	}
	if o.maxStreams == 0 {
		return usagef("--max-streams must not be 0 (negative: no limit)")
	}
	if o.maxCSVMiB <= 0 || o.maxBodyMiB <= 0 {
		return usagef("--max-csv-mib and --max-body-mib must be positive")
	}
	if o.lines != "" {
		l, err := opcua.LoadLineWriters(o.lines)
		if err != nil {
			return err
		}
		a.lines = l
		defer func() { _ = l.Close() }() // after the HTTP server has drained
		a.log.Info("serve: line writers", "lines", l.Lines())
	}
	work, p := o.workers > 0, a.process()
	d, err := p.Deps(ctx, work, max(o.workers, 1))
	if err != nil {
		return err
	}
	if err := p.RelayEvents(ctx); err != nil {
		return err
	}
	st := d.Store
	api.Version = version
	// One application for every front door: the API, the MCP tools and
	// the UI share its clock and its heavy-operation slots.
	ap := amlapp.New(d, a.appOptions())
	amlmcp.Version = version
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return core.Wrap(core.CodeUsage, err, "listen on %s", o.addr)
	}
	// The names this server answers to: the listen address as given and as
	// bound (port 0 resolved), and --allowed-host.
	hosts := append([]string{o.addr, ln.Addr().String()}, o.hosts...)
	opts := api.Options{Dev: o.dev, AllowedHosts: hosts, MaxStreams: o.maxStreams, BodyTimeout: o.bodyTO, CSVTimeout: o.csvTO, RatePerSec: o.rate, RateBurst: o.burst, MaxCSVBytes: o.maxCSVMiB << 20, MaxBodyBytes: o.maxBodyMiB << 20,
		Verifier: auth.NewTokens(st.SQL()), App: ap, MCP: amlmcp.HTTPHandler(ap), UI: web.New(d, web.Options{App: ap, Now: a.now, AllowedHosts: hosts})}
	h := api.NewServer(d, opts)
	// Headers must arrive within 10 s; a body within --body-timeout
	// (--csv-timeout for CSV uploads), set per request by the API so that
	// event streams and long calls after their body are not cut (no
	// server-wide ReadTimeout or WriteTimeout; an event stream bounds
	// each of its writes).
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, ErrorLog: nil}
	srv.RegisterOnShutdown(h.CloseStreams)

	// As in "aml worker": the queue runs under the signal context, so the
	// first SIGINT/SIGTERM cancels the running jobs' contexts and the
	// runner hands each back to the queue (or marks it interrupted) while
	// the HTTP server drains.
	sctx, stop := signal.NotifyContext(context.WithoutCancel(ctx), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var workers *service.Workers
	if work {
		if workers, err = p.StartWorkers(sctx); err != nil {
			return err
		}
		a.log.Info("serve: workers", "worker", workers.Worker, "concurrency", o.workers, "requeued", workers.Requeued, "interrupted", workers.Interrupt)
	}
	watchConnectors(sctx, st, d.Bus, a.log)
	mounted := "api, metrics"
	if opts.MCP != nil {
		mounted += ", mcp"
	}
	if opts.UI != nil {
		mounted += ", ui"
	}
	fmt.Fprintf(a.stderr, "aml serve: listening on http://%s (%s; %d worker(s)%s)\n", ln.Addr(), mounted, o.workers, map[bool]string{true: "; dev: tokenless loopback requests are admin", false: ""}[o.dev])
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-sctx.Done():
	case serveErr = <-errc:
	}
	fmt.Fprintln(a.stderr, "aml serve: shutting down: finishing in-flight requests, handing running jobs back")
	gctx, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	shutErr := srv.Shutdown(gctx)
	if errors.Is(shutErr, context.DeadlineExceeded) {
		shutErr = errors.Join(shutErr, srv.Close())
	}
	// Step tests running in the background stop before their next move
	// and record their end (the line is not left moved silently).
	stopErr := ap.Shutdown(gctx)
	if workers != nil {
		stopErr = errors.Join(stopErr, workers.Stop(gctx))
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, shutErr, stopErr)
}
