package dataset

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/aml-project/aml/internal/core"
)

// writeBuf is each array file's write buffer: seven files are open at once
// during a build, so this is held seven times (bench/dataset.sh measures
// the build's peak memory).
const writeBuf = 256 << 10

// arrayFile writes a little-endian array file while hashing it, so no
// second pass over the bytes is needed.
type arrayFile struct {
	name  string
	dtype string
	shape []int
	f     *os.File
	bw    *bufio.Writer
	h     hash.Hash
	n     int64
	buf   [8]byte
}

func createArray(dir, name, dtype string, shape []int) (*arrayFile, error) {
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", name)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", name)
	}
	a := &arrayFile{name: name, dtype: dtype, shape: shape, f: f, h: sha256.New()}
	a.bw = bufio.NewWriterSize(io.MultiWriter(f, a.h), writeBuf)
	return a, nil
}

func (a *arrayFile) f32(v float64) {
	binary.LittleEndian.PutUint32(a.buf[:4], math.Float32bits(float32(v)))
	a.bw.Write(a.buf[:4])
	a.n += 4
}

// write appends bytes already encoded as the file's dtype.
func (a *arrayFile) write(b []byte) {
	a.bw.Write(b)
	a.n += int64(len(b))
}

func (a *arrayFile) f64(v float64) {
	binary.LittleEndian.PutUint64(a.buf[:8], math.Float64bits(v))
	a.bw.Write(a.buf[:8])
	a.n += 8
}

// close flushes, syncs and returns the artifact entry. A short write is an
// error: the element count must match the declared shape.
func (a *arrayFile) close() (Artifact, error) {
	if err := a.bw.Flush(); err != nil {
		a.f.Close()
		return Artifact{}, core.Wrap(core.CodeInternal, err, "write %s", a.name)
	}
	if err := a.f.Sync(); err != nil {
		a.f.Close()
		return Artifact{}, core.Wrap(core.CodeInternal, err, "sync %s", a.name)
	}
	if err := a.f.Close(); err != nil {
		return Artifact{}, core.Wrap(core.CodeInternal, err, "close %s", a.name)
	}
	want := int64(1)
	for _, d := range a.shape {
		want *= int64(d)
	}
	size := int64(4)
	if a.dtype == "<f8" {
		size = 8
	}
	if want*size != a.n {
		return Artifact{}, core.Errorf(core.CodeInternal, "%s: wrote %d bytes, shape %v needs %d", a.name, a.n, a.shape, want*size)
	}
	return Artifact{Name: a.name, DType: a.dtype, Shape: a.shape, Bytes: a.n, SHA256: hex.EncodeToString(a.h.Sum(nil))}, nil
}

func (a *arrayFile) abort() { a.f.Close() }

// writeBlob writes a whole small file (JSON) and returns its artifact entry.
func writeBlob(dir, name string, b []byte) (Artifact, error) {
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return Artifact{}, core.Wrap(core.CodeInternal, err, "create %s", name)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Artifact{}, core.Wrap(core.CodeInternal, err, "create %s", name)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return Artifact{}, core.Wrap(core.CodeInternal, err, "write %s", name)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return Artifact{}, core.Wrap(core.CodeInternal, err, "sync %s", name)
	}
	if err := f.Close(); err != nil {
		return Artifact{}, core.Wrap(core.CodeInternal, err, "close %s", name)
	}
	sum := sha256.Sum256(b)
	return Artifact{Name: name, Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// hashPrefix starts every dataset hash, so a future format can change the
// construction without colliding with this one.
const hashPrefix = "aml-dataset/1\n"

// DatasetHash is the dataset's identity: sha256 over the canonical spec,
// every artifact's name and sha256 in manifest order, then manifest.json's
// sha256. Because each artifact's sha256 covers all of its bytes and
// manifest.json lists them, changing any byte of any file changes this hash.
// Exact construction (documented in docs/dataset-format.md):
//
//	sha256( "aml-dataset/1\n" + "spec " + canonicalSpec + "\n"
//	        + for each artifact: name + " " + sha256hex + "\n"
//	        + "manifest.json " + sha256hex(manifest.json bytes) + "\n" )
func DatasetHash(canonicalSpec []byte, artifacts []Artifact, manifestSHA string) string {
	h := sha256.New()
	io.WriteString(h, hashPrefix)
	io.WriteString(h, "spec ")
	h.Write(canonicalSpec)
	io.WriteString(h, "\n")
	for _, a := range artifacts {
		io.WriteString(h, a.Name+" "+a.SHA256+"\n")
	}
	io.WriteString(h, "manifest.json "+manifestSHA+"\n")
	return hex.EncodeToString(h.Sum(nil))
}

// fileSHA streams a file through sha256.
func fileSHA(path string) (string, int64, error) {
	f, err := os.Open(path)
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// safeName reports whether an artifact name stays inside the dataset dir.
func safeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}
