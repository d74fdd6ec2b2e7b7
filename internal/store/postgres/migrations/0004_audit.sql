-- 0004: the hash-chained audit log (same table and columns as SQLite's
-- 0004; hash rules in internal/audit). Append-only at the SQL level through
-- triggers, like SQLite's: they stop accidents, verification detects
-- tampering.
CREATE TABLE audit_log (
    seq       bigint PRIMARY KEY,
    at        bigint NOT NULL,
    actor     text NOT NULL,
    action    text NOT NULL,
    subject   text NOT NULL,
    line_id   text NOT NULL DEFAULT '',
    payload   text NOT NULL,
    prev_hash text NOT NULL CHECK (length(prev_hash) = 64),
    hash      text NOT NULL UNIQUE CHECK (length(hash) = 64)
);
CREATE INDEX audit_log_subject ON audit_log(subject, seq);

CREATE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'integrity_constraint_violation';
END
$$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse();

-- An insert must extend the chain: next seq, linked to the current head.
-- The table lock serialises appenders so two cannot both read the same head.
CREATE FUNCTION audit_log_extend() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head_seq  bigint;
    head_hash text;
BEGIN
    LOCK TABLE audit_log IN SHARE ROW EXCLUSIVE MODE;
    SELECT seq, hash INTO head_seq, head_hash FROM audit_log ORDER BY seq DESC LIMIT 1;
    IF NEW.seq IS DISTINCT FROM coalesce(head_seq, 0) + 1
       OR NEW.prev_hash IS DISTINCT FROM coalesce(head_hash, repeat('0', 64)) THEN
        RAISE EXCEPTION 'audit_log: an insert must extend the chain (seq = last seq + 1, prev_hash = last hash)'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER audit_log_extend_chain BEFORE INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_extend();

-- TRUNCATE skips row triggers: refuse it as well (SQLite has no TRUNCATE).
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();
