-- 0006: the digital twin's records. PENDING on PostgreSQL: SQLite's 0006
-- is still being changed by the twin work, and the PostgreSQL back-end
-- does not store twin records yet (it is not selectable from the CLI
-- either), so this step only keeps the version numbers of both back-ends
-- in step. TestSchemaParity lists the twin_* tables as pending. Because no
-- PostgreSQL database has been handed to a user yet, this file may be
-- replaced by the full translation without breaking a deployed checksum;
-- once the back-end ships, twin tables arrive in a new migration instead.
SELECT 1;
