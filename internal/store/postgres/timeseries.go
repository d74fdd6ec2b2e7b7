package postgres

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/records"
	"github.com/aml-project/aml/internal/store/samples"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The query limits are core's (the same on both back-ends).
const (
	DefaultPageLimit = core.DefaultPageLimit
	MaxPageLimit     = core.MaxPageLimit
	MaxBuckets       = core.MaxBuckets
)

// stageDDL is the per-connection staging table a batch is copied into when
// it touches stored instants. seq is the sample's index in the batch, so a
// conflict is reported at the first sample that has one.
const stageDDL = `CREATE TEMP TABLE IF NOT EXISTS aml_stage (
	seq bigint NOT NULL, node bigint NOT NULL, ts bigint NOT NULL, value double precision NOT NULL, state text, ctx bigint NOT NULL
) ON COMMIT DELETE ROWS`

// upsertStaged writes the staged batch, which Write has already reduced to
// one row per (node, ts) — the last of the batch, as in SQLite's
// multi-row INSERT — and staged in (node, ts) order, so that the row
// locks are taken in key order (a fresh temporary table is scanned in
// insertion order) and two ingests cannot deadlock on them. The WHERE on
// the update skips rows whose stored sample belongs to another context,
// which Write turns into AML_CONFLICT, and rows that would not change: a
// file ingested twice then writes no new row versions. "=" holds between
// -0 and 0, so a stored zero is always rewritten, keeping the sign last
// written.
const upsertStaged = `INSERT INTO samples(node, ts, value, state, ctx)
	SELECT node, ts, value, state, ctx FROM aml_stage
	ON CONFLICT (node, ts) DO UPDATE SET value=excluded.value, state=excluded.state
	WHERE samples.ctx = excluded.ctx
		AND (samples.value <> excluded.value OR samples.value = 0 OR samples.state IS DISTINCT FROM excluded.state)`

type span struct{ lo, hi int64 }

type ingestTx struct {
	s      *Store
	ctx    context.Context
	tx     pgx.Tx
	staged bool // temp table created on this connection
	// savepoint: aml_append is held (released with the next batch's
	// overlap check or by the commit).
	savepoint bool
	// Keys interns nodes and contexts in the same transaction.
	samples.Keys
	spans map[int64]span
	b     *batch // scratch of Write and Append, from batchPool
	// pending: b holds rows of Append not yet written; appendErr is the
	// error of a failed Append (the transaction can then only roll back).
	pending   bool
	appendErr error
	// parts are the results of partition creations started for rows
	// not yet written (ensurePartitions, on another connection).
	parts []chan error
	// ahead is the batch COPY of WriteAhead still running on the
	// connection, spare a finished one to reuse, aheadErr the first
	// error of one (ahead.go).
	ahead, spare *copyJob
	aheadErr     error
}

// Ingest implements core.TimeSeries.
func (s *Store) Ingest(ctx context.Context, fn func(tx core.IngestTx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbErr(err, "begin ingest")
	}
	defer tx.Rollback(ctx)
	it := &ingestTx{s: s, ctx: ctx, tx: tx, spans: map[int64]span{},
		Keys: samples.Keys{Ctx: ctx, Nodes: s.nodes.Begin(), Ctxs: s.ctxs.Begin()}}
	// The keys' statements wait for a COPY of WriteAhead first.
	it.Keys.Conn = settledConn{it}
	defer it.release()
	// Before the rollback and the release: no COPY may still use the
	// connection or the scratch.
	defer func() { _ = it.settle() }()
	// And no partition creation may still use the context.
	defer func() { _ = it.awaitParts() }()
	if err := fn(it); err != nil {
		return err
	}
	if err := it.flushAppended(); err != nil {
		return err
	}
	if err := it.settle(); err != nil {
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
	it.Nodes.Commit()
	it.Ctxs.Commit()
	return nil
}

// IngestBatchSize is the batch size a CSV ingest hands Write on this
// back-end when it does not use Append (internal/ingest asks for it),
// without a ramp: a file of at most ingestBuffer samples reaches Write
// whole, as one batch, and goes in as one COPY in (node, ts) order.
// internal/ingest.Stream uses Append instead, in small batches, which
// this back-end gathers into batches of that size itself.
func (s *Store) IngestBatchSize() (int, bool) { return ingestBuffer, false }

// ingestBuffer bounds what a CSV ingest holds in memory on this back-end:
// up to 262 144 samples are gathered (≈ 7 MiB of sampleRow and order)
// and written as one COPY in (node, ts) order — each node's rows then
// follow one another at the right edge of the primary key, PostgreSQL's
// cheapest insert (its rightmost-leaf fast path; bench/RESULTS.md,
// issue 22 fifth pass: ≈ 15 % less server time than the same rows in
// ramped batches of up to 32 768); a longer stream goes in batches of
// that size.
const ingestBuffer = 1 << 18

// WriteSamples implements core.TimeSeries.
func (s *Store) WriteSamples(ctx context.Context, batch []core.Sample) (core.WriteStats, error) {
	return samples.WriteSamples(ctx, s, batch)
}

// batch is the scratch memory of one Write (or of the rows gathered by
// Append), reused across batches and (through batchPool) across
// transactions, so that a steady ingest allocates per batch, not per
// sample.
type batch struct {
	// rowData: the keyed samples in the order given, the batch's nodes
	// in first-seen order, the contexts and states of its rows.
	rowData
	stateIx map[string]int32 // state → its rowAux.state
	auxIx   map[rowAux]int32 // context and state → index into aux
	byID    map[string]int32 // node id → index into nodes
	months  map[int64]bool   // the months (start, µs) the rows lie in
	order   []int32          // rows to write: row indices, (node pk, ts) order
	sorted  []int32          // node indices in pk order
	pks     []int64          // overlap query arguments
	los     []int64
	his     []int64
	enc     copyEncoder
	broken  bool // a COPY failed mid-stream: pgconn may still be reading enc
}

// nodeRange is what a batch holds for one node: its id and pk, its time
// range, its sample count, and whether its timestamps strictly increase
// in batch order (then the batch holds none of its instants twice and
// its samples need no sorting).
type nodeRange struct {
	id         string
	pk, lo, hi int64
	n          int32
	ordered    bool
}

var batchPool = sync.Pool{New: func() any {
	return &batch{byID: map[string]int32{}, stateIx: map[string]int32{}, auxIx: map[rowAux]int32{}, months: map[int64]bool{}}
}}

// maxPooledBatch caps the batch size whose scratch is kept for reuse: one
// huge Write should not pin its memory in the pool.
const maxPooledBatch = 1 << 20

// begin empties the batch for new rows. The maps hold the caller's
// strings (node ids, states) until then or until release.
func (b *batch) begin() {
	b.rows, b.states, b.nodes, b.aux = b.rows[:0], b.states[:0], b.nodes[:0], b.aux[:0]
	clear(b.byID)
	clear(b.stateIx)
	clear(b.auxIx)
	clear(b.months)
}

func (it *ingestTx) release() {
	b := it.b
	if b == nil {
		return
	}
	it.b = nil
	if b.broken || cap(b.rows) > maxPooledBatch {
		return
	}
	b.enc.release()
	b.begin()
	batchPool.Put(b)
}

// scratch returns the transaction's batch, taken from the pool at first
// use.
func (it *ingestTx) scratch() *batch {
	if it.b == nil {
		it.b = batchPool.Get().(*batch)
	}
	return it.b
}

// copyStage and copySamples stream the encoder's rows into the staging
// table and straight into samples.
const (
	copyStage   = `COPY aml_stage (seq, node, ts, value, state, ctx) FROM STDIN BINARY`
	copySamples = `COPY samples (node, ts, value, state, ctx) FROM STDIN BINARY`
)

// overlapQuery tells whether any stored sample of the batch's nodes lies
// within that node's time range in the batch; when none does, the batch
// can only add new instants and is copied straight into samples.
const overlapQuery = `SELECT EXISTS (SELECT 1 FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS b(node, lo, hi)
	WHERE EXISTS (SELECT 1 FROM samples s WHERE s.node = b.node AND s.ts >= b.lo AND s.ts <= b.hi))`

// Write validates and keys the batch in Go, orders it by (node, ts) and
// keeps the last sample of any repeated instant (refusing two contexts at
// one instant, as SQLite does, before anything is written), then takes
// one of two paths: appendOnly when no stored sample lies in the batch's
// time range of any of its nodes (new data: the common case), else the
// staging table and upsert. Either way the rows travel as binary COPY
// (copybin.go). Rows gathered by Append are written first.
func (it *ingestTx) Write(samples []core.Sample) (core.WriteStats, error) {
	return it.write(samples, false)
}

// Append is Write for a caller that writes a stream in many small
// batches (internal/ingest.Stream): the samples are validated and keyed
// now — nodes and contexts interned, a missing month's partition started
// on another connection — and kept as 24-byte rows (not as the caller's
// 112-byte samples, which are free again when Append returns); they are
// written, as Write writes one batch, when ingestBuffer rows are
// gathered (that COPY then runs on while the caller goes on, as
// WriteAhead's), or by the next Write, WriteAhead or the commit. So a
// stream of at most ingestBuffer samples goes in as one COPY in (node, ts)
// order, as one Write of all of it would, and without the caller holding
// all of it. What is written, and every error, are Write's; an error may
// be reported by a later call or the commit, and after one the
// transaction can only roll back.
func (it *ingestTx) Append(samples []core.Sample) (core.WriteStats, error) {
	st := core.WriteStats{}
	if err := it.ctx.Err(); err != nil {
		return st, core.Wrap(core.CodeStoreUnavailable, err, "write samples")
	}
	if it.appendErr != nil {
		return st, it.appendErr
	}
	if len(samples) == 0 {
		return st, nil
	}
	b := it.scratch()
	if b.broken {
		return st, core.Errorf(core.CodeStoreUnavailable, "write samples: an earlier COPY of this transaction failed")
	}
	if !it.pending {
		b.begin()
		if n := it.s.appendMax(); cap(b.rows) < n {
			// Room for a whole buffer and the batch that fills it, so the
			// rows are never copied to grow (pages not written to are
			// never touched).
			b.rows = make([]sampleRow, 0, n+len(samples))
		}
		it.pending = true
	}
	created, err := it.add(samples)
	st.NewNodes = created
	if err != nil {
		it.appendErr = err
		return st, err
	}
	st.Samples = len(samples)
	if len(b.rows) >= it.s.appendMax() {
		it.pending = false
		if _, err := it.flush(true); err != nil {
			it.appendErr = err
			return st, err
		}
	}
	return st, nil
}

// appendMax is how many rows Append gathers before writing them.
func (s *Store) appendMax() int {
	if s.appendLimit > 0 {
		return s.appendLimit
	}
	return ingestBuffer
}

// flushAppended writes the rows Append gathered, if any.
func (it *ingestTx) flushAppended() error {
	if it.appendErr != nil {
		return it.appendErr
	}
	if !it.pending {
		return nil
	}
	it.pending = false
	if _, err := it.flush(false); err != nil {
		it.appendErr = err
		return err
	}
	return nil
}

// write is Write, and with ahead WriteAhead (ahead.go).
func (it *ingestTx) write(samples []core.Sample, ahead bool) (core.WriteStats, error) {
	st := core.WriteStats{}
	if err := it.ctx.Err(); err != nil {
		return st, core.Wrap(core.CodeStoreUnavailable, err, "write samples")
	}
	if err := it.flushAppended(); err != nil {
		return st, err
	}
	if !ahead {
		// One statement at a time on the connection.
		if err := it.settle(); err != nil {
			return st, err
		}
	}
	if len(samples) == 0 {
		return st, nil
	}
	b := it.scratch()
	if b.broken {
		return st, core.Errorf(core.CodeStoreUnavailable, "write samples: an earlier COPY of this transaction failed")
	}
	b.begin()
	b.rows = slices.Grow(b.rows, len(samples))
	created, err := it.add(samples)
	st.NewNodes = created
	if err != nil {
		return st, err
	}
	w, err := it.flush(ahead)
	w.NewNodes = created
	return w, err
}

// nodeCacheSize is the size of add's direct-mapped cache of node ids.
const nodeCacheSize = 64

// nodeSlot is the slot of add's node cache for an id's bytes at p: the
// address's bits mixed (Fibonacci hashing), as short ids are packed a
// few bytes apart by the allocator.
func nodeSlot(p *byte) uint64 {
	return (uint64(uintptr(unsafe.Pointer(p))) * 0x9E3779B97F4A7C15) >> (64 - 6)
}

// add validates samples and appends them to it.b as keyed rows: nodes
// and contexts interned (creating those that do not exist), the batch's
// node ranges and months widened. It returns how many nodes it created.
// A month of the samples without its partition has it made on another
// connection (ensurePartitions, awaited by flush) while this goroutine
// keys the rows and the caller goes on — creating nodes and contexts
// costs round trips, and so does the partition's DDL; done one after the
// other they would add up before the COPY. Only samples that all pass
// the checks start it (an invalid batch fails as before, making nothing).
func (it *ingestTx) add(samples []core.Sample) (int, error) {
	b := it.b
	var added map[int64]bool
	var lastMonthLo, lastMonthHi int64 = 1, 0
	for i := range samples {
		sm := &samples[i]
		if sm.Node == "" {
			return 0, core.FieldErrorf(core.CodeInvalidArgument, "samples["+strconv.Itoa(i)+"].node", "sample has no node")
		}
		if math.IsNaN(sm.Value) || math.IsInf(sm.Value, 0) {
			return 0, core.FieldErrorf(core.CodeNonFinite, "samples["+strconv.Itoa(i)+"].value", "node %q at %d: value %v is not finite", sm.Node, sm.TsUs, sm.Value)
		}
		if sm.TsUs < lastMonthLo || sm.TsUs >= lastMonthHi {
			lastMonthLo, lastMonthHi = monthBounds(sm.TsUs)
			if !b.months[lastMonthLo] {
				b.months[lastMonthLo] = true
				if added == nil {
					added = map[int64]bool{}
				}
				added[lastMonthLo] = true
			}
		}
	}
	if added != nil && it.s.missingPartition(added) {
		c := make(chan error, 1)
		go func() { c <- it.s.ensurePartitions(it.ctx, added) }()
		it.parts = append(it.parts, c)
	}
	// The node of a sample is looked up by its id's bytes' address first
	// (a parser's samples share their node's id string): a hit costs no
	// hashing. The cache lives for this call only, while samples keeps
	// its strings alive.
	var cache [nodeCacheSize]struct {
		p  *byte
		n  int
		ni int32
	}
	created := 0
	var lastCtx core.ContextFilter
	var lastCtxPK int64 = -1
	var ctxLo, ctxHi int64
	lastAux, auxI := rowAux{ctx: -1}, int32(-1)
	base := len(b.rows)
	b.rows = slices.Grow(b.rows, len(samples))[:base+len(samples)]
	for i := range samples {
		sm := &samples[i]
		p := unsafe.StringData(sm.Node)
		slot := &cache[nodeSlot(p)]
		ni := slot.ni
		if slot.p != p || slot.n != len(sm.Node) {
			var ok bool
			ni, ok = b.byID[sm.Node]
			if !ok {
				pk, made, err := it.NodePK(core.Node{ID: sm.Node, LineID: sm.Line, Kind: core.NodeDAQ})
				if err != nil {
					b.rows = b.rows[:base]
					return created, err
				}
				if made {
					created++
				}
				ni = int32(len(b.nodes))
				b.nodes = append(b.nodes, nodeRange{id: sm.Node, pk: pk, lo: sm.TsUs, hi: sm.TsUs, ordered: true})
				b.byID[sm.Node] = ni
			}
			slot.p, slot.n, slot.ni = p, len(sm.Node), ni
		}
		nr := &b.nodes[ni]
		if nr.n > 0 {
			if sm.TsUs <= nr.hi {
				nr.ordered = false
				nr.lo = min(nr.lo, sm.TsUs)
			}
			nr.hi = max(nr.hi, sm.TsUs)
		}
		nr.n++
		c := core.ContextFilter{Line: sm.Line, Product: sm.Product, Recipe: sm.Recipe, Run: sm.Run}
		if c != lastCtx || lastCtxPK < 0 {
			pk, err := it.CtxPK(c)
			if err != nil {
				b.rows = b.rows[:base]
				return created, err
			}
			if lastCtxPK >= 0 {
				it.widen(lastCtxPK, ctxLo, ctxHi)
			}
			lastCtx, lastCtxPK, ctxLo, ctxHi = c, pk, sm.TsUs, sm.TsUs
		}
		ctxLo, ctxHi = min(ctxLo, sm.TsUs), max(ctxHi, sm.TsUs)
		var state int32
		if !isNullState(sm.State) {
			var ok bool
			if state, ok = b.stateIx[sm.State]; !ok {
				b.states = append(b.states, sm.State)
				state = int32(len(b.states))
				b.stateIx[sm.State] = state
			}
		}
		if a := (rowAux{ctx: lastCtxPK, state: state}); a != lastAux || auxI < 0 {
			var ok bool
			if auxI, ok = b.auxIx[a]; !ok {
				auxI = int32(len(b.aux))
				b.aux = append(b.aux, a)
				b.auxIx[a] = auxI
			}
			lastAux = a
		}
		b.rows[base+i] = sampleRow{ts: sm.TsUs, value: sm.Value, ni: ni, aux: auxI}
	}
	it.widen(lastCtxPK, ctxLo, ctxHi)
	return created, nil
}

// flush writes the rows of it.b: ordered and de-duplicated, then copied
// straight into samples (or the month's partition) when no stored sample
// lies in their range, else upserted; with ahead as WriteAhead writes
// them (the COPY may run on when flush returns; it.b is free again).
func (it *ingestTx) flush(ahead bool) (core.WriteStats, error) {
	st := core.WriteStats{}
	b := it.b
	if len(b.rows) == 0 {
		return st, nil
	}
	if err := b.sortUnique(); err != nil {
		return st, err
	}
	if err := it.awaitParts(); err != nil {
		return st, err
	}
	// A batch within one month whose partition exists is copied into that
	// partition itself: PostgreSQL then skips routing every row through
	// samples (≈ 15 % of a COPY's server time), and checks each row
	// against the partition's bounds.
	var part string
	var partLo int64
	if len(b.months) == 1 {
		for lo := range b.months {
			partLo, part = lo, it.s.partitionOf(lo)
		}
	}
	if ahead {
		return it.writeAhead(part, partLo)
	}
	if err := it.settle(); err != nil {
		return st, err
	}
	done, err := it.appendOnly(part, partLo)
	if err == nil && !done {
		err = it.upsert()
	}
	if err != nil {
		return st, err
	}
	st.Samples = len(b.rows)
	return st, nil
}

// awaitParts waits for the partition creations started by add and
// returns the first error of one.
func (it *ingestTx) awaitParts() error {
	var first error
	for _, c := range it.parts {
		if err := awaitPartitions(c); err != nil && first == nil {
			first = err
		}
	}
	it.parts = it.parts[:0]
	return first
}

// ensureNodesSQL creates the nodes of its arrays that do not exist, in
// array order, and returns the pk of every one it sees, created or not.
// A node another transaction commits while this statement runs is in
// neither half (the insert skips it, the snapshot misses it): EnsureNodes
// takes such a node the one-by-one way.
const ensureNodesSQL = `WITH want AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS w(id, line_id, unit, kind, meaning, ord)
	), ins AS (
		INSERT INTO nodes(id, line_id, unit, kind, meaning, created_at)
		SELECT id, line_id, unit, kind, meaning, $6 FROM want ORDER BY ord
		ON CONFLICT(id) DO NOTHING RETURNING id, pk
	)
	SELECT id, pk, true FROM ins
	UNION ALL SELECT n.id, n.pk, false FROM nodes n JOIN want w ON w.id = n.id`

// EnsureNodes is EnsureNode for several nodes in one round trip instead
// of two or three each (internal/ingest uses it when a transaction has
// it): it creates those that do not exist, in order, and returns how many
// it created. Each node is checked as EnsureNode checks it; nodes with a
// range (Min, Max) and a lone node take EnsureNode itself.
func (it *ingestTx) EnsureNodes(nodes []core.Node) (int, error) {
	if err := it.settle(); err != nil {
		return 0, err
	}
	created := 0
	var todo []core.Node
	dup := map[string]bool{}
	for _, n := range nodes {
		if n.Kind == "" {
			n.Kind = core.NodeDAQ
		}
		if err := records.ValidateNode(n); err != nil {
			return created, err
		}
		if _, ok := it.Nodes.Get(n.ID); ok || dup[n.ID] {
			continue
		}
		dup[n.ID] = true
		todo = append(todo, n)
	}
	one := func(n core.Node) error {
		ok, err := it.EnsureNode(n)
		if ok {
			created++
		}
		return err
	}
	if len(todo) == 1 || slices.ContainsFunc(todo, func(n core.Node) bool { return n.Min != nil || n.Max != nil }) {
		for _, n := range todo {
			if err := one(n); err != nil {
				return created, err
			}
		}
		return created, nil
	}
	if len(todo) == 0 {
		return 0, nil
	}
	cols := make([][]string, 5)
	for _, n := range todo {
		cols[0] = append(cols[0], n.ID)
		cols[1] = append(cols[1], n.LineID)
		cols[2] = append(cols[2], n.Unit)
		cols[3] = append(cols[3], n.Kind)
		cols[4] = append(cols[4], n.Meaning)
	}
	rows, err := it.tx.Query(it.ctx, ensureNodesSQL, pgx.QueryExecModeExec, cols[0], cols[1], cols[2], cols[3], cols[4], time.Now().UnixMilli())
	if err != nil {
		return 0, dbErr(err, "create nodes")
	}
	got := make(map[string]bool, len(todo))
	for rows.Next() {
		var id string
		var pk int64
		var made bool
		if err := rows.Scan(&id, &pk, &made); err != nil {
			rows.Close()
			return 0, dbErr(err, "create nodes")
		}
		got[id] = true
		it.Nodes.Add(id, pk)
		if made {
			created++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, dbErr(err, "create nodes")
	}
	for _, n := range todo {
		if !got[n.ID] {
			if err := one(n); err != nil {
				return created, err
			}
		}
	}
	return created, nil
}

// GetNodes returns the stored records of those of ids that exist, read in
// one statement inside the transaction (internal/ingest checks a stream's
// nodes with it: a read through the pool would wait for a second
// connection, and take a round trip per node).
func (it *ingestTx) GetNodes(ids []string) ([]core.Node, error) {
	if err := it.settle(); err != nil {
		return nil, err
	}
	rows, err := it.tx.Query(it.ctx, `SELECT `+records.NodeColumns+` FROM nodes WHERE id = ANY($1::text[])`, pgx.QueryExecModeExec, ids)
	if err != nil {
		return nil, dbErr(err, "read nodes")
	}
	defer rows.Close()
	var out []core.Node
	for rows.Next() {
		n, err := records.ScanNode(rows)
		if err != nil {
			return nil, dbErr(err, "read nodes")
		}
		out = append(out, n)
	}
	return out, dbErr(rows.Err(), "read nodes")
}

// widen records that context pk has samples in [lo, hi].
func (it *ingestTx) widen(pk, lo, hi int64) {
	if sp, ok := it.spans[pk]; ok {
		lo, hi = min(lo, sp.lo), max(hi, sp.hi)
	}
	it.spans[pk] = span{lo, hi}
}

// sortUnique fills b.order with the rows to write: the rows in (node
// pk, ts) order — a counting sort by node, which keeps batch order within
// a node, then a stable sort by ts of the nodes whose timestamps are not
// already increasing — keeping only the last row of a repeated
// (node, ts). Two rows of one instant in different contexts are
// AML_CONFLICT, reported at the instant whose first row comes first in
// the batch. The nodes' counts are used up (b.nodes[j].n becomes the
// end of node j's rows in b.order).
func (b *batch) sortUnique() error {
	b.sorted = b.sorted[:0]
	for j := range b.nodes {
		b.sorted = append(b.sorted, int32(j))
	}
	slices.SortFunc(b.sorted, func(x, y int32) int { return cmp.Compare(b.nodes[x].pk, b.nodes[y].pk) })
	var at int32
	for _, j := range b.sorted {
		nr := &b.nodes[j]
		nr.n, at = at, at+nr.n // n now counts the node's slots from its start
	}
	rows := b.rows
	b.order = slices.Grow(b.order[:0], len(rows))[:len(rows)]
	for i := range rows {
		nr := &b.nodes[rows[i].ni]
		b.order[nr.n] = int32(i)
		nr.n++
	}
	byTs := func(x, y int32) int { return cmp.Compare(rows[x].ts, rows[y].ts) }
	unique := true
	at = 0
	for _, j := range b.sorted {
		nr := &b.nodes[j]
		seg := b.order[at:nr.n]
		at = nr.n
		if !nr.ordered {
			slices.SortStableFunc(seg, byTs)
			unique = false
		}
	}
	if unique {
		return nil
	}
	w, conflict := 0, -1
	for r := 0; r < len(b.order); {
		first := &rows[b.order[r]]
		e := r + 1
		for e < len(b.order) && rows[b.order[e]].ni == first.ni && rows[b.order[e]].ts == first.ts {
			if b.aux[rows[b.order[e]].aux].ctx != b.aux[first.aux].ctx && (conflict < 0 || int(b.order[r]) < conflict) {
				conflict = int(b.order[r])
			}
			e++
		}
		b.order[w] = b.order[e-1]
		w++
		r = e
	}
	b.order = b.order[:w]
	if conflict >= 0 {
		r := &rows[conflict]
		return core.FieldErrorf(core.CodeConflict, "ts", "node %s has two samples at %d (epoch µs) in different contexts in one batch; a node holds one value per instant", b.nodes[r.ni].id, r.ts)
	}
	return nil
}

// copyIn streams the rows of b.order through the encoder with one COPY
// statement.
func (it *ingestTx) copyIn(sql string, seq bool) error {
	b := it.b
	b.enc.reset(b.rowData, b.order, seq)
	_, err := it.tx.Conn().PgConn().CopyFrom(it.ctx, &b.enc, sql)
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && pe.Severity == "ERROR") {
		// Not a plain statement error (a broken connection, a FATAL
		// from the server): pgconn may return while its sender goroutine
		// still reads the encoder, which must then not be reused. The
		// connection is gone with it, and so is this transaction.
		b.broken = true
		return err
	}
	b.enc.release()
	return err
}

// appendOnly is the fast path for a batch whose node time ranges hold no
// stored sample (new data, later than what is stored, or filling a gap).
// Such a batch cannot replace or conflict with anything, so it is copied
// straight into samples — no staging table, no upsert — in (node, ts)
// order, the order the upsert also takes its row locks in. A concurrent
// writer can still commit one of these instants between the check and the
// COPY: the COPY then fails on the primary key (or on a deadlock against
// that writer), is rolled back to its savepoint, and done reports false
// so the batch takes the upsert path, which applies the conflict rule to
// what is there now.
//
// part, when not "", is the partition that holds every row of the batch;
// if it is gone or holds another range (a COPY error on the relation or
// its partition bound), the batch is copied through samples instead.
func (it *ingestTx) appendOnly(part string, partLo int64) (done bool, err error) {
	overlap, err := it.checkOverlap()
	if err != nil || overlap {
		return false, err
	}
	return it.copyAppend(func(sql string) error { return it.copyIn(sql, false) }, part, partLo)
}

// checkOverlap tells whether a stored sample lies in the batch's time
// range of one of its nodes (b.nodes), in one round trip: it releases
// the previous batch's savepoint, checks for stored samples, and takes
// this batch's savepoint — released at once when there is an overlap: the
// batch then takes the upsert path, which runs outside a subtransaction.
func (it *ingestTx) checkOverlap() (bool, error) {
	b := it.b
	b.pks, b.los, b.his = b.pks[:0], b.los[:0], b.his[:0]
	for _, nr := range b.nodes {
		b.pks, b.los, b.his = append(b.pks, nr.pk), append(b.los, nr.lo), append(b.his, nr.hi)
	}
	var pb pgx.Batch
	if it.savepoint {
		pb.Queue(`RELEASE SAVEPOINT aml_append`)
	}
	var overlap bool
	pb.Queue(overlapQuery, b.pks, b.los, b.his).QueryRow(func(row pgx.Row) error { return row.Scan(&overlap) })
	pb.Queue(`SAVEPOINT aml_append`)
	if err := it.tx.SendBatch(it.ctx, &pb).Close(); err != nil {
		return false, dbErr(err, "check stored samples")
	}
	it.savepoint = true
	if overlap {
		if _, err := it.tx.Exec(it.ctx, `RELEASE SAVEPOINT aml_append`); err != nil {
			return false, dbErr(err, "write samples")
		}
		it.savepoint = false
	}
	return overlap, nil
}

// copyAppend runs the append-only COPY of a batch checkOverlap found
// free, with copyRows(sql) streaming its rows, into partition part when
// not "". done is false when the batch must take the upsert path (a
// concurrent writer took one of its instants).
func (it *ingestTx) copyAppend(copyRows func(sql string) error, part string, partLo int64) (done bool, err error) {
	if part != "" {
		err = copyRows(`COPY ` + pgx.Identifier{part}.Sanitize() + ` (node, ts, value, state, ctx) FROM STDIN BINARY`)
		if c := pgCode(err); c == sqlUndefinedTable || c == sqlCheckViolation {
			it.s.forgetPartition(partLo)
			if _, err := it.tx.Exec(it.ctx, `ROLLBACK TO SAVEPOINT aml_append`); err != nil {
				return false, dbErr(err, "write samples")
			}
			part = ""
		}
	}
	if part == "" {
		err = copyRows(copySamples)
	}
	if c := pgCode(err); c == sqlUniqueViolation || c == sqlDeadlock {
		if _, err := it.tx.Exec(it.ctx, `ROLLBACK TO SAVEPOINT aml_append`); err != nil {
			return false, dbErr(err, "write samples")
		}
	} else if err != nil {
		return false, dbErr(err, "copy samples")
	} else {
		done = true
	}
	// The savepoint is released with the next batch's check, or by the
	// commit: one subtransaction at a time, without a round trip of its own.
	return done, nil
}

// upsert stages the rows of b.order and writes them with the conflict
// rule.
func (it *ingestTx) upsert() error {
	return it.stageUpsert(func() error { return it.copyIn(copyStage, true) }, len(it.b.order))
}

// stageUpsert stages rows rows with copyRows and writes them with the
// conflict rule.
func (it *ingestTx) stageUpsert(copyRows func() error, rows int) error {
	if !it.staged {
		if _, err := it.tx.Exec(it.ctx, stageDDL); err != nil {
			return dbErr(err, "create staging table")
		}
		it.staged = true
	} else if _, err := it.tx.Exec(it.ctx, `TRUNCATE aml_stage`); err != nil {
		return dbErr(err, "clear staging table")
	}
	if err := copyRows(); err != nil {
		return dbErr(err, "copy samples")
	}
	tag, err := it.tx.Exec(it.ctx, upsertStaged)
	if err != nil {
		return dbErr(err, "insert samples")
	}
	if tag.RowsAffected() < int64(rows) {
		return it.checkConflict()
	}
	return nil
}

// checkConflict runs when the upsert touched fewer rows than were staged:
// rows were skipped either because they would not change anything (fine)
// or because another context holds the instant (AML_CONFLICT). The
// upsert locked every row it skipped, so what this reads stays true until
// commit.
func (it *ingestTx) checkConflict() error {
	var node, run string
	var ts int64
	err := it.tx.QueryRow(it.ctx, `SELECT n.id, s.ts, c.run FROM aml_stage s
		JOIN samples x ON x.node = s.node AND x.ts = s.ts AND x.ctx <> s.ctx
		JOIN nodes n ON n.pk = s.node JOIN sample_ctx c ON c.pk = x.ctx
		ORDER BY s.seq LIMIT 1`).Scan(&node, &ts, &run)
	if err == nil {
		return core.FieldErrorf(core.CodeConflict, "ts", "node %s already has a sample at %d (epoch µs) from run %q with another context; a node holds one value per instant — shift this file's times (aml ingest csv --time-offset, --sequential or --start) instead of overwriting another run", node, ts, run)
	}
	if !noRows(err) {
		return dbErr(err, "check write")
	}
	return nil
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
	cond, args := s.Where(sel, nil, nil, nil)
	rows, err := s.pool.Query(ctx, sqldb.Rebind(`SELECT n.id, count(*) FROM samples s JOIN nodes n ON n.pk = s.node WHERE true`+cond+` GROUP BY n.id`), args...)
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

// readDB runs the shared read path (internal/store/samples) on the pool
// with pgx itself, its placeholders rebound.
type readDB struct{ pool *pgxpool.Pool }

func (d readDB) Query(ctx context.Context, q string, args ...any) (samples.Rows, error) {
	rows, err := d.pool.Query(ctx, sqldb.Rebind(q), args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (d readDB) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	return d.pool.QueryRow(ctx, sqldb.Rebind(q), args...)
}

func (readDB) NoRows(err error) bool { return noRows(err) }

// awaitPartitions waits for ensurePartitions' result on c.
func awaitPartitions(c <-chan error) error { return <-c }
