package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxNewPartitions caps the partitions one batch may create: a batch with
// stray timestamps spread over decades puts the rows of the months past the
// cap in the default partition instead of making hundreds of tables.
const maxNewPartitions = 48

// monthBounds returns the UTC calendar month [lo, hi) that contains ts
// (epoch µs, as the ts column). hi <= lo only at the far edges of the int64
// range.
func monthBounds(ts int64) (lo, hi int64) {
	t := time.UnixMicro(ts).UTC()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start.UnixMicro(), start.AddDate(0, 1, 0).UnixMicro()
}

func partitionName(lo int64) string {
	t := time.UnixMicro(lo).UTC()
	return fmt.Sprintf("samples_%04d%02d", t.Year(), int(t.Month()))
}

// ensurePartitions makes sure every month in months has its partition.
// Each missing one is created in its own short transaction on another
// connection, not in the caller's ingest transaction: the DDL locks are
// then held for milliseconds, and an ingest that later rolls back leaves
// only an empty partition behind. A partition that cannot be made within
// the lock timeout (a long reader holds the default partition) is skipped:
// its rows land in the default partition and move out when the month's
// partition is made by a later ingest.
func (s *Store) ensurePartitions(ctx context.Context, months map[int64]bool) error {
	if !s.partitioned || len(months) == 0 {
		return nil
	}
	var missing []int64
	s.mu.RLock()
	for m := range months {
		if s.parts[m] == "" {
			missing = append(missing, m)
		}
	}
	s.mu.RUnlock()
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	if err := s.loadPartitions(ctx); err != nil {
		return err
	}
	created := 0
	for _, lo := range missing {
		s.mu.RLock()
		ok := s.parts[lo] != ""
		s.mu.RUnlock()
		if ok {
			continue
		}
		if created == maxNewPartitions {
			break
		}
		_, hi := monthBounds(lo)
		if hi <= lo {
			continue
		}
		err := s.createPartition(ctx, lo, hi)
		switch pgCode(err) {
		case "":
			if err != nil {
				return dbErr(err, "create partition %s", partitionName(lo))
			}
		case sqlLockNotAvailable, sqlDeadlock, sqlSerialization:
			continue // default partition takes the rows
		default:
			return dbErr(err, "create partition %s", partitionName(lo))
		}
		created++
		s.mu.Lock()
		s.parts[lo] = partitionName(lo)
		s.mu.Unlock()
	}
	return nil
}

// missingPartition tells whether a month in months has no known
// partition (ensurePartitions would then have work to do).
func (s *Store) missingPartition(months map[int64]bool) bool {
	if !s.partitioned {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for m := range months {
		if s.parts[m] == "" {
			return true
		}
	}
	return false
}

// partitionOf returns the name of the partition that holds the month
// starting at lo, "" when none is known (then rows go through samples and
// its default partition).
func (s *Store) partitionOf(lo int64) string {
	if !s.partitioned {
		return ""
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.parts[lo]
}

// forgetPartition drops a cached partition that turned out not to be
// there (or not to hold its month).
func (s *Store) forgetPartition(lo int64) {
	s.mu.Lock()
	delete(s.parts, lo)
	s.mu.Unlock()
}

// loadPartitions refreshes the cache of existing monthly partitions from
// the catalog (another process may have made some).
func (s *Store) loadPartitions(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'samples'::regclass`)
	if err != nil {
		return dbErr(err, "list partitions")
	}
	defer rows.Close()
	found := map[int64]string{}
	for rows.Next() {
		var name, bound string
		if err := rows.Scan(&name, &bound); err != nil {
			return dbErr(err, "list partitions")
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(bound, "FOR VALUES FROM ('%d') TO ('%d')", &lo, &hi); err == nil {
			found[lo] = name
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr(err, "list partitions")
	}
	s.mu.Lock()
	for lo, name := range found {
		s.parts[lo] = name
	}
	s.mu.Unlock()
	return nil
}

// createPartition makes the partition for [lo, hi): a plain table filled
// with whatever rows of the range the default partition holds, then
// attached (ATTACH only needs SHARE UPDATE EXCLUSIVE on the parent, so
// writers and readers of other partitions go on). An advisory lock
// serialises creators; the existence check under it makes a lost race a
// no-op.
func (s *Store) createPartition(ctx context.Context, lo, hi int64) error {
	name := partitionName(lo)
	ident := pgx.Identifier{name}.Sanitize()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '3s'`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('aml.partitions:' || current_schema()))`); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return tx.Commit(ctx)
	}
	stmts := []string{
		`LOCK TABLE samples_default IN ACCESS EXCLUSIVE MODE`,
		`CREATE TABLE ` + ident + ` (LIKE samples INCLUDING DEFAULTS)`,
		fmt.Sprintf(`INSERT INTO %s SELECT * FROM samples_default WHERE ts >= %d AND ts < %d`, ident, lo, hi),
		fmt.Sprintf(`DELETE FROM samples_default WHERE ts >= %d AND ts < %d`, lo, hi),
		fmt.Sprintf(`ALTER TABLE samples ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`, ident, lo, hi),
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
