package ingest

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// ParseCSV streams the CSV in r and calls emit with batches of samples. The
// batch slice is reused after emit returns, so emit must copy what it keeps.
// name is the file name used in reports and error positions.
//
// A file either parses completely or ParseCSV returns an error; with
// opts.SkipBad, bad rows are skipped and counted instead. Batches already
// emitted before an error are not taken back: callers that need all or
// nothing (IngestFiles) emit into a transaction they roll back.
//
// Errors about the data are *core.Error with code AML_INGEST_INVALID and
// Field "file:line:col" when a position is known; invalid options are
// AML_INVALID_ARGUMENT; an error returned by emit is returned unchanged.
// The report is filled in as far as parsing got, also on error.
func ParseCSV(r io.Reader, name string, opts CSVOptions, emit func([]core.Sample) error) (FileReport, error) {
	p := &parser{name: name, opts: opts, emit: emit}
	p.rep = FileReport{File: name, Run: opts.Run}
	err := p.run(r)
	return p.rep, err
}

type parser struct {
	name string
	opts CSVOptions
	emit func([]core.Sample) error
	// handoff, when set, replaces emit: it takes the batch slice over and
	// returns the (empty) slice to fill next, so no batch is copied.
	handoff func([]core.Sample) ([]core.Sample, error)
	rep     FileReport

	rr     *recordReader
	header []string
	// trailingEmpty: the header ends with a delimiter (an unnamed last
	// column, empty on every row).
	trailingEmpty bool
	long          bool
	tp            timeParser
	period        int64 // µs; 0 = time column
	k             int64 // index of the current data record, skipped ones included

	timeIdx  int
	nodeCols []nodeCol // wide
	nodeIdx  int       // long
	valueIdx int       // long
	stateIdx int       // long, -1 if absent

	longNodes map[string]*longNode
	longOrder []string // long nodes in order of first sample
	newCols   []int    // wide columns that got their first sample in this row
	states    map[string]string

	buf   []core.Sample
	batch int // samples that close the current batch
	// ramp, when > 0 (parseAhead), is the first batch's size; each
	// next batch is twice the last, up to full.
	ramp  int
	full  int
	anyTs bool
	// wideLast is the time of the last wide row with a sample (wideAny:
	// there is one): a row at the same time would overwrite its samples.
	wideLast int64
	wideAny  bool
}

type nodeCol struct {
	idx  int
	name string
	has  bool // received a sample
}

type longNode struct {
	name string
	has  bool
	last int64 // time of the node's last sample (when has)
}

// badRow is one bad data row: reason is a Reason* constant, col 1-based.
type badRow struct {
	reason string
	col    int
	detail string
}

func (p *parser) run(r io.Reader) error {
	unit, period, err := p.opts.validate()
	if err != nil {
		return err
	}
	sep, _ := p.opts.separator() // checked by validate
	loc, _ := p.opts.location()  // checked by validate
	p.tp = timeParser{unit: unit, loc: loc, comma: p.opts.DecimalComma}
	p.period = period
	p.batch = p.opts.BatchSize
	if p.batch == 0 {
		p.batch = DefaultBatchSize
	}
	p.full = p.batch
	if p.ramp > 0 && p.ramp < p.batch {
		p.batch = p.ramp
	}

	p.rr = newRecordReader(r, sep)
	if b, _ := p.rr.br.Peek(2); len(b) == 2 && (b[0] == 0xff && b[1] == 0xfe || b[0] == 0xfe && b[1] == 0xff) {
		return core.FieldErrorf(core.CodeIngestInvalid, p.name, "%s: file is UTF-16 encoded; save it as UTF-8", p.name)
	}
	p.rr.skipPrefix("\xef\xbb\xbf")

	fields, line, err := p.rr.next()
	if err == io.EOF {
		return core.FieldErrorf(core.CodeIngestInvalid, p.name, "%s: empty file (no header)", p.name)
	}
	if err != nil {
		return p.fatal(err, line)
	}
	if err := p.readHeader(fields, line); err != nil {
		return err
	}

	// In a one-column file a blank line is a row with an empty cell; blank
	// lines at the end of the file are not rows.
	p.rr.keepBlank = len(p.header) == 1
	pendingBlank := 0
	for {
		fields, line, err := p.rr.next()
		if err == io.EOF {
			break
		}
		if p.rr.blank {
			pendingBlank++
			continue
		}
		for ; pendingBlank > 0; pendingBlank-- {
			if bad := p.wideRow([][]byte{nil}); bad != nil {
				return core.Errorf(core.CodeInternal, "blank row: %s", bad.detail)
			}
			p.k++
			p.rep.Rows++
		}
		var bad *badRow
		switch {
		case err != nil:
			qe, ok := err.(*quoteError)
			if !ok {
				return p.fatal(err, line)
			}
			bad = &badRow{ReasonBadQuote, qe.col, qe.msg}
		case p.long:
			bad = p.longRow(fields)
		default:
			bad = p.wideRow(fields)
		}
		p.k++
		if bad != nil {
			if err := p.skip(bad, line); err != nil {
				return err
			}
			continue
		}
		p.rep.Rows++
		if len(p.buf) >= p.batch {
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
	if p.rep.Rows == 0 {
		if p.rep.Skipped > 0 {
			return core.FieldErrorf(core.CodeIngestInvalid, p.name, "%s: no valid data rows (%d bad rows skipped)", p.name, p.rep.Skipped)
		}
		return core.FieldErrorf(core.CodeIngestInvalid, p.name, "%s: no data rows after the header", p.name)
	}
	if err := p.flush(); err != nil {
		return err
	}
	p.rep.Nodes = []string{}
	if p.long {
		p.rep.Nodes = append(p.rep.Nodes, p.longOrder...)
	} else {
		for _, c := range p.nodeCols {
			if c.has {
				p.rep.Nodes = append(p.rep.Nodes, c.name)
			}
		}
	}
	return nil
}

// firstCap is the capacity of the first batch buffer for rows of up to
// perRow samples: small for a plain parse (a short file stays small),
// the whole first batch when batches are handed off (parseAhead), since
// every later buffer is at least that size anyway and growing the first
// one by appending would copy it over and over.
func (p *parser) firstCap(perRow int) int {
	if p.handoff != nil {
		return p.batch + perRow + 1
	}
	return min(p.batch+perRow, 1024)
}

// nextBatch is the size of the batch after the current one: twice the
// current while ramping up, at most the full batch size.
func (p *parser) nextBatch() int {
	return min(2*p.batch, max(p.full, p.batch))
}

func (p *parser) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	if p.handoff != nil {
		next, err := p.handoff(p.buf)
		if err != nil {
			return err
		}
		p.buf = next[:0]
		p.batch = p.nextBatch()
		return nil
	}
	if err := p.emit(p.buf); err != nil {
		return err
	}
	p.buf = p.buf[:0]
	return nil
}

func (p *parser) fatal(err error, line int) error {
	if errors.Is(err, errRecordTooLong) {
		return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", p.name, line),
			"%s:%d: record longer than 16 MiB (is this a CSV file?)", p.name, line)
	}
	var qe *quoteError
	if errors.As(err, &qe) {
		return p.headerErr(line, qe.col, "header: %s", qe.msg)
	}
	e := core.Errorf(core.CodeInternal, "read %s: %v", p.name, err)
	e.Err = err
	return e
}

func (p *parser) headerErr(line, col int, format string, args ...any) error {
	return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d:%d", p.name, line, col),
		"%s:%d: %s (column %d)", p.name, line, fmt.Sprintf(format, args...), col)
}

// readHeader validates the header and decides the shape.
func (p *parser) readHeader(fields [][]byte, line int) error {
	p.header = make([]string, len(fields))
	seen := make(map[string]int, len(fields))
	for i, f := range fields {
		name := string(trimSpace(f))
		if name == "" && i == len(fields)-1 && i > 0 {
			// A trailing delimiter on every line (MATLAB, many loggers):
			// an unnamed last column that must stay empty.
			p.trailingEmpty = true
			continue
		}
		if name == "" {
			return p.headerErr(line, i+1, "empty column name in the header")
		}
		if err := core.CheckNodeID("column", name); err != nil {
			return p.headerErr(line, i+1, "%s", core.MessageOf(err))
		}
		if j, dup := seen[name]; dup {
			return p.headerErr(line, i+1, "duplicate column %q (also column %d)", name, j+1)
		}
		seen[name] = i
		p.header[i] = name
	}

	// Columns taking part: all but the ignored ones.
	var active []int
	for i, h := range p.header {
		if p.trailingEmpty && i == len(p.header)-1 {
			continue
		}
		ignored := false
		for _, ig := range p.opts.IgnoreCols {
			if strings.EqualFold(strings.TrimSpace(ig), h) {
				ignored = true
				break
			}
		}
		if !ignored {
			active = append(active, i)
		}
	}

	timeCol := strings.TrimSpace(p.opts.TimeCol)
	p.timeIdx = -1
	if timeCol != "" {
		for _, i := range active {
			if p.header[i] == timeCol {
				p.timeIdx = i
			}
		}
		if p.timeIdx < 0 {
			n := 0
			for _, i := range active {
				if strings.EqualFold(p.header[i], timeCol) {
					p.timeIdx = i
					n++
				}
			}
			if n > 1 {
				return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", p.name, line),
					"%s:%d: time column %q matches several columns (case-insensitive); spell it exactly", p.name, line, timeCol)
			}
		}
		if p.timeIdx < 0 {
			why := "not in the header (" + strings.Join(p.header, ",") + ")"
			for _, h := range p.header {
				if strings.EqualFold(h, timeCol) {
					why = "also in the ignored columns"
				}
			}
			return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", p.name, line),
				"%s:%d: time column %q %s", p.name, line, timeCol, why)
		}
	} else {
		var cands []string
		for _, i := range active {
			if isTimeLike(p.header[i]) {
				if p.timeIdx < 0 {
					p.timeIdx = i
				}
				cands = append(cands, p.header[i])
			}
		}
		if len(cands) > 1 {
			return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", p.name, line),
				"%s:%d: several time-like columns (%s): name the time column, ignore the others",
				p.name, line, strings.Join(cands, ", "))
		}
		if p.timeIdx >= 0 && p.period != 0 {
			return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d:%d", p.name, line, p.timeIdx+1),
				"%s:%d: a period is set but the file has the time column %q (column %d): drop the period or ignore the column",
				p.name, line, p.header[p.timeIdx], p.timeIdx+1)
		}
	}
	if p.timeIdx >= 0 && p.tp.unit == unitAuto {
		p.tp.unit = unitFromName(p.header[p.timeIdx])
	}

	// Long: the active columns are exactly time,node,value[,state].
	if p.timeIdx >= 0 && (len(active) == 3 || len(active) == 4) && active[0] == p.timeIdx &&
		strings.EqualFold(p.header[active[1]], "node") && strings.EqualFold(p.header[active[2]], "value") &&
		(len(active) == 3 || strings.EqualFold(p.header[active[3]], "state")) {
		p.long = true
		p.rep.Shape = "long"
		p.nodeIdx, p.valueIdx, p.stateIdx = active[1], active[2], -1
		if len(active) == 4 {
			p.stateIdx = active[3]
		}
		p.longNodes = make(map[string]*longNode)
		p.states = map[string]string{core.StateOK: core.StateOK}
		p.buf = make([]core.Sample, 0, p.firstCap(1))
		return nil
	}

	p.rep.Shape = "wide"
	if p.timeIdx < 0 && p.period == 0 {
		hint := ""
		if len(p.header) == 1 && strings.ContainsAny(p.header[0], ";\t|") {
			hint = " (the header has one column: the delimiter must be a comma)"
		}
		return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", p.name, line),
			"%s:%d: no time column (%s)%s: name it with the time column option or give a period",
			p.name, line, strings.Join(timeLikeNames, ", "), hint)
	}
	for _, i := range active {
		if i != p.timeIdx {
			p.nodeCols = append(p.nodeCols, nodeCol{idx: i, name: p.header[i]})
		}
	}
	if len(p.nodeCols) == 0 {
		return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", p.name, line),
			"%s:%d: no value columns: the header has only the time column or ignored columns", p.name, line)
	}
	p.buf = make([]core.Sample, 0, p.firstCap(len(p.nodeCols)))
	return nil
}

// rowTime returns the time of the current data row.
func (p *parser) rowTime(fields [][]byte) (int64, *badRow) {
	if p.timeIdx < 0 {
		return p.opts.StartMs*1000 + p.k*p.period, nil
	}
	cell := trimSpace(fields[p.timeIdx])
	ts, ok := p.tp.parse(cell)
	if !ok && p.tp.bad != "" {
		return 0, &badRow{ReasonBadTime, p.timeIdx + 1, fmt.Sprintf("%s %s", core.Quote(string(cell)), p.tp.bad)}
	}
	if !ok {
		return 0, &badRow{ReasonBadTime, p.timeIdx + 1, fmt.Sprintf("%s is not %s", core.Quote(string(cell)), p.tp.want())}
	}
	ts += p.opts.TimeOffsetMs * 1000
	if err := core.CheckTsUs("time", ts); err != nil {
		return 0, &badRow{ReasonBadTime, p.timeIdx + 1, core.MessageOf(err)}
	}
	return ts, nil
}

func (p *parser) columnCount(got int) *badRow {
	col := got + 1
	if got > len(p.header) {
		col = len(p.header) + 1
	}
	return &badRow{ReasonColumnCount, col, fmt.Sprintf("%d cells, the header has %d", got, len(p.header))}
}

// trailingCell refuses a value under the unnamed trailing column.
func (p *parser) trailingCell(fields [][]byte) *badRow {
	if p.trailingEmpty && len(trimSpace(fields[len(fields)-1])) > 0 {
		return &badRow{ReasonColumnCount, len(fields), fmt.Sprintf("%s under the unnamed last column (the header ends with a delimiter)", core.Quote(string(trimSpace(fields[len(fields)-1]))))}
	}
	return nil
}

func (p *parser) wideRow(fields [][]byte) *badRow {
	if len(fields) != len(p.header) {
		return p.columnCount(len(fields))
	}
	if bad := p.trailingCell(fields); bad != nil {
		return bad
	}
	ts, bad := p.rowTime(fields)
	if bad != nil {
		return bad
	}
	if p.wideAny && ts == p.wideLast {
		return &badRow{ReasonDupTime, p.timeIdx + 1, fmt.Sprintf("time %s repeats the previous row's (its samples would overwrite those)", fmtUs(ts))}
	}
	mark := len(p.buf)
	missing := 0
	newCols := p.newCols[:0]
	o := &p.opts
	for i := range p.nodeCols {
		c := &p.nodeCols[i]
		v, st := p.value(fields[c.idx])
		switch st {
		case valMissing:
			missing++
			continue
		case valBad:
			p.buf = p.buf[:mark]
			for _, j := range newCols {
				p.nodeCols[j].has = false
			}
			return &badRow{ReasonBadValue, c.idx + 1, fmt.Sprintf("%s is not a finite number", core.Quote(string(trimSpace(fields[c.idx]))))}
		}
		p.buf = append(p.buf, core.Sample{Node: c.name, TsUs: ts, Value: v, State: core.StateOK,
			Line: o.Line, Product: o.Product, Recipe: o.Recipe, Run: o.Run})
		if !c.has {
			c.has = true
			newCols = append(newCols, i)
		}
	}
	p.newCols = newCols
	p.rep.Missing += missing
	if n := len(p.buf) - mark; n > 0 {
		p.rep.Samples += n
		p.seeTs(ts)
		p.wideLast, p.wideAny = ts, true
	}
	return nil
}

func (p *parser) longRow(fields [][]byte) *badRow {
	if len(fields) != len(p.header) {
		return p.columnCount(len(fields))
	}
	if bad := p.trailingCell(fields); bad != nil {
		return bad
	}
	ts, bad := p.rowTime(fields)
	if bad != nil {
		return bad
	}
	nb := trimSpace(fields[p.nodeIdx])
	if len(nb) == 0 {
		return &badRow{ReasonEmptyNode, p.nodeIdx + 1, "empty node name"}
	}
	node := p.longNodes[string(nb)]
	if node == nil {
		name := string(nb)
		if err := core.CheckNodeID("node", name); err != nil {
			return &badRow{ReasonBadNode, p.nodeIdx + 1, core.MessageOf(err)}
		}
		node = &longNode{name: name}
		p.longNodes[name] = node
	}
	v, st := p.value(fields[p.valueIdx])
	switch st {
	case valMissing:
		p.rep.Missing++
		return nil
	case valBad:
		return &badRow{ReasonBadValue, p.valueIdx + 1, fmt.Sprintf("%s is not a finite number", core.Quote(string(trimSpace(fields[p.valueIdx]))))}
	}
	state := core.StateOK
	if p.stateIdx >= 0 {
		sb := trimSpace(fields[p.stateIdx])
		if len(sb) > 0 {
			s, ok := p.states[string(sb)]
			if !ok {
				var err error
				if s, err = core.CheckState("state", string(sb)); err != nil {
					return &badRow{ReasonBadState, p.stateIdx + 1, core.MessageOf(err)}
				}
				p.states[string(sb)] = s
			}
			state = s
		}
	}
	if node.has && ts == node.last {
		return &badRow{ReasonDupTime, p.timeIdx + 1, fmt.Sprintf("node %s has a sample at %s already (it would be overwritten)", core.Quote(node.name), fmtUs(ts))}
	}
	o := &p.opts
	p.buf = append(p.buf, core.Sample{Node: node.name, TsUs: ts, Value: v, State: state,
		Line: o.Line, Product: o.Product, Recipe: o.Recipe, Run: o.Run})
	if !node.has {
		node.has = true
		p.longOrder = append(p.longOrder, node.name)
	}
	node.last = ts
	p.rep.Samples++
	p.seeTs(ts)
	return nil
}

// fmtUs writes an epoch µs time for a message (RFC 3339, µs when needed).
func fmtUs(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.999999Z07:00")
}

// seeTs widens the report's time span (kept in epoch ms) by the sample time
// us.
func (p *parser) seeTs(us int64) {
	ts := core.UsToMs(us)
	if !p.anyTs {
		p.rep.FirstTs, p.rep.LastTs, p.anyTs = ts, ts, true
		return
	}
	if ts < p.rep.FirstTs {
		p.rep.FirstTs = ts
	}
	if ts > p.rep.LastTs {
		p.rep.LastTs = ts
	}
}

// skip records a bad row, or fails the file without SkipBad.
func (p *parser) skip(b *badRow, line int) error {
	col := fmt.Sprintf("column %d", b.col)
	if b.col-1 < len(p.header) {
		col += fmt.Sprintf(" %q", p.header[b.col-1])
	}
	msg := fmt.Sprintf("%s:%d: %s: %s (%s)", p.name, line, b.reason, b.detail, col)
	if !p.opts.SkipBad {
		return core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d:%d", p.name, line, b.col), "%s", msg)
	}
	p.rep.Skipped++
	if p.rep.SkipReasons == nil {
		p.rep.SkipReasons = make(map[string]int)
	}
	p.rep.SkipReasons[b.reason]++
	if len(p.rep.FirstSkipped) < 5 {
		p.rep.FirstSkipped = append(p.rep.FirstSkipped, msg)
	}
	return nil
}

const (
	valOK = iota
	valMissing
	valBad
)

// value is parseValue, reading a decimal comma as a point when the file
// has one (CSVOptions.DecimalComma).
func (p *parser) value(b []byte) (float64, int) {
	if p.opts.DecimalComma {
		b = p.tp.dotted(b)
	}
	return parseValue(b)
}

// parseValue parses one value cell: empty, NaN, NA or null (any case) is
// missing; a finite plain decimal number is a value; anything else is bad.
func parseValue(b []byte) (float64, int) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, valMissing
	}
	if c := b[0] | 0x20; c == 'n' && isMissingWord(b) {
		return 0, valMissing
	}
	v, ok := parseDecimal(b)
	if !ok {
		return 0, valBad
	}
	return v, valOK
}

func isMissingWord(b []byte) bool {
	switch len(b) {
	case 2:
		return b[0]|0x20 == 'n' && b[1]|0x20 == 'a'
	case 3:
		return b[0]|0x20 == 'n' && b[1]|0x20 == 'a' && b[2]|0x20 == 'n'
	case 4:
		return b[0]|0x20 == 'n' && b[1]|0x20 == 'u' && b[2]|0x20 == 'l' && b[3]|0x20 == 'l'
	}
	return false
}
