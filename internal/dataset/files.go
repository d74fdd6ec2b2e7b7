package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"github.com/aml-project/aml/internal/core"
)

// Each array file has two write buffers (one filling while the other is
// written) of writeBufSize(its size): 1/64 of the file rounded up to a
// block, at least minWriteBuf and at most maxWriteBuf. A direct write
// waits for the disk, so the disk sees one write per file at a time, and
// larger writes keep it busier for less system time: on the VM of
// bench/RESULTS.md 286 MiB written with O_DIRECT took 0.31–0.35 s wall and
// 0.12–0.14 s system time in 128 KiB writes, 0.14 s and 0.035 s in 1 MiB
// writes. Seven files are open at once during a build, so the buffers are
// held fourteen times; scaling them with the file keeps a small dataset's
// build small (bench/dataset.sh measures the peak memory). Multiples of
// directAlign.
const (
	minWriteBuf = 128 << 10
	maxWriteBuf = 1 << 20
)

// writeBufSize is the size of each write buffer of a file of n bytes.
func writeBufSize(n int64) int {
	b := (n/64 + directAlign - 1) &^ (directAlign - 1)
	return int(min(max(b, minWriteBuf), maxWriteBuf))
}

// directWrites lets array files use O_DIRECT (tests turn it off to check
// the buffered path gives the same files).
var directWrites = true

// directAlign is the alignment of O_DIRECT writes: buffer address, length
// and file offset (4096 covers 512-byte and 4 KiB logical blocks).
const directAlign = 4096

// arrayFile writes a little-endian array file while hashing it, so no
// second pass over the bytes is needed.
//
// Where the file system allows it the file is written with O_DIRECT (Linux):
// the arrays go from the buffer to the disk without a copy into the page
// cache. A stride-1 build writes ≈ 290 MB, and on the shared VM filling
// fresh page-cache pages cost the build ≈ 0.8 s of system time, about as
// much as reading its samples, against ≈ 0.03 s written directly
// (bench/RESULTS.md). The tail that is not a whole block is written after
// O_DIRECT is turned off; a file system that refuses O_DIRECT (tmpfs) or
// one of its writes gets ordinary buffered writes. The bytes, and so the
// hashes, are the same either way; the file is synced before it counts.
// Buffered writes with sync_file_range started after every buffer and one
// final sync were measured too (bench/RESULTS.md, 2026-12-06): as fast when
// the page cache has free pages to recycle, 0.46–0.60 s of system time per
// stride-1 build when it must take fresh ones, so O_DIRECT stays.
type arrayFile struct {
	name   string
	dtype  string
	shape  []int
	f      *os.File
	h      hash.Hash
	n      int64
	direct bool   // owned by the writer goroutine until it is done
	buf    []byte // pending bytes, directAlign-aligned, cap writeBufSize(file size)
	err    error  // the first write error (the writer's until done); close reports it
	b8     [8]byte

	// Full buffers are written by a goroutine of the file while the next
	// one fills (a direct write waits for the disk): two buffers go round.
	full, free chan []byte
	done       chan struct{}
	stopped    bool
}

func newArrayFile(name, dtype string, shape []int, f *os.File, direct bool, bufSize int) *arrayFile {
	a := &arrayFile{name: name, dtype: dtype, shape: shape, f: f, h: sha256.New(), direct: direct,
		full: make(chan []byte, 1), free: make(chan []byte, 2), done: make(chan struct{})}
	a.buf = alignedBuf(bufSize)
	a.free <- alignedBuf(bufSize)
	go func() {
		defer close(a.done)
		for b := range a.full {
			a.writeOut(b)
			a.free <- b[:0]
		}
	}()
	return a
}

// stop ends the writer goroutine once it has written what it was given.
func (a *arrayFile) stop() {
	if !a.stopped {
		a.stopped = true
		close(a.full)
		<-a.done
	}
}

func createArray(dir, name, dtype string, shape []int) (*arrayFile, error) {
	return createArrayBuf(dir, name, dtype, shape, writeBufSize(arrayBytes(dtype, shape)))
}

// arrayBytes is the size of an array of this dtype and shape.
func arrayBytes(dtype string, shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	if dtype == "<f8" {
		return 8 * n
	}
	return 4 * n
}

// createArrayBuf is createArray with write buffers of bufSize bytes (a
// multiple of directAlign).
func createArrayBuf(dir, name, dtype string, shape []int, bufSize int) (*arrayFile, error) {
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", name)
	}
	direct := directWrites && oDirect != 0
	flags := os.O_CREATE | os.O_EXCL | os.O_WRONLY
	if direct {
		flags |= oDirect
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil && direct {
		// O_DIRECT refused (tmpfs: EINVAL, possibly after creating the
		// file, which is ours — the directory is this build's own).
		_ = os.Remove(path)
		direct = false
		f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	}
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", name)
	}
	return newArrayFile(name, dtype, shape, f, direct, bufSize), nil
}

// alignedBuf is an empty slice of capacity n whose first byte is
// directAlign-aligned (Go's heap does not move objects).
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % directAlign); r != 0 {
		off = directAlign - r
	}
	return b[off : off : off+n]
}

func (a *arrayFile) f32(v float64) {
	binary.LittleEndian.PutUint32(a.b8[:4], math.Float32bits(float32(v)))
	a.write(a.b8[:4])
}

// write appends bytes already encoded as the file's dtype.
func (a *arrayFile) write(b []byte) {
	a.n += int64(len(b))
	for len(b) > 0 {
		k := copy(a.buf[len(a.buf):cap(a.buf)], b)
		a.buf, b = a.buf[:len(a.buf)+k], b[k:]
		if len(a.buf) == cap(a.buf) {
			a.h.Write(a.buf)
			a.full <- a.buf
			a.buf = <-a.free
		}
	}
}

func (a *arrayFile) f64(v float64) {
	binary.LittleEndian.PutUint64(a.b8[:8], math.Float64bits(v))
	a.write(a.b8[:8])
}

// writeOut writes b to the file. With O_DIRECT, b must be aligned and a
// whole number of blocks; a write the file system refuses is retried
// without O_DIRECT, which stays off.
func (a *arrayFile) writeOut(b []byte) {
	if a.err != nil || len(b) == 0 {
		return
	}
	_, err := a.f.Write(b)
	if err != nil && a.direct && errors.Is(err, syscall.EINVAL) {
		if err = setDirect(a.f, false); err == nil {
			a.direct = false
			_, err = a.f.Write(b)
		}
	}
	a.err = err
}

// close flushes, syncs and returns the artifact entry. A short write is an
// error: the element count must match the declared shape.
func (a *arrayFile) close() (Artifact, error) {
	a.stop()
	// The last, partial block leaves O_DIRECT: whole blocks first, then
	// the rest through the page cache.
	a.h.Write(a.buf)
	whole := len(a.buf)
	if a.direct {
		whole &^= directAlign - 1
	}
	a.writeOut(a.buf[:whole])
	if rest := a.buf[whole:]; len(rest) > 0 && a.err == nil {
		if a.direct {
			if a.err = setDirect(a.f, false); a.err == nil {
				a.direct = false
			}
		}
		a.writeOut(rest)
	}
	a.buf = a.buf[:0]
	if a.err != nil {
		a.f.Close()
		return Artifact{}, core.Wrap(core.CodeInternal, a.err, "write %s", a.name)
	}
	if err := a.f.Sync(); err != nil {
		a.f.Close()
		return Artifact{}, core.Wrap(core.CodeInternal, err, "sync %s", a.name)
	}
	if err := a.f.Close(); err != nil {
		return Artifact{}, core.Wrap(core.CodeInternal, err, "close %s", a.name)
	}
	if want := arrayBytes(a.dtype, a.shape); want != a.n {
		return Artifact{}, core.Errorf(core.CodeInternal, "%s: wrote %d bytes, shape %v needs %d", a.name, a.n, a.shape, want)
	}
	return Artifact{Name: a.name, DType: a.dtype, Shape: a.shape, Bytes: a.n, SHA256: hex.EncodeToString(a.h.Sum(nil))}, nil
}

func (a *arrayFile) abort() {
	a.stop()
	a.f.Close()
}

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
