package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"modernc.org/sqlite"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/records"
	"github.com/aml-project/aml/internal/store/samples"
	"github.com/aml-project/aml/internal/store/sqldb"
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
	tx    *sql.Tx // the raw transaction: prepared sample inserts
	stmtN *sql.Stmt
	stmt1 *sql.Stmt
	// Keys interns nodes and contexts with the same transaction (Conn).
	samples.Keys
	spans map[int64]span
	args  []any
	order []int32 // the batch's rows in (node, ts) order
}

// Ingest implements core.TimeSeries.
func (s *Store) Ingest(ctx context.Context, fn func(tx core.IngestTx) error) error {
	tx, err := s.sql.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin ingest")
	}
	it := &ingestTx{s: s, ctx: ctx, tx: tx.Raw(), spans: map[int64]span{},
		Keys: samples.Keys{Ctx: ctx, Conn: records.Tx(tx), Nodes: s.nodes.Begin(), Ctxs: s.ctxs.Begin()}}
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
	it.Nodes.Commit()
	it.Ctxs.Commit()
	return nil
}

// WriteSamples implements core.TimeSeries.
func (s *Store) WriteSamples(ctx context.Context, batch []core.Sample) (core.WriteStats, error) {
	return samples.WriteSamples(ctx, s, batch)
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
	// Validate in the caller's order (the first bad sample is the one
	// named), then insert in (node, ts) order: consecutive rows of one node
	// land on the same B-tree leaf, so the cost of an insert does not grow
	// with the store (rows of ten interleaved nodes would each seek a
	// different leaf). The sort is stable: of two samples of one node at
	// one instant the later in the batch is written last and wins.
	it.order = it.order[:0]
	sorted := true
	for i := range samples {
		sm := &samples[i]
		if sm.Node == "" {
			return st, core.FieldErrorf(core.CodeInvalidArgument, "samples["+strconv.Itoa(i)+"].node", "sample has no node")
		}
		if math.IsNaN(sm.Value) || math.IsInf(sm.Value, 0) {
			return st, core.FieldErrorf(core.CodeNonFinite, "samples["+strconv.Itoa(i)+"].value", "node %q at %d: value %v is not finite", sm.Node, sm.TsUs, sm.Value)
		}
		if i > 0 && sorted && cmpNodeTs(&samples[i-1], sm) > 0 {
			sorted = false
		}
		it.order = append(it.order, int32(i))
	}
	if !sorted {
		slices.SortStableFunc(it.order, func(x, y int32) int { return cmpNodeTs(&samples[x], &samples[y]) })
	}
	for _, i := range it.order {
		sm := &samples[i]
		if sm.Node != lastNode || lastNodePK < 0 {
			pk, created, err := it.NodePK(core.Node{ID: sm.Node, LineID: sm.Line, Kind: core.NodeDAQ})
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
			pk, err := it.CtxPK(c)
			if err != nil {
				return st, err
			}
			lastCtx, lastCtxPK = c, pk
		}
		sp, ok := it.spans[lastCtxPK]
		if !ok {
			sp = span{sm.TsUs, sm.TsUs}
		}
		sp.lo, sp.hi = min(sp.lo, sm.TsUs), max(sp.hi, sm.TsUs)
		it.spans[lastCtxPK] = sp
		var state any
		if sm.State != "" && sm.State != core.StateOK {
			state = sm.State
		}
		it.args = append(it.args, lastNodePK, sm.TsUs, sm.Value, state, lastCtxPK)
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
			return core.FieldErrorf(core.CodeConflict, "ts", "node %s already has a sample at %d (epoch µs) from run %q with another context; a node holds one value per instant — shift this file's times (aml ingest csv --time-offset, --sequential or --start) instead of overwriting another run", node, args[j+1], run)
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

// CountRunSamples implements core.TimeSeries.
func (s *Store) CountRunSamples(ctx context.Context, runID string) (map[string]int64, error) {
	sel, err := s.Resolve(ctx, core.ContextFilter{Run: runID})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	if len(sel.PKs) == 0 {
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
		more, args := s.Where(sel, []any{n.pk}, nil, nil)
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

// readDB runs the shared read path (internal/store/samples) on the reader
// pool.
type readDB struct{ r *sql.DB }

func (d readDB) Query(ctx context.Context, q string, args ...any) (samples.Rows, error) {
	rows, err := d.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (d readDB) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return d.r.QueryRowContext(ctx, q, args...)
}

func (readDB) NoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// AppendPoints implements samples.PointQuerier: a page of (ts, value,
// state) rows appended to dst, read on one pooled reader connection
// (sql.Conn.Raw) through the aml_points aggregate (pointsAgg):
//
//	SELECT aml_points(<sink>, ts, value, state) FROM (<page query>)
//
// SQLite hands the aggregate each row's values inside the step of one
// statement, so a page costs one row through the driver instead of one per
// sample: every sqlite3_column_* call takes and releases the connection's
// mutex (modernc's libc emulates it with atomics), three or four a column,
// and the driver boxes every value (bench/RESULTS.md: BenchmarkQueryPage
// beside BenchmarkQueryPageRows, and the dataset build). The values and their
// conversions are Scan's: ts an integer, value a float (or an integer,
// converted), state NULL or text. Rows reach the aggregate in the page
// query's ORDER BY ts; should they ever not, the page is read again row by
// row (appendPointRows).
func (d readDB) AppendPoints(ctx context.Context, q string, args []any, dst []core.Point, limit int) ([]core.Point, bool, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int:
			a = int64(v)
		case int64, float64, string:
		default:
			return dst, false, fmt.Errorf("sqlite: AppendPoints: argument %d of type %T", i, a)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	conn, err := d.r.Conn(ctx)
	if err != nil {
		return dst, false, err
	}
	defer func() { _ = conn.Close() }() // returns the connection to the pool
	base := len(dst)
	sink := &pointSink{dst: dst, limit: limit}
	token := pointSinks.add(sink)
	defer pointSinks.remove(token)
	err = conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("sqlite: driver connection %T cannot query", dc)
		}
		rows, err := qc.QueryContext(ctx, "SELECT "+pointsFunc+"("+strconv.FormatInt(token, 10)+", ts, value, state) FROM ("+q+")", named)
		if err != nil {
			return err
		}
		if n := len(rows.Columns()); n != 1 {
			_ = rows.Close()
			return fmt.Errorf("sqlite: AppendPoints: %d columns, want 1", n)
		}
		dest := make([]driver.Value, 1)
		for {
			if err := rows.Next(dest); err == io.EOF {
				break
			} else if err != nil {
				_ = rows.Close()
				return err
			}
		}
		return rows.Close()
	})
	if err != nil {
		return dst, false, err
	}
	if sink.err != nil {
		return dst, false, sink.err
	}
	if sink.unordered {
		return d.appendPointRows(ctx, q, named, sink.dst[:base], limit)
	}
	return sink.dst, sink.more, nil
}

// appendPointRows is AppendPoints reading the page row by row from the
// driver's rows.
func (d readDB) appendPointRows(ctx context.Context, q string, named []driver.NamedValue, dst []core.Point, limit int) ([]core.Point, bool, error) {
	conn, err := d.r.Conn(ctx)
	if err != nil {
		return dst, false, err
	}
	defer func() { _ = conn.Close() }() // returns the connection to the pool
	more := false
	err = conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("sqlite: driver connection %T cannot query", dc)
		}
		rows, err := qc.QueryContext(ctx, q, named)
		if err != nil {
			return err
		}
		if n := len(rows.Columns()); n != 3 {
			_ = rows.Close()
			return fmt.Errorf("sqlite: AppendPoints: %d columns, want ts, value, state", n)
		}
		dest := make([]driver.Value, 3)
		got := 0
		for {
			if err := rows.Next(dest); err == io.EOF {
				break
			} else if err != nil {
				_ = rows.Close()
				return err
			}
			if got == limit {
				more = true
				break
			}
			p, err := pointOf(dest)
			if err != nil {
				_ = rows.Close()
				return err
			}
			dst = append(dst, p)
			got++
		}
		return rows.Close()
	})
	return dst, more, err
}

// pointsFunc is the aggregate AppendPoints reads a page through.
const pointsFunc = "aml_points"

func init() {
	// Registered for every connection the driver opens from now on (the
	// store's connections are opened later, in Open).
	sqlite.MustRegisterFunction(pointsFunc, &sqlite.FunctionImpl{
		NArgs: 4,
		MakeAggregate: func(sqlite.FunctionContext) (sqlite.AggregateFunction, error) {
			return &pointsAgg{}, nil
		},
	})
}

// pointSink is where one AppendPoints call's aggregate puts the page's
// points: up to limit of them appended to dst, more once a further row
// arrives, unordered if a row's ts is not above the one before.
type pointSink struct {
	dst       []core.Point
	limit     int
	got       int
	more      bool
	unordered bool
	last      int64
	err       error
}

// pointSinks names the sinks of the calls in progress by a number the
// query carries as the aggregate's first argument.
var pointSinks = &sinkSet{m: map[int64]*pointSink{}}

type sinkSet struct {
	mu   sync.Mutex
	next int64
	m    map[int64]*pointSink
}

func (ss *sinkSet) add(s *pointSink) int64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.next++
	ss.m[ss.next] = s
	return ss.next
}

func (ss *sinkSet) get(token int64) *pointSink {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[token]
}

func (ss *sinkSet) remove(token int64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, token)
}

// pointsAgg is one evaluation of aml_points(sink, ts, value, state): each
// row becomes a point of the sink (pointOf), and the result is the number
// of rows seen.
type pointsAgg struct {
	s *pointSink
	n int64
}

func (a *pointsAgg) Step(_ *sqlite.FunctionContext, args []driver.Value) error {
	if a.s == nil {
		token, ok := args[0].(int64)
		if ok {
			a.s = pointSinks.get(token)
		}
		if a.s == nil {
			return fmt.Errorf("sqlite: %s: no sink %v", pointsFunc, args[0])
		}
	}
	a.n++
	s := a.s
	if s.err != nil || s.unordered || s.more {
		return nil
	}
	if s.got == s.limit {
		s.more = true
		return nil
	}
	p, err := pointOf(args[1:])
	if err != nil {
		s.err = err
		return nil
	}
	if s.got > 0 && p.TsUs <= s.last {
		s.unordered = true
		return nil
	}
	s.dst = append(s.dst, p)
	s.got++
	s.last = p.TsUs
	return nil
}

func (a *pointsAgg) WindowInverse(*sqlite.FunctionContext, []driver.Value) error {
	return fmt.Errorf("sqlite: %s is not a window function", pointsFunc)
}

func (a *pointsAgg) WindowValue(*sqlite.FunctionContext) (driver.Value, error) { return a.n, nil }

func (a *pointsAgg) Final(*sqlite.FunctionContext) {}

// pointOf converts one driver row (ts, value, state) as Scan into
// (*int64, *float64, *sql.NullString) would.
func pointOf(v []driver.Value) (core.Point, error) {
	var p core.Point
	switch ts := v[0].(type) {
	case int64:
		p.TsUs = ts
	default:
		return p, fmt.Errorf("sqlite: sample ts of type %T", v[0])
	}
	switch x := v[1].(type) {
	case float64:
		p.Value = x
	case int64:
		p.Value = float64(x)
	default:
		return p, fmt.Errorf("sqlite: sample value of type %T", v[1])
	}
	switch s := v[2].(type) {
	case nil:
		p.State = core.StateOK
	case string:
		p.State = s
	case []byte:
		p.State = string(s)
	default:
		return p, fmt.Errorf("sqlite: sample state of type %T", v[2])
	}
	return p, nil
}

// sqlRows is *sql.Rows with Close's error dropped: Err reports what
// reading found.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// cmpNodeTs orders samples by node, then time.
func cmpNodeTs(a, b *core.Sample) int {
	if c := strings.Compare(a.Node, b.Node); c != 0 {
		return c
	}
	return cmp.Compare(a.TsUs, b.TsUs)
}
