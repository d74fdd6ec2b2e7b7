-- 0011: stored physics models and registered external trainers (the
-- PostgreSQL form of SQLite's 0011; see there).
CREATE TABLE physics_models (
    id         text PRIMARY KEY,
    sha256     text NOT NULL UNIQUE CHECK (length(sha256) = 64),
    name       text NOT NULL DEFAULT '',
    file_name  text NOT NULL DEFAULT '',
    source     text NOT NULL,
    size       bigint NOT NULL,
    created_by text NOT NULL DEFAULT '',
    created_at bigint NOT NULL
);

CREATE TABLE ext_trainers (
    name          text PRIMARY KEY,
    command       text NOT NULL,
    env_json      text NOT NULL DEFAULT '[]',
    registered_by text NOT NULL DEFAULT '',
    registered_at bigint NOT NULL
);
