package dataset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// An array file holds exactly the bytes written and their sha256, written
// with O_DIRECT (where the file system takes it: whole blocks, then the
// partial last block buffered) or buffered: sizes below a block, at block
// and buffer boundaries, and over several buffers with a ragged tail, in
// chunks of every size.
func TestArrayFileBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	sizes := []int{0, 4, directAlign - 4, directAlign, directAlign + 4, writeBuf - 4, writeBuf, writeBuf + directAlign, 3*writeBuf + 1236}
	for _, direct := range []bool{true, false} {
		directWrites = direct
		for _, size := range sizes {
			dir := t.TempDir()
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(r.Uint32())
			}
			a, err := createArray(dir, "arrays/x.f32", "<f4", []int{size / 4})
			if err != nil {
				t.Fatal(err)
			}
			if size == writeBuf && direct && !a.direct {
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
				t.Fatalf("direct %v size %d: file %d bytes (equal %v), sha %s bytes %d", direct, size, len(got), bytes.Equal(got, want), art.SHA256, art.Bytes)
			}
		}
	}
	directWrites = true
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
