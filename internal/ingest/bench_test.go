package ingest

import (
	"bytes"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// wideCSV generates rows × cols of a wide file with epoch-ms times and
// values spelled like real sensor exports (a few significant digits).
func wideCSV(rows, cols int) []byte {
	var b bytes.Buffer
	b.WriteString("time_ms")
	for c := 0; c < cols; c++ {
		b.WriteString(",sensor_")
		b.WriteString(strconv.Itoa(c))
	}
	b.WriteByte('\n')
	start := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for r := 0; r < rows; r++ {
		b.WriteString(strconv.FormatInt(start+int64(r)*100, 10))
		for c := 0; c < cols; c++ {
			b.WriteByte(',')
			v := float64((r*7919+c*104729)%200000-100000) / 1000
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func longCSV(rows int) []byte {
	var b bytes.Buffer
	b.WriteString("ts,node,value,state\n")
	for r := 0; r < rows; r++ {
		b.WriteString("2024-05-01T00:00:")
		b.WriteString(strconv.Itoa(10 + r%50))
		b.WriteString(".")
		b.WriteString(strconv.Itoa(100 + r%900))
		b.WriteString("Z,sensor_")
		b.WriteString(strconv.Itoa(r % 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(float64(r%100000)/100, 'f', -1, 64))
		b.WriteString(",ok\n")
	}
	return b.Bytes()
}

func benchParse(b *testing.B, data []byte, opts CSVOptions) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	samples := 0
	for b.Loop() {
		rep, err := ParseCSV(bytes.NewReader(data), "bench.csv", opts, func([]core.Sample) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		samples += rep.Samples
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkParseWide parses 100k rows × 10 value columns held in memory.
func BenchmarkParseWide(b *testing.B) {
	benchParse(b, wideCSV(100_000, 10), CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "run1"})
}

// BenchmarkParseLong parses 200k long rows with RFC 3339 times and states.
func BenchmarkParseLong(b *testing.B) {
	benchParse(b, longCSV(200_000), CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "run1"})
}

// BenchmarkParseWideQuoted is the wide benchmark with every cell quoted
// (the slow path of the reader).
func BenchmarkParseWideQuoted(b *testing.B) {
	data := wideCSV(100_000, 10)
	var q bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) == 0 {
			continue
		}
		for i, cell := range bytes.Split(line, []byte(",")) {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('"')
			q.Write(cell)
			q.WriteByte('"')
		}
		q.WriteByte('\n')
	}
	benchParse(b, q.Bytes(), CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "run1"})
}

var _ = io.EOF
