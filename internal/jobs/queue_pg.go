package jobs

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The PostgreSQL queue. Many worker processes on many machines share one
// River queue in the store's database. What differs from SQLite, and why:
//
//   - A worker can vanish (SIGKILL, a machine lost) while its River job is
//     running; nobody on its host will run Recover for it. River's rescuer
//     (RescueStuckJobsAfter) finds dispatches running for longer than
//     RescueAfter and makes them retryable; the retry, on any worker, does
//     not train but checks the AML job (rescue below): a job whose worker is
//     lost (dead pid on this host, or a heartbeat older than RescueAfter) is
//     handed back exactly as Recover does — requeued as the next try (a new
//     dispatch) or interrupted when no retry is left, by compare-and-set, so
//     if two workers rescue at once one wins. A job whose worker is alive
//     (a long training) is left alone and the check snoozes; a finished job
//     ends the dispatch. So a lost worker's job becomes a retry, no job
//     stays active, and none runs twice at once (the claim is still the
//     compare-and-set queued → provisioning).
//   - River's rescuer only looks at dispatches whose timeout has passed, so
//     the dispatch timeout is RescueAfter; the runner does not inherit that
//     deadline (training has its own watchdogs) and stops only when the
//     worker stops.
//   - A dispatch may be attempted several times (rescues, or a store error
//     before the claim); snoozes do not count. The AML job's own retry
//     budget (MaxRetries) is what limits re-training.

// pgQueue is the PostgreSQL side of Queue.
type pgQueue struct {
	client      *river.Client[pgx.Tx]
	r           *Runner
	rescueAfter time.Duration

	mu      sync.Mutex
	workCtx context.Context // the worker's life: Start's context
}

// pgMaxAttempts bounds how often one dispatch is attempted (rescues of a
// lost worker's dispatch and retries after store errors).
const pgMaxAttempts = 25

// riverMigrateLock serialises River's migrations across processes starting
// at once.
const riverMigrateLock = 7419305522

// MigrateRiverPG applies River's schema migrations to the PostgreSQL
// database of pool (in the connections' search_path), under an advisory
// lock so that workers starting together migrate once.
func MigrateRiverPG(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "river migrations: connect")
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, riverMigrateLock); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "river migrations: lock")
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, riverMigrateLock); err != nil {
			// A lock left on a pooled connection would block the next
			// worker's migrations: close the connection (its session's
			// locks go with it) so that Release destroys it.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "river migrator")
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "river migrations")
	}
	return nil
}

// NewQueuePG creates the River client on a PostgreSQL pool (the store's:
// postgres.Store.QueueDB).
func NewQueuePG(ctx context.Context, pool *pgxpool.Pool, r *Runner, opt QueueOptions) (*Queue, error) {
	if err := MigrateRiverPG(ctx, pool); err != nil {
		return nil, err
	}
	if opt.MaxConcurrent <= 0 {
		opt.MaxConcurrent = 2
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = 200 * time.Millisecond
	}
	if opt.RescueAfter <= 0 {
		opt.RescueAfter = time.Minute
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	pq := &pgQueue{r: r, rescueAfter: opt.RescueAfter}
	cfg := &river.Config{
		Logger:               slog.New(quietStuck{opt.Logger.Handler()}),
		FetchPollInterval:    opt.PollInterval,
		FetchCooldown:        min(opt.PollInterval, 50*time.Millisecond),
		PollOnly:             true,
		RescueStuckJobsAfter: opt.RescueAfter,
		JobTimeout:           opt.RescueAfter,
	}
	if opt.Work {
		workers := river.NewWorkers()
		if err := river.AddWorkerSafely(workers, &pgTrainWorker{q: pq}); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "register worker")
		}
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opt.MaxConcurrent}}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "river client")
	}
	pq.client = client
	q := &Queue{pg: pq}
	if r != nil {
		r.queue = q
	}
	return q, nil
}

// QueueHost is a back-end's job-queue capability; every back-end declares
// it (internal/store.Store requires it). QueueDB names the database River
// keeps the queue in, exactly one of the two: SQLite's single writer pool
// (NewQueue: River and AML then never fight over SQLite's lock), or a
// PostgreSQL pool that many worker processes share (NewQueuePG).
type QueueHost interface {
	QueueDB() (sqlite *sql.DB, postgres *pgxpool.Pool)
}

// NewQueueFor opens the queue in the database of the store a runner uses
// (QueueHost): NewQueue or NewQueuePG.
func NewQueueFor(ctx context.Context, st QueueHost, r *Runner, opt QueueOptions) (*Queue, error) {
	db, pool := st.QueueDB()
	switch {
	case db != nil && pool == nil:
		return NewQueue(ctx, db, r, opt)
	case pool != nil && db == nil:
		return NewQueuePG(ctx, pool, r, opt)
	}
	return nil, core.Errorf(core.CodeInvalidArgument, "store %T must name exactly one job-queue database", st)
}

func (p *pgQueue) start(ctx context.Context) error {
	p.mu.Lock()
	p.workCtx = ctx
	p.mu.Unlock()
	return p.client.Start(ctx)
}

func (p *pgQueue) life() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workCtx == nil {
		return context.Background()
	}
	return p.workCtx
}

func (p *pgQueue) enqueue(ctx context.Context, id string, try int) error {
	opts := TrainArgs{}.InsertOpts()
	opts.MaxAttempts = pgMaxAttempts
	if _, err := p.client.Insert(ctx, TrainArgs{JobID: id, Try: try}, &opts); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "enqueue job %s", id)
	}
	return nil
}

type pgTrainWorker struct {
	river.WorkerDefaults[TrainArgs]
	q *pgQueue
}

// Timeout is RescueAfter so that River's rescuer considers the dispatch
// (see the comment at the top of this file); Work does not inherit it.
func (w *pgTrainWorker) Timeout(*river.Job[TrainArgs]) time.Duration { return w.q.rescueAfter }

func (w *pgTrainWorker) Work(ctx context.Context, job *river.Job[TrainArgs]) error {
	life := w.q.life()
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(life, func() { cancel(context.Cause(life)) })
	defer stop()
	if job.Attempt <= 1 {
		return w.q.r.Run(rctx, job.Args.JobID, job.Args.Try)
	}
	again, err := w.q.r.rescue(rctx, job.Args.JobID, job.Args.Try, LostAfter(w.q.rescueAfter))
	if err == nil && again > 0 {
		return river.JobSnooze(again)
	}
	return err
}

// rescue handles a dispatch that River rescued (or retried): see the top
// of this file. It returns how long to wait before looking again when the
// job's worker is still alive.
func (r *Runner) rescue(ctx context.Context, id string, try int, staleAfter time.Duration) (time.Duration, error) {
	j, err := r.st.GetJob(ctx, id)
	if err != nil {
		return 0, err
	}
	host, _ := os.Hostname()
	switch {
	case j.Status.Terminal():
		return 0, nil
	case j.Status == core.JobQueued:
		if j.RetryCount == try {
			// This dispatch failed before anyone claimed the job.
			return 0, r.Run(ctx, id, try)
		}
		return 0, nil // a later try has its own dispatch
	case j.RetryCount != try:
		return 0, nil // a later try is running; its dispatch watches it
	case !workerLost(j, r.worker, host, staleAfter, time.Now()):
		return staleAfter, nil
	}
	st := r.recoverJob(ctx, j)
	r.log.Info("rescued job of a lost worker", "job", id, "worker", j.Worker, "now", st)
	return 0, nil
}

// quietStuck drops River's "job appears to be stuck" notices: on
// PostgreSQL every training longer than RescueAfter outlives its dispatch
// timeout on purpose.
type quietStuck struct{ slog.Handler }

func (h quietStuck) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "appears to be stuck") || strings.Contains(r.Message, "became unstuck") {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietStuck) WithAttrs(as []slog.Attr) slog.Handler {
	return quietStuck{h.Handler.WithAttrs(as)}
}
func (h quietStuck) WithGroup(n string) slog.Handler { return quietStuck{h.Handler.WithGroup(n)} }
