package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aml-project/aml/internal/core"
)

// CodeTampered is the code of a stored artifact whose bytes do not match
// their recorded sha256 (a chunk, a file or the tree).
const CodeTampered = core.CodeArtifactTampered

// File is one regular file of a tree.
type File struct {
	Path   string `json:"path"` // '/'-separated, relative to the tree root
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Tree is a directory's content identity.
type Tree struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"` // TreeHash(Files)
	Bytes  int64  `json:"bytes"`
	Files  []File `json:"files"` // sorted by Path
}

// Store puts and gets directories by key.
type Store interface {
	// Put records the regular files under dir as key's content and returns
	// their tree. Putting the same content under a key again is a no-op;
	// different content under an existing key is AML_CONFLICT (keys name
	// immutable things: a dataset, a model).
	Put(ctx context.Context, key, dir string) (Tree, error)
	// Fetch makes key's files available as a local directory and returns
	// its path. With want set, the tree hash must be want
	// (AML_ARTIFACT_TAMPERED otherwise). AML_NOT_FOUND for an unknown key.
	Fetch(ctx context.Context, key, want string) (string, error)
	// Stat returns key's tree without fetching it.
	Stat(ctx context.Context, key string) (Tree, error)
	// Delete removes key from the store (Local: its files; Postgres: its
	// tree row, not a local copy). Deleting an unknown key is not an error.
	Delete(ctx context.Context, key string) error
}

// TreeHash is the tree hash of files (sorted by Path): model.ArtifactHash's
// construction.
func TreeHash(files []File) string {
	h := sha256.New()
	for _, f := range files {
		io.WriteString(h, f.Path+"\n"+f.SHA256+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CheckKey validates a key: a clean, relative, '/'-separated path that
// stays inside the data directory.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || path.Clean(key) != key || key == "." ||
		key == ".." || strings.HasPrefix(key, "../") || strings.HasPrefix(key, ".tmp-") {
		return core.FieldErrorf(core.CodeInvalidArgument, "key", "artifact key %q must be a clean relative path inside the data directory", key)
	}
	return nil
}

// Scan walks dir and returns its tree (key left empty). Symbolic links and
// other non-regular files are refused with AML_INVALID_ARGUMENT, as
// model.ArtifactHash refuses them: the tree covers exactly what a reader
// reads.
func Scan(dir string) (Tree, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Tree{}, core.Wrap(core.CodeNotFound, err, "artifact directory")
		}
		return Tree{}, core.Wrap(core.CodeInternal, err, "artifact directory")
	}
	if !st.IsDir() {
		return Tree{}, core.Errorf(core.CodeInvalidArgument, "%s is not a directory", dir)
	}
	var t Tree
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch ty := e.Type(); {
		case ty&fs.ModeSymlink != 0:
			return core.FieldErrorf(core.CodeInvalidArgument, rel, "symbolic links are not stored as artifacts")
		case ty.IsDir():
			return nil
		case !ty.IsRegular():
			return core.FieldErrorf(core.CodeInvalidArgument, rel, "not a regular file")
		}
		sum, n, err := fileSHA(p)
		if err != nil {
			return err
		}
		t.Files = append(t.Files, File{Path: rel, SHA256: sum, Bytes: n})
		t.Bytes += n
		return nil
	})
	if err != nil {
		return Tree{}, core.Wrap(core.CodeInternal, err, "scan %s", dir)
	}
	sort.Slice(t.Files, func(i, j int) bool { return t.Files[i].Path < t.Files[j].Path })
	t.SHA256 = TreeHash(t.Files)
	return t, nil
}

func fileSHA(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func tampered(field, format string, args ...any) error {
	return core.FieldErrorf(CodeTampered, field, format, args...)
}

// IsTampered reports whether err is a failed verification.
func IsTampered(err error) bool { return core.CodeOf(err) == CodeTampered }

// Local is the data directory itself: a key's files live at Root/key.
type Local struct{ Root string }

var _ Store = Local{}

func (l Local) dir(key string) string { return filepath.Join(l.Root, filepath.FromSlash(key)) }

// Put hashes dir when it already is Root/key (the usual case: builders
// write in place), else copies it there (temp dir + rename).
func (l Local) Put(ctx context.Context, key, dir string) (Tree, error) {
	if err := CheckKey(key); err != nil {
		return Tree{}, err
	}
	src, err := Scan(dir)
	if err != nil {
		return Tree{}, err
	}
	src.Key = key
	dst := l.dir(key)
	same, err := sameDir(dir, dst)
	if err != nil || same {
		return src, err
	}
	if cur, err := Scan(dst); err == nil {
		if cur.SHA256 != src.SHA256 {
			return Tree{}, core.FieldErrorf(core.CodeConflict, "key", "artifact %s already exists with other content (tree %.12s, not %.12s)", key, cur.SHA256, src.SHA256)
		}
		return src, nil
	}
	if err := copyTree(dir, dst, src.Files); err != nil {
		return Tree{}, err
	}
	return src, nil
}

// Fetch returns Root/key, verified against want when want is set.
func (l Local) Fetch(ctx context.Context, key, want string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	dir := l.dir(key)
	if want == "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", core.FieldErrorf(core.CodeNotFound, "key", "artifact %s not found", key)
		}
		return dir, nil
	}
	t, err := Scan(dir)
	if err != nil {
		return "", err
	}
	if t.SHA256 != want {
		return "", tampered(key, "tree hash %.12s, expected %.12s", t.SHA256, want)
	}
	return dir, nil
}

// Stat scans Root/key.
func (l Local) Stat(ctx context.Context, key string) (Tree, error) {
	if err := CheckKey(key); err != nil {
		return Tree{}, err
	}
	t, err := Scan(l.dir(key))
	t.Key = key
	return t, err
}

// Delete removes Root/key.
func (l Local) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := os.RemoveAll(l.dir(key)); err != nil {
		return core.Wrap(core.CodeInternal, err, "delete artifact %s", key)
	}
	return nil
}

func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, core.Wrap(core.CodeInternal, err, "stat %s", a)
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, nil
	}
	return os.SameFile(sa, sb), nil
}

// copyTree copies files from src into a temp dir next to dst and renames
// it into place.
func copyTree(src, dst string, files []File) error {
	tmp, err := tempBeside(dst)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp) // best effort: the failure is what is returned
		}
	}()
	for _, f := range files {
		if err := copyFile(filepath.Join(src, filepath.FromSlash(f.Path)), filepath.Join(tmp, filepath.FromSlash(f.Path))); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return core.Wrap(core.CodeInternal, err, "rename artifact into place")
	}
	ok = true
	return nil
}

// tempBeside makes an empty temporary directory in dst's parent (same file
// system, so the final rename is atomic).
func tempBeside(dst string) (string, error) {
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", core.Wrap(core.CodeInternal, err, "create %s", parent)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-art-")
	if err != nil {
		return "", core.Wrap(core.CodeInternal, err, "create temp dir")
	}
	return tmp, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "open %s", from)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return core.Wrap(core.CodeInternal, err, "create dir")
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "create %s", to)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return core.Wrap(core.CodeInternal, err, "copy %s", from)
	}
	return core.Wrap(core.CodeInternal, out.Close(), "close %s", to)
}
