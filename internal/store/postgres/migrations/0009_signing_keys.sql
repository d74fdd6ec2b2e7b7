-- 0009: the deployment's certificate signing key (the PostgreSQL form of
-- SQLite's 0009; see there). Processes on several machines share this
-- database, so they must share one signing key: the first registers it,
-- others holding a different key are refused (AML_CERT_KEY_MISMATCH).
CREATE TABLE twin_signing_keys (
    key_id        text PRIMARY KEY CHECK (length(key_id) = 16),
    public_key    text NOT NULL,
    registered_by text NOT NULL DEFAULT '',
    registered_at bigint NOT NULL
);
