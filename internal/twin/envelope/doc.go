// Package envelope runs the twin as a receding-horizon controller under
// supervision: under the bounded_auto control policy a person approves an
// operating envelope (contract.EnvelopeCertificate: per manipulated
// variable the bounds every target must lie in, a cap on moves per
// rolling hour, an expiry, the line, frozen scene and model it is for)
// instead of each move, and each cycle the twin re-optimises from a fresh
// snapshot and writes the first step through the write guard, which
// checks it against the envelope (guard.Request.Envelope). hitl_governed
// stays one approval per move: the guard refuses an envelope there.
//
// Records. An envelope has no table of its own: its lifecycle is its
// trail in the hash-chained audit log, subject the envelope id —
// "envelope.issue" (the whole signed envelope), "envelope.approve" (an
// approval statement signed with the deployment key naming the envelope
// hash, the approver and their role), "envelope.revoke" and
// "envelope.stop" (either revokes it), "envelope.cycle" (each cycle's
// outcome) — and the log's head is signed (an audit checkpoint) at issue
// and approval. Load replays the trail and trusts only what the
// deployment key signed: an envelope whose body was changed, an approval
// not signed by a key of the keyring, by the proposer, by a role other
// than approver/admin or by an agent's token name does not verify
// (AML_CERT_INVALID). A cycle also verifies the whole chain with its
// signed checkpoints and that the issue and approval entries are covered
// by one (AUDIT_TAMPERED). Each cycle's writes are recorded like a
// certificate's (a claim and one "write.attempt" per node, in twin_writes
// and the audit log) under the action id
// contract.EnvelopeActionPrefix(id) + cycle id, which is how the guard
// counts the envelope's moves in the rolling hour.
//
// Cycle(ctx, st, pub, writer, in, bus): the caller took a fresh snapshot,
// re-optimised with the envelope's model and evaluated its gate (the
// application layer, internal/app, does all three); Cycle then
//
//  1. refuses (StatusRefused; nothing was in force, nothing changes) an
//     envelope never issued, not approved, revoked or stopped, whose
//     trail does not verify, or a channel that is not bounded_auto;
//  2. stops (StatusStopped) when the envelope is in force but the cycle
//     leaves it: expiry, a model that fails its gate, no snapshot, a
//     stale connector (snapshot not fresh, stale nodes, or older than
//     the age limit), an out-of-distribution snapshot or trial, a trial
//     that breaks a scene constraint, and every guard denial but an
//     interval (targets outside the envelope OUTSIDE_ENVELOPE, more
//     moves than maxMovesPerHour RATE_EXCEEDED, a delta beyond the
//     write policy, the channel's bounds, too many actions in the run,
//     a clock fault, …), or a readback that differs from what was
//     written. A stop appends "envelope.stop" (actor aml-supervisor),
//     which revokes the envelope, and publishes EventStopped (the alarm:
//     a person must look and approve a new envelope);
//  3. holds (StatusHeld, no error) when there is nothing to write: no
//     passing candidate improves on holding, the first step changes no
//     control, or a write-policy interval is not over yet;
//  4. otherwise claims the line and writes the moves through
//     guard.Execute (read, write, record, read back) — StatusWritten.
//
// Every outcome is audited. The clocks are injected (CycleInput.Now,
// WallNow) as for certificates (see package twin/guard).
package envelope
