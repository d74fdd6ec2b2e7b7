// Package audit is the hash-chained, append-only audit log of the digital
// twin. Every twin action (scene freeze, trial, certificate issue, approve,
// revoke and execute, every write) is appended as one Entry to the table
// audit_log of the store's database, SQLite or PostgreSQL (migration
// 0004_audit.sql of each), through internal/store/sqldb.
//
// # Chain
//
// Entries are numbered seq = 1, 2, 3, … without gaps. Each entry carries
// the hash of its predecessor (prevHash; 64 zeros for seq 1, GenesisHash)
// and its own hash:
//
//	hash = hex(sha256(CanonicalJSON({
//	    "seq": seq, "at": epochMillis, "actor": actor, "action": action,
//	    "subject": subject, "lineId": lineID, "payload": payload,
//	    "prevHash": prevHash})))
//
// where CanonicalJSON is core.CanonicalJSON (keys sorted bytewise, no
// white space, one number spelling) and payload is the parsed JSON value,
// stored in canonical form. So the bytes hashed for an entry are, e.g.,
//
//	{"action":"trial","actor":"alice","at":1767600000000,"lineId":"L1","payload":{"k":1},"prevHash":"00…00","seq":1,"subject":"trial-7"}
//
// and anyone can recompute the chain from a dump of the table without
// AML. Changing any field of an entry changes its hash, which no longer
// matches the stored hash or the next entry's prevHash; the hash also
// covers seq, so reordering is detected, and seq has no gaps, so deleting
// an entry is detected (the gap and the broken link) even when the
// deleted row's neighbours are untouched.
//
// # Append-only
//
// Append runs in one write transaction of the handle (sqldb.DB.Begin:
// BEGIN IMMEDIATE on SQLite's single writer, BEGIN plus an advisory lock on
// PostgreSQL): it takes the write lock, reads the head, and inserts seq+1
// linked to it, so appends from several processes on one database
// serialise into one chain. AppendTx does the same inside a caller's
// transaction, for actions that must be recorded atomically with their
// effect; the caller's transaction must be a write transaction of the same
// handle, like every write transaction of the shared stores. AppendIf
// (and AppendIfTx, inside a caller's such transaction) appends only when
// a check of the subject's trail, read in that transaction, passes: an
// atomic claim (a step test's start).
//
// At the SQL level, triggers refuse every UPDATE and DELETE on audit_log
// (and TRUNCATE on PostgreSQL) and every INSERT that does not extend the
// chain (seq = last + 1, prev_hash = last hash). Triggers are not a security boundary: anyone
// with write access to the database can drop them and edit the table.
// They stop accidents and casual edits; tampering is detected by Verify
// (`aml audit verify`).
//
// # What verification cannot see: truncation
//
// Removing the newest entries (or removing them and appending new ones)
// leaves a shorter chain that is valid in itself: no log can prove on its
// own that it once was longer. A whole-suffix rewrite with recomputed
// hashes is likewise self-consistent. To detect it, record the head
// (Head: seq and hash) somewhere else when it matters — certificates store
// the audit head at issue, an operator can copy it into a ticket or
// another system — and check it later with VerifyHead, which fails unless
// the log still contains that exact entry at that seq.
//
// Verification failures carry the code AML_AUDIT_TAMPERED (HTTP 409) and
// name the first bad seq.
//
// # Records replayed from their trail
//
// Signed records that live only in the log (step tests, operating
// envelopes) append each step with AppendSigned (the entry, then a
// signed checkpoint of the new head), are rebuilt from their trail, every
// entry of their subject (Trail), and listed by Replay: the subjects of the newest issue entries
// of a line, each replayed and verified by the record's own package, the
// ones that do not verify named apart.
package audit
