-- 0012: rotation of the deployment's signing key (internal/twin/cert).
-- A row is the succession of key old_key_id by new_key_id: the old key
-- signs "new succeeds me at succeeded_at" (old_signature) and the new key
-- signs "I retired old at succeeded_at" (new_signature). A verifier trusts
-- a retired key only through a row whose new key it already trusts and
-- whose two signatures verify; the public halves here are never trusted on
-- their own.
CREATE TABLE twin_key_successions (
    old_key_id     TEXT PRIMARY KEY CHECK (length(old_key_id) = 16),
    old_public_key TEXT NOT NULL,          -- base64 of the 32 raw bytes
    new_key_id     TEXT NOT NULL UNIQUE CHECK (length(new_key_id) = 16),
    new_public_key TEXT NOT NULL,
    succeeded_at   INTEGER NOT NULL,       -- epoch ms
    old_signature  TEXT NOT NULL,          -- base64 Ed25519 by the old key
    new_signature  TEXT NOT NULL,          -- base64 Ed25519 by the new key
    registered_by  TEXT NOT NULL DEFAULT ''
);
