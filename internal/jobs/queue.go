package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// TrainArgs is the River job that dispatches one try of one AML job.
type TrainArgs struct {
	JobID string `json:"jobId"`
	Try   int    `json:"try"` // the job's retry count when this dispatch was made
}

// Kind is River's job kind.
func (TrainArgs) Kind() string { return "aml_train" }

// InsertOpts makes one dispatch per (job, try) unique, and leaves retrying to
// the runner (River never retries on its own).
func (TrainArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type trainWorker struct {
	river.WorkerDefaults[TrainArgs]
	r *Runner
}

func (w *trainWorker) Work(ctx context.Context, job *river.Job[TrainArgs]) error {
	return w.r.Run(ctx, job.Args.JobID, job.Args.Try)
}

// Timeout: the runner enforces its own watchdogs; River must not cancel it.
func (w *trainWorker) Timeout(*river.Job[TrainArgs]) time.Duration { return -1 }

// Queue is the River client: over the store's SQLite writer pool
// (NewQueue), or over a PostgreSQL pool shared by many worker processes
// (NewQueuePG, queue_pg.go). Exactly one of client and pg is set.
type Queue struct {
	client *river.Client[*sql.Tx]
	db     *sql.DB
	pg     *pgQueue
}

// MigrateRiver applies River's own schema migrations to db.
func MigrateRiver(ctx context.Context, db *sql.DB) error {
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "river migrator")
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "river migrations")
	}
	return nil
}

// QueueOptions configure the queue.
type QueueOptions struct {
	MaxConcurrent int           // jobs run at once by this process (default 2)
	PollInterval  time.Duration // how often idle workers look for work (default 200ms)
	Logger        *slog.Logger
	// Work disables job execution when false (insert-only client).
	Work bool
	// RescueAfter (PostgreSQL only) is how long a dispatch may run before
	// River's rescuer hands it to another worker to check whether its
	// worker is still alive; also the heartbeat age that counts as lost
	// for a worker on another host. Default 1 minute. River's rescuer looks
	// every 30 s, so a lost worker's job is retried within about
	// RescueAfter + 30 s.
	RescueAfter time.Duration
}

// NewQueue creates the River client. db must be the store's writer pool
// (one connection: River and AML then never fight over SQLite's lock).
func NewQueue(ctx context.Context, db *sql.DB, r *Runner, opt QueueOptions) (*Queue, error) {
	if err := MigrateRiver(ctx, db); err != nil {
		return nil, err
	}
	if opt.MaxConcurrent <= 0 {
		opt.MaxConcurrent = 2
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = 200 * time.Millisecond
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := &river.Config{
		Logger:               opt.Logger,
		FetchPollInterval:    opt.PollInterval,
		FetchCooldown:        min(opt.PollInterval, 50*time.Millisecond),
		PollOnly:             true,
		RescueStuckJobsAfter: 24 * time.Hour, // the runner's Recover handles lost workers
		JobTimeout:           -1,
	}
	if opt.Work {
		workers := river.NewWorkers()
		if err := river.AddWorkerSafely(workers, &trainWorker{r: r}); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "register worker")
		}
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opt.MaxConcurrent}}
	}
	client, err := river.NewClient(riversqlite.New(db), cfg)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "river client")
	}
	q := &Queue{client: client, db: db}
	if r != nil {
		r.queue = q
	}
	return q, nil
}

// Start begins working jobs (QueueOptions.Work).
func (q *Queue) Start(ctx context.Context) error {
	if q.pg != nil {
		return q.pg.start(ctx)
	}
	return q.client.Start(ctx)
}

// Stop waits for running jobs to finish their current step and stops.
func (q *Queue) Stop(ctx context.Context) error {
	if q.pg != nil {
		return q.pg.client.Stop(ctx)
	}
	return q.client.Stop(ctx)
}

// Enqueue dispatches try `try` of job id. Dispatching the same (job, try)
// twice is a no-op.
func (q *Queue) Enqueue(ctx context.Context, id string, try int) error {
	if q.pg != nil {
		return q.pg.enqueue(ctx, id, try)
	}
	res, err := q.client.Insert(ctx, TrainArgs{JobID: id, Try: try}, nil)
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "enqueue job %s", id)
	}
	_ = res
	return nil
}

// Client exposes the River client (benchmarks compare against it); nil on
// PostgreSQL.
func (q *Queue) Client() *river.Client[*sql.Tx] { return q.client }

// Reconcile dispatches every queued job that has no live River job (after a
// crash between inserting a job and dispatching it, or after recovery).
func (q *Queue) Reconcile(ctx context.Context, st core.Jobs) error {
	jobs, err := st.ListJobs(ctx, core.JobFilter{Status: core.JobQueued, Limit: 100_000})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := q.Enqueue(ctx, j.ID, j.RetryCount); err != nil {
			return fmt.Errorf("reconcile %s: %w", j.ID, err)
		}
	}
	return nil
}

var _ = rivertype.JobStateAvailable

// Shared reports whether the queue's database is shared by processes on
// several machines (PostgreSQL): a worker that dies there is noticed only
// by the others, so their runners watch for lost jobs (Runner.WatchLost).
// With the embedded store one machine runs the jobs and recovers them at
// start.
func (q *Queue) Shared() bool { return q != nil && q.pg != nil }
