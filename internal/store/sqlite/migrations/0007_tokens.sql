-- 0007: API tokens (package internal/auth). Only the sha256 hex of a token
-- is stored; the token itself is shown once at creation. lines is a JSON
-- array of line ids (empty array = every line). A revoked token keeps its
-- row (revoked_at set) so the audit log's subjects stay resolvable.
CREATE TABLE api_tokens (
    token_id   TEXT PRIMARY KEY,
    name       TEXT NOT NULL CHECK (name <> ''),
    role       TEXT NOT NULL CHECK (role IN ('viewer','engineer','approver','admin','agent')),
    lines      TEXT NOT NULL DEFAULT '[]',
    hash       TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,             -- epoch milliseconds
    expires_at INTEGER,                      -- epoch milliseconds, NULL = never
    revoked_at INTEGER,                      -- epoch milliseconds, NULL = active
    revoked_by TEXT NOT NULL DEFAULT ''
);
