-- 0015: leases of running work (the PostgreSQL form of SQLite's 0015;
-- see there).
CREATE TABLE twin_leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    renewed_at bigint NOT NULL
);
