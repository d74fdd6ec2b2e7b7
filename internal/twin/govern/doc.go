// Package govern runs a governed write: the one path by which a certified
// recommendation reaches a line. It ties the stored records together and
// hands them to the fail-closed write guard (package twin/guard), so that
// what the guard checks is what the store holds, and records everything
// it does in the write history and the hash-chained audit log.
//
// Execute(ctx, st, pub, certID, writer, opts):
//
//  1. loads the certificate (its row must agree with its JSON; the guard
//     verifies the signature with pub), the trial it certifies, the trial's
//     snapshot and the scene it names. The stored trial and snapshot must
//     still hash to what the certificate signed (trialHash, snapshotHash):
//     a record changed after issue denies RECORD_TAMPERED;
//  2. builds the moves: the certificate's first candidate step (receding
//     horizon — the first step is what is applied now, the rest of the
//     trajectory is re-planned from the next snapshot), one move per
//     control of that step, from the snapshot's control value to the
//     certified value, on the control's node (the scene variable's nodeId,
//     else the variable id, which is the node id on the simulated line),
//     in variable order. The snapshot is the trial's own: the certificate
//     certifies a move from that state, so the move's From is the
//     snapshot's value and the guard's freshness check on the snapshot's
//     capture time bounds how far the line may have drifted since; the
//     executor then refuses to write a node that no longer holds From.
//     When the caller re-validated (Options.Snapshot and
//     Options.Revalidation: the certified trajectory re-run from a fresh
//     stored snapshot, internal/app), the moves start from that fresh
//     snapshot instead — its values, its capture time for the freshness
//     check, its run — and the certified trial and snapshot must still
//     hash to what the certificate signed; a failed re-validation is
//     denied REVALIDATION_FAILED (AML_CERT_REVALIDATION_FAILED) once the
//     authority below holds;
//  3. for an APPROVED row, checks what it cannot trust the row for
//     (authority): the signed approval matches the row and names a person
//     with the approver or admin role who is not the requester
//     (APPROVAL_UNSIGNED, APPROVAL_INVALID); no signed execution and no
//     audited claim, write or execution of it exists (CERT_ALREADY_USED);
//     the audit log holds its issue entry at the anchor and its approval
//     entry (AUDIT_INCOMPLETE), verifies with its signed checkpoints and
//     has both entries signed (AUDIT_TAMPERED). The run the action counts
//     against is the certified snapshot's, else the line's active run; a
//     caller naming another is denied RUN_MISMATCH (none: NO_RUN);
//  4. reads the newest row id of the line's write history, runs
//     guard.Check over the store (channel, history — twin_writes and the
//     writes the audit log recorded), and on a denial
//     appends "write.denied" with the reason code and returns
//     AML_WRITE_DENIED (an expired certificate is also marked EXPIRED);
//  5. claims the line (ClaimCertificateWrite, which also signs the
//     execution claim, once per certificate; the history must not have
//     grown since step 3, so two executors racing cannot both act on the
//     same history — the loser is denied CONCURRENT_WRITE);
//  6. runs guard.Execute through the Writer, recording every attempted
//     write (twin_writes and "write.attempt") before its readback. The
//     claim and the writes are recorded at the wall clock
//     (Options.WallNow), not at Now; a history entry dated after the wall
//     clock is a clock fault (reason CLOCK_FAULT, AML_CLOCK_FAULT);
//  7. on a readback-verified outcome appends "write.executed" and marks the
//     certificate EXECUTED ("cert.execute"); otherwise appends
//     "write.failed" and returns AML_WRITE_FAILED. The certificate of a
//     failed write stays APPROVED but cannot be used again: its writes are
//     in the history (CERT_ALREADY_USED).
//
// Nothing fails open: any error reading a record the decision needs
// denies (STORE_ERROR, RECORD_MISSING, RECORD_TAMPERED) and is audited
// when the audit log can still be written.
//
// VerifyCertificate is the offline check behind `aml cert verify`: the
// row, the hash, the signature, the certificate's audit trail (its issue
// entry at the recorded head, a lifecycle that replays to the stored
// status and approver) and the whole audit chain.
package govern
