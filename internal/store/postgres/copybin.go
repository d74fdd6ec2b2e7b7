package postgres

import (
	"encoding/binary"
	"io"
	"math"
	"slices"

	"github.com/aml-project/aml/internal/core"
)

// Binary COPY encoder for sample rows.
//
// Why by hand: pgx's CopyFrom takes rows as []any, so every int64 and
// float64 of every sample is boxed on the heap (≈3.3 allocations per
// sample) and each value goes through pgx's type map to find its encode
// plan. The rows of a sample batch have a fixed shape — bigint, bigint,
// double precision, nullable text, bigint (plus the batch position when
// staging) — so writing PostgreSQL's binary COPY format directly is a
// few dozen lines, allocates nothing per sample, and encodes straight
// into the 64 KiB buffer pgconn sends from. BenchmarkWriteSamples
// (bench/pg_ingest.sh, bench/RESULTS.md) shows the effect;
// TestCopyEncoderRoundTrip checks every field byte for byte against what
// the server stores.
//
// The format (PostgreSQL docs, "COPY … Binary Format"): an 11-byte
// signature "PGCOPY\n\377\r\n\000", an int32 flags word (0: no OIDs), an
// int32 header-extension length (0); then per row an int16 field count
// and per field an int32 byte length followed by the value in network
// byte order (length -1 and no bytes for NULL); bigint is 8 bytes
// two's complement, double precision the 8 IEEE 754 bytes, text the raw
// bytes in the server encoding (UTF-8 here); a trailer int16 -1 ends the
// stream.

// copySignature is the fixed 19-byte header: signature, flags, extension
// length.
var copySignature = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyTrailer ends a binary COPY stream (field count -1).
var copyTrailer = []byte{0xff, 0xff}

// sampleRow is a keyed sample as a batch holds it: 24 bytes, against a
// core.Sample's 112 (a batch of a whole file touches fewer pages:
// bench/RESULTS.md, issue 22 sixth pass). ni is the index of its node in
// rowData.nodes, aux that of its context and state in rowData.aux.
type sampleRow struct {
	ts      int64
	value   float64
	ni, aux int32
}

// rowAux is what the rows of a batch share besides their node: the
// context pk and the state, 0 for NULL ("" or core.StateOK), else k for
// rowData.states[k-1].
type rowAux struct {
	ctx   int64
	state int32
}

// rowData is a batch's rows and what they refer to.
type rowData struct {
	rows   []sampleRow
	nodes  []nodeRange
	aux    []rowAux
	states []string
}

// copyEncoder is an io.Reader producing one batch of sample rows in binary
// COPY format. Row i is rows[order[i]] (rows[i] when order is nil) of a
// rowData. With seq set it writes the staging table's columns
// (seq, node, ts, value, state, ctx), the row's index in the batch first;
// otherwise the samples table's (node, ts, value, state, ctx). A NULL
// state (0) is stored as NULL, as everywhere else in this package.
//
// Read writes whole rows straight into the caller's buffer; only a row
// longer than the space left in an empty buffer goes through spill, kept
// for the next batch. reset prepares a new batch; the encoder holds no
// other state, so it is reused across batches and transactions.
type copyEncoder struct {
	d     rowData
	order []int32
	seq   bool

	pos   int // next item: -1 header, 0..rows-1 a row, rows the trailer, rows+1 done
	pend  []byte
	spill []byte
}

func (e *copyEncoder) reset(d rowData, order []int32, seq bool) {
	e.d, e.order, e.seq = d, order, seq
	e.pos, e.pend = -1, nil
}

// release drops the references to the caller's batch.
func (e *copyEncoder) release() { e.d, e.order, e.pend = rowData{}, nil, nil }

func (e *copyEncoder) count() int {
	if e.order != nil {
		return len(e.order)
	}
	return len(e.d.rows)
}

// isNullState tells whether a sample's state is stored as NULL.
func isNullState(state string) bool { return state == "" || state == core.StateOK }

// itemSize is the encoded length of item pos (0 when done).
func (e *copyEncoder) itemSize() int {
	switch n := e.count(); {
	case e.pos < 0:
		return len(copySignature)
	case e.pos < n:
		// field count + 4 fixed 8-byte fields (+ seq) + state length word
		size := 2 + 4*(4+8) + 4
		if e.seq {
			size += 4 + 8
		}
		if st := e.d.aux[e.d.rows[e.index(e.pos)].aux].state; st != 0 {
			size += len(e.d.states[st-1])
		}
		return size
	case e.pos == n:
		return len(copyTrailer)
	}
	return 0
}

func (e *copyEncoder) index(row int) int {
	if e.order != nil {
		return int(e.order[row])
	}
	return row
}

// put writes item pos into b, which is exactly itemSize() long.
func (e *copyEncoder) put(b []byte) {
	switch n := e.count(); {
	case e.pos < 0:
		copy(b, copySignature)
	case e.pos < n:
		i := e.index(e.pos)
		r := &e.d.rows[i]
		a := &e.d.aux[r.aux]
		be := binary.BigEndian
		off := 2
		put8 := func(v uint64) {
			be.PutUint32(b[off:], 8)
			be.PutUint64(b[off+4:], v)
			off += 12
		}
		if e.seq {
			be.PutUint16(b, 6)
			put8(uint64(i))
		} else {
			be.PutUint16(b, 5)
		}
		put8(uint64(e.d.nodes[r.ni].pk))
		put8(uint64(r.ts))
		put8(math.Float64bits(r.value))
		if a.state == 0 {
			be.PutUint32(b[off:], math.MaxUint32) // -1: NULL
			off += 4
		} else {
			st := e.d.states[a.state-1]
			be.PutUint32(b[off:], uint32(len(st)))
			off += 4 + copy(b[off+4:], st)
		}
		put8(uint64(a.ctx))
	default:
		copy(b, copyTrailer)
	}
}

// Read implements io.Reader.
func (e *copyEncoder) Read(p []byte) (int, error) {
	n := copy(p, e.pend)
	e.pend = e.pend[n:]
	if len(e.pend) > 0 {
		return n, nil
	}
	for {
		size := e.itemSize()
		if size == 0 {
			return n, io.EOF
		}
		if size <= len(p)-n {
			e.put(p[n : n+size])
			n += size
			e.pos++
			continue
		}
		if n > 0 || len(p) == 0 {
			return n, nil
		}
		// Does not fit even in an empty buffer: hand it out in pieces.
		e.spill = slices.Grow(e.spill[:0], size)[:size]
		e.put(e.spill)
		e.pos++
		n = copy(p, e.spill)
		e.pend = e.spill[n:]
		return n, nil
	}
}
