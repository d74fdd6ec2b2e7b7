// Package jobs runs training jobs: a queue on River, a runner that drives
// each job through the state machine of internal/core (queued →
// provisioning → training → evaluating → done, or a terminal failure),
// native and external trainers, watchdogs, cancellation and recovery.
//
// Why it is built this way:
//
//   - Our jobs table is the truth; River only dispatches. A River job
//     carries (job id, try); the runner first claims the job with a
//     compare-and-set (queued → provisioning). A duplicate or stale River
//     job (rescued after a crash, or from an earlier try) finds the job not
//     queued and does nothing, so no job ever runs twice at once.
//   - Every state change is one compare-and-set statement in the store;
//     done is reached only together with the registered model (one
//     transaction), so a job never claims success without its model.
//   - Automatic retries happen only for infrastructure failures (the
//     trainer process killed by a signal nobody sent, a lost worker), at
//     most MaxRetries (2). A trainer that exits with an error, a tampered
//     dataset, a timeout or a stall fail for good; `aml job retry` makes a
//     new experiment whose parent is the old one.
//   - Watchdogs (wall timeout and stall) start when training starts, never
//     during provisioning (dataset verification, environment lease).
//   - Cancellation works across processes: `aml job cancel` sets a flag in
//     the store that the runner polls with its heartbeat; the trainer's
//     whole process tree is killed and the worker slot is freed.
//   - Recover runs at worker start: an active job whose worker is gone
//     (dead pid on this host, or a stale heartbeat) is requeued if it has
//     retries left, otherwise marked interrupted. No job stays active.
//   - On PostgreSQL (queue_pg.go) many worker processes on many machines
//     share the River queue; a worker lost mid-job is found by River's
//     rescuer, and the rescued dispatch requeues the job through the same
//     compare-and-set as Recover. Datasets are fetched from and models put
//     to a shared artifact store (Options.Artifacts), so workers need no
//     shared filesystem.
//   - Metrics are computed by the platform (internal/eval) from the
//     model's predictions on the dataset's val and test splits, never taken
//     from the trainer.
package jobs
