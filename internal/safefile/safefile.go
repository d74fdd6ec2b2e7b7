// Package safefile opens files whose names come from outside the server —
// a path in a request, a file a trainer process could replace — without
// following a final symbolic link where that matters, without blocking on
// a FIFO or a device (O_NONBLOCK, then fstat: regular files only) and with
// a size limit. Its errors name the file and why it was refused; they never
// quote the file's content.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aml-project/aml/internal/core"
)

// ErrNotRegular: the file is a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge: the file is larger than the limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the regular file path (a final symbolic link is followed:
// a person at the machine may name a link) of at most max bytes. A FIFO
// or device is refused without blocking.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	return readAll(f, path, max)
}

// ReadFileNoFollow is ReadFile refusing a final symbolic link.
func ReadFileNoFollow(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path, true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	return readAll(f, path, max)
}

func readAll(f *os.File, path string, max int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}

// Refusal maps a ReadFile error to an AML error of code (the caller's
// "bad input" code), not-found to AML_NOT_FOUND.
func Refusal(code string, err error, what string) error {
	if errors.Is(err, os.ErrNotExist) {
		return core.Wrap(core.CodeNotFound, err, "%s", what)
	}
	return core.Wrap(code, err, "%s", what)
}
