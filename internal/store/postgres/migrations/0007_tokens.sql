-- 0007: API tokens (same table and columns as SQLite's 0007; rules in
-- internal/auth). Only the sha256 hex of a token is stored. rowid stands in
-- for SQLite's implicit rowid, which the Go code orders by (ORDER BY
-- created_at, rowid) and PostgreSQL does not have; TestSchemaParity ignores
-- PostgreSQL columns named rowid.
CREATE TABLE api_tokens (
    token_id   text PRIMARY KEY,
    name       text NOT NULL CHECK (name <> ''),
    role       text NOT NULL CHECK (role IN ('viewer','engineer','approver','admin','agent')),
    lines      text NOT NULL DEFAULT '[]',
    hash       text NOT NULL UNIQUE CHECK (length(hash) = 64),
    created_by text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint,
    revoked_at bigint,
    revoked_by text NOT NULL DEFAULT '',
    rowid      bigint GENERATED ALWAYS AS IDENTITY
);
