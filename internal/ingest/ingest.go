package ingest

import (
	// The zones of --tz work on machines without a zoneinfo database.
	_ "time/tzdata"

	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/aml-project/aml/internal/core"
)

// progressInterval is the minimum time between two progress calls (a
// variable so tests can report every read).
var progressInterval = 50 * time.Millisecond

// RunIDFromFile is the run id IngestFiles uses for a file when
// CSVOptions.Run is empty: the base name without its last extension
// ("data/2024-05-01_batch7.csv" → "2024-05-01_batch7"), or the whole base
// name when that would be empty.
func RunIDFromFile(path string) string {
	base := filepath.Base(path)
	if stem := strings.TrimSuffix(base, filepath.Ext(base)); stem != "" {
		return stem
	}
	return base
}

// IngestFiles ingests each file in its own ts.Ingest transaction: a file is
// written completely or not at all. It stops at the first failing file;
// files before it stay written. The reports returned are those of the
// committed files; the error names the failing file and keeps the code of
// the cause (AML_INGEST_INVALID for bad data).
//
// opts apply to every file. When opts.Run is empty, each file's samples carry
// the run RunIDFromFile(file). Before a batch with a node not yet seen in the
// file is written, the node is ensured (kind daq, line opts.Line, unit
// opts.Units[id]); after the last batch the run is ensured as ended, spanning
// FirstTs..LastTs, unless the file produced no samples. Line, Product and
// Recipe are required.
//
// progress, if not nil, is called with the bytes of the current file read so
// far and its size, at most every 50 ms, and once more when the file is done.
func IngestFiles(ctx context.Context, ts core.TimeSeries, files []string, opts CSVOptions, progress func(file string, done, total int64)) ([]FileReport, error) {
	for _, req := range [...][2]string{{"line", opts.Line}, {"product", opts.Product}, {"recipe", opts.Recipe}} {
		if strings.TrimSpace(req[1]) == "" {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, req[0], "ingest: the %s is required", req[0])
		}
	}
	if _, _, err := opts.validate(); err != nil {
		return nil, err
	}
	var reports []FileReport
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return reports, fmt.Errorf("ingest %s: %w", file, err)
		}
		rep, err := ingestFile(ctx, ts, file, opts, progress)
		if err != nil {
			return reports, fileError(file, err)
		}
		reports = append(reports, rep)
	}
	return reports, nil
}

// fileError makes err name file, keeping its code and field.
func fileError(file string, err error) error {
	var ae *core.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("ingest %s: %w", file, err)
	}
	msg := ae.Message
	if !strings.HasPrefix(msg, file+":") {
		msg = "ingest " + file + ": " + msg
	}
	return &core.Error{Code: ae.Code, Message: msg, Field: ae.Field, Err: err}
}

// Stream parses one CSV stream (named name in reports and errors) into one
// ingest transaction: nodes are created as they first appear (checkNode,
// when set, is shown the stored record of each one that exists already,
// before any sample of it is written, and may refuse it — a node of
// another line; see lookupNodes), and the run
// opts.Run is created from the first and last sample unless it exists.
// Nothing is buffered beyond a few parser batches (the parser runs one to
// two batches ahead of the writes, one when the batches are large; a store
// may ask for larger batches with an IngestBatchSize() (size int, ramp
// bool) method, and then gets small ones if its transaction gathers them
// itself with an Append method); on any error nothing of the stream is
// written. Every CSV ingest — files from the CLI, uploads to the API —
// takes this one path.
func Stream(ctx context.Context, ts core.TimeSeries, r io.Reader, name string, opts CSVOptions, checkNode func(n core.Node) error) (FileReport, error) {
	var rep FileReport
	first := 0
	sized := false // the store chose the batch size
	if bs, ok := ts.(interface{ IngestBatchSize() (int, bool) }); ok && opts.BatchSize == 0 {
		sized = true
		// A store whose writes cost round trips asks for larger batches.
		// With ramp the first ones are small and grow to that size, so
		// that the store starts writing (creating nodes, partitions, the
		// first COPY) a few rows into the file instead of a whole large
		// batch into it, while the parser reads on. Without, a file of
		// at most that many samples reaches the store as one batch, which
		// it can write in its key order (the PostgreSQL store: one COPY
		// in (node, ts) order).
		var ramp bool
		opts.BatchSize, ramp = bs.IngestBatchSize()
		if ramp {
			first = rampFirstBatch
		}
	}
	err := ts.Ingest(ctx, func(tx core.IngestTx) error {
		// A transaction that gathers small batches itself (Append: the
		// PostgreSQL store keeps them as compact keyed rows and writes
		// up to its buffer's worth as one COPY in its key order) gets
		// the parser's small batches, appendBatch samples, reused:
		// the stream is then never held as samples, whatever the
		// store's batch. A transaction that can write a batch while the
		// next one is prepared (WriteAhead: its COPY runs on while this
		// goroutine keys and encodes the next batch; an error of it
		// fails a later call or the commit, and so the stream) takes the
		// ramped batches that way. Without a ramp the batches are few
		// and large (often one: the whole file), and Write streams each
		// one's encoding into its COPY instead of encoding it in full
		// first, which would only delay a last batch's COPY.
		write := tx.Write
		o := opts
		ap, appends := tx.(interface {
			Append([]core.Sample) (core.WriteStats, error)
		})
		if wa, ok := tx.(interface {
			WriteAhead([]core.Sample) (core.WriteStats, error)
		}); ok && first > 0 {
			write = wa.WriteAhead
		}
		if appends && sized {
			write, o.BatchSize, first = ap.Append, appendBatch, 0
		}
		seen := make(map[string]bool)
		var fresh []core.Node // the batch's nodes not seen before
		newNodes := 0
		var perr error
		rep, perr = parseAhead(r, name, o, first, func(batch []core.Sample) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			fresh = fresh[:0]
			// A node already looked at in this batch is known by its id's
			// address (the parser's samples share their node's id
			// string), without hashing the id; the cache lives for this
			// call only, while batch keeps its strings alive.
			var known [seenCacheSize]*byte
			for i := range batch {
				id := batch[i].Node
				p := unsafe.StringData(id)
				slot := &known[seenSlot(p)]
				if *slot == p && p != nil {
					continue
				}
				*slot = p
				if seen[id] {
					continue
				}
				seen[id] = true
				fresh = append(fresh, core.Node{ID: id, LineID: opts.Line, Unit: opts.Units[id], Kind: core.NodeDAQ})
			}
			if len(fresh) > 0 {
				if checkNode != nil {
					if err := checkNodes(ctx, ts, tx, fresh, checkNode); err != nil {
						return err
					}
				}
				n, err := ensureNodes(tx, fresh)
				newNodes += n
				if err != nil {
					return err
				}
			}
			_, err := write(batch)
			return err
		})
		rep.NewNodes = newNodes
		if perr != nil {
			return perr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if rep.Samples > 0 && opts.Run != "" {
			last := rep.LastTs
			created, err := tx.EnsureRun(core.Run{ID: opts.Run, LineID: opts.Line, ProductID: opts.Product,
				RecipeID: opts.Recipe, StartedMs: rep.FirstTs, EndedMs: &last, Status: core.RunEnded})
			if err != nil {
				return err
			}
			rep.RunCreated = created
		}
		return nil
	})
	if err != nil {
		rep.RunCreated, rep.NewNodes = false, 0
	}
	return rep, err
}

// checkNodes shows check the stored record of every node of nodes that
// exists, in the order of nodes, and returns its first error.
func checkNodes(ctx context.Context, ts core.TimeSeries, tx core.IngestTx, nodes []core.Node, check func(core.Node) error) error {
	stored, err := lookupNodes(ctx, ts, tx, nodes)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if sn, ok := stored[n.ID]; ok {
			if err := check(sn); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookupNodes reads the stored records of those of nodes that exist: in
// one statement inside the ingest transaction when tx can (a GetNodes
// method: the PostgreSQL store, where a read through the store's pool
// would wait for a second connection, and cost a round trip per node),
// else one by one through ts's GetNode.
func lookupNodes(ctx context.Context, ts core.TimeSeries, tx core.IngestTx, nodes []core.Node) (map[string]core.Node, error) {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	out := make(map[string]core.Node, len(nodes))
	if g, ok := tx.(interface {
		GetNodes([]string) ([]core.Node, error)
	}); ok {
		got, err := g.GetNodes(ids)
		if err != nil {
			return nil, err
		}
		for _, n := range got {
			out[n.ID] = n
		}
		return out, nil
	}
	g, ok := ts.(interface {
		GetNode(context.Context, string) (core.Node, error)
	})
	if !ok {
		return nil, core.Errorf(core.CodeInternal, "ingest: the store cannot read nodes to check them")
	}
	for _, id := range ids {
		n, err := g.GetNode(ctx, id)
		if core.CodeOf(err) == core.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, nil
}

// ensureNodes ensures nodes in tx, in one call when tx can take several
// (a store where each costs round trips: see the PostgreSQL store's
// EnsureNodes), and returns how many it created.
func ensureNodes(tx core.IngestTx, nodes []core.Node) (int, error) {
	if m, ok := tx.(interface {
		EnsureNodes([]core.Node) (int, error)
	}); ok {
		return m.EnsureNodes(nodes)
	}
	created := 0
	for _, n := range nodes {
		ok, err := tx.EnsureNode(n)
		if err != nil {
			return created, err
		}
		if ok {
			created++
		}
	}
	return created, nil
}

// seenCacheSize is the size of Stream's direct-mapped cache of the node
// ids of a batch already looked at.
const seenCacheSize = 64

// seenSlot is the slot of Stream's node cache for an id's bytes at p: the
// address's bits mixed (Fibonacci hashing), as short ids are packed a few
// bytes apart by the allocator.
func seenSlot(p *byte) uint64 {
	return (uint64(uintptr(unsafe.Pointer(p))) * 0x9E3779B97F4A7C15) >> (64 - 6)
}

// appendBatch is the batch size of a Stream into a transaction that
// gathers batches itself (Append): a few of them live at a time stay in
// the processor's cache, and a file is never held as samples (bench/
// RESULTS.md, issue 22 sixth pass: 1 024 against 8 192 saved ≈ 1.5 ms of
// client CPU on the 200 000-sample bench file).
const appendBatch = 1024

// rampFirstBatch is the first batch of a Stream into a store that asks
// for larger batches (see parseAhead): ≈ 400 rows of a 10-column file.
const rampFirstBatch = 4096

// bigBatch is the batch size from which parseAhead keeps no parsed batch
// waiting besides the one being written (≈ 7 MiB of samples).
const bigBatch = 65536

// errStopped stops the parser of parseAhead when the writer has failed.
var errStopped = errors.New("ingest: writer stopped")

// parseAhead is ParseCSV with the parsing one batch ahead of write: the
// parser runs in its own goroutine while write, in the caller's goroutine,
// stores the batch before, so that reading and parsing the file overlap
// the store's work (a PostgreSQL COPY waits on the server; SQLite's
// writer is CPU-bound in this process) instead of alternating with it.
// write sees the batches in file order, each exactly as ParseCSV emits
// it; the result is ParseCSV's, except that an error of write — the
// first, in file order, as without the goroutine — wins over the parser's
// (the parser stops at its next batch and its error is then errStopped).
// The parser goroutine has ended when parseAhead returns, so r and the
// report are the caller's again.
//
// first, when > 0 and below the batch size, ramps the batches up: the
// first batch closes at first samples, each next one at twice the last,
// up to the batch size. Every sample still reaches write once and in
// file order; only the batch boundaries move (which a store's result
// does not depend on: a CSV ingest is one transaction whatever its
// batches).
func parseAhead(r io.Reader, name string, opts CSVOptions, first int, write func([]core.Sample) error) (FileReport, error) {
	// Batches parsed and not yet written, besides the one the parser
	// fills: two, or none for large batches (≥ bigBatch samples, the
	// PostgreSQL store's), so that at most two of those exist — the one
	// written and the one parsed meanwhile.
	inFlight := 2
	if opts.BatchSize >= bigBatch {
		inFlight = 0
	}
	full := make(chan []core.Sample, inFlight)
	// Room in free for every batch there can be besides the one the
	// parser fills, so that the writer never drops one it returns (it may
	// return a batch before the parser looks for one): the parser then
	// makes a new batch only when the writer holds all the others.
	free := make(chan []core.Sample, inFlight+2)
	stop := make(chan struct{})
	var (
		rep  FileReport
		perr error
	)
	parsed := make(chan struct{})
	go func() {
		defer close(parsed)
		defer close(full)
		p := &parser{name: name, opts: opts, ramp: first}
		p.rep = FileReport{File: name, Run: opts.Run}
		// The parser hands each batch over whole and fills a free one
		// (or a new one) next: batches are never copied.
		p.handoff = func(batch []core.Sample) ([]core.Sample, error) {
			select {
			case full <- batch:
			case <-stop:
				return nil, errStopped
			}
			// Room for the next batch and the row that crosses its
			// end, so it is filled without regrowth (a batch closes at
			// the first row that takes it to p.nextBatch() samples or
			// more; flush ramps p.batch up after this handoff).
			need := p.nextBatch() + len(p.nodeCols) + 1
			select {
			case next := <-free:
				if cap(next) >= need {
					return next, nil
				}
				// A small buffer of the ramp: let it go.
			default:
			}
			return make([]core.Sample, 0, need), nil
		}
		perr = p.run(r)
		rep = p.rep
	}()
	var werr error
	for buf := range full {
		if werr != nil {
			continue // drain until the parser has seen stop
		}
		if werr = write(buf); werr != nil {
			close(stop)
			continue
		}
		select {
		case free <- buf[:0]:
		default:
		}
	}
	<-parsed
	if werr != nil {
		return rep, werr
	}
	return rep, perr
}

func ingestFile(ctx context.Context, ts core.TimeSeries, file string, opts CSVOptions, progress func(string, int64, int64)) (FileReport, error) {
	f, err := os.Open(file)
	if err != nil {
		code := core.CodeInternal
		if errors.Is(err, fs.ErrNotExist) {
			code = core.CodeNotFound
		}
		e := core.FieldErrorf(code, file, "open %s: %v", file, err)
		e.Err = err
		return FileReport{File: file}, e
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	if opts.Run == "" {
		opts.Run = RunIDFromFile(file)
	}
	cr := &countingReader{r: f, file: file, total: size, progress: progress}
	cr.report(true)

	rep, err := Stream(ctx, ts, cr, file, opts, nil)
	if err != nil {
		return rep, err
	}
	cr.done = cr.total
	if cr.done < cr.read {
		cr.done = cr.read
	}
	cr.report(true)
	return rep, nil
}

// countingReader counts bytes read and reports progress, throttled.
type countingReader struct {
	r        io.Reader
	file     string
	read     int64
	done     int64
	total    int64
	last     time.Time
	progress func(string, int64, int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	c.done = c.read
	c.report(false)
	return n, err
}

func (c *countingReader) report(force bool) {
	if c.progress == nil {
		return
	}
	now := time.Now()
	if !force && now.Sub(c.last) < progressInterval {
		return
	}
	c.last = now
	total := c.total
	if c.done > total {
		total = c.done
	}
	c.progress(c.file, c.done, total)
}
