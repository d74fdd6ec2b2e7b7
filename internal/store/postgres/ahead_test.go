package postgres

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestJobEncodeAndStagedRows: a WriteAhead job's buffer is the encoder's
// stream without seq, and stagedRows turns it into the stream with seq
// (the staging table's), byte for byte as refEncode writes both — random
// batches with and without states of every length, in a random order
// that drops some samples (repeated instants).
func TestJobEncodeAndStagedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var j copyJob
	for round := 0; round < 40; round++ {
		samples, keys, order := randomBatch(rng, rng.IntN(2500))
		if order == nil {
			order = []int32{}
			for i := range samples {
				order = append(order, int32(i))
			}
		}
		j.encode(toRows(samples, keys), order)
		if want := refEncode(samples, keys, order, false); !bytes.Equal(j.buf, want) {
			t.Fatalf("round %d: job buffer differs from the reference (%d vs %d bytes)", round, len(j.buf), len(want))
		}
		j.stage = stagedRows(j.stage[:0], j.buf, j.seq)
		if want := refEncode(samples, keys, order, true); !bytes.Equal(j.stage, want) {
			t.Fatalf("round %d: staged rows differ from the reference (%d vs %d bytes)", round, len(j.stage), len(want))
		}
	}
}
