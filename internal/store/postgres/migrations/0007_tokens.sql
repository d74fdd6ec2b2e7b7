-- 0007: API tokens (same table and columns as SQLite's 0007; rules in
-- internal/auth). Only the sha256 hex of a token is stored.
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
    revoked_by text NOT NULL DEFAULT ''
);
