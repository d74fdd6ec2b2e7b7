package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/storetest"
)

// rowKey is a sample's interned keys in these tests: node and context
// primary keys.
type rowKey struct{ node, ctx int64 }

// toRows is samples with keys as a batch holds them (a node and an aux
// entry per row).
func toRows(samples []core.Sample, keys []rowKey) rowData {
	var d rowData
	for i, sm := range samples {
		a := rowAux{ctx: keys[i].ctx}
		if !isNullState(sm.State) {
			d.states = append(d.states, sm.State)
			a.state = int32(len(d.states))
		}
		d.nodes = append(d.nodes, nodeRange{pk: keys[i].node})
		d.aux = append(d.aux, a)
		d.rows = append(d.rows, sampleRow{ts: sm.TsUs, value: sm.Value, ni: int32(i), aux: int32(i)})
	}
	return d
}

// resetSamples resets e to encode samples with keys.
func resetSamples(e *copyEncoder, samples []core.Sample, keys []rowKey, order []int32, seq bool) {
	e.reset(toRows(samples, keys), order, seq)
}

// refEncode is the binary COPY stream written the plain way — one append
// per field, straight from the format's description — against which the
// streaming encoder is checked.
func refEncode(samples []core.Sample, keys []rowKey, order []int32, seq bool) []byte {
	out := append([]byte("PGCOPY\n\xff\r\n\x00"), 0, 0, 0, 0, 0, 0, 0, 0)
	i64 := func(v int64) {
		out = binary.BigEndian.AppendUint32(out, 8)
		out = binary.BigEndian.AppendUint64(out, uint64(v))
	}
	rows := len(samples)
	if order != nil {
		rows = len(order)
	}
	for r := 0; r < rows; r++ {
		i := r
		if order != nil {
			i = int(order[r])
		}
		sm := samples[i]
		if seq {
			out = binary.BigEndian.AppendUint16(out, 6)
			i64(int64(i))
		} else {
			out = binary.BigEndian.AppendUint16(out, 5)
		}
		i64(keys[i].node)
		i64(sm.TsUs)
		out = binary.BigEndian.AppendUint32(out, 8)
		out = binary.BigEndian.AppendUint64(out, math.Float64bits(sm.Value))
		if sm.State == "" || sm.State == core.StateOK {
			out = binary.BigEndian.AppendUint32(out, 0xffffffff)
		} else {
			out = binary.BigEndian.AppendUint32(out, uint32(len(sm.State)))
			out = append(out, sm.State...)
		}
		i64(keys[i].ctx)
	}
	return append(out, 0xff, 0xff)
}

// readChunked drains r with reads of the given sizes (cycled).
func readChunked(t testing.TB, r io.Reader, sizes []int) []byte {
	var out []byte
	for k := 0; ; k++ {
		buf := make([]byte, sizes[k%len(sizes)])
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if k > 10_000_000 {
			t.Fatal("reader does not end")
		}
	}
}

// edgeValues are the float64s whose bits must survive the trip exactly.
var edgeValues = []float64{0, math.Copysign(0, -1), 1, -1, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64,
	-math.SmallestNonzeroFloat64, 0x1p-1022, math.Pi, math.NaN(), math.Inf(1), math.Inf(-1)}

var edgeInts = []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32 + 1, -1 << 40}

// randomBatch returns n rows with edge and random values, states NULL
// ("" and "ok"), ASCII, multi-byte UTF-8, and now and then one longer
// than pgconn's 64 KiB send buffer; order is a random subset permutation.
func randomBatch(rng *rand.Rand, n int) ([]core.Sample, []rowKey, []int32) {
	pick := func(xs []int64) int64 {
		if rng.IntN(3) == 0 {
			return xs[rng.IntN(len(xs))]
		}
		return int64(rng.Uint64())
	}
	states := []string{"", core.StateOK, "bad", "uncertain", "ünsicher — 測定", "x"}
	samples := make([]core.Sample, n)
	keys := make([]rowKey, n)
	for i := range samples {
		v := edgeValues[rng.IntN(len(edgeValues))]
		if rng.IntN(2) == 0 {
			v = math.Float64frombits(rng.Uint64())
		}
		st := states[rng.IntN(len(states))]
		if rng.IntN(200) == 0 {
			st = strings.Repeat("long-state ", 7000) // 77 000 bytes
		}
		samples[i] = core.Sample{TsUs: pick(edgeInts), Value: v, State: st}
		keys[i] = rowKey{node: pick(edgeInts), ctx: pick(edgeInts)}
	}
	order := make([]int32, 0, n)
	for _, i := range rng.Perm(n) {
		if rng.IntN(4) != 0 {
			order = append(order, int32(i))
		}
	}
	return samples, keys, order
}

// TestCopyEncoderGolden pins the bytes of a two-row stream to the format
// PostgreSQL documents, written out by hand.
func TestCopyEncoderGolden(t *testing.T) {
	samples := []core.Sample{{TsUs: 1000, Value: 1.5, State: core.StateOK}, {TsUs: -1, Value: -2, State: "bad"}}
	keys := []rowKey{{node: 7, ctx: 2}, {node: 8, ctx: 3}}
	want := "5047434f50590aff0d0a00" + "00000000" + "00000000" + // signature, flags, extension
		"0005" + "00000008" + "0000000000000007" + "00000008" + "00000000000003e8" + // 5 fields, node 7, ts 1000
		"00000008" + "3ff8000000000000" + "ffffffff" + "00000008" + "0000000000000002" + // 1.5, NULL, ctx 2
		"0005" + "00000008" + "0000000000000008" + "00000008" + "ffffffffffffffff" + // node 8, ts -1
		"00000008" + "c000000000000000" + "00000003" + "626164" + "00000008" + "0000000000000003" + // -2, "bad", ctx 3
		"ffff"
	var e copyEncoder
	resetSamples(&e, samples, keys, nil, false)
	got := hex.EncodeToString(readChunked(t, &e, []int{4096}))
	if got != want {
		t.Fatalf("stream\n got %s\nwant %s", got, want)
	}
	// With seq (the staging table's first column), in the given order.
	resetSamples(&e, samples, keys, []int32{1}, true)
	want = "5047434f50590aff0d0a00" + "00000000" + "00000000" +
		"0006" + "00000008" + "0000000000000001" + "00000008" + "0000000000000008" + "00000008" + "ffffffffffffffff" +
		"00000008" + "c000000000000000" + "00000003" + "626164" + "00000008" + "0000000000000003" + "ffff"
	if got := hex.EncodeToString(readChunked(t, &e, []int{4096})); got != want {
		t.Fatalf("seq stream\n got %s\nwant %s", got, want)
	}
}

// TestCopyEncoderChunks: whatever the sizes of the reads, the stream is
// the reference encoding, and the encoder is reusable batch after batch.
func TestCopyEncoderChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e copyEncoder
	for round := 0; round < 200; round++ {
		samples, keys, order := randomBatch(rng, rng.IntN(300))
		if rng.IntN(3) == 0 {
			order = nil
		}
		seq := rng.IntN(2) == 0
		want := refEncode(samples, keys, order, seq)
		sizes := []int{1 + rng.IntN(3), 19, 1 + rng.IntN(200), 65531, 0, 1 + rng.IntN(100_000)}
		rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
		resetSamples(&e, samples, keys, order, seq)
		if got := readChunked(t, &e, sizes); !bytes.Equal(got, want) {
			t.Fatalf("round %d (sizes %v): %d bytes, want %d; first difference at %d", round, sizes, len(got), len(want), firstDiff(got, want))
		}
		// After the end: still EOF, nothing more.
		if n, err := e.Read(make([]byte, 16)); n != 0 || err != io.EOF {
			t.Fatalf("read after end: %d %v", n, err)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// FuzzCopyEncoder checks one row of any content, read in chunks of any
// size, against the reference encoding.
func FuzzCopyEncoder(f *testing.F) {
	f.Add(int64(0), int64(0), uint64(0), "", int64(0), uint8(1), false)
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), math.Float64bits(math.NaN()), "ok", int64(-1), uint8(3), true)
	f.Add(int64(5), int64(1700000000000), math.Float64bits(math.Copysign(0, -1)), "bad ünsicher", int64(9), uint8(200), true)
	f.Fuzz(func(t *testing.T, node, ts int64, bits uint64, state string, ctx int64, chunk uint8, seq bool) {
		samples := []core.Sample{{TsUs: ts, Value: math.Float64frombits(bits), State: state}, {TsUs: ^ts, State: state + "!"}}
		keys := []rowKey{{node: node, ctx: ctx}, {node: ^node, ctx: ^ctx}}
		var e copyEncoder
		resetSamples(&e, samples, keys, nil, seq)
		want := refEncode(samples, keys, nil, seq)
		if got := readChunked(t, &e, []int{int(chunk)%64 + 1, int(chunk) + 1}); !bytes.Equal(got, want) {
			t.Fatalf("got %x\nwant %x", got, want)
		}
	})
}

// TestCopyEncoderRoundTrip copies random batches through PostgreSQL into
// tables shaped like aml_stage and samples (NaN, ±Inf, -0 and subnormals
// included: the encoder does not refuse them, Write does) and reads every
// field back: integers and float bits exactly, NULL for "" and "ok", text
// byte for byte.
func TestCopyEncoderRoundTrip(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// rn numbers the rows in the order the stream carried them.
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE rt_stage (seq bigint NOT NULL, node bigint NOT NULL, ts bigint NOT NULL,
		value double precision NOT NULL, state text, ctx bigint NOT NULL, rn bigint GENERATED ALWAYS AS IDENTITY);
		CREATE TEMP TABLE rt_samples (node bigint NOT NULL, ts bigint NOT NULL, value double precision NOT NULL, state text,
		ctx bigint NOT NULL, rn bigint GENERATED ALWAYS AS IDENTITY)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var e copyEncoder
	for round := 0; round < 12; round++ {
		samples, keys, order := randomBatch(rng, 1+rng.IntN(3000))
		if round%3 == 0 {
			order = nil
		}
		for _, seq := range []bool{true, false} {
			if _, err := conn.Exec(ctx, `TRUNCATE rt_stage, rt_samples RESTART IDENTITY`); err != nil {
				t.Fatal(err)
			}
			sql, table := `COPY rt_samples (node, ts, value, state, ctx) FROM STDIN BINARY`, "rt_samples"
			if seq {
				sql, table = `COPY rt_stage (seq, node, ts, value, state, ctx) FROM STDIN BINARY`, "rt_stage"
			}
			resetSamples(&e, samples, keys, order, seq)
			tag, err := conn.Conn().PgConn().CopyFrom(ctx, &e, sql)
			if err != nil {
				t.Fatalf("round %d seq %v: %v", round, seq, err)
			}
			rows := len(samples)
			if order != nil {
				rows = len(order)
			}
			if tag.RowsAffected() != int64(rows) {
				t.Fatalf("copied %d rows, want %d", tag.RowsAffected(), rows)
			}
			// Read back in stream order, float8send for the exact bits.
			cols := "0::bigint"
			if seq {
				cols = "seq"
			}
			res, err := conn.Query(ctx, `SELECT `+cols+`, node, ts, float8send(value), state, ctx FROM `+table+` ORDER BY rn`)
			if err != nil {
				t.Fatal(err)
			}
			r := 0
			for res.Next() {
				var sq, node, ts, c int64
				var vb []byte
				var st *string
				if err := res.Scan(&sq, &node, &ts, &vb, &st, &c); err != nil {
					t.Fatal(err)
				}
				i := r
				if order != nil {
					i = int(order[r])
				}
				sm, k := samples[i], keys[i]
				wantSt := &sm.State
				if sm.State == "" || sm.State == core.StateOK {
					wantSt = nil
				}
				if (seq && sq != int64(i)) || node != k.node || ts != sm.TsUs || c != k.ctx ||
					binary.BigEndian.Uint64(vb) != math.Float64bits(sm.Value) || (st == nil) != (wantSt == nil) || (st != nil && *st != *wantSt) {
					t.Fatalf("round %d row %d: got seq %d node %d ts %d value %x state %.40q ctx %d; want sample %d ts %d value %x state %.40q keys %+v",
						round, r, sq, node, ts, vb, deref(st), c, i, sm.TsUs, math.Float64bits(sm.Value), sm.State, k)
				}
				r++
			}
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			if r != rows {
				t.Fatalf("read back %d rows, want %d", r, rows)
			}
		}
	}
}

// BenchmarkCopyEncoder is the client side alone: one 10 000-row batch
// encoded into pgconn-sized buffers. It allocates nothing.
func BenchmarkCopyEncoder(b *testing.B) {
	samples := storetest.BenchSamples()[:10_000]
	keys := make([]rowKey, len(samples))
	for i := range keys {
		keys[i] = rowKey{node: int64(i % storetest.BenchNodes), ctx: 1}
	}
	buf := make([]byte, 65531)
	var e copyEncoder
	d := toRows(samples, keys)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.reset(d, nil, false)
		for {
			if _, err := e.Read(buf); err == io.EOF {
				break
			}
		}
	}
	b.ReportMetric(float64(len(samples)*b.N)/b.Elapsed().Seconds(), "samples/s")
}

func deref(s *string) string {
	if s == nil {
		return "<NULL>"
	}
	return *s
}
