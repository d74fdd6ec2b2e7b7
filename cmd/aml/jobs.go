package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	nativetrainers "github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/spf13/cobra"
)

// trainers returns the native trainers this binary offers. The trivial
// test trainer is available only with AML_TEST_TRAINERS=1 (tests and
// benchmarks); it is not a product feature.
func trainers() *jobs.Trainers {
	t := jobs.NewTrainers(nativetrainers.All()...).WithFormats(nativetrainers.Formats())
	if os.Getenv("AML_TEST_TRAINERS") == "1" {
		t.Add(jobs.TestMeanTrainer{})
	}
	return t
}

func printJob(w io.Writer, j core.Job) {
	fmt.Fprintf(w, "job       %s\nstatus    %s", j.ID, j.Status)
	if j.Stage != "" && j.Stage != string(j.Status) {
		fmt.Fprintf(w, " (%s)", j.Stage)
	}
	fmt.Fprintf(w, "  progress %.0f%%\ndataset   %s (sha256 %.12s…)\ntrainer   %s\nseed      %d\nparams    %s\n", 100*j.Progress, j.DatasetID, j.DatasetSHA256, j.TrainerRef, j.Seed, string(j.Params))
	if j.ParentID != "" {
		fmt.Fprintf(w, "parent    %s\n", j.ParentID)
	}
	if j.ChangeNote != "" {
		fmt.Fprintf(w, "note      %s\n", j.ChangeNote)
	}
	fmt.Fprintf(w, "attempt   %d (retries %d of %d)  timeout %ds  stall %ds\n", j.Attempt, j.RetryCount, j.MaxRetries, j.TimeoutSec, j.StallSec)
	if j.ModelID != "" {
		fmt.Fprintf(w, "model     %s (gates passed: %v)\n", j.ModelID, j.GatePassed)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error     %s: %s\n", j.ErrorCode, j.Error)
	}
	if len(j.Metrics) > 0 {
		var m struct {
			Test struct {
				MeanNRMSE        float64 `json:"meanNrmse"`
				MeanOneStepNRMSE float64 `json:"meanOneStepNrmse"`
			} `json:"test"`
		}
		if json.Unmarshal(j.Metrics, &m) == nil {
			fmt.Fprintf(w, "test      mean NRMSE %.4f (one-step %.4f), computed by the platform\n", m.Test.MeanNRMSE, m.Test.MeanOneStepNRMSE)
		}
	}
}

func newJobCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Submit, follow, cancel and retry training jobs"}
	var (
		sr     = amlapp.JobSubmitRequest{Timeout: amlapp.Duration(jobs.DefaultTimeout), Stall: amlapp.Duration(jobs.DefaultStall)}
		params string
		wait   bool
	)
	// submitted calls op (job.submit, job.retry) and prints the queued job
	// or, with --wait, waits for its end.
	submitted := func(c *cobra.Command, op string, req any, print func(io.Writer, core.Job)) error {
		var j core.Job
		if err := a.invoke(c, op, "", req, &j); err != nil {
			return err
		}
		if wait {
			return a.awaitJob(c, j.ID)
		}
		return a.emit(j, func(w io.Writer) { print(w, j) })
	}
	submit := routed(&cobra.Command{
		Use:   "submit --dataset ID --trainer REF",
		Short: "Submit a training job (one experiment)",
		Long: `Submit a training job on a verified dataset. REF is a native trainer
(e.g. linear_state_space@1), a registered external one, ext:NAME (aml trainer
list), or — from this machine only, not with --server — exec:PATH (see
docs/external-trainer.md). A params "physics" naming a local file is
uploaded first (aml physics put) and replaced by the stored model's id. Without --wait the job is queued for a worker
('aml worker' or 'aml serve'); with --wait it runs in this process with a live
progress bar and the command ends when the job does (exit 1 unless done).
With --server and --wait the job runs on the server's workers and is followed
on its event stream.`,
		Args: argsExact(0),
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
			return submitted(c, "job.submit", &sr, printQueued)
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
	fl.BoolVar(&wait, "wait", false, "run the job here and wait, with a progress bar (with --server: follow it on the server)")

	var jr amlapp.JobRequest
	one := func(use, short string) *cobra.Command {
		return &cobra.Command{Use: use + " ID", Short: short, Args: argsExact(1)}
	}
	status := opCommand(a, one("status", "Show a job"), "job.show", "", &jr, arg0(&jr.ID), printJob)
	cancel := opCommand(a, one("cancel", "Cancel a queued or running job (its process tree is killed)"), "job.cancel", "", &jr, arg0(&jr.ID), printCancel)
	retry := routed(one("retry", "Retry a finished job as a new experiment (parent = ID)"), "job.retry")
	retry.RunE = func(c *cobra.Command, args []string) error {
		jr.ID = args[0]
		return submitted(c, "job.retry", &jr, func(w io.Writer, j core.Job) { fmt.Fprintf(w, "queued job %s (retry of %s)\n", j.ID, args[0]) })
	}
	retry.Flags().BoolVar(&wait, "wait", false, "run the retry here and wait (with --server: follow it on the server)")

	var lr amlapp.JobListRequest
	list := listCommand(a, &cobra.Command{Use: "list", Short: "List jobs, newest first", Args: argsExact(0)}, "job.list", &lr, nil, printJobs)
	list.Flags().StringVar(&lr.Status, "status", "", "only jobs in this status")
	list.Flags().StringVar(&lr.Dataset, "dataset", "", "only jobs of this dataset")
	list.Flags().IntVar(&lr.Limit, "limit", 0, "at most this many (default 1000)")

	var follow bool
	logs := routed(&cobra.Command{Use: "logs ID [-f]", Short: "Print a job's trainer log (all rotated parts, oldest first)", Args: argsExact(1),
		Long: `Print a job's trainer log, read page by page from the job.logs op. With -f,
keep reading until the job has ended. With --json the whole log is one
job.logs answer (text from offset 0).`,
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
	if err := a.emit(j, func(w io.Writer) { printJob(w, j) }); err != nil {
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
	list := listCommand(a, &cobra.Command{Use: "list", Short: "List models, newest first", Args: argsExact(0)}, "model.list", &lr, nil, printModels)
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
	show := opCommand(a, one("show ID", "Model card: metrics, gates, lineage, stage history"), "model.show", "", &sr, arg0(&sr.ID), printModel)
	promote := opCommand(a, one("promote ID --to shadow|production", "Move a model to shadow or production"), "model.promote", "", &pr, arg0(&pr.ID), printMoved)
	promote.Flags().StringVar(&pr.To, "to", "", "target stage: shadow or production")
	_ = promote.MarkFlagRequired("to")
	promote.Flags().StringVar(&pr.Expect, "expect", "", "the stage you believe the model is in (refused with AML_STAGE_RACE otherwise)")
	promote.Flags().StringVar(&pr.Reason, "reason", "", "why")
	retire := opCommand(a, one("retire ID", "Retire a model"), "model.retire", "", &rr, arg0(&rr.ID), printMoved)
	retire.Flags().StringVar(&rr.Reason, "reason", "", "why")
	retire.Flags().StringVar(&rr.Expect, "expect", "", "the stage you believe the model is in")
	var cr amlapp.ModelCompareRequest
	compare := opCommand(a, &cobra.Command{Use: "compare", Short: "Rank models by the platform's test metrics (gates passed first, then test NRMSE), with each experiment's parent and note", Args: argsExact(0)},
		"model.compare", "", &cr, nil, printCompare)
	for name, p := range map[string]*string{"line": &cr.Line, "product": &cr.Product, "recipe": &cr.Recipe, "purpose": &cr.Purpose, "dataset": &cr.Dataset, "stage": &cr.Stage} {
		compare.Flags().StringVar(p, name, "", "only models of this "+name)
	}
	compare.Flags().IntVar(&cr.Limit, "limit", 0, "at most this many (default 20, at most 200)")
	cmd.AddCommand(list, show, promote, retire, compare, newPredictCmd(a))
	return cmd
}

func fmt4(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g", *p)
}

func printCompare(w io.Writer, r amlapp.ModelCompareResponse) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tMODEL\tTRAINER\tSTAGE\tGATES\tTEST NRMSE\tONE-STEP\tCOVERAGE\tNOTE")
	for _, e := range r.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\n", e.Rank, e.ModelID, e.Trainer, e.Stage, e.GatePassed, fmt4(e.TestNRMSE), fmt4(e.TestOneStep), fmt4(e.Coverage), e.ChangeNote)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d of %d model(s), ranked by %s\n", len(r.Entries), r.Total, r.RankedBy)
}

func printModel(w io.Writer, sh amlapp.ModelShowResponse) {
	m, h := sh.Model, sh.History
	fmt.Fprintf(w, "model     %s (%s)\nstage     %s\ntrainer   %s (job %s)\ndataset   %s\nrecipe    %s / %s / %s, purpose %s\n", m.ID, m.ArtifactKind, m.Stage, m.TrainerRef, m.JobID, m.DatasetID, m.LineID, m.ProductID, m.RecipeID, m.Purpose)
	fmt.Fprintf(w, "artifact  %s (sha256 %.16s…)\nlineage   verified=%v", m.ArtifactPath, m.ArtifactHash, m.LineageVerified)
	if !m.LineageVerified {
		fmt.Fprint(w, " — may not drive optimisation")
	}
	fmt.Fprintln(w)
	var met struct {
		Val, Test struct {
			Targets []struct {
				Target                                     string
				RMSE, NRMSE, OneStepRMSE, OneStepNRMSE, R2 float64
			} `json:"targets"`
			MeanNRMSE float64 `json:"meanNrmse"`
		}
		ValTestGap float64 `json:"valTestGap"`
	}
	if json.Unmarshal(m.Metrics, &met) == nil && len(met.Test.Targets) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "test target\tRMSE\tNRMSE\tone-step RMSE\tone-step NRMSE\tR²\t")
		for _, t := range met.Test.Targets {
			fmt.Fprintf(tw, "%s\t%.5g\t%.4f\t%.5g\t%.4f\t%.4f\t\n", t.Target, t.RMSE, t.NRMSE, t.OneStepRMSE, t.OneStepNRMSE, t.R2)
		}
		tw.Flush()
		fmt.Fprintf(w, "mean NRMSE val %.4f test %.4f (gap %.3f)\n", met.Val.MeanNRMSE, met.Test.MeanNRMSE, met.ValTestGap)
	}
	var unc struct {
		Conformal *struct {
			Coverage           float64 `json:"coverage"`
			CalibrationWindows int     `json:"calibrationWindows"`
		} `json:"conformal"`
		Coverage *struct {
			Measured    float64 `json:"measured"`
			TestWindows int     `json:"testWindows"`
		} `json:"coverage"`
		ConformalSkipped string `json:"conformalSkipped"`
		OOD              *struct {
			Threshold float64 `json:"threshold"`
			Shrinkage float64 `json:"shrinkage"`
		} `json:"ood"`
	}
	if json.Unmarshal(m.Metrics, &unc) == nil {
		if unc.Conformal != nil && unc.Coverage != nil {
			fmt.Fprintf(w, "intervals split conformal, target coverage %.2f from %d val windows; measured on %d test windows: %.4f\n", unc.Conformal.Coverage, unc.Conformal.CalibrationWindows, unc.Coverage.TestWindows, unc.Coverage.Measured)
		} else if unc.ConformalSkipped != "" {
			fmt.Fprintf(w, "intervals not calibrated: %s\n", unc.ConformalSkipped)
		}
		if unc.OOD != nil {
			fmt.Fprintf(w, "OOD       Mahalanobis (Ledoit–Wolf shrinkage %.3g), threshold %.3g from the train windows\n", unc.OOD.Shrinkage, unc.OOD.Threshold)
		}
	}
	var g struct {
		Profile string
		Passed  bool
		Checks  []struct {
			ID, Name, Op, Detail string
			Value, Threshold     float64
			Passed               bool
		}
	}
	if json.Unmarshal(m.Gates, &g) == nil && g.Profile != "" {
		fmt.Fprintf(w, "gates     %s: passed=%v\n", g.Profile, g.Passed)
		for _, c := range g.Checks {
			mark := "pass"
			if !c.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "  %-4s %-4s %-40s %.4g %s %.4g %s\n", mark, c.ID, c.Name, c.Value, c.Op, c.Threshold, c.Detail)
		}
	}
	for _, c := range h {
		fmt.Fprintf(w, "history   %s %s → %s by %s %s\n", c.At.Format(time.RFC3339), c.From, c.To, c.By, strings.TrimSpace(c.Reason))
	}
}

func printQueued(w io.Writer, j core.Job) {
	fmt.Fprintf(w, "queued job %s (%s on %s)\nrun 'aml worker' (or 'aml serve') to execute it, or submit with --wait\n", j.ID, j.TrainerRef, j.DatasetID)
}

func printJobs(w io.Writer, js []core.Job) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tPROGRESS\tTRAINER\tDATASET\tMODEL\tCREATED")
	for _, j := range js {
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%s\t%s\t%s\t%s\n", j.ID, j.Status, 100*j.Progress, j.TrainerRef, j.DatasetID, j.ModelID, j.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d job(s)\n", len(js))
}

func printCancel(w io.Writer, j core.Job) {
	if j.Status == core.JobCancelled {
		fmt.Fprintf(w, "cancelled job %s\n", j.ID)
	} else {
		fmt.Fprintf(w, "cancel requested for running job %s; its worker stops it within a second\n", j.ID)
	}
}

func printModels(w io.Writer, ms []core.Model) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSTAGE\tGATES\tTRAINER\tRECIPE\tPURPOSE\tLINEAGE\tCREATED")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%v\t%s\n", m.ID, m.Stage, m.GatePassed, m.TrainerRef, m.RecipeID, m.Purpose, m.LineageVerified, m.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d model(s)\n", len(ms))
}

func printMoved(w io.Writer, m core.Model) { fmt.Fprintf(w, "model %s is now %s\n", m.ID, m.Stage) }
