package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/keycache"
	"github.com/aml-project/aml/internal/store/records"
)

// rowsPerStmt is how many samples one prepared INSERT carries. 100 rows ×
// 5 columns stays far below SQLite's parameter limit and amortises the
// per-statement cost (measured in BenchmarkWriteSamples).
const rowsPerStmt = 100

const insertPrefix = `INSERT INTO samples(node, ts, value, state, ctx) VALUES `

// Re-writing a (node, ts) replaces it only within the same context (line,
// product, recipe, run): a sample of another run at the same instant is a
// conflict, reported instead of silently overwritten (see checkWrite).
const insertSuffix = ` ON CONFLICT(node, ts) DO UPDATE SET value=excluded.value, state=excluded.state WHERE samples.ctx = excluded.ctx`

var insertN = insertPrefix + strings.TrimSuffix(strings.Repeat("(?,?,?,?,?),", rowsPerStmt), ",") + insertSuffix
var insert1 = insertPrefix + `(?,?,?,?,?)` + insertSuffix

// The query limits are core's (the same on both back-ends).
const (
	DefaultPageLimit = core.DefaultPageLimit
	MaxPageLimit     = core.MaxPageLimit
	MaxBuckets       = core.MaxBuckets
)

type span struct{ lo, hi int64 }

type ingestTx struct {
	s     *Store
	ctx   context.Context
	tx    *sql.Tx      // the raw transaction: prepared sample inserts
	conn  records.Conn // the same transaction for the shared statements (nodes, runs)
	stmtN *sql.Stmt
	stmt1 *sql.Stmt
	nodes *keycache.Tx[string]
	ctxs  *keycache.Tx[core.ContextFilter]
	spans map[int64]span
	args  []any
}

// Ingest implements core.TimeSeries.
func (s *Store) Ingest(ctx context.Context, fn func(tx core.IngestTx) error) error {
	tx, err := s.sql.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin ingest")
	}
	it := &ingestTx{s: s, ctx: ctx, tx: tx.Raw(), conn: records.Tx(tx), nodes: s.nodes.Begin(), ctxs: s.ctxs.Begin(), spans: map[int64]span{}}
	defer func() {
		if it.stmtN != nil {
			it.stmtN.Close()
		}
		if it.stmt1 != nil {
			it.stmt1.Close()
		}
	}()
	if err := fn(it); err != nil {
		tx.Rollback()
		return err
	}
	if err := it.flushSpans(); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return dbErr(err, "commit ingest")
	}
	// Only now are the new keys real; a rolled-back transaction must not
	// leave them in the caches.
	it.nodes.Commit()
	it.ctxs.Commit()
	return nil
}

// WriteSamples implements core.TimeSeries.
func (s *Store) WriteSamples(ctx context.Context, samples []core.Sample) (core.WriteStats, error) {
	var st core.WriteStats
	err := s.Ingest(ctx, func(tx core.IngestTx) error {
		var err error
		st, err = tx.Write(samples)
		return err
	})
	if err != nil {
		return core.WriteStats{}, err
	}
	return st, nil
}

func (it *ingestTx) nodePK(n core.Node) (int64, bool, error) {
	if pk, ok := it.nodes.Get(n.ID); ok {
		return pk, false, nil
	}
	pk, created, err := records.EnsureNode(it.ctx, it.conn, n)
	if err != nil {
		return 0, false, err
	}
	it.nodes.Add(n.ID, pk)
	return pk, created, nil
}

func (it *ingestTx) ctxPK(c core.ContextFilter) (int64, error) {
	pk, ok := it.ctxs.Get(c)
	if ok {
		return pk, nil
	}
	if _, err := it.tx.ExecContext(it.ctx, `INSERT INTO sample_ctx(line, product, recipe, run) VALUES (?,?,?,?) ON CONFLICT DO NOTHING`,
		c.Line, c.Product, c.Recipe, c.Run); err != nil {
		return 0, dbErr(err, "intern sample context")
	}
	if err := it.tx.QueryRowContext(it.ctx, `SELECT pk FROM sample_ctx WHERE line=? AND product=? AND recipe=? AND run=?`,
		c.Line, c.Product, c.Recipe, c.Run).Scan(&pk); err != nil {
		return 0, dbErr(err, "intern sample context")
	}
	it.ctxs.Add(c, pk)
	return pk, nil
}

func (it *ingestTx) EnsureNode(n core.Node) (bool, error) {
	_, created, err := it.nodePK(n)
	return created, err
}

func (it *ingestTx) EnsureRun(r core.Run) (bool, error) {
	return records.EnsureRun(it.ctx, it.conn, r)
}

func (it *ingestTx) Write(samples []core.Sample) (core.WriteStats, error) {
	st := core.WriteStats{}
	if err := it.ctx.Err(); err != nil {
		return st, core.Wrap(core.CodeStoreUnavailable, err, "write samples")
	}
	var lastNode string
	var lastNodePK int64 = -1
	var lastCtx core.ContextFilter
	var lastCtxPK int64 = -1
	it.args = it.args[:0]
	for i := range samples {
		sm := &samples[i]
		if sm.Node == "" {
			return st, core.FieldErrorf(core.CodeInvalidArgument, "samples["+strconv.Itoa(i)+"].node", "sample has no node")
		}
		if math.IsNaN(sm.Value) || math.IsInf(sm.Value, 0) {
			return st, core.FieldErrorf(core.CodeNonFinite, "samples["+strconv.Itoa(i)+"].value", "node %q at %d: value %v is not finite", sm.Node, sm.TsMs, sm.Value)
		}
		if sm.Node != lastNode || lastNodePK < 0 {
			pk, created, err := it.nodePK(core.Node{ID: sm.Node, LineID: sm.Line, Kind: core.NodeDAQ})
			if err != nil {
				return st, err
			}
			if created {
				st.NewNodes++
			}
			lastNode, lastNodePK = sm.Node, pk
		}
		c := core.ContextFilter{Line: sm.Line, Product: sm.Product, Recipe: sm.Recipe, Run: sm.Run}
		if c != lastCtx || lastCtxPK < 0 {
			pk, err := it.ctxPK(c)
			if err != nil {
				return st, err
			}
			lastCtx, lastCtxPK = c, pk
		}
		sp, ok := it.spans[lastCtxPK]
		if !ok {
			sp = span{sm.TsMs, sm.TsMs}
		}
		sp.lo, sp.hi = min(sp.lo, sm.TsMs), max(sp.hi, sm.TsMs)
		it.spans[lastCtxPK] = sp
		var state any
		if sm.State != "" && sm.State != core.StateOK {
			state = sm.State
		}
		it.args = append(it.args, lastNodePK, sm.TsMs, sm.Value, state, lastCtxPK)
		if len(it.args) == rowsPerStmt*5 {
			if err := it.execN(); err != nil {
				return st, err
			}
			it.args = it.args[:0]
		}
	}
	for j := 0; j < len(it.args); j += 5 {
		if it.stmt1 == nil {
			var err error
			if it.stmt1, err = it.tx.PrepareContext(it.ctx, insert1); err != nil {
				return st, dbErr(err, "prepare insert")
			}
		}
		res, err := it.stmt1.ExecContext(it.ctx, it.args[j:j+5]...)
		if err != nil {
			return st, dbErr(err, "insert sample")
		}
		if err := it.checkWrite(res, it.args[j:j+5]); err != nil {
			return st, err
		}
	}
	it.args = it.args[:0]
	st.Samples = len(samples)
	return st, nil
}

func (it *ingestTx) execN() error {
	if it.stmtN == nil {
		var err error
		if it.stmtN, err = it.tx.PrepareContext(it.ctx, insertN); err != nil {
			return dbErr(err, "prepare insert")
		}
	}
	res, err := it.stmtN.ExecContext(it.ctx, it.args...)
	if err != nil {
		return dbErr(err, "insert samples")
	}
	return it.checkWrite(res, it.args)
}

// checkWrite verifies that every row of an INSERT was inserted or replaced;
// a row skipped by the ON CONFLICT … WHERE clause belongs to another run.
func (it *ingestTx) checkWrite(res sql.Result, args []any) error {
	n, err := res.RowsAffected()
	if err != nil || int(n) == len(args)/5 {
		return nil
	}
	// Find the first conflicting row for the message.
	for j := 0; j < len(args); j += 5 {
		var ctxPK int64
		if it.tx.QueryRowContext(it.ctx, `SELECT ctx FROM samples WHERE node=? AND ts=?`, args[j], args[j+1]).Scan(&ctxPK) == nil && ctxPK != args[j+4].(int64) {
			// The names are for the message only: a lookup that fails
			// leaves one empty rather than hide the conflict.
			var run, node string
			_ = it.tx.QueryRowContext(it.ctx, `SELECT run FROM sample_ctx WHERE pk=?`, ctxPK).Scan(&run)
			_ = it.tx.QueryRowContext(it.ctx, `SELECT id FROM nodes WHERE pk=?`, args[j]).Scan(&node)
			return core.FieldErrorf(core.CodeConflict, "ts", "node %s already has a sample at %d (epoch ms) from run %q with another context; a node holds one value per instant — shift this file's times (aml ingest csv --time-offset, --sequential or --start) instead of overwriting another run", node, args[j+1], run)
		}
	}
	return core.Errorf(core.CodeConflict, "%d of %d samples were not written because another run holds those instants", len(args)/5-int(n), len(args)/5)
}

func (it *ingestTx) flushSpans() error {
	for pk, sp := range it.spans {
		if _, err := it.tx.ExecContext(it.ctx, `UPDATE sample_ctx SET min_ts=min(coalesce(min_ts, ?1), ?1), max_ts=max(coalesce(max_ts, ?2), ?2) WHERE pk=?3`,
			sp.lo, sp.hi, pk); err != nil {
			return dbErr(err, "update context span")
		}
	}
	return nil
}

// ctxSel is a resolved context filter: all=true means no restriction;
// otherwise pks lists the matching contexts (maybe none) and lo/hi bound
// their timestamps.
type ctxSel struct {
	all    bool
	pks    []int64
	lo, hi int64
}

func (s *Store) resolveCtx(ctx context.Context, f core.ContextFilter) (ctxSel, error) {
	if f == (core.ContextFilter{}) {
		return ctxSel{all: true}, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT pk, coalesce(min_ts, 0), coalesce(max_ts, -1) FROM sample_ctx
		WHERE (?1='' OR line=?1) AND (?2='' OR product=?2) AND (?3='' OR recipe=?3) AND (?4='' OR run=?4)`, f.Line, f.Product, f.Recipe, f.Run)
	if err != nil {
		return ctxSel{}, dbErr(err, "resolve context")
	}
	defer rows.Close()
	sel := ctxSel{lo: math.MaxInt64, hi: math.MinInt64}
	for rows.Next() {
		var pk, lo, hi int64
		if err := rows.Scan(&pk, &lo, &hi); err != nil {
			return ctxSel{}, dbErr(err, "resolve context")
		}
		if hi < lo {
			continue
		}
		sel.pks = append(sel.pks, pk)
		sel.lo, sel.hi = min(sel.lo, lo), max(sel.hi, hi)
	}
	return sel, dbErr(rows.Err(), "resolve context")
}

// where renders the time and context conditions shared by the queries.
func (sel ctxSel) where(args []any, from, to *int64) (string, []any) {
	var b strings.Builder
	if from != nil {
		b.WriteString(" AND ts >= ?")
		args = append(args, *from)
	}
	if to != nil {
		b.WriteString(" AND ts <= ?")
		args = append(args, *to)
	}
	if !sel.all {
		b.WriteString(" AND ts >= ? AND ts <= ? AND ctx IN (")
		args = append(args, sel.lo, sel.hi)
		for i, pk := range sel.pks {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(pk, 10))
		}
		b.WriteByte(')')
	}
	return b.String(), args
}

func (s *Store) lookupNode(ctx context.Context, id string) (int64, error) {
	pk, ok := s.nodes.Get(id)
	if ok {
		return pk, nil
	}
	err := s.r.QueryRowContext(ctx, `SELECT pk FROM nodes WHERE id=?`, id).Scan(&pk)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("node", id)
	}
	if err != nil {
		return 0, dbErr(err, "read node")
	}
	s.nodes.Put(id, pk)
	return pk, nil
}

func stateOf(ns sql.NullString) string {
	if ns.Valid {
		return ns.String
	}
	return core.StateOK
}

// QueryPage implements core.TimeSeries.
func (s *Store) QueryPage(ctx context.Context, q core.PageQuery) (core.Page, error) {
	page := core.Page{Node: q.Node, Points: []core.Point{}}
	limit, err := q.PageLimit()
	if err != nil {
		return page, err
	}
	pk, err := s.lookupNode(ctx, q.Node)
	if err != nil {
		return page, err
	}
	sel, err := s.resolveCtx(ctx, q.Filter)
	if err != nil {
		return page, err
	}
	if !sel.all && len(sel.pks) == 0 {
		return page, nil
	}
	args := []any{pk}
	cond := ""
	if q.AfterTs != nil {
		cond = " AND ts > ?"
		args = append(args, *q.AfterTs)
	}
	more, args := sel.where(args, q.FromMs, q.ToMs)
	args = append(args, limit+1)
	rows, err := s.r.QueryContext(ctx, `SELECT ts, value, state FROM samples WHERE node = ?`+cond+more+` ORDER BY ts LIMIT ?`, args...)
	if err != nil {
		return page, dbErr(err, "query page")
	}
	defer rows.Close()
	page.Points = make([]core.Point, 0, min(limit, 4096))
	for rows.Next() {
		var p core.Point
		var st sql.NullString
		if err := rows.Scan(&p.TsMs, &p.Value, &st); err != nil {
			return page, dbErr(err, "query page")
		}
		if len(page.Points) == limit {
			page.HasMore = true
			break
		}
		p.State = stateOf(st)
		page.Points = append(page.Points, p)
	}
	if err := rows.Err(); err != nil {
		return page, dbErr(err, "query page")
	}
	if n := len(page.Points); n > 0 {
		page.NextAfterTs = page.Points[n-1].TsMs
	}
	return page, nil
}

func (s *Store) ctxTuples(ctx context.Context) (map[int64]core.ContextFilter, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT pk, line, product, recipe, run FROM sample_ctx`)
	if err != nil {
		return nil, dbErr(err, "read contexts")
	}
	defer rows.Close()
	out := map[int64]core.ContextFilter{}
	for rows.Next() {
		var pk int64
		var c core.ContextFilter
		if err := rows.Scan(&pk, &c.Line, &c.Product, &c.Recipe, &c.Run); err != nil {
			return nil, dbErr(err, "read contexts")
		}
		out[pk] = c
	}
	return out, dbErr(rows.Err(), "read contexts")
}

// QueryMulti implements core.TimeSeries.
func (s *Store) QueryMulti(ctx context.Context, q core.MultiQuery) (core.MultiResult, error) {
	res := core.MultiResult{Samples: []core.Sample{}}
	limit, err := q.Check()
	if err != nil {
		return res, err
	}
	sel, err := s.resolveCtx(ctx, q.Filter)
	if err != nil {
		return res, err
	}
	tuples, err := s.ctxTuples(ctx)
	if err != nil {
		return res, err
	}
	for _, id := range q.Nodes {
		pk, err := s.lookupNode(ctx, id)
		if err != nil {
			return res, err
		}
		if !sel.all && len(sel.pks) == 0 {
			continue
		}
		remaining := limit - len(res.Samples)
		more, args := sel.where([]any{pk}, q.FromMs, q.ToMs)
		args = append(args, remaining+1)
		rows, err := s.r.QueryContext(ctx, `SELECT ts, value, state, ctx FROM samples WHERE node = ?`+more+` ORDER BY ts LIMIT ?`, args...)
		if err != nil {
			return res, dbErr(err, "query samples")
		}
		n := 0
		for rows.Next() {
			var sm core.Sample
			var st sql.NullString
			var c int64
			if err := rows.Scan(&sm.TsMs, &sm.Value, &st, &c); err != nil {
				rows.Close()
				return res, dbErr(err, "query samples")
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
		err = rows.Err()
		rows.Close()
		if err != nil {
			return res, dbErr(err, "query samples")
		}
		if res.Truncated {
			break
		}
	}
	return res, nil
}

// Latest implements core.TimeSeries.
func (s *Store) Latest(ctx context.Context, nodes []string, f core.ContextFilter) ([]core.Sample, error) {
	sel, err := s.resolveCtx(ctx, f)
	if err != nil {
		return nil, err
	}
	tuples, err := s.ctxTuples(ctx)
	if err != nil {
		return nil, err
	}
	out := []core.Sample{}
	for _, id := range nodes {
		pk, err := s.lookupNode(ctx, id)
		if err != nil {
			return nil, err
		}
		if !sel.all && len(sel.pks) == 0 {
			continue
		}
		more, args := sel.where([]any{pk}, nil, nil)
		var sm core.Sample
		var st sql.NullString
		var c int64
		err = s.r.QueryRowContext(ctx, `SELECT ts, value, state, ctx FROM samples WHERE node = ?`+more+` ORDER BY ts DESC LIMIT 1`, args...).
			Scan(&sm.TsMs, &sm.Value, &st, &c)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, dbErr(err, "latest sample")
		}
		sm.Node, sm.State = id, stateOf(st)
		t := tuples[c]
		sm.Line, sm.Product, sm.Recipe, sm.Run = t.Line, t.Product, t.Recipe, t.Run
		out = append(out, sm)
	}
	return out, nil
}

// Buckets implements core.TimeSeries.
func (s *Store) Buckets(ctx context.Context, q core.BucketQuery) ([]core.Bucket, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	pk, err := s.lookupNode(ctx, q.Node)
	if err != nil {
		return nil, err
	}
	sel, err := s.resolveCtx(ctx, q.Filter)
	if err != nil {
		return nil, err
	}
	out := []core.Bucket{}
	if !sel.all && len(sel.pks) == 0 {
		return out, nil
	}
	more, args := sel.where([]any{q.BucketMs, pk}, q.FromMs, q.ToMs)
	args = append(args, MaxBuckets+1)
	// Floor division so negative timestamps land in the right bucket.
	rows, err := s.r.QueryContext(ctx, `SELECT ts - ((ts % ?1) + ?1) % ?1 AS b,
			avg(value) FILTER (WHERE state IS NULL), min(value) FILTER (WHERE state IS NULL), max(value) FILTER (WHERE state IS NULL),
			count(*) FILTER (WHERE state IS NULL), count(*) FILTER (WHERE state IS NOT NULL)
		FROM samples WHERE node = ?2`+more+` GROUP BY b ORDER BY b LIMIT ?`, args...)
	if err != nil {
		return nil, dbErr(err, "bucket query")
	}
	defer rows.Close()
	for rows.Next() {
		var b core.Bucket
		var avg, mn, mx sql.NullFloat64
		if err := rows.Scan(&b.StartMs, &avg, &mn, &mx, &b.Count, &b.Bad); err != nil {
			return nil, dbErr(err, "bucket query")
		}
		b.Avg, b.Min, b.Max = avg.Float64, mn.Float64, mx.Float64
		if len(out) == MaxBuckets {
			return nil, core.ErrTooManyBuckets()
		}
		out = append(out, b)
	}
	return out, dbErr(rows.Err(), "bucket query")
}

// CountRunSamples implements core.TimeSeries.
func (s *Store) CountRunSamples(ctx context.Context, runID string) (map[string]int64, error) {
	sel, err := s.resolveCtx(ctx, core.ContextFilter{Run: runID})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	if len(sel.pks) == 0 {
		return out, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT pk, id FROM nodes ORDER BY id`)
	if err != nil {
		return nil, dbErr(err, "list nodes")
	}
	type nd struct {
		pk int64
		id string
	}
	var nodes []nd
	for rows.Next() {
		var n nd
		if err := rows.Scan(&n.pk, &n.id); err != nil {
			rows.Close()
			return nil, dbErr(err, "list nodes")
		}
		nodes = append(nodes, n)
	}
	rows.Close()
	for _, n := range nodes {
		more, args := sel.where([]any{n.pk}, nil, nil)
		var c int64
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM samples WHERE node = ?`+more, args...).Scan(&c); err != nil {
			return nil, dbErr(err, "count samples")
		}
		if c > 0 {
			out[n.id] = c
		}
	}
	return out, nil
}
