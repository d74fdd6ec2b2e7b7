package dataset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// An array file holds exactly the bytes written and their sha256, written
// with O_DIRECT (where the file system takes it: whole blocks, then the
// partial last block buffered) or buffered: sizes below a block, at block
// and buffer boundaries, and over several buffers with a ragged tail, in
// chunks of every size, with the smallest and a larger write buffer.
func TestArrayFileBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, buf := range []int{minWriteBuf, 4 * minWriteBuf} {
		sizes := []int{0, 4, directAlign - 4, directAlign, directAlign + 4, buf - 4, buf, buf + directAlign, 3*buf + 1236}
		for _, direct := range []bool{true, false} {
			directWrites = direct
			for _, size := range sizes {
				dir := t.TempDir()
				want := make([]byte, size)
				for i := range want {
					want[i] = byte(r.Uint32())
				}
				a, err := createArrayBuf(dir, "arrays/x.f32", "<f4", []int{size / 4}, buf)
				if err != nil {
					t.Fatal(err)
				}
				if size == buf && direct && !a.direct {
					t.Logf("this file system refuses O_DIRECT: both passes are buffered")
				}
				for b := want; len(b) > 0; {
					k := min(len(b), 4*(1+r.IntN(3000)))
					a.write(b[:k])
					b = b[k:]
				}
				art, err := a.close()
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(dir, "arrays", "x.f32"))
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(want)
				if !bytes.Equal(got, want) || art.SHA256 != hex.EncodeToString(sum[:]) || art.Bytes != int64(size) {
					t.Fatalf("buffer %d direct %v size %d: file %d bytes (equal %v), sha %s bytes %d", buf, direct, size, len(got), bytes.Equal(got, want), art.SHA256, art.Bytes)
				}
			}
		}
	}
	directWrites = true
}

// Write buffers are 1/64 of the file, whole blocks, between the bounds.
func TestWriteBufSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int
	}{
		{0, minWriteBuf}, {64 * minWriteBuf, minWriteBuf}, {64 * (minWriteBuf + 1), minWriteBuf + directAlign},
		{64 * 300 << 10, 300 << 10}, {64 * maxWriteBuf, maxWriteBuf}, {1 << 40, maxWriteBuf},
	} {
		got := writeBufSize(c.n)
		if got != c.want || got%directAlign != 0 {
			t.Errorf("writeBufSize(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if got := arrayBytes("<f8", []int{3, 5}); got != 120 {
		t.Errorf("arrayBytes(<f8, [3 5]) = %d, want 120", got)
	}
	if got := arrayBytes("<f4", []int{3, 5}); got != 60 {
		t.Errorf("arrayBytes(<f4, [3 5]) = %d, want 60", got)
	}
}

// With one P the write phase gets a second one and gives it back; two
// builds writing at once share it and the last one restores the value; a
// process with more Ps, one whose GOMAXPROCS was set in its environment,
// and a small dataset's build are left alone.
func TestExtraWriterProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r0 := extraProc(true)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS set in the environment: GOMAXPROCS %d, want 1", n)
	}
	r0()
	rs := extraWriterProc(extraProcMinBytes - 1)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("a small dataset: GOMAXPROCS %d, want 1", n)
	}
	rs()
	r1 := extraProc(false)
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("writing with one P: GOMAXPROCS %d, want 2", n)
	}
	r2 := extraProc(false)
	r1()
	r1() // a second call does nothing
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("one of two builds done: GOMAXPROCS %d, want 2", n)
	}
	r2()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("both builds done: GOMAXPROCS %d, want 1", n)
	}
	runtime.GOMAXPROCS(3)
	r3 := extraProc(false)
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("with 3 Ps: GOMAXPROCS %d, want 3", n)
	}
	r3()
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("with 3 Ps, after: GOMAXPROCS %d, want 3", n)
	}
}

// A dataset written with buffered files has the same hash as one written
// with O_DIRECT.
func TestBuildHashBufferedSame(t *testing.T) {
	st, dir := simulated(t)
	directWrites = false
	defer func() { directWrites = true }()
	res, err := Build(t.Context(), st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dataset.SHA256 != goldenHash {
		t.Fatalf("buffered build: %s, want %s", res.Dataset.SHA256, goldenHash)
	}
}

// A build of one P that writes with the second P (the size threshold
// lowered to 0) gives the golden hash and leaves one P behind.
func TestBuildHashExtraProc(t *testing.T) {
	st, dir := simulated(t)
	defer func(n int64) { extraProcMinBytes = n }(extraProcMinBytes)
	extraProcMinBytes = 0
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res, err := Build(t.Context(), st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dataset.SHA256 != goldenHash {
		t.Fatalf("build with the extra P: %s, want %s", res.Dataset.SHA256, goldenHash)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("after the build: GOMAXPROCS %d, want 1", n)
	}
}
