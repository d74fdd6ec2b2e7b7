-- 0004: the hash-chained audit log of the digital twin (package
-- internal/audit). Every twin action is appended; nothing is ever changed.
--
-- hash = sha256 hex of the canonical JSON of {seq, at, actor, action,
-- subject, lineId, payload, prevHash}; prev_hash of seq 1 is 64 zeros.
-- seq is assigned by the writer as last seq + 1 (no AUTOINCREMENT gaps), so
-- a missing seq means a deleted entry.
CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,              -- epoch milliseconds
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    subject   TEXT NOT NULL,
    line_id   TEXT NOT NULL DEFAULT '',
    payload   TEXT NOT NULL,                 -- canonical JSON
    prev_hash TEXT NOT NULL CHECK (length(prev_hash) = 64),
    hash      TEXT NOT NULL UNIQUE CHECK (length(hash) = 64)
);
CREATE INDEX audit_log_subject ON audit_log(subject, seq);

-- Append-only at the SQL level. Anyone with write access to the file can
-- drop these triggers; they stop accidents and casual edits, while
-- tampering is detected by verification (aml audit verify).
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused');
END;
-- An insert must extend the chain: next seq, linked to the current head.
CREATE TRIGGER audit_log_extend_chain BEFORE INSERT ON audit_log
WHEN NEW.seq IS NOT COALESCE((SELECT max(seq) FROM audit_log), 0) + 1
  OR NEW.prev_hash IS NOT COALESCE((SELECT hash FROM audit_log ORDER BY seq DESC LIMIT 1),
                                   '0000000000000000000000000000000000000000000000000000000000000000')
BEGIN
    SELECT RAISE(ABORT, 'audit_log: an insert must extend the chain (seq = last seq + 1, prev_hash = last hash)');
END;
