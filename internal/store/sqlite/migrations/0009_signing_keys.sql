-- 0009: the deployment's certificate signing key (internal/twin/cert).
-- Certificates are signed with the key in a data directory
-- (cert-key.json). Several processes on several machines share one
-- database (PostgreSQL), so they must share that key, or a certificate
-- issued by one would not verify on another. The first process to sign
-- registers its key's id and public half here; a process holding another
-- key is refused (AML_CERT_KEY_MISMATCH) before it signs or verifies
-- anything, with the fix in the message. Only public halves are stored.
CREATE TABLE twin_signing_keys (
    key_id        TEXT PRIMARY KEY CHECK (length(key_id) = 16),
    public_key    TEXT NOT NULL,          -- base64 of the 32 raw bytes
    registered_by TEXT NOT NULL DEFAULT '',
    registered_at INTEGER NOT NULL
);
