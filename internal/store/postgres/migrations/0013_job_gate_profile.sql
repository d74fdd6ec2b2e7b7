-- 0013: the model gate profile a job named at submit (the PostgreSQL form
-- of SQLite's 0013; see there).
ALTER TABLE jobs ADD COLUMN gate_profile text NOT NULL DEFAULT '';
