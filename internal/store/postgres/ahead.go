package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/jackc/pgx/v5/pgconn"
)

// A CSV ingest (internal/ingest.Stream) writes its batches with
// WriteAhead: a batch's append-only COPY then runs on the connection
// while the caller parses, and WriteAhead keys, orders and encodes, the
// next batch — work that Write does between two COPYs, while the server
// waits. The COPY's rows are encoded in full before WriteAhead returns
// (≈ 54 bytes a sample, in a buffer kept for the next batch), so the
// caller's samples are free again at once, as after Write.
//
// What a batch writes, and every error it can meet, are Write's; only the
// moment an error of the COPY is reported moves: to the next statement of
// the transaction — the next WriteAhead's check, Write, EnsureNode(s),
// GetNodes, EnsureRun — or the commit, which all wait for the COPY first
// (settle), and the transaction then fails with it. A batch that meets
// stored samples (the overlap check, made before its COPY starts, as in
// Write) takes the upsert path at once, synchronously; one whose COPY
// loses a race against a concurrent writer (unique violation or deadlock)
// is rolled back to its savepoint and upserted from the encoded rows, as
// Write upserts it from the samples.

// copyJob is one batch's COPY of WriteAhead.
type copyJob struct {
	buf   []byte  // the COPY data, binary format, columns of copySamples
	seq   []int32 // per row of buf: its sample's index in the batch
	stage []byte  // buf with seq, for the staging table (the fallback)
	done  chan struct{}
	err   error
	// broken: a COPY failed mid-stream and pgconn may still read buf.
	broken bool
}

// WriteAhead is Write, except that the batch's append-only COPY may still
// run when it returns (see above); samples are not referenced after it
// returns.
func (it *ingestTx) WriteAhead(samples []core.Sample) (core.WriteStats, error) {
	return it.write(samples, true)
}

// settle waits for the running COPY of WriteAhead, if any, and returns the
// first error any of them met.
func (it *ingestTx) settle() error {
	if j := it.ahead; j != nil {
		<-j.done
		it.ahead = nil
		if j.broken {
			it.b.broken = true // the scratch's encoder is not j's, but the connection is gone
		} else {
			it.spare = j
		}
		if j.err != nil && it.aheadErr == nil {
			it.aheadErr = j.err
		}
	}
	return it.aheadErr
}

// writeAhead is the end of WriteAhead, after write has keyed and ordered
// the batch (it.b): it encodes the rows, waits for the previous COPY,
// checks for stored samples and starts the COPY, or upserts the batch
// when stored samples lie in its range.
func (it *ingestTx) writeAhead(part string, partLo int64) (core.WriteStats, error) {
	st := core.WriteStats{}
	b := it.b
	j := it.spare
	it.spare = nil
	if j == nil {
		j = &copyJob{}
	}
	j.encode(b.rowData, b.order)
	if err := it.settle(); err != nil {
		return st, err
	}
	overlap, err := it.checkOverlap()
	if err != nil {
		return st, err
	}
	if overlap {
		it.spare = j
		if err := it.upsert(); err != nil {
			return st, err
		}
		st.Samples = len(b.rows)
		return st, nil
	}
	j.done, j.err, j.broken = make(chan struct{}), nil, false
	it.ahead = j
	go func() {
		defer close(j.done)
		done, err := it.copyAppend(func(sql string) error { return it.copyBytes(j, sql, j.buf) }, part, partLo)
		if err == nil && !done {
			j.stage = stagedRows(j.stage[:0], j.buf, j.seq)
			err = it.stageUpsert(func() error { return it.copyBytes(j, copyStage, j.stage) }, len(j.seq))
		}
		j.err = err
	}()
	st.Samples = len(b.rows)
	return st, nil
}

// encode writes the COPY data of the rows of order into j.buf, and their
// indices in the batch into j.seq.
func (j *copyJob) encode(d rowData, order []int32) {
	var e copyEncoder
	e.reset(d, order, false)
	j.buf = slices.Grow(j.buf[:0], len(copySignature)+len(order)*copyRowSize+len(copyTrailer)+64)
	for {
		if cap(j.buf)-len(j.buf) < 4096 {
			j.buf = slices.Grow(j.buf, cap(j.buf))
		}
		n, err := e.Read(j.buf[len(j.buf):cap(j.buf)])
		j.buf = j.buf[:len(j.buf)+n]
		if err == io.EOF {
			break
		}
	}
	j.seq = append(j.seq[:0], order...)
}

// copyRowSize is the size of a row without a state (NULL): the field
// count, four 8-byte fields and the NULL, each field with its length.
const copyRowSize = 2 + 4*(4+8) + 4

// copyBytes streams data with the COPY statement sql, as copyIn does the
// encoder's rows.
func (it *ingestTx) copyBytes(j *copyJob, sql string, data []byte) error {
	_, err := it.tx.Conn().PgConn().CopyFrom(it.ctx, bytes.NewReader(data), sql)
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && pe.Severity == "ERROR") {
		j.broken = true // see copyIn
	}
	return err
}

// stagedRows appends to dst the rows of data (COPY data of copySamples'
// columns, as encode writes it) with a first column seq[r] for row r: the
// staging table's columns, as copyIn writes them with seq.
func stagedRows(dst, data []byte, seq []int32) []byte {
	be := binary.BigEndian
	dst = append(dst, copySignature...)
	p := len(copySignature)
	for _, s := range seq {
		// node, ts, value: 3 × 12 bytes after the count; then the state
		// (length, -1 for NULL, and its bytes); then ctx.
		end := p + 2 + 3*12
		if l := int32(be.Uint32(data[end:])); l >= 0 {
			end += int(l)
		}
		end += 4 + 12
		dst = be.AppendUint16(dst, 6)
		dst = be.AppendUint32(dst, 8)
		dst = be.AppendUint64(dst, uint64(s))
		dst = append(dst, data[p+2:end]...)
		p = end
	}
	return append(dst, copyTrailer...)
}

// settledConn is the Conn of the transaction's keys (samples.Keys): each
// statement waits for a COPY of WriteAhead first.
type settledConn struct{ it *ingestTx }

func (c settledConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	if err := c.it.settle(); err != nil {
		return 0, err
	}
	return pgxConn{c.it.tx, c.it.s.sql}.Exec(ctx, q, args...)
}

func (c settledConn) QueryRow(ctx context.Context, q string, args ...any) sqldb.Row {
	if err := c.it.settle(); err != nil {
		return errRow{err}
	}
	return pgxConn{c.it.tx, c.it.s.sql}.QueryRow(ctx, q, args...)
}

// errRow is a row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
