package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxRecordBytes bounds one logical CSV record (a physical line, or several
// when a quoted cell spans lines). A longer record is a corrupt file, not a
// bad row: the whole file fails.
const maxRecordBytes = 16 << 20

var errRecordTooLong = errors.New("record longer than 16 MiB")

// quoteError is a malformed quoted cell in one record. The record has been
// consumed completely; the caller reports it as a bad row.
type quoteError struct {
	col int // 1-based
	msg string
}

// recordReader splits a byte stream into CSV records (RFC 4180) without
// allocating per record or per cell. Cells are returned trimmed of spaces and
// tabs unless quoted; quoted cells keep their content exactly, with "" turned
// into " and line breaks inside quotes kept as \n. Blank lines (only spaces
// and tabs) between records are skipped. A record's line is the physical line
// it starts on.
//
// The slices returned by next are valid until the following call.
type recordReader struct {
	// keepBlank returns blank lines as records of one empty cell (with
	// blank set) instead of skipping them: in a one-column file a blank line
	// is an empty cell.
	keepBlank bool
	blank     bool // the last record was a blank line

	br     *bufio.Reader
	line   int    // physical lines read so far
	long   []byte // assembles a line longer than the bufio buffer
	out    []byte // unquoted cell contents of a record that has quotes
	ends   []int  // end offsets of cells in out
	fields [][]byte
	sep    byte // the cell separator (',' unless CSVOptions.Delimiter)
}

func newRecordReader(r io.Reader, sep byte) *recordReader {
	return &recordReader{br: bufio.NewReaderSize(r, 64<<10), fields: make([][]byte, 0, 16), sep: sep}
}

// skipPrefix discards p if the stream starts with it and reports whether it did.
func (r *recordReader) skipPrefix(p string) bool {
	b, _ := r.br.Peek(len(p))
	if string(b) == p {
		_, _ = r.br.Discard(len(p))
		return true
	}
	return false
}

// readLine returns the next physical line without its "\n" or "\r\n".
// At the end of input it returns io.EOF and no line.
func (r *recordReader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
			if len(r.long) > maxRecordBytes {
				return nil, errRecordTooLong
			}
		}
		line = r.long
	}
	if err != nil {
		if err != io.EOF {
			return nil, err
		}
		if len(line) == 0 {
			return nil, io.EOF
		}
	}
	r.line++
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
		if n > 0 && line[n-1] == '\r' {
			n--
		}
	}
	return line[:n], nil
}

// next returns the next record and the line it starts on. err is io.EOF at
// the end of input, a *quoteError for a malformed record (consumed; reading
// may continue), or a fatal error.
func (r *recordReader) next() (fields [][]byte, line int, err error) {
	var b []byte
	for {
		b, err = r.readLine()
		if err != nil {
			return nil, r.line + 1, err // the line that could not be read
		}
		if !isBlank(b) {
			break
		}
		if r.keepBlank {
			r.blank = true
			return r.split(b[:0]), r.line, nil
		}
	}
	r.blank = false
	line = r.line
	if bytes.IndexByte(b, '"') < 0 {
		return r.split(b), line, nil
	}
	fields, err = r.parseQuoted(b)
	return fields, line, err
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// split is the fast path for a line without quotes.
func (r *recordReader) split(b []byte) [][]byte {
	f := r.fields[:0]
	for {
		i := bytes.IndexByte(b, r.sep)
		if i < 0 {
			f = append(f, trimSpace(b))
			break
		}
		f = append(f, trimSpace(b[:i]))
		b = b[i+1:]
	}
	r.fields = f
	return f
}

// parseQuoted parses a record containing at least one quote, reading further
// lines while a quoted cell is open.
func (r *recordReader) parseQuoted(line []byte) ([][]byte, error) {
	r.out = r.out[:0]
	r.ends = r.ends[:0]
	var qerr *quoteError
	bad := func(msg string) {
		if qerr == nil {
			qerr = &quoteError{col: len(r.ends) + 1, msg: msg}
		}
	}
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i < len(line) && line[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(line[i:], '"')
				if j < 0 {
					r.out = append(r.out, line[i:]...)
					r.out = append(r.out, '\n')
					if len(r.out) > maxRecordBytes {
						return nil, errRecordTooLong
					}
					next, err := r.readLine()
					if err == io.EOF {
						// Drop the '\n' added for the missing next line.
						r.out = r.out[:len(r.out)-1]
						bad("quoted cell not closed before the end of the file")
						r.ends = append(r.ends, len(r.out))
						return r.cells(), qerr
					}
					if err != nil {
						return nil, err
					}
					line, i = next, 0
					continue
				}
				r.out = append(r.out, line[i:i+j]...)
				i += j + 1
				if i < len(line) && line[i] == '"' {
					r.out = append(r.out, '"')
					i++
					continue
				}
				break
			}
			for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
				i++
			}
			if i < len(line) && line[i] != r.sep {
				bad("text after the closing quote of a quoted cell")
				j := bytes.IndexByte(line[i:], r.sep)
				if j < 0 {
					i = len(line)
				} else {
					i += j
				}
			}
		} else {
			end := len(line)
			if j := bytes.IndexByte(line[i:], r.sep); j >= 0 {
				end = i + j
			}
			cell := trimSpace(line[i:end])
			if bytes.IndexByte(cell, '"') >= 0 {
				bad(`quote inside an unquoted cell (quote the whole cell and double inner quotes: "a""b")`)
			}
			r.out = append(r.out, cell...)
			i = end
		}
		r.ends = append(r.ends, len(r.out))
		if i < len(line) && line[i] == r.sep {
			i++
			continue
		}
		break
	}
	if qerr != nil {
		return r.cells(), qerr
	}
	return r.cells(), nil
}

func (r *recordReader) cells() [][]byte {
	f := r.fields[:0]
	start := 0
	for _, e := range r.ends {
		f = append(f, r.out[start:e:e])
		start = e
	}
	r.fields = f
	return f
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func (e *quoteError) Error() string { return e.msg }
