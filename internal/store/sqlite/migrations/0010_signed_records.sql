-- 0010: signed governance records (security issue #16). The certificate
-- row and the audit log can be edited by anyone with write access to the
-- database; what they hold is trusted only where the deployment's signing
-- key (cert-key.json, outside the database) signed it.
--
-- twin_attestations: statements signed with the deployment key about a
-- certificate (subject): its approval ({certificate hash, approver, role,
-- approval time}) and its execution ({certificate hash, actor, run,
-- claim}). At most one of each kind per certificate: a second execution
-- claim is refused here even with the row reset. hash is the sha256 of
-- statement_json (canonical JSON); signature the base64 Ed25519
-- signature of the 32 hash bytes by key key_id.
CREATE TABLE twin_attestations (
    subject        TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('approve', 'execute')),
    statement_json TEXT NOT NULL,
    hash           TEXT NOT NULL CHECK (length(hash) = 64),
    key_id         TEXT NOT NULL,
    signature      TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (subject, kind)
);
CREATE TRIGGER twin_attestations_no_update BEFORE UPDATE ON twin_attestations
BEGIN
    SELECT RAISE(ABORT, 'twin_attestations: a signed statement cannot change');
END;

-- audit_checkpoints: the audit log's head (seq, hash) signed with the
-- deployment key, written at every certificate lifecycle step and every
-- audit.CheckpointEvery entries. Verification with the key detects a
-- rewritten chain (recomputed hashes) up to the newest checkpoint.
CREATE TABLE audit_checkpoints (
    seq        INTEGER PRIMARY KEY,
    hash       TEXT NOT NULL CHECK (length(hash) = 64),
    key_id     TEXT NOT NULL,
    signature  TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit_checkpoints: a checkpoint cannot change');
END;
