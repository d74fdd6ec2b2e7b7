package ingest

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aml-project/aml/internal/core"
)

// fuzzOpts derives options from one byte so the fuzzer explores them too.
func fuzzOpts(mode uint8) CSVOptions {
	o := CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "r"}
	o.SkipBad = mode&1 != 0
	if mode&2 != 0 {
		o.BatchSize = 3
	}
	if mode&4 != 0 {
		o.Period = 100 * time.Millisecond
		o.StartMs = 1_700_000_000_000
	} else {
		o.TimeUnit = []string{"", "ms", "s", "rfc3339"}[mode>>3&3]
	}
	if mode&32 != 0 {
		o.IgnoreCols = []string{"k"}
	}
	if mode&64 != 0 { // a plant export: ';', decimal commas, local times
		o.Delimiter, o.DecimalComma, o.TZ = ";", true, "Europe/Berlin"
	}
	if mode&128 != 0 && mode&4 == 0 {
		o.TimeUnit = "min"
	}
	return o
}

func FuzzParseCSV(f *testing.F) {
	seeds := []struct {
		s    string
		mode uint8
	}{
		{"time,a,b\n1700000000000,1,2\n1700000000100,3,\n", 0},
		{"t,x\n12.5,1\n-1.0005,4\n", 1},
		{"timestamp,x\n2024-03-01T12:00:00+02:00,1\n2024-03-01 10:00:00.9996-01:30,nan\n", 24},
		{"ts,node,value,state\n1,a,1.5,\n2,b,2,bad\n3,,1,ok\n", 1},
		{"Time,Node,Value\n1,\"a,b\",\"1\"\n", 2},
		{"a,b\n1,2\n3,x\n", 5},
		{"k,a\n0,1\n1,2\n", 36},
		{"\ufefftime , a\r\n 1 , 2 \r\n\r\n", 0},
		{"\"time\",\"x\"\"y\",note\n1,2,\"multi\nline\"\n", 3},
		{"time,a\n1,\"2\n", 1},
		{"time,a,a\n1,2,3\n", 0},
		{"", 0},
		{"time,a\n", 0},
		{"Zeit;x\n2026-10-25 02:30:00;1,5\n2026-10-25 03:30;2\n", 64 | 1},
		{"t;x\n1,5;2\n", 64 | 128},
	}
	for _, s := range seeds {
		f.Add([]byte(s.s), s.mode)
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		opts := fuzzOpts(mode)
		var got []core.Sample
		rep, err := ParseCSV(bytes.NewReader(data), "f.csv", opts, func(b []core.Sample) error {
			got = append(got, b...)
			return nil
		})
		if err != nil {
			var ae *core.Error
			if !errors.As(err, &ae) || ae.Code != core.CodeIngestInvalid {
				t.Fatalf("error is not AML_INGEST_INVALID: %#v", err)
			}
			if ae.Field == "" || !strings.HasPrefix(ae.Field, "f.csv") {
				t.Fatalf("error without a file position: %v", err)
			}
			return
		}
		if rep.Rows == 0 {
			t.Fatalf("success without rows: %+v", rep)
		}
		if len(got) != rep.Samples {
			t.Fatalf("emitted %d samples, report says %d", len(got), rep.Samples)
		}
		nodes := map[string]bool{}
		for _, s := range got {
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				t.Fatalf("non-finite sample %+v", s)
			}
			if s.Node == "" || !utf8.ValidString(s.Node) || s.State == "" {
				t.Fatalf("bad node or state in %+v", s)
			}
			if ms := core.UsToMs(s.TsUs); ms < rep.FirstTs || ms > rep.LastTs {
				t.Fatalf("sample %+v outside %d..%d", s, rep.FirstTs, rep.LastTs)
			}
			if s.Line != "L" || s.Product != "P" || s.Recipe != "R" || s.Run != "r" {
				t.Fatalf("context not stamped: %+v", s)
			}
			if rep.Shape == "wide" && s.State != core.StateOK {
				t.Fatalf("wide sample with state %q", s.State)
			}
			nodes[s.Node] = true
		}
		if len(nodes) != len(rep.Nodes) {
			t.Fatalf("nodes %q, samples have %d distinct", rep.Nodes, len(nodes))
		}
		for _, n := range rep.Nodes {
			if !nodes[n] {
				t.Fatalf("node %q listed without samples", n)
			}
		}
		if !opts.SkipBad && rep.Skipped != 0 {
			t.Fatalf("skipped %d rows without SkipBad", rep.Skipped)
		}
		sum := 0
		for _, n := range rep.SkipReasons {
			sum += n
		}
		if sum != rep.Skipped || len(rep.FirstSkipped) != min(5, rep.Skipped) {
			t.Fatalf("skip accounting: %+v", rep)
		}
	})
}

// writeCSV writes records with encoding/csv and returns the text and the
// records recordReader must read back: unquoted cells lose trailing spaces
// and tabs, CRLF inside quoted cells reads as LF, and a record that is one
// empty cell is a blank line, which is skipped.
func writeCSV(t *testing.T, records [][]string) (string, [][]string) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	var want [][]string
	for _, rec := range records {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if len(rec) == 1 && rec[0] == "" {
			continue
		}
		exp := make([]string, len(rec))
		for i, c := range rec {
			if needsQuotes(c) {
				exp[i] = strings.ReplaceAll(c, "\r\n", "\n")
			} else {
				exp[i] = strings.TrimRight(c, " \t")
			}
		}
		want = append(want, exp)
	}
	w.Flush()
	return buf.String(), want
}

// needsQuotes mirrors encoding/csv.Writer's rule.
func needsQuotes(field string) bool {
	if field == "" {
		return false
	}
	if field == `\.` || strings.ContainsAny(field, "\",\r\n") {
		return true
	}
	r, _ := utf8.DecodeRuneInString(field)
	return unicode.IsSpace(r)
}

func readAll(t *testing.T, text string) [][]string {
	rr := newRecordReader(strings.NewReader(text), ',')
	var out [][]string
	for {
		f, _, err := rr.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read %q: %v", text, err)
		}
		rec := make([]string, len(f))
		for i, c := range f {
			rec[i] = string(c)
		}
		out = append(out, rec)
	}
}

func TestRecordReaderRoundTrip(t *testing.T) {
	records := [][]string{
		{"time", "a,b", `say "hi"`, " lead", "trail ", "multi\nline", "crlf\r\nin cell", "cr\ronly", ""},
		{"", "", ""},
		{""},
		{`\.`, "x"},
		{"ümlaut", "\t tab"},
	}
	text, want := writeCSV(t, records)
	if got := readAll(t, text); !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n got %q\nwant %q", got, want)
	}
}

func TestRecordReaderLines(t *testing.T) {
	text := "a,b\n\n\"x\ny\",1\n  \n2,3\r\nlast"
	rr := newRecordReader(strings.NewReader(text), ',')
	var lines []int
	for {
		_, line, err := rr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if want := []int{1, 3, 6, 7}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %v, want %v", lines, want)
	}
}

func TestRecordReaderLongLine(t *testing.T) {
	cell := strings.Repeat("7", 200_000)
	text := "a,b\n" + cell + ",\"" + cell + "\"\n1,2\n"
	got := readAll(t, text)
	want := [][]string{{"a", "b"}, {cell, cell}, {"1", "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("long line not read back (%d records)", len(got))
	}
}

// FuzzRecordReader: whatever encoding/csv writes, recordReader reads back.
// Records are the input split at \x1e, cells at \x1f.
func FuzzRecordReader(f *testing.F) {
	f.Add("time\x1fa,b\x1e1\x1f\"q\"\x1emulti\nline\x1f \x1e")
	f.Add("\x1e\x1f\x1e\r\n\x1f\\.")
	f.Fuzz(func(t *testing.T, s string) {
		var records [][]string
		for _, r := range strings.Split(s, "\x1e") {
			records = append(records, strings.Split(r, "\x1f"))
		}
		text, want := writeCSV(t, records)
		got := readAll(t, text)
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("csv %q\n got %q\nwant %q", text, got, want)
		}
	})
}
