package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aml-project/aml/internal/render"
	"github.com/aml-project/aml/internal/web"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/spf13/cobra"
)

// testTrainers reports whether this process offers the trivial test
// trainer besides the native ones (service.NativeTrainers): only with
// AML_TEST_TRAINERS=1 (tests and benchmarks); it is not a product feature.
func testTrainers() bool { return os.Getenv("AML_TEST_TRAINERS") == "1" }

func newJobCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Submit, follow, cancel and retry training jobs"}
	var (
		sr     = amlapp.JobSubmitRequest{Timeout: amlapp.Duration(amlapp.DefaultJobTimeout), Stall: amlapp.Duration(amlapp.DefaultJobStall)}
		params string
		wait   bool
	)
	// submitted calls op (job.submit, job.retry) and prints the queued job
	// or, with --wait, waits for its end.
	submitted := func(c *cobra.Command, op string, req any) error {
		var j core.Job
		if err := a.invoke(c, op, "", req, &j); err != nil {
			return err
		}
		if wait {
			return a.awaitJob(c, j.ID)
		}
		return a.emit(j, func(w io.Writer) { render.Text(w, op, req, j) })
	}
	submit := routed(&cobra.Command{
		Use:   "submit --dataset ID --trainer REF",
		Short: "Submit a training job (one experiment)",
		Args:  argsExact(0),
		RunE: func(c *cobra.Command, args []string) error {
			if err := prepare(c, &sr, func([]string) error {
				if params == "" {
					return nil
				} else if !json.Valid([]byte(params)) {
					return usagef("--params: not JSON: %s", params)
				}
				sr.Params = json.RawMessage(params)
				return nil
			}, args); err != nil {
				return err
			}
			// A person at the machine may name local files: the physics
			// file is uploaded (physics.put) and named by id; an exec:
			// program path is made absolute (a worker runs elsewhere).
			var err error
			if sr.Params, err = a.uploadPhysicsParam(c, sr.Params); err != nil {
				return err
			}
			if p, ok := strings.CutPrefix(sr.Trainer, "exec:"); ok && p != "" && a.remote.server == "" {
				abs, err := filepath.Abs(p)
				if err != nil {
					return err
				}
				sr.Trainer = "exec:" + abs
			}
			return submitted(c, "job.submit", &sr)
		},
	}, "job.submit")
	fl := submit.Flags()
	fl.StringVar(&sr.DatasetID, "dataset", "", "dataset id (required)")
	fl.StringVar(&sr.Trainer, "trainer", "", "trainer reference, e.g. linear_state_space@1, ext:NAME, or (local only) exec:examples/trainers/ridge_arx.py (required)")
	fl.StringVar(&params, "params", "", "trainer parameters as a JSON object")
	fl.Int64Var(&sr.Seed, "seed", 0, "random seed")
	fl.StringVar(&sr.ParentID, "parent", "", "parent experiment (job id)")
	fl.StringVar(&sr.Note, "note", "", "what changed compared with the parent")
	fl.StringVar(&sr.Env, "env", "", "trainer environment to lease (default: python for exec:*.py)")
	fl.Var(&sr.Timeout, "timeout", "wall-clock limit of the training step")
	fl.Var(&sr.Stall, "stall", "fail when no progress is reported for this long")
	fl.StringVar(&sr.GateProfile, "gate-profile", "", "model gate profile to judge the model by (aml gate profiles; default: the dataset purpose's)")
	fl.BoolVar(&wait, "wait", false, "run the job here and wait, with a progress bar (with --server: follow it on the server)")

	var jr amlapp.JobRequest
	one := func(use, short string) *cobra.Command {
		return &cobra.Command{Use: use + " ID", Short: short, Args: argsExact(1)}
	}
	status := opCommand(a, one("status", "Show a job"), "job.show", "", &jr, arg0(&jr.ID))
	cancel := opCommand(a, one("cancel", "Cancel a queued or running job (its process tree is killed)"), "job.cancel", "", &jr, arg0(&jr.ID))
	retry := routed(one("retry", "Retry a finished job as a new experiment (parent = ID)"), "job.retry")
	retry.RunE = func(c *cobra.Command, args []string) error {
		jr.ID = args[0]
		return submitted(c, "job.retry", &jr)
	}
	retry.Flags().BoolVar(&wait, "wait", false, "run the retry here and wait (with --server: follow it on the server)")

	var lr amlapp.JobListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List jobs, newest first", Args: argsExact(0)}, "job.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Status, "status", "", "only jobs in this status")
	list.Flags().StringVar(&lr.Dataset, "dataset", "", "only jobs of this dataset")
	list.Flags().IntVar(&lr.Limit, "limit", 0, "at most this many (default 1000)")

	var follow bool
	logs := routed(&cobra.Command{Use: "logs ID [-f]", Short: "Print a job's trainer log (all rotated parts, oldest first)", Args: argsExact(1),
		RunE: func(c *cobra.Command, args []string) error {
			req := amlapp.JobLogsRequest{ID: args[0], MaxBytes: amlapp.MaxLogBytes}
			var all amlapp.JobLogsResponse
			for last := false; ; {
				var page amlapp.JobLogsResponse
				if err := a.invoke(c, "job.logs", "", &req, &page); err != nil {
					return err
				}
				if page.Text, page.Offset = all.Text+page.Text, 0; !a.jsonOut {
					if _, err := io.WriteString(a.stdout, page.Text); err != nil {
						return err
					}
					page.Text = ""
				}
				all, req.Offset = page, page.NextOffset
				switch {
				case page.More:
					continue
				case !follow || last:
					return a.emit(all, func(io.Writer) {})
				case page.Status.Terminal():
					last = true // one last read
					continue
				}
				select {
				case <-c.Context().Done():
					return nil
				case <-time.After(300 * time.Millisecond):
				}
			}
		}}, "job.logs")
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the job ends")
	cmd.AddCommand(submit, status, list, cancel, retry, logs)
	return cmd
}

// awaitJob waits for job id to end — run in this process by the local
// runner, or followed on the server's event stream with --server — prints
// it and fails unless it is done.
func (a *app) awaitJob(c *cobra.Command, id string) error {
	var j core.Job
	var err error
	if a.remote.server != "" {
		j, err = a.waitJob(c.Context(), a.remote.c, id)
	} else {
		err = a.runJob(c.Context(), id)
		if err == nil {
			err = a.invoke(c, "job.show", "", &amlapp.JobRequest{ID: id}, &j)
		}
	}
	if err != nil {
		return err
	}
	if err := a.emit(j, func(w io.Writer) { render.Text(w, "job.show", nil, j) }); err != nil {
		return err
	}
	if j.Status != core.JobDone {
		code := j.ErrorCode
		if code == "" {
			code = core.CodeJobConflict
		}
		return core.Errorf(code, "job %s ended %s: %s", j.ID, j.Status, j.Error)
	}
	return nil
}

// runJob runs a queued job with the local App's runner, with a progress
// bar fed by its events.
func (a *app) runJob(ctx context.Context, id string) error {
	d := a.process().Opened()
	r, bus := d.Runner, d.Bus
	sub := bus.Subscribe(256, func(e events.Event) bool { return e.ID == id })
	defer sub.Close()
	bar := a.newProgress(100, "queued", false)
	defer bar.finish()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, id, 0) }()
	for {
		select {
		case e := <-sub.C:
			bar.job(e.Data)
		case err := <-done:
			return err
		}
	}
}

func newWorkerCmd(a *app) *cobra.Command {
	var concurrency int
	var recalEvery time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run job workers until interrupted (Ctrl-C hands running jobs back)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := a.process()
			if _, err := p.Jobs(cmd.Context(), true, concurrency); err != nil {
				return err
			}
			if err := p.RelayEvents(cmd.Context()); err != nil {
				return err
			}
			wctx, stop := signal.NotifyContext(context.WithoutCancel(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w, err := p.StartWorkers(wctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "worker %s: %d concurrent job(s); recovered %d (requeued) and %d (interrupted) job(s)\n", w.Worker, concurrency, w.Requeued, w.Interrupt)
			if recalEvery > 0 {
				go p.Recalibrate(wctx, recalEvery)
			}
			<-wctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return w.Stop(sctx)
		},
	}
	cmd.Flags().IntVar(&concurrency, "concurrency", 2, "jobs run at once")
	cmd.Flags().DurationVar(&recalEvery, "recalibrate-every", time.Minute, "how often the worker processes twin recalibration requests (rebuild the dataset, submit the retraining job, settle finished ones); 0 disables")
	cmd.Flags().DurationVar(&a.rescueAfter, "rescue-after", time.Minute, "with --db postgres://: a job whose worker's heartbeat is older than this (at least 10s) counts as lost and is retried by another worker")
	return cmd
}

func newModelCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "List, inspect, promote and retire models"}
	var lr amlapp.ModelListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List models, newest first", Args: argsExact(0)}, "model.list", "", &lr, nil)
	for name, p := range map[string]*string{"line": &lr.Line, "stage": &lr.Stage, "recipe": &lr.Recipe, "purpose": &lr.Purpose, "dataset": &lr.Dataset} {
		list.Flags().StringVar(p, name, "", "only models of this "+name)
	}
	var (
		sr amlapp.ModelRequest
		pr amlapp.ModelPromoteRequest
		rr amlapp.ModelRetireRequest
	)
	one := func(use, short string) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: argsExact(1)}
	}
	show := opCommand(a, one("show ID", "Model card: metrics, gates, lineage, stage history"), "model.show", "", &sr, arg0(&sr.ID))
	promote := opCommand(a, one("promote ID --to shadow|production", "Move a model to shadow or production"), "model.promote", "as", &pr, arg0(&pr.ID))
	asFlag(promote.Flags(), "who moves it (default $USER; with --server the token's owner)")
	promote.Flags().StringVar(&pr.To, "to", "", "target stage: shadow or production")
	_ = promote.MarkFlagRequired("to")
	promote.Flags().StringVar(&pr.Expect, "expect", "", "the stage you believe the model is in (refused with AML_STAGE_RACE otherwise)")
	promote.Flags().StringVar(&pr.Reason, "reason", "", "why")
	retire := opCommand(a, one("retire ID", "Retire a model"), "model.retire", "as", &rr, arg0(&rr.ID))
	asFlag(retire.Flags(), "who retires it (default $USER; with --server the token's owner)")
	retire.Flags().StringVar(&rr.Reason, "reason", "", "why")
	retire.Flags().StringVar(&rr.Expect, "expect", "", "the stage you believe the model is in")
	var cr amlapp.ModelCompareRequest
	var svgDir string
	compare := &cobra.Command{Use: "compare [MODEL]... [--run R [--svg DIR]]", Short: "Rank models by the platform's test metrics (gates passed first, then test NRMSE); with --run, each model's fit % on that run"}
	routed(compare, "model.compare").RunE = func(c *cobra.Command, args []string) error {
		if err := prepare(c, &cr, func(args []string) error { cr.Models = args; return nil }, args); err != nil {
			return err
		}
		resp, err := a.call(c, "model.compare", "", &cr)
		for _, ch := range web.FitCharts(resp.(amlapp.ModelCompareResponse)) { // --svg: the user's own files
			if err == nil && svgDir != "" {
				err = errors.Join(os.MkdirAll(svgDir, 0o755), os.WriteFile(filepath.Join(svgDir, cr.Run+"-"+ch.YLabel+".svg"), []byte(ch.SVG()), 0o644))
			}
		}
		if err != nil {
			return err
		}
		return a.show("model.compare", &cr, resp)
	}
	compare.Flags().StringVar(&cr.Run, "run", "", "validate the models (default: the top of the ranking) on this run: free-run and k-step fit %")
	compare.Flags().StringVar(&svgDir, "svg", "", "with --run: write one SVG per target (measured and each model's free run) to DIR")
	for name, p := range map[string]*string{"line": &cr.Line, "product": &cr.Product, "recipe": &cr.Recipe, "purpose": &cr.Purpose, "dataset": &cr.Dataset, "stage": &cr.Stage} {
		compare.Flags().StringVar(p, name, "", "only models of this "+name)
	}
	compare.Flags().IntVar(&cr.Limit, "limit", 0, "at most this many (default 20, at most 200)")
	var rp amlapp.ModelReplayRequest
	var replaySVG string
	replay := &cobra.Command{Use: "replay ID [--run R] [--svg DIR]", Short: "Predicted vs actual on a run, the way the platform evaluated the model: windows tiling the run with the conformal band and its coverage", Args: argsExact(1)}
	routed(replay, "model.replay").RunE = func(c *cobra.Command, args []string) error {
		if err := prepare(c, &rp, arg0(&rp.ID), args); err != nil {
			return err
		}
		resp, err := a.call(c, "model.replay", "", &rp)
		if err == nil && replaySVG != "" { // --svg: the user's own files
			r := resp.(amlapp.ModelReplayResponse)
			for _, ch := range web.ReplayCharts(r) {
				if err == nil {
					err = errors.Join(os.MkdirAll(replaySVG, 0o755), os.WriteFile(filepath.Join(replaySVG, r.Replay.RunID+"-"+ch.YLabel+".svg"), []byte(ch.SVG()), 0o644))
				}
			}
		}
		if err != nil {
			return err
		}
		return a.show("model.replay", &rp, resp)
	}
	replay.Flags().StringVar(&rp.Run, "run", "", "a run of the model's line, product and recipe (default: the first test run of its dataset)")
	replay.Flags().StringVar(&replaySVG, "svg", "", "write one SVG per target (actual, predicted, band) to DIR")
	cmd.AddCommand(list, show, promote, retire, compare, replay, newPredictCmd(a))
	return cmd
}
