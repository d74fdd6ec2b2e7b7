// Package guard is the fail-closed write guard of the hybrid twin: the
// single check every write of a certified recommendation to a line passes
// through, and the executor that applies an allowed write and verifies it
// by reading it back.
//
// Upstream (channel-profile.ts and its write guard) failed open: no
// channel, a database error or an empty capability let the write through.
// Check is the opposite: a write is allowed only when every check below
// passes, and anything unexpected — a lookup error, a missing policy, an
// unknown enumeration, a panic in an adapter — denies it with a stable
// reason code (Decision.Reason, the Reason* constants; never rename one,
// only add).
//
// Checks, in order (the first failing check names the reason):
//
//  1. the request names a line and a run            INVALID_REQUEST
//  2. the channel of the line exists                 CHANNEL_ERROR, NO_CHANNEL
//     and belongs to the line                        LINE_MISMATCH
//  3. the channel's profile is hybrid_twin           PROFILE_NOT_TWIN
//  4. its control policy is hitl_governed or         POLICY_RECOMMENDATION_ONLY,
//     bounded_auto                                   POLICY_UNKNOWN
//  5. a valid, frozen scene of the line with its     NO_POLICY, LINE_MISMATCH
//     write policy is given
//  6. a certificate is given, its signature          NO_CERTIFICATE, CERT_INVALID
//     verifies (cert.Verify), it is APPROVED by      CERT_REVOKED, CERT_EXPIRED,
//     someone other than its requester and not       CERT_NOT_APPROVED
//     expired
//  7. the certificate was issued on this scene       SCENE_MISMATCH
//  8. the snapshot the moves start from is fresh     SNAPSHOT_STALE
//     (SnapshotAt within SnapshotMaxAge of Now)
//  9. the moves are exactly the certificate's moves  MOVES_MISMATCH
//  10. each |to − from| ≤ maxDeltaPerAction           NO_POLICY, DELTA_TOO_LARGE
//  11. bounded_auto: each target within the           OUT_OF_BOUNDS
//     channel's absolute bounds for the control
//  12. the recorded write history, on the wall        HISTORY_ERROR, CLOCK_FAULT,
//     clock (WallNow): no entry dated after it        NODE_INTERVAL,
//     (beyond ClockTolerance), no write to a moved    LINE_INTERVAL,
//     node within minNodeIntervalSec, none on the     CERT_ALREADY_USED,
//     line within minLineActionIntervalSec, the       TOO_MANY_ACTIONS
//     certificate not used before, at most
//     maxActionsPerRun actions in the run
//
// A panic anywhere in Check is recovered and denies with INTERNAL.
//
// Operating envelopes. A request may name an approved operating envelope
// (Request.Envelope, with an ActionID) instead of a certificate: under
// bounded_auto only (ENVELOPE_NOT_ALLOWED otherwise), the moves are then
// whatever the supervisor re-optimised, each within the envelope's
// bounds (OUTSIDE_ENVELOPE) and together within its moves per rolling
// hour (RATE_EXCEEDED); every other check applies as above. See
// envelope.go and package twin/envelope.
//
// Step tests. A request may instead name move StepIndex of an approved
// step-test certificate (Request.StepTest, StepStart): its values must be
// exactly the certificate's move, written within the move's time slot
// and only after the test's previous move was written in the same run
// (OUTSIDE_SLOT), within the test's bounds; every other check applies as
// above. See steptest.go and package twin/steptest.
//
// Clocks. Now is the clock the certificate and the snapshot were stamped
// on (the application's, which a demo runs at simulated time): expiry and
// freshness are judged on it. The write history is kept on the wall clock
// (WallNow; zero: Now): Execute stamps its records with it and the
// history checks measure against it, so an entry dated in the future is
// a clock fault (CLOCK_FAULT), never an interval that seems to hold.
//
// A certificate's snapshot is fresh for seconds, its approval comes
// minutes later: the caller (internal/twin/govern with
// internal/app) then re-runs the certified moves from a fresh snapshot
// and gives the guard that snapshot's values and capture time; the
// certified setpoints, and every check here, stay the same.
//
// Definitions. A move sets one control (scene variable) on one node from
// its current value (read from the snapshot taken at SnapshotAt) to a
// target. The certificate's moves are the first step of its candidate
// control trajectory (receding horizon: the first step is what is applied
// now): the request must set every control of that step, exactly once, to
// its certified value, on distinct nodes, and nothing else. An action is
// one guarded write batch — all moves written under one certificate; in
// the history its writes share a CertificateID (a record without one
// counts as an action of its own). Both policies need an APPROVED
// certificate; bounded_auto additionally keeps every target within the
// channel's bounds.
//
// Execute applies an allowed Decision: it refuses a denied decision or
// one that Check did not produce for this very request, then for each
// move reads the node (it must still hold From), writes To, records the
// write in the history and reads it back; the first mismatch or error
// stops the remaining moves (outcome failed). The caller marks the
// certificate EXECUTED (cert.MarkExecuted) after a readback-verified
// outcome.
//
// Not covered here: that a move's node is the node bound to its variable
// (a NodeBindingSnapshot check belongs to the caller), and the race
// between Check and Execute — a store must serialise guarded writes per
// line so that the history Check read is still the history at Execute.
package guard
