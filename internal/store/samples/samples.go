// Package samples is what the time-series path of both back-ends shares:
// the reads — pages of one node, several nodes at once, the latest sample
// of each node and bucketed aggregates, all restricted by a sample context
// (line, product, recipe, run) — and, on the write side, the interning of
// the nodes and contexts an ingest transaction refers to (Keys). The
// statements are the same on SQLite and PostgreSQL — written with "?" and
// "?N" placeholders, which a back-end's DB rewrites where it numbers them
// — so they are written once; each back-end keeps only what differs: how
// it writes the samples themselves (COPY and partitions on PostgreSQL,
// prepared batches on SQLite), the driver that runs these statements (DB),
// and how it counts a run's samples. A back-end's DB may also read a
// page's rows straight into points (PointQuerier; SQLite's does, past
// database/sql's Scan), and a page under a run's context skips the
// per-row context test when no other context has samples in its time
// range (pageWhere).
package samples

import (
	"context"
	"database/sql"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/keycache"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Rows is a result being read (database/sql's or pgx's).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// DB runs the reader's statements on a back-end's read connections.
type DB interface {
	// Query runs a statement returning rows.
	Query(ctx context.Context, q string, args ...any) (Rows, error)
	// QueryRow runs a statement returning at most one row.
	QueryRow(ctx context.Context, q string, args ...any) sqldb.Row
	// NoRows reports whether err is the driver's "no rows".
	NoRows(err error) bool
}

// PointQuerier is a DB that reads a page query's (ts, value, state) rows
// straight into points: up to limit rows are appended to dst, and more
// reports that a further row exists. It is the same rows Query and Scan
// would give, without the generic path's per-row costs (SQLite: the driver
// rows are read directly, not through database/sql's locking and Scan
// conversions). AppendPage uses it when DB has it.
type PointQuerier interface {
	AppendPoints(ctx context.Context, q string, args []any, dst []core.Point, limit int) (pts []core.Point, more bool, err error)
}

// Reader reads samples through DB; Nodes caches node id → pk (shared with
// the back-end's write path, which fills it too). ArrayIn binds the
// matching contexts as one array parameter ("ctx = ANY(?)", PostgreSQL:
// one statement text whatever the contexts, and the plan of a parameter)
// instead of an inline list ("ctx IN (1,2)", SQLite, which binds no
// arrays).
type Reader struct {
	DB      DB
	Nodes   *keycache.Cache[string]
	ArrayIn bool
}

// Sel is a resolved context filter: All means no restriction; otherwise
// PKs lists the matching contexts (maybe none) and Lo/Hi bound their
// timestamps (which lets PostgreSQL prune partitions outside them).
type Sel struct {
	All    bool
	PKs    []int64
	Lo, Hi int64
}

// None reports whether the filter matches no context at all.
func (s Sel) None() bool { return !s.All && len(s.PKs) == 0 }

// Resolve turns a context filter into the contexts it matches.
func (r *Reader) Resolve(ctx context.Context, f core.ContextFilter) (Sel, error) {
	if f == (core.ContextFilter{}) {
		return Sel{All: true}, nil
	}
	rows, err := r.DB.Query(ctx, `SELECT pk, coalesce(min_ts, 0), coalesce(max_ts, -1) FROM sample_ctx
		WHERE (?1='' OR line=?1) AND (?2='' OR product=?2) AND (?3='' OR recipe=?3) AND (?4='' OR run=?4)`, f.Line, f.Product, f.Recipe, f.Run)
	if err != nil {
		return Sel{}, sqldb.Err(err, "resolve context")
	}
	defer rows.Close()
	sel := Sel{Lo: math.MaxInt64, Hi: math.MinInt64}
	for rows.Next() {
		var pk, lo, hi int64
		if err := rows.Scan(&pk, &lo, &hi); err != nil {
			return Sel{}, sqldb.Err(err, "resolve context")
		}
		if hi < lo {
			continue
		}
		sel.PKs = append(sel.PKs, pk)
		sel.Lo, sel.Hi = min(sel.Lo, lo), max(sel.Hi, hi)
	}
	return sel, sqldb.Err(rows.Err(), "resolve context")
}

// Where renders the time and context conditions of the queries, appending
// their arguments to args. from and to are epoch ms (inclusive of every
// sample within them); the ts column and the context bounds are epoch µs.
func (r *Reader) Where(s Sel, args []any, from, to *int64) (string, []any) {
	var b strings.Builder
	if from != nil {
		b.WriteString(" AND ts >= ?")
		args = append(args, *from*1000)
	}
	if to != nil {
		b.WriteString(" AND ts <= ?")
		args = append(args, *to*1000+999)
	}
	if !s.All && r.ArrayIn {
		b.WriteString(" AND ts >= ? AND ts <= ? AND ctx = ANY(?)")
		args = append(args, s.Lo, s.Hi, s.PKs)
	} else if !s.All {
		b.WriteString(" AND ts >= ? AND ts <= ? AND ctx IN (")
		args = append(args, s.Lo, s.Hi)
		for i, pk := range s.PKs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(pk, 10))
		}
		b.WriteByte(')')
	}
	return b.String(), args
}

// Node returns a node's pk (AML_NOT_FOUND when there is none).
func (r *Reader) Node(ctx context.Context, id string) (int64, error) {
	pk, ok := r.Nodes.Get(id)
	if ok {
		return pk, nil
	}
	err := r.DB.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=?`, id).Scan(&pk)
	if r.DB.NoRows(err) {
		return 0, core.FieldErrorf(core.CodeNotFound, "node", "node %q not found", id)
	}
	if err != nil {
		return 0, sqldb.Err(err, "read node")
	}
	r.Nodes.Put(id, pk)
	return pk, nil
}

func stateOf(ns sql.NullString) string {
	if ns.Valid {
		return ns.String
	}
	return core.StateOK
}

// QueryPage implements core.TimeSeries.
func (r *Reader) QueryPage(ctx context.Context, q core.PageQuery) (core.Page, error) {
	return r.AppendPage(ctx, q, nil)
}

// AppendPage is QueryPage appending the page's points to dst (the
// returned page's Points is dst extended): a caller reading a whole
// series page by page fills one slice instead of allocating and copying a
// slice per page.
func (r *Reader) AppendPage(ctx context.Context, q core.PageQuery, dst []core.Point) (core.Page, error) {
	if dst == nil {
		dst = []core.Point{}
	}
	page := core.Page{Node: q.Node, Points: dst}
	limit, err := q.PageLimit()
	if err != nil {
		return page, err
	}
	pk, err := r.Node(ctx, q.Node)
	if err != nil {
		return page, err
	}
	sel, err := r.Resolve(ctx, q.Filter)
	if err != nil || sel.None() {
		return page, err
	}
	lo, hi, ok := pageRange(sel, q)
	if !ok {
		return page, nil
	}
	more, args := r.pageWhere(sel, []any{pk, lo, hi}, lo, hi)
	args = append(args, limit+1)
	query := `SELECT ts, value, state FROM samples WHERE node = ? AND ts >= ? AND ts <= ?` + more + ` ORDER BY ts LIMIT ?`
	base := len(dst)
	if cap(dst)-base < min(limit, 4096) {
		page.Points = slices.Grow(dst, min(limit, 4096))
	}
	if pq, ok := r.DB.(PointQuerier); ok {
		page.Points, page.HasMore, err = pq.AppendPoints(ctx, query, args, page.Points, limit)
		if err != nil {
			return page, sqldb.Err(err, "query page")
		}
		if n := len(page.Points); n > base {
			page.NextAfterTs = page.Points[n-1].TsUs
		}
		return page, nil
	}
	rows, err := r.DB.Query(ctx, query, args...)
	if err != nil {
		return page, sqldb.Err(err, "query page")
	}
	defer rows.Close()
	var p core.Point
	var st sql.NullString
	for rows.Next() {
		if err := rows.Scan(&p.TsUs, &p.Value, &st); err != nil {
			return page, sqldb.Err(err, "query page")
		}
		if len(page.Points)-base == limit {
			page.HasMore = true
			break
		}
		p.State = stateOf(st)
		page.Points = append(page.Points, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return page, sqldb.Err(err, "query page")
	}
	if n := len(page.Points); n > base {
		page.NextAfterTs = page.Points[n-1].TsUs
	}
	return page, nil
}

// pageRange is the one time range [lo, hi] (epoch µs) a page reads: the
// cursor (AfterTs, exclusive), FromMs/ToMs (as Where renders them) and,
// under a context filter, the matching contexts' bounds. ok is false when
// no timestamp is in all of them.
func pageRange(s Sel, q core.PageQuery) (lo, hi int64, ok bool) {
	lo, hi = math.MinInt64, math.MaxInt64
	if q.AfterTs != nil {
		if *q.AfterTs == math.MaxInt64 {
			return 0, 0, false
		}
		lo = *q.AfterTs + 1
	}
	if q.FromMs != nil {
		lo = max(lo, *q.FromMs*1000)
	}
	if q.ToMs != nil {
		hi = min(hi, *q.ToMs*1000+999)
	}
	if !s.All {
		lo, hi = max(lo, s.Lo), min(hi, s.Hi)
	}
	return lo, hi, lo <= hi
}

// pageWhere renders a page's context condition for the range [lo, hi]:
// the samples must belong to the matching contexts, unless no other
// context has a sample in [lo, hi] — then every sample there belongs to
// them and the test of each row's ctx is skipped. Each context's
// [min_ts, max_ts] covers its samples in every committed state (the
// ingest transaction that writes samples widens their context's bounds),
// and the check is a subquery of the page's own statement, so it sees
// the same snapshot as the rows it decides about, on both back-ends
// (SQLite runs the uncorrelated subquery once, PostgreSQL as an
// InitPlan). The ctx column is then neither decoded nor compared for the
// rows of a run that no other run overlaps in time, the common case of a
// dataset build (bench/RESULTS.md, issue 22).
func (r *Reader) pageWhere(s Sel, args []any, lo, hi int64) (string, []any) {
	if s.All {
		return "", args
	}
	if r.ArrayIn {
		return " AND (NOT EXISTS (SELECT 1 FROM sample_ctx WHERE pk <> ALL(?) AND min_ts <= ? AND max_ts >= ?) OR ctx = ANY(?))",
			append(args, s.PKs, hi, lo, s.PKs)
	}
	var in strings.Builder
	for i, pk := range s.PKs {
		if i > 0 {
			in.WriteByte(',')
		}
		in.WriteString(strconv.FormatInt(pk, 10))
	}
	return " AND (NOT EXISTS (SELECT 1 FROM sample_ctx WHERE pk NOT IN (" + in.String() + ") AND min_ts <= ? AND max_ts >= ?) OR ctx IN (" + in.String() + "))",
		append(args, hi, lo)
}

// contexts maps every sample context pk to its ids.
func (r *Reader) contexts(ctx context.Context) (map[int64]core.ContextFilter, error) {
	rows, err := r.DB.Query(ctx, `SELECT pk, line, product, recipe, run FROM sample_ctx`)
	if err != nil {
		return nil, sqldb.Err(err, "read contexts")
	}
	defer rows.Close()
	out := map[int64]core.ContextFilter{}
	for rows.Next() {
		var pk int64
		var c core.ContextFilter
		if err := rows.Scan(&pk, &c.Line, &c.Product, &c.Recipe, &c.Run); err != nil {
			return nil, sqldb.Err(err, "read contexts")
		}
		out[pk] = c
	}
	return out, sqldb.Err(rows.Err(), "read contexts")
}

// QueryMulti implements core.TimeSeries.
func (r *Reader) QueryMulti(ctx context.Context, q core.MultiQuery) (core.MultiResult, error) {
	res := core.MultiResult{Samples: []core.Sample{}}
	limit, err := q.Check()
	if err != nil {
		return res, err
	}
	sel, err := r.Resolve(ctx, q.Filter)
	if err != nil {
		return res, err
	}
	tuples, err := r.contexts(ctx)
	if err != nil {
		return res, err
	}
	for _, id := range q.Nodes {
		pk, err := r.Node(ctx, id)
		if err != nil {
			return res, err
		}
		if sel.None() {
			continue
		}
		remaining := limit - len(res.Samples)
		more, args := r.Where(sel, []any{pk}, q.FromMs, q.ToMs)
		args = append(args, remaining+1)
		rows, err := r.DB.Query(ctx, `SELECT ts, value, state, ctx FROM samples WHERE node = ?`+more+` ORDER BY ts LIMIT ?`, args...)
		if err != nil {
			return res, sqldb.Err(err, "query samples")
		}
		n := 0
		for rows.Next() {
			var sm core.Sample
			var st sql.NullString
			var c int64
			if err := rows.Scan(&sm.TsUs, &sm.Value, &st, &c); err != nil {
				rows.Close()
				return res, sqldb.Err(err, "query samples")
			}
			if n == remaining {
				res.Truncated = true
				break
			}
			n++
			sm.Node, sm.State = id, stateOf(st)
			t := tuples[c]
			sm.Line, sm.Product, sm.Recipe, sm.Run = t.Line, t.Product, t.Recipe, t.Run
			res.Samples = append(res.Samples, sm)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, sqldb.Err(err, "query samples")
		}
		if res.Truncated {
			break
		}
	}
	return res, nil
}

// Latest implements core.TimeSeries.
func (r *Reader) Latest(ctx context.Context, nodes []string, f core.ContextFilter) ([]core.Sample, error) {
	sel, err := r.Resolve(ctx, f)
	if err != nil {
		return nil, err
	}
	tuples, err := r.contexts(ctx)
	if err != nil {
		return nil, err
	}
	out := []core.Sample{}
	for _, id := range nodes {
		pk, err := r.Node(ctx, id)
		if err != nil {
			return nil, err
		}
		if sel.None() {
			continue
		}
		more, args := r.Where(sel, []any{pk}, nil, nil)
		var sm core.Sample
		var st sql.NullString
		var c int64
		err = r.DB.QueryRow(ctx, `SELECT ts, value, state, ctx FROM samples WHERE node = ?`+more+` ORDER BY ts DESC LIMIT 1`, args...).
			Scan(&sm.TsUs, &sm.Value, &st, &c)
		if r.DB.NoRows(err) {
			continue
		}
		if err != nil {
			return nil, sqldb.Err(err, "latest sample")
		}
		sm.Node, sm.State = id, stateOf(st)
		t := tuples[c]
		sm.Line, sm.Product, sm.Recipe, sm.Run = t.Line, t.Product, t.Recipe, t.Run
		out = append(out, sm)
	}
	return out, nil
}

// Buckets implements core.TimeSeries.
func (r *Reader) Buckets(ctx context.Context, q core.BucketQuery) ([]core.Bucket, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	pk, err := r.Node(ctx, q.Node)
	if err != nil {
		return nil, err
	}
	sel, err := r.Resolve(ctx, q.Filter)
	if err != nil {
		return nil, err
	}
	out := []core.Bucket{}
	if sel.None() {
		return out, nil
	}
	more, args := r.Where(sel, []any{q.BucketMs * 1000, pk}, q.FromMs, q.ToMs)
	args = append(args, core.MaxBuckets+1)
	// Floor division so negative timestamps land in the right bucket.
	rows, err := r.DB.Query(ctx, `SELECT ts - ((ts % ?1) + ?1) % ?1 AS b,
			avg(value) FILTER (WHERE state IS NULL), min(value) FILTER (WHERE state IS NULL), max(value) FILTER (WHERE state IS NULL),
			count(*) FILTER (WHERE state IS NULL), count(*) FILTER (WHERE state IS NOT NULL)
		FROM samples WHERE node = ?2`+more+` GROUP BY b ORDER BY b LIMIT ?`, args...)
	if err != nil {
		return nil, sqldb.Err(err, "bucket query")
	}
	defer rows.Close()
	for rows.Next() {
		var b core.Bucket
		var avg, mn, mx sql.NullFloat64
		if err := rows.Scan(&b.StartMs, &avg, &mn, &mx, &b.Count, &b.Bad); err != nil {
			return nil, sqldb.Err(err, "bucket query")
		}
		b.StartMs /= 1000 // a multiple of the bucket width in µs
		b.Avg, b.Min, b.Max = avg.Float64, mn.Float64, mx.Float64
		if len(out) == core.MaxBuckets {
			return nil, core.ErrTooManyBuckets()
		}
		out = append(out, b)
	}
	return out, sqldb.Err(rows.Err(), "bucket query")
}
