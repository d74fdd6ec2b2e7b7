//go:build unix

package safefile

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenRegular opens path read-only: O_NONBLOCK (a FIFO without a writer
// or a device cannot block the open), then fstat refuses anything but a
// regular file; with noFollow a final symbolic link is refused
// (O_NOFOLLOW). The returned file is in blocking mode.
func OpenRegular(path string, noFollow bool) (*os.File, error) {
	flag := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if noFollow {
		flag |= unix.O_NOFOLLOW
	}
	return openChecked(path, func() (int, error) { return unix.Open(path, flag, 0) })
}

// OpenFile opens path with flag (os.O_* flags; O_NOFOLLOW, O_NONBLOCK and
// O_CLOEXEC are added) and perm, and refuses anything but a regular file:
// a log the server writes into a directory a trainer can change.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	fl := flag | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	return openChecked(path, func() (int, error) { return unix.Open(path, fl, uint32(perm.Perm())) })
}

// Dir is an open directory; names are opened relative to it, so that
// renaming or replacing the directory's path afterwards changes nothing.
type Dir struct {
	f    *os.File
	path string
}

// OpenDir opens the directory path, refusing a final symbolic link.
func OpenDir(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Path is the directory's path when it was opened.
func (d *Dir) Path() string { return d.path }

func (d *Dir) fd() int { return int(d.f.Fd()) }

// OpenFile opens name (one path element) in d with flag and perm, never
// following a symbolic link, never blocking on a FIFO, regular files only.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	fl := flag | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	p := d.path + "/" + name
	return openChecked(p, func() (int, error) { return unix.Openat(d.fd(), name, fl, uint32(perm.Perm())) })
}

// Lstat is fstatat(name, AT_SYMLINK_NOFOLLOW).
func (d *Dir) Lstat(name string) (os.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: d.path + "/" + name, Err: err}
	}
	// Open it (without following) for an os.FileInfo only when regular.
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &os.PathError{Op: "lstat", Path: d.path + "/" + name, Err: ErrNotRegular}
	}
	f, err := d.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	return f.Stat()
}

// Rename renames old to new inside d.
func (d *Dir) Rename(oldName, newName string) error {
	if err := unix.Renameat(d.fd(), oldName, d.fd(), newName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.path + "/" + oldName, New: d.path + "/" + newName, Err: err}
	}
	return nil
}

// Remove removes the file name (not a directory) from d.
func (d *Dir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd(), name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: d.path + "/" + name, Err: err}
	}
	return nil
}

// Mkdir creates the directory name in d.
func (d *Dir) Mkdir(name string, perm os.FileMode) error {
	if err := unix.Mkdirat(d.fd(), name, uint32(perm.Perm())); err != nil {
		return &os.PathError{Op: "mkdir", Path: d.path + "/" + name, Err: err}
	}
	return nil
}

// Names lists the entries of d.
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer func() { _ = f.Close() }() // read-only
	return f.Readdirnames(-1)
}

func openChecked(path string, open func() (int, error)) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = open()
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		if err == unix.ELOOP {
			return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("a symbolic link is not accepted (%w)", err)}
		}
		if err == unix.ENXIO {
			// O_WRONLY|O_NONBLOCK on a FIFO without a reader.
			return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	// Regular files never block; clear O_NONBLOCK for plain reads and writes.
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
