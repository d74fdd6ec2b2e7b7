package extrun

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/safefile"
)

// rotLog is a size-capped, rotated log: NAME is the file being written,
// NAME.1 the previous one … NAME.keep the oldest. Files are cut at line
// boundaries once they would exceed max (a single line longer than max gets a
// file of its own). Up to (keep+1)·max everything is kept. Beyond, the log
// keeps its head — NAME.keep, the first file written, which holds the
// start-up output — and the newest keep files: the oldest of the middle
// files is dropped at each rotation and a line in the head file tells how
// many bytes were dropped after it. The log never degenerates to only a
// tail.
//
// A log from an earlier run in the same directory (a retried job) is moved
// to DIR/prev-N/ first.
//
// DIR lies in the trainer's job directory, which the trainer can change:
// every operation goes through the directory opened once (d, so renaming
// or replacing DIR changes nothing) and files are opened without following
// a link and without blocking on a FIFO, regular files only
// (internal/safefile); what the trainer planted there fails the log, which
// Close reports.
type rotLog struct {
	d         *safefile.Dir
	dir, name string
	max       int64
	keep      int
	f         *os.File
	size      int64
	segs      int // files: NAME plus NAME.1 … NAME.(segs-1)
	dropped   int64
	err       error // first write error
}

func openRotLog(dir, name string, max int64, keep int) (*rotLog, error) {
	if keep < 2 {
		keep = 2
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	d, err := safefile.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	l := &rotLog{d: d, dir: dir, name: name, max: max, keep: keep, segs: 1}
	if err := l.moveOld(); err != nil {
		_ = d.Close() // a directory opened read-only
		return nil, err
	}
	f, err := l.create(0)
	if err != nil {
		_ = d.Close() // a directory opened read-only
		return nil, err
	}
	l.f = f
	return l, nil
}

// name of file k: NAME, NAME.1, …
func (l *rotLog) nameOf(k int) string {
	if k == 0 {
		return l.name
	}
	return l.name + "." + strconv.Itoa(k)
}

// create truncates or creates file k.
func (l *rotLog) create(k int) (*os.File, error) {
	return l.d.OpenFile(l.nameOf(k), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
}

func (l *rotLog) path(k int) string {
	if k == 0 {
		return filepath.Join(l.dir, l.name)
	}
	return filepath.Join(l.dir, l.name+"."+strconv.Itoa(k))
}

// moveOld moves NAME and NAME.N of an earlier run to DIR/prev-K/.
func (l *rotLog) moveOld() error {
	names, err := l.d.Names()
	if err != nil {
		return err
	}
	var old []string
	for _, n := range names {
		if n == l.name {
			old = append(old, n)
		} else if s, ok := strings.CutPrefix(n, l.name+"."); ok {
			if _, err := strconv.Atoi(s); err == nil {
				old = append(old, n)
			}
		}
	}
	if len(old) == 0 {
		return nil
	}
	var dst string
	for k := 1; ; k++ {
		dst = "prev-" + strconv.Itoa(k)
		if err := l.d.Mkdir(dst, 0o700); err == nil {
			break
		} else if !os.IsExist(err) {
			return err
		}
	}
	for _, n := range old {
		if err := l.d.Rename(n, dst+"/"+n); err != nil {
			return err
		}
	}
	return nil
}

// WriteLine appends b and a newline, rotating first if needed.
func (l *rotLog) WriteLine(b []byte) {
	if l.f == nil {
		return
	}
	n := int64(len(b)) + 1
	if l.size > 0 && l.size+n > l.max {
		if err := l.rotate(); err != nil {
			l.fail(err)
			return
		}
	}
	buf := make([]byte, 0, n)
	buf = append(append(buf, b...), '\n')
	w, err := l.f.Write(buf)
	l.size += int64(w)
	if err != nil {
		l.fail(err)
	}
}

func (l *rotLog) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

func (l *rotLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	l.f = nil
	if l.segs == l.keep+1 {
		victim := l.nameOf(l.keep - 1)
		var n int64
		if st, err := l.d.Lstat(victim); err == nil {
			n = st.Size()
		}
		if err := l.d.Remove(victim); err != nil {
			return err
		}
		l.dropped += n
		if h, err := l.d.OpenFile(l.nameOf(l.keep), os.O_WRONLY|os.O_APPEND, 0); err == nil {
			_, werr := fmt.Fprintf(h, "[aml-runner] log rotation dropped %d bytes here (%d dropped so far); the newest output is in %s.%d … %s\n",
				n, l.dropped, l.name, l.keep-1, l.name)
			if cerr := h.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				l.fail(werr) // reported by Close; the rotation goes on
			}
		} else {
			l.fail(err) // a link or FIFO in its place: reported by Close
		}
		for k := l.keep - 2; k >= 1; k-- {
			if err := l.d.Rename(l.nameOf(k), l.nameOf(k+1)); err != nil {
				return err
			}
		}
	} else {
		for k := l.segs - 1; k >= 1; k-- {
			if err := l.d.Rename(l.nameOf(k), l.nameOf(k+1)); err != nil {
				return err
			}
		}
		l.segs++
	}
	if err := l.d.Rename(l.nameOf(0), l.nameOf(1)); err != nil {
		return err
	}
	f, err := l.create(0)
	if err != nil {
		return err
	}
	l.f, l.size = f, 0
	return nil
}

// Close closes the current file and returns the first error met. The
// directory stays open for tail.
func (l *rotLog) Close() error {
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			l.fail(err)
		}
		l.f = nil
	}
	return l.err
}

// release closes the directory (after Close and tail).
func (l *rotLog) release() {
	if l.d != nil {
		_ = l.d.Close() // a directory opened read-only
		l.d = nil
	}
}

// Files returns the log files, oldest first.
func (l *rotLog) Files() []string {
	var out []string
	for k := l.segs - 1; k >= 0; k-- {
		out = append(out, l.path(k))
	}
	return out
}

// Dropped is how many bytes rotation dropped.
func (l *rotLog) Dropped() int64 { return l.dropped }

// tail returns up to n bytes of the end of the log.
func (l *rotLog) tail(n int64) string {
	var parts []string
	for k := 0; k < l.segs && n > 0 && l.d != nil; k++ {
		f, err := l.d.OpenFile(l.nameOf(k), os.O_RDONLY, 0)
		if err != nil {
			break
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			break
		}
		off := max(0, st.Size()-n)
		b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
		f.Close()
		parts = append([]string{string(b)}, parts...)
		n -= int64(len(b))
	}
	return strings.Join(parts, "")
}
