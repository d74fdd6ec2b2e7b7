// Package envlease coordinates the shared environments external trainers
// run in (a Python venv, say) between the jobs that use them and the admin
// who rebuilds them.
//
// # Rules
//
//   - A running job holds a read lease ([Manager.Acquire]); any number may
//     be held at once, by any number of processes.
//   - A rebuild ([Manager.Rebuild]) takes the exclusive lock. It never waits
//     and never stops anything: while any live read lease exists it fails at
//     once with ENV_BUSY (HTTP 409), naming the holders. While a rebuild
//     runs, new read leases fail with ENV_BUSY.
//   - Two rebuilds of one environment never run at once, whichever processes
//     (or hosts sharing the data directory) start them.
//   - Nothing is deleted automatically because it looks abandoned: stale
//     files are reported, and cleared only by [Manager.Unlock] (aml env
//     unlock).
//
// # Files
//
// All state lives in files under <dataDir>/runtime, so every process that
// shares a data directory sees the same leases:
//
//	env-<name>.lock                                   the exclusive lock (LockInfo)
//	env-<name>.readers/<holder>-<pid>-<token>.lease   one per read lease (ReaderInfo)
//	env-<name>.last.json                              the last finished rebuild (LastRebuild)
//
// Environments are configured in <dataDir>/envs.json, a JSON array of
// [Config]; without it there is one, "python", a venv in
// <dataDir>/envs/python rebuilt with python3 -m venv --clear. The rebuild
// command runs in the environment's directory with AML_ENV_NAME and
// AML_ENV_DIR set.
//
// A job uses an environment like this:
//
//	l, err := m.Acquire(ctx, "python", jobID) // ENV_BUSY during a rebuild
//	if err != nil { ... }
//	defer l.Release()
//	... run the trainer in l.Env().Dir; l.Lost() is closed if the lease
//	    could no longer be trusted (see below) ...
//
// # Why files for readers
//
// An in-memory reader count cannot see jobs in another process: a rebuild
// started from the command line would rebuild the venv under the jobs of a
// worker process. Here each read lease is a file, so any process can count
// them; in-memory counters would add nothing the files do not already say,
// so there are none.
//
// # Race-free ordering
//
// A reader publishes its lease file first and then looks for the lock file;
// a rebuild creates the lock file first and then looks for lease files.
// Each side writes before it reads, so when both race at least one sees the
// other (if the reader's look found no lock, its lease file already existed
// when the rebuild created the lock and looked for readers). The side that
// sees the other backs off: the reader removes its lease file, the rebuild
// removes its lock, and each reports ENV_BUSY. Both may back off; both can
// never proceed. This relies on the file system ordering metadata operations
// as they are issued, which local file systems do; on NFS it holds only with
// attribute caching off (mount option actimeo=0 or noac).
//
// The lock file is created exclusively: the content is written to a
// temporary file that is then hard-linked into place, which fails with
// EEXIST exactly like open(O_CREAT|O_EXCL) but never shows a half-written
// lock (where hard links are unsupported it falls back to O_EXCL). A lease
// file has a unique name and is published by rename. The lock's phase is
// "checking" until the rebuild has found no readers and "running" after.
//
// # Heartbeats and staleness
//
// The process holding a lock or a lease refreshes its heartbeatAt (unix ms)
// every heartbeat interval (2s by default) by rewriting the file in place
// through its open descriptor, with a fixed size so a concurrent reader never
// sees it empty, and never by path, so a heartbeat cannot recreate a file
// someone removed or overwrite one someone else created.
//
// A holder is stale when its pid is not running on this host (the file
// names the host and, on Linux, the pid namespace, so a container sharing
// the host name counts as another host; a zombie counts as gone), or its
// heartbeat is older than 3 intervals (the only test for a holder on
// another host, and the one for a hung or stopped process). A file that cannot be parsed is judged by its
// modification time. Across hosts, heartbeats compare wall clocks: keep them
// synchronised.
//
// The lock also records the rebuild command's pid (it runs in its own
// process group). If the owner dies, the command may live on and keep
// writing the environment; while it runs on this host the lock cannot be
// cleared, even with --force, and the message says how to stop it.
//
// A stale lock means a rebuild was interrupted and the environment may be
// half built, so it keeps refusing rebuilds and leases (ENV_BUSY, with a
// message naming owner, pid, host and ages and saying exactly how to clear
// it: aml env unlock NAME --force after confirming the process is gone, then
// rebuild). [Manager.Unlock] removes a stale lock; it refuses a live one
// unless forced, and refuses even then while the pid is alive on this host
// (unless the process started after the lock was taken: a reused pid).
// Unlock re-reads the lock just before removing it and goes ahead only if
// its token is still the one it judged, so a lock taken meanwhile by a new
// rebuild is not removed (short of a new lock appearing in the microseconds
// between that read and the unlink). [Manager.Rebuild] releases its lock
// only if the file is still its own (same inode, same token): it never
// deletes someone else's.
//
// A stale lease file (its job crashed) would otherwise block rebuilds
// forever, so a rebuild ignores it, but only after reporting it: it is
// printed on the rebuild's output, returned in [RebuildResult.StaleReaders]
// and shown by [Manager.List] until aml env unlock removes it. Unlock keeps
// stale lease files whose pid is still alive on this host. If a process
// whose lease looked stale (it was suspended, say) comes back, its lease
// notices that a rebuild ran (the lock file in phase "running", or a newer
// last.json) or that its file was removed, and reports it through
// [Lease.Lost] and [Lease.Err]; a heartbeat never recreates the file.
package envlease
