//go:build !unix

package safefile

import (
	"os"
	"path/filepath"
)

// OpenRegular opens path read-only after checking it is a regular file
// (without O_NOFOLLOW and O_NONBLOCK, a best effort on this system).
func OpenRegular(path string, noFollow bool) (*os.File, error) {
	return OpenFile(path, os.O_RDONLY, 0)
}

// OpenFile opens path if it is absent or a regular file.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return f, nil
}

// Dir is a directory; names are joined to its path on this system.
type Dir struct{ path string }

// OpenDir checks that path is a directory and not a link.
func OpenDir(path string) (*Dir, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return &Dir{path: path}, nil
}

func (d *Dir) Close() error { return nil }
func (d *Dir) Path() string { return d.path }
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return OpenFile(filepath.Join(d.path, name), flag, perm)
}
func (d *Dir) Lstat(name string) (os.FileInfo, error) {
	st, err := os.Lstat(filepath.Join(d.path, name))
	if err == nil && !st.Mode().IsRegular() {
		return nil, &os.PathError{Op: "lstat", Path: filepath.Join(d.path, name), Err: ErrNotRegular}
	}
	return st, err
}
func (d *Dir) Rename(o, n string) error {
	return os.Rename(filepath.Join(d.path, o), filepath.Join(d.path, n))
}
func (d *Dir) Remove(name string) error { return os.Remove(filepath.Join(d.path, name)) }
func (d *Dir) Mkdir(name string, p os.FileMode) error {
	return os.Mkdir(filepath.Join(d.path, name), p)
}
func (d *Dir) Names() ([]string, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return f.Readdirnames(-1)
}
