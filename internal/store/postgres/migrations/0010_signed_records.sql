-- 0010: signed governance records (the PostgreSQL form of SQLite's 0010;
-- see there): statements signed with the deployment key about a
-- certificate (approval, execution), and signed audit checkpoints.
CREATE TABLE twin_attestations (
    subject        text NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('approve', 'execute')),
    statement_json text NOT NULL,
    hash           text NOT NULL CHECK (length(hash) = 64),
    key_id         text NOT NULL,
    signature      text NOT NULL,
    created_at     bigint NOT NULL,
    PRIMARY KEY (subject, kind)
);
CREATE TRIGGER twin_attestations_no_update BEFORE UPDATE ON twin_attestations
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('twin_attestations: a signed statement cannot change');

CREATE TABLE audit_checkpoints (
    seq        bigint PRIMARY KEY,
    hash       text NOT NULL CHECK (length(hash) = 64),
    key_id     text NOT NULL,
    signature  text NOT NULL,
    created_at bigint NOT NULL
);
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('audit_checkpoints: a checkpoint cannot change');
