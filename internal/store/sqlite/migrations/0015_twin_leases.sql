-- 0015: leases of running work (internal/store/twinstore, lease.go): a
-- name (e.g. "steptest/<id>") held by one holder (the execution that
-- claimed it) while the holder renews it. A lease whose renewal is older
-- than its user's timeout is taken for dead (a running step test's
-- process was killed). Rows change (renewals); nothing here is audit
-- evidence: the claim itself is in the audit log.
CREATE TABLE twin_leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    renewed_at INTEGER NOT NULL            -- epoch ms
);
