package service

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/envlease"
	"github.com/aml-project/aml/internal/events"
	nativetrainers "github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/recal"
)

// Config says where a process's deployment lives.
type Config struct {
	// DataDir holds the SQLite store (when DBURL is empty), the signing
	// key, artifacts and job folders.
	DataDir string
	// DBURL is a postgres:// URL, or empty for the embedded SQLite store.
	DBURL string
	// Trainers are the trainers this process's runner offers.
	Trainers *jobs.Trainers
	// RescueAfter is the PostgreSQL queue's rescue age (jobs.QueueOptions).
	RescueAfter time.Duration
	Log         *slog.Logger
	// Now stamps registered models' creation time (jobs.Options.Now; nil:
	// the wall clock): the application's clock.
	Now func() time.Time
}

// NativeTrainers are the trainers an AML binary offers: the native ones
// (internal/ident/trainers) with their model formats, and with
// testTrainer the trivial test trainer (jobs.TestMeanTrainer: tests and
// benchmarks only, not a product feature).
func NativeTrainers(testTrainer bool) *jobs.Trainers {
	t := jobs.NewTrainers(nativetrainers.All()...).WithFormats(nativetrainers.Formats())
	if testTrainer {
		t.Add(jobs.TestMeanTrainer{})
	}
	return t
}

// IsPostgres reports whether url selects PostgreSQL.
func IsPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// CheckDB refuses a database URL that names neither back-end.
func CheckDB(url string) error {
	if url != "" && !IsPostgres(url) {
		return core.Errorf(core.CodeUsage, "--db %q: want a postgres:// URL (omit --db for the embedded SQLite store in --data)", RedactURL(url))
	}
	return nil
}

// RedactURL hides a URL's credentials.
func RedactURL(u string) string {
	if at := strings.LastIndexByte(u, '@'); at > 0 {
		if i := strings.Index(u, "://"); i > 0 && i < at {
			return u[:i+3] + "…" + u[at:]
		}
	}
	return u
}

// Process opens a deployment's resources on first use, each once: a
// command that reads samples opens only the store; one that trains opens
// the job system too; one that signs loads the key.
type Process struct {
	cfg  Config
	deps Deps
	arts artifact.Store
	// work and relayed: the job system was opened to run jobs; events
	// are relayed between processes.
	work, relayed bool
}

// New is a process over cfg; nothing is opened yet.
func New(cfg Config) *Process {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// An absolute data dir: job directories handed to trainer processes,
	// artifact paths and the key must not depend on the working directory.
	if cfg.DataDir != "" {
		if abs, err := filepath.Abs(cfg.DataDir); err == nil {
			cfg.DataDir = abs
		}
	}
	return &Process{cfg: cfg, deps: Deps{DataDir: cfg.DataDir, Log: cfg.Log}}
}

// Store opens the selected back-end.
func (p *Process) Store(ctx context.Context) (store.Store, error) {
	if p.deps.Store != nil {
		return p.deps.Store, nil
	}
	var (
		s   store.Store
		err error
	)
	if IsPostgres(p.cfg.DBURL) {
		// The database is elsewhere; the data dir still holds the key,
		// job folders and artifacts: owner only, as sqlite.Open makes it.
		if err := privateDir(p.cfg.DataDir); err != nil {
			return nil, err
		}
		s, err = postgres.Open(ctx, p.cfg.DBURL)
	} else {
		s, err = sqlite.Open(p.cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	p.deps.Store = s
	return s, nil
}

// Artifacts is the store's shared artifact store (datasets and models in
// the database on PostgreSQL, materialised under DataDir), or nil where
// the files in DataDir are the truth (SQLite).
func (p *Process) Artifacts(ctx context.Context) (artifact.Store, error) {
	if p.arts != nil {
		return p.arts, nil
	}
	st, err := p.Store(ctx)
	if err != nil {
		return nil, err
	}
	if p.arts, err = st.Artifacts(ctx, p.cfg.DataDir); err != nil {
		return nil, err
	}
	return p.arts, nil
}

// Jobs opens the job runner, its queue and the event bus. work makes the
// queue run jobs (concurrency at once) rather than only insert them.
func (p *Process) Jobs(ctx context.Context, work bool, concurrency int) (*Deps, error) {
	if p.deps.Runner != nil {
		return &p.deps, nil
	}
	s, err := p.Store(ctx)
	if err != nil {
		return nil, err
	}
	arts, err := p.Artifacts(ctx)
	if err != nil {
		return nil, err
	}
	envs, err := envlease.Open(p.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	bus := events.New()
	r := jobs.NewRunner(s, jobs.Options{DataDir: p.cfg.DataDir, Trainers: p.cfg.Trainers, Bus: bus, Envs: envs, Logger: p.cfg.Log, Artifacts: arts, Now: p.cfg.Now})
	q, err := jobs.NewQueueFor(ctx, s, r, jobs.QueueOptions{Work: work, MaxConcurrent: concurrency, Logger: p.cfg.Log, RescueAfter: p.cfg.RescueAfter})
	if err != nil {
		return nil, err
	}
	p.deps.Runner, p.deps.Queue, p.deps.Bus, p.work = r, q, bus, work
	return &p.deps, nil
}

// RelayEvents carries the process's job, model and certificate events to
// and from the other processes on the same database (the store's
// RelayEvents: internal/events/pgrelay on PostgreSQL), so that a server
// shows the progress of jobs its workers on other machines run. A no-op
// on SQLite, where one process runs the jobs its clients watch. Jobs must
// have been opened.
func (p *Process) RelayEvents(ctx context.Context) error {
	if p.relayed {
		return nil
	}
	p.relayed = true
	return p.deps.Store.RelayEvents(ctx, p.deps.Bus, p.cfg.Log)
}

// Key loads (creating at first use) the data directory's signing key and
// checks it is the deployment's, registering it in the database when none
// is: processes sharing a PostgreSQL database on several machines must
// sign with one key (twinstore.RegisterSigningKey).
func (p *Process) Key(ctx context.Context) (*cert.KeyPair, error) {
	if p.deps.Key != nil {
		return p.deps.Key, nil
	}
	st, err := p.Store(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(p.cfg.DataDir, cert.KeyFileName)); errors.Is(err, fs.ErrNotExist) {
		// No key here yet: if the deployment has one, making a new key
		// would only make one that is refused.
		id, err := st.DeploymentKeyID(ctx)
		if err != nil {
			return nil, err
		}
		if id != "" {
			return nil, twinstore.MissingKeyError(id)
		}
	}
	k, err := cert.LoadOrCreateKey(p.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := st.RegisterSigningKey(ctx, k, "aml"); err != nil {
		return nil, err
	}
	p.deps.Key = k
	return k, nil
}

// ExistingKey loads the data directory's signing key when it has one and
// none is loaded yet, never creating one (a command that only verifies,
// such as audit.verify, writes nothing); without a key file it does
// nothing.
func (p *Process) ExistingKey() error {
	if p.deps.Key != nil {
		return nil
	}
	k, err := cert.LoadKey(p.cfg.DataDir)
	switch {
	case err == nil:
		p.deps.Key = k
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return nil
}

// Deps opens everything a serving process needs (store, job system, key).
func (p *Process) Deps(ctx context.Context, work bool, concurrency int) (*Deps, error) {
	if _, err := p.Jobs(ctx, work, concurrency); err != nil {
		return nil, err
	}
	if _, err := p.Key(ctx); err != nil {
		return nil, err
	}
	return &p.deps, nil
}

// Opened is what has been opened so far (fields of what has not are nil).
func (p *Process) Opened() *Deps { return &p.deps }

// Workers is a process's running job workers.
type Workers struct {
	Worker              string
	Requeued, Interrupt int
	q                   *jobs.Queue
}

// StartWorkers runs the job system's workers under ctx (Jobs must have
// been opened with work): jobs left by a crashed process are recovered
// (requeued or marked interrupted), the queue is reconciled with the
// queued jobs, and on a shared queue (PostgreSQL) the jobs of lost
// workers on other hosts are watched for. Cancelling ctx makes the runner
// hand its running jobs back; Stop then waits for them.
func (p *Process) StartWorkers(ctx context.Context) (*Workers, error) {
	if !p.work {
		return nil, core.Errorf(core.CodeInternal, "service: StartWorkers on a job system opened without work")
	}
	r, q := p.deps.Runner, p.deps.Queue
	rq, in, err := r.Recover(ctx, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if err := q.Reconcile(ctx, p.deps.Store); err != nil {
		return nil, err
	}
	if err := q.Start(ctx); err != nil {
		return nil, err
	}
	if q.Shared() {
		go r.WatchLost(ctx, jobs.LostEvery(p.cfg.RescueAfter), jobs.LostAfter(p.cfg.RescueAfter))
	}
	return &Workers{Worker: r.Worker(), Requeued: rq, Interrupt: in, q: q}, nil
}

// Stop waits (until ctx ends) for the workers' jobs to be handed back.
func (w *Workers) Stop(ctx context.Context) error { return w.q.Stop(ctx) }

// Recalibrate is a worker's share of twin recalibration: every interval
// one recal.RunNext step settles requests whose retraining job ended and
// claims the next queued request (dataset rebuilt with the new runs, a
// hybrid_residual job submitted to this process's queue). The new model
// arrives as a candidate; nothing is promoted here. It returns when ctx
// ends.
func (p *Process) Recalibrate(ctx context.Context, every time.Duration) {
	log, s, r := p.cfg.Log, p.deps.Store, p.deps.Runner
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		step, err := recal.RunNext(ctx, s, r, recal.RunOptions{DataDir: p.cfg.DataDir})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("recalibration step failed", "err", err)
		case step.Claimed != nil || len(step.Settled) > 0:
			log.Info("recalibration step", "claimed", step.Claimed != nil, "settled", len(step.Settled), "running", step.Running)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close closes the store (if it was opened).
func (p *Process) Close() error {
	if p.deps.Store == nil {
		return nil
	}
	return p.deps.Store.Close()
}

// privateDir creates dir with mode 0700, or removes group and other
// access from an existing one.
func privateDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "create data dir %s", dir)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "data dir %s", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, st.Mode().Perm()&0o700); err != nil {
			return core.Wrap(core.CodeStoreUnavailable, err, "data dir %s", dir)
		}
	}
	return nil
}
