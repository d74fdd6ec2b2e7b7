package postgres

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/jackc/pgx/v5"
)

// MaxPageLimit caps one page; DefaultPageLimit applies when Limit is 0.
// MaxBuckets caps one bucket query's answer. Same values as SQLite's.
const (
	DefaultPageLimit = 1000
	MaxPageLimit     = 100_000
	MaxBuckets       = 100_000
)

// stageDDL is the per-connection staging table a batch is copied into.
// seq keeps the batch order so the last write of a duplicated (node, ts)
// wins, as it does in SQLite's multi-row INSERT.
const stageDDL = `CREATE TEMP TABLE IF NOT EXISTS aml_stage (
	seq bigint NOT NULL, node bigint NOT NULL, ts bigint NOT NULL, value double precision NOT NULL, state text, ctx bigint NOT NULL
) ON COMMIT DELETE ROWS`

// upsertStaged writes the staged batch. DISTINCT ON keeps the last staged
// row per key (one INSERT … ON CONFLICT may not touch a row twice); the
// WHERE on the update skips rows whose stored sample belongs to another
// context, which Write turns into AML_CONFLICT by comparing counts.
const upsertStaged = `INSERT INTO samples(node, ts, value, state, ctx)
	SELECT DISTINCT ON (node, ts) node, ts, value, state, ctx FROM aml_stage ORDER BY node, ts, seq DESC
	ON CONFLICT (node, ts) DO UPDATE SET value=excluded.value, state=excluded.state WHERE samples.ctx = excluded.ctx`

type span struct{ lo, hi int64 }

type ingestTx struct {
	s        *Store
	ctx      context.Context
	tx       pgx.Tx
	staged   bool // temp table created on this connection
	newNodes map[string]int64
	newCtxs  map[core.ContextFilter]int64
	spans    map[int64]span
	rows     stageRows
}

// Ingest implements core.TimeSeries.
func (s *Store) Ingest(ctx context.Context, fn func(tx core.IngestTx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbErr(err, "begin ingest")
	}
	defer tx.Rollback(ctx)
	it := &ingestTx{s: s, ctx: ctx, tx: tx, newNodes: map[string]int64{}, newCtxs: map[core.ContextFilter]int64{}, spans: map[int64]span{}}
	if err := fn(it); err != nil {
		return err
	}
	if err := it.flushSpans(); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return dbErr(err, "commit ingest")
	}
	// Only now are the new keys real; a rolled-back transaction must not
	// leave them in the caches.
	s.mu.Lock()
	for k, v := range it.newNodes {
		s.nodes[k] = v
	}
	for k, v := range it.newCtxs {
		s.ctxs[k] = v
	}
	s.mu.Unlock()
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
	it.s.mu.RLock()
	pk, ok := it.s.nodes[n.ID]
	it.s.mu.RUnlock()
	if ok {
		return pk, false, nil
	}
	if pk, ok := it.newNodes[n.ID]; ok {
		return pk, false, nil
	}
	pk, created, err := ensureNode(it.ctx, it.tx, n)
	if err != nil {
		return 0, false, err
	}
	it.newNodes[n.ID] = pk
	return pk, created, nil
}

func (it *ingestTx) ctxPK(c core.ContextFilter) (int64, error) {
	it.s.mu.RLock()
	pk, ok := it.s.ctxs[c]
	it.s.mu.RUnlock()
	if ok {
		return pk, nil
	}
	if pk, ok := it.newCtxs[c]; ok {
		return pk, nil
	}
	if _, err := it.tx.Exec(it.ctx, `INSERT INTO sample_ctx(line, product, recipe, run) VALUES ($1,$2,$3,$4) ON CONFLICT DO NOTHING`,
		c.Line, c.Product, c.Recipe, c.Run); err != nil {
		return 0, dbErr(err, "intern sample context")
	}
	if err := it.tx.QueryRow(it.ctx, `SELECT pk FROM sample_ctx WHERE line=$1 AND product=$2 AND recipe=$3 AND run=$4`,
		c.Line, c.Product, c.Recipe, c.Run).Scan(&pk); err != nil {
		return 0, dbErr(err, "intern sample context")
	}
	it.newCtxs[c] = pk
	return pk, nil
}

func (it *ingestTx) EnsureNode(n core.Node) (bool, error) {
	_, created, err := it.nodePK(n)
	return created, err
}

func (it *ingestTx) EnsureRun(r core.Run) (bool, error) {
	var n int
	if err := it.tx.QueryRow(it.ctx, `SELECT count(*) FROM runs WHERE id=$1`, r.ID).Scan(&n); err != nil {
		return false, dbErr(err, "read run")
	}
	if n > 0 {
		return false, nil
	}
	return createRun(it.ctx, it.tx, r)
}

// stageRows is the pgx.CopyFromSource over one batch; it reuses one
// values slice (pgx encodes a row before asking for the next).
type stageRows struct {
	seq   []int64
	node  []int64
	ts    []int64
	value []float64
	state []*string
	ctx   []int64
	i     int
	vals  []any
}

func (r *stageRows) reset() {
	r.seq, r.node, r.ts, r.value, r.state, r.ctx = r.seq[:0], r.node[:0], r.ts[:0], r.value[:0], r.state[:0], r.ctx[:0]
	r.i = -1
}

func (r *stageRows) Next() bool { r.i++; return r.i < len(r.seq) }
func (r *stageRows) Values() ([]any, error) {
	r.vals = append(r.vals[:0], r.seq[r.i], r.node[r.i], r.ts[r.i], r.value[r.i], r.state[r.i], r.ctx[r.i])
	return r.vals, nil
}
func (r *stageRows) Err() error { return nil }

var stageCols = []string{"seq", "node", "ts", "value", "state", "ctx"}

func (it *ingestTx) Write(samples []core.Sample) (core.WriteStats, error) {
	st := core.WriteStats{}
	if err := it.ctx.Err(); err != nil {
		return st, core.Wrap(core.CodeStoreUnavailable, err, "write samples")
	}
	var lastNode string
	var lastNodePK int64 = -1
	var lastCtx core.ContextFilter
	var lastCtxPK int64 = -1
	manyCtx := false
	months := map[int64]bool{}
	var lastMonthLo, lastMonthHi int64 = 1, 0
	r := &it.rows
	r.reset()
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
			if lastCtxPK >= 0 && pk != lastCtxPK {
				manyCtx = true
			}
			lastCtx, lastCtxPK = c, pk
		}
		sp, ok := it.spans[lastCtxPK]
		if !ok {
			sp = span{sm.TsMs, sm.TsMs}
		}
		sp.lo, sp.hi = min(sp.lo, sm.TsMs), max(sp.hi, sm.TsMs)
		it.spans[lastCtxPK] = sp
		if sm.TsMs < lastMonthLo || sm.TsMs >= lastMonthHi {
			lastMonthLo, lastMonthHi = monthBounds(sm.TsMs)
			months[lastMonthLo] = true
		}
		var state *string
		if sm.State != "" && sm.State != core.StateOK {
			state = &sm.State
		}
		r.seq = append(r.seq, int64(i))
		r.node = append(r.node, lastNodePK)
		r.ts = append(r.ts, sm.TsMs)
		r.value = append(r.value, sm.Value)
		r.state = append(r.state, state)
		r.ctx = append(r.ctx, lastCtxPK)
	}
	if len(samples) == 0 {
		return st, nil
	}
	if err := it.s.ensurePartitions(it.ctx, months); err != nil {
		return st, err
	}
	if !it.staged {
		if _, err := it.tx.Exec(it.ctx, stageDDL); err != nil {
			return st, dbErr(err, "create staging table")
		}
		it.staged = true
	} else if _, err := it.tx.Exec(it.ctx, `TRUNCATE aml_stage`); err != nil {
		return st, dbErr(err, "clear staging table")
	}
	if _, err := it.tx.CopyFrom(it.ctx, pgx.Identifier{"aml_stage"}, stageCols, r); err != nil {
		return st, dbErr(err, "copy samples")
	}
	if manyCtx {
		// Two samples of one batch at the same node and instant in
		// different contexts: SQLite writes the first and refuses the
		// second; so do we, before writing anything.
		var node string
		var ts, ctxA, ctxB int64
		err := it.tx.QueryRow(it.ctx, `SELECT n.id, s.ts, min(s.ctx), max(s.ctx) FROM aml_stage s JOIN nodes n ON n.pk = s.node
			GROUP BY n.id, s.ts HAVING count(DISTINCT s.ctx) > 1 ORDER BY min(s.seq) LIMIT 1`).Scan(&node, &ts, &ctxA, &ctxB)
		if err == nil {
			return st, core.FieldErrorf(core.CodeConflict, "ts", "node %s has two samples at %d (epoch ms) in different contexts in one batch; a node holds one value per instant", node, ts)
		}
		if !noRows(err) {
			return st, dbErr(err, "check batch")
		}
	}
	tag, err := it.tx.Exec(it.ctx, upsertStaged)
	if err != nil {
		return st, dbErr(err, "insert samples")
	}
	if n := tag.RowsAffected(); n != int64(len(samples)) {
		if err := it.checkConflict(n); err != nil {
			return st, err
		}
	}
	st.Samples = len(samples)
	return st, nil
}

// checkConflict runs when the upsert touched fewer rows than were staged:
// either the batch repeated a (node, ts) (fine: the last one won), or some
// rows were skipped because another context holds the instant.
func (it *ingestTx) checkConflict(affected int64) error {
	var distinct int64
	if err := it.tx.QueryRow(it.ctx, `SELECT count(*) FROM (SELECT DISTINCT node, ts FROM aml_stage) d`).Scan(&distinct); err != nil {
		return dbErr(err, "check write")
	}
	if affected == distinct {
		return nil
	}
	var node, run string
	var ts int64
	err := it.tx.QueryRow(it.ctx, `SELECT n.id, s.ts, c.run FROM aml_stage s
		JOIN samples x ON x.node = s.node AND x.ts = s.ts AND x.ctx <> s.ctx
		JOIN nodes n ON n.pk = s.node JOIN sample_ctx c ON c.pk = x.ctx
		ORDER BY s.seq LIMIT 1`).Scan(&node, &ts, &run)
	if err == nil {
		return core.FieldErrorf(core.CodeConflict, "ts", "node %s already has a sample at %d (epoch ms) from run %q with another context; a node holds one value per instant — shift this file's times (aml ingest csv --time-offset, --sequential or --start) instead of overwriting another run", node, ts, run)
	}
	return core.Errorf(core.CodeConflict, "%d of %d samples were not written because another run holds those instants", distinct-affected, distinct)
}

func (it *ingestTx) flushSpans() error {
	// Fixed order: two transactions widening the same contexts lock their
	// rows in the same order and cannot deadlock.
	pks := make([]int64, 0, len(it.spans))
	for pk := range it.spans {
		pks = append(pks, pk)
	}
	slices.Sort(pks)
	for _, pk := range pks {
		sp := it.spans[pk]
		if _, err := it.tx.Exec(it.ctx, `UPDATE sample_ctx SET min_ts=least(coalesce(min_ts, $1), $1), max_ts=greatest(coalesce(max_ts, $2), $2) WHERE pk=$3`,
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
	rows, err := s.pool.Query(ctx, `SELECT pk, coalesce(min_ts, 0), coalesce(max_ts, -1) FROM sample_ctx
		WHERE ($1='' OR line=$1) AND ($2='' OR product=$2) AND ($3='' OR recipe=$3) AND ($4='' OR run=$4)`, f.Line, f.Product, f.Recipe, f.Run)
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

// args numbers query parameters ($1, $2, ...) as they are added.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// where renders the time and context conditions shared by the queries. The
// context's time bounds let partition pruning skip months outside it.
func (sel ctxSel) where(a *args, from, to *int64) string {
	var b strings.Builder
	if from != nil {
		b.WriteString(" AND ts >= " + a.add(*from))
	}
	if to != nil {
		b.WriteString(" AND ts <= " + a.add(*to))
	}
	if !sel.all {
		b.WriteString(" AND ts >= " + a.add(sel.lo) + " AND ts <= " + a.add(sel.hi))
		b.WriteString(" AND ctx = ANY(" + a.add(sel.pks) + ")")
	}
	return b.String()
}

func (s *Store) lookupNode(ctx context.Context, id string) (int64, error) {
	s.mu.RLock()
	pk, ok := s.nodes[id]
	s.mu.RUnlock()
	if ok {
		return pk, nil
	}
	err := s.pool.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=$1`, id).Scan(&pk)
	if noRows(err) {
		return 0, notFound("node", id)
	}
	if err != nil {
		return 0, dbErr(err, "read node")
	}
	s.mu.Lock()
	s.nodes[id] = pk
	s.mu.Unlock()
	return pk, nil
}

func stateOf(st *string) string {
	if st != nil {
		return *st
	}
	return core.StateOK
}

// QueryPage implements core.TimeSeries.
func (s *Store) QueryPage(ctx context.Context, q core.PageQuery) (core.Page, error) {
	page := core.Page{Node: q.Node, Points: []core.Point{}}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 0 || limit > MaxPageLimit {
		return page, core.FieldErrorf(core.CodeInvalidArgument, "limit", "limit must be 1..%d, got %d", MaxPageLimit, q.Limit)
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
	a := args{}
	cond := "node = " + a.add(pk)
	if q.AfterTs != nil {
		cond += " AND ts > " + a.add(*q.AfterTs)
	}
	cond += sel.where(&a, q.FromMs, q.ToMs)
	rows, err := s.pool.Query(ctx, `SELECT ts, value, state FROM samples WHERE `+cond+` ORDER BY ts LIMIT `+a.add(limit+1), a...)
	if err != nil {
		return page, dbErr(err, "query page")
	}
	defer rows.Close()
	page.Points = make([]core.Point, 0, min(limit, 4096))
	for rows.Next() {
		var p core.Point
		var st *string
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
	rows.Close()
	if err := rows.Err(); err != nil {
		return page, dbErr(err, "query page")
	}
	if n := len(page.Points); n > 0 {
		page.NextAfterTs = page.Points[n-1].TsMs
	}
	return page, nil
}

func (s *Store) ctxTuples(ctx context.Context) (map[int64]core.ContextFilter, error) {
	rows, err := s.pool.Query(ctx, `SELECT pk, line, product, recipe, run FROM sample_ctx`)
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
	limit := q.Limit
	if limit == 0 {
		limit = MaxPageLimit
	}
	if limit < 0 || limit > 10*MaxPageLimit {
		return res, core.FieldErrorf(core.CodeInvalidArgument, "limit", "limit must be 1..%d, got %d", 10*MaxPageLimit, q.Limit)
	}
	if len(q.Nodes) == 0 {
		return res, core.FieldErrorf(core.CodeInvalidArgument, "nodes", "at least one node is required")
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
		a := args{}
		cond := "node = " + a.add(pk) + sel.where(&a, q.FromMs, q.ToMs)
		rows, err := s.pool.Query(ctx, `SELECT ts, value, state, ctx FROM samples WHERE `+cond+` ORDER BY ts LIMIT `+a.add(remaining+1), a...)
		if err != nil {
			return res, dbErr(err, "query samples")
		}
		n := 0
		for rows.Next() {
			var sm core.Sample
			var st *string
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
		rows.Close()
		if err := rows.Err(); err != nil {
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
		a := args{}
		cond := "node = " + a.add(pk) + sel.where(&a, nil, nil)
		var sm core.Sample
		var st *string
		var c int64
		err = s.pool.QueryRow(ctx, `SELECT ts, value, state, ctx FROM samples WHERE `+cond+` ORDER BY ts DESC LIMIT 1`, a...).
			Scan(&sm.TsMs, &sm.Value, &st, &c)
		if noRows(err) {
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
	if q.BucketMs <= 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "bucket", "bucket width must be positive, got %d ms", q.BucketMs)
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
	a := args{}
	w := a.add(q.BucketMs)
	cond := "node = " + a.add(pk) + sel.where(&a, q.FromMs, q.ToMs)
	// Floor division so negative timestamps land in the right bucket.
	rows, err := s.pool.Query(ctx, `SELECT ts - ((ts % `+w+`) + `+w+`) % `+w+` AS b,
			avg(value) FILTER (WHERE state IS NULL), min(value) FILTER (WHERE state IS NULL), max(value) FILTER (WHERE state IS NULL),
			count(*) FILTER (WHERE state IS NULL), count(*) FILTER (WHERE state IS NOT NULL)
		FROM samples WHERE `+cond+` GROUP BY b ORDER BY b LIMIT `+a.add(MaxBuckets+1), a...)
	if err != nil {
		return nil, dbErr(err, "bucket query")
	}
	defer rows.Close()
	for rows.Next() {
		var b core.Bucket
		var avg, mn, mx *float64
		if err := rows.Scan(&b.StartMs, &avg, &mn, &mx, &b.Count, &b.Bad); err != nil {
			return nil, dbErr(err, "bucket query")
		}
		if avg != nil {
			b.Avg, b.Min, b.Max = *avg, *mn, *mx
		}
		if len(out) == MaxBuckets {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "bucket", "more than %d buckets: use a wider bucket or a shorter range", MaxBuckets)
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
	a := args{}
	cond := sel.where(&a, nil, nil)
	rows, err := s.pool.Query(ctx, `SELECT n.id, count(*) FROM samples s JOIN nodes n ON n.pk = s.node WHERE true`+cond+` GROUP BY n.id`, a...)
	if err != nil {
		return nil, dbErr(err, "count samples")
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c int64
		if err := rows.Scan(&id, &c); err != nil {
			return nil, dbErr(err, "count samples")
		}
		out[id] = c
	}
	return out, dbErr(rows.Err(), "count samples")
}
