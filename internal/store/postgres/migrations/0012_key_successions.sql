-- 0012: rotation of the deployment's signing key (the PostgreSQL form of
-- SQLite's 0012; see there). A retired key is trusted only through a
-- succession signed by it and by the key that replaced it.
CREATE TABLE twin_key_successions (
    old_key_id     text PRIMARY KEY CHECK (length(old_key_id) = 16),
    old_public_key text NOT NULL,
    new_key_id     text NOT NULL UNIQUE CHECK (length(new_key_id) = 16),
    new_public_key text NOT NULL,
    succeeded_at   bigint NOT NULL,
    old_signature  text NOT NULL,
    new_signature  text NOT NULL,
    registered_by  text NOT NULL DEFAULT ''
);
