-- 0011: stored physics models and registered external trainers (security
-- issue #16). A trainer parameter used to name a physics file the server
-- opened, and a trainer reference "exec:PATH" a program it ran: both came
-- from the request. Now a physics model is uploaded content (physics.put:
-- validated, hashed, stored here) and parameters name it by id; an
-- external trainer is a program an admin registered (trainer.register,
-- audited) and requests name it "ext:NAME".
CREATE TABLE physics_models (
    id         TEXT PRIMARY KEY,          -- "phys-" + the first 24 hex digits of sha256
    sha256     TEXT NOT NULL UNIQUE CHECK (length(sha256) = 64),
    name       TEXT NOT NULL DEFAULT '',  -- the model's declared name
    file_name  TEXT NOT NULL DEFAULT '',  -- the uploaded file's base name (positions in problems)
    source     TEXT NOT NULL,
    size       INTEGER NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE ext_trainers (
    name          TEXT PRIMARY KEY,
    command       TEXT NOT NULL,          -- absolute path of the program
    env_json      TEXT NOT NULL DEFAULT '[]', -- parent variables passed through
    registered_by TEXT NOT NULL DEFAULT '',
    registered_at INTEGER NOT NULL
);
