package ingest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// parseAll parses in and collects copies of every emitted sample.
func parseAll(t testing.TB, name, in string, opts CSVOptions) (FileReport, []core.Sample, error) {
	t.Helper()
	var got []core.Sample
	rep, err := ParseCSV(strings.NewReader(in), name, opts, func(b []core.Sample) error {
		got = append(got, b...)
		return nil
	})
	return rep, got, err
}

// pt is a compact expected sample: node, ts, value, state ("" = ok).
type pt struct {
	node  string
	ts    int64
	v     float64
	state string
}

func ms(y int, mo time.Month, d, h, mi, s, msec int) int64 {
	return time.Date(y, mo, d, h, mi, s, msec*1e6, time.UTC).UnixMilli()
}

var ctxOpts = CSVOptions{Line: "L1", Product: "P1", Recipe: "R1", Run: "run-7"}

func with(f func(o *CSVOptions)) CSVOptions {
	o := ctxOpts
	f(&o)
	return o
}

func TestParseGood(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		opts    CSVOptions
		shape   string
		want    []pt
		nodes   []string
		missing int
	}{
		{
			name:  "wide epoch ms auto by magnitude",
			in:    "time,a,b\n1700000000000,1,2\n1700000000100,3,\n",
			opts:  ctxOpts,
			shape: "wide",
			want: []pt{{"a", 1700000000000, 1, ""}, {"b", 1700000000000, 2, ""},
				{"a", 1700000000100, 3, ""}},
			nodes:   []string{"a", "b"},
			missing: 1,
		},
		{
			name:  "wide epoch ms by name suffix",
			in:    "epoch_ms,x\n5,1.25\n6,-2e3\n",
			opts:  ctxOpts,
			shape: "wide",
			want:  []pt{{"x", 5, 1.25, ""}, {"x", 6, -2000, ""}},
			nodes: []string{"x"},
		},
		{
			name:  "wide epoch seconds fractional",
			in:    "t,x\n12.5,1\n12.004,2\n12.005,3\n-1.005,4\n1700000000.123,5\n1.5e1,6\n",
			opts:  ctxOpts,
			shape: "wide",
			want: []pt{{"x", 12500, 1, ""}, {"x", 12004, 2, ""}, {"x", 12005, 3, ""},
				{"x", -1005, 4, ""}, {"x", 1700000000123, 5, ""}, {"x", 15000, 6, ""}},
			nodes: []string{"x"},
		},
		{
			name: "wide RFC 3339 with offsets",
			in: "timestamp,x\n" +
				"2024-03-01T12:00:00+02:00,1\n" +
				"2024-03-01T10:00:00.123Z,2\n" +
				"2024-03-01 10:00:00.999-01:30,3\n" +
				"2024-02-29t23:59:59.5z,4\n",
			opts:  ctxOpts,
			shape: "wide",
			want: []pt{{"x", ms(2024, 3, 1, 10, 0, 0, 0), 1, ""},
				{"x", ms(2024, 3, 1, 10, 0, 0, 123), 2, ""},
				{"x", ms(2024, 3, 1, 11, 30, 0, 999), 3, ""},
				{"x", ms(2024, 2, 29, 23, 59, 59, 500), 4, ""}},
			nodes: []string{"x"},
		},
		{
			name:  "explicit time column and unit, other columns ignored",
			in:    "k,when,x,time\n0,1000,1,9\n1,1001.25,2,9\n",
			opts:  with(func(o *CSVOptions) { o.TimeCol = "WHEN"; o.TimeUnit = "s"; o.IgnoreCols = []string{"k", "time"} }),
			shape: "wide",
			want:  []pt{{"x", 1000000, 1, ""}, {"x", 1001250, 2, ""}},
			nodes: []string{"x"},
		},
		{
			name:  "explicit unit beats name suffix",
			in:    "time_s,x\n5,1\n",
			opts:  with(func(o *CSVOptions) { o.TimeUnit = "ms" }),
			shape: "wide",
			want:  []pt{{"x", 5, 1, ""}},
			nodes: []string{"x"},
		},
		{
			name:  "explicit rfc3339 unit",
			in:    "date,x\n2024-01-01T00:00:00Z,1\n",
			opts:  with(func(o *CSVOptions) { o.TimeUnit = "rfc3339" }),
			shape: "wide",
			want:  []pt{{"x", ms(2024, 1, 1, 0, 0, 0, 0), 1, ""}},
			nodes: []string{"x"},
		},
		{
			name:  "long without state",
			in:    "ts,node,value\n1000,a,1.5\n1000,b,\n2000, b ,2\n3000,a,NaN\n",
			opts:  with(func(o *CSVOptions) { o.TimeUnit = "ms" }),
			shape: "long",
			want:  []pt{{"a", 1000, 1.5, ""}, {"b", 2000, 2, ""}},
			nodes: []string{"a", "b"},
			// b at 1000 and a at 3000
			missing: 2,
		},
		{
			name:  "long with state, case-insensitive header",
			in:    "Time,Node,Value,State\n1,temp,20.5,\n2,temp,21,OK\n3,temp,99,bad\n4,press,1,uncertain\n",
			opts:  ctxOpts,
			shape: "long",
			want: []pt{{"temp", 1000, 20.5, ""}, {"temp", 2000, 21, ""}, {"temp", 3000, 99, "bad"},
				{"press", 4000, 1, "uncertain"}},
			nodes: []string{"temp", "press"},
		},
		{
			name:  "long with an ignored index column",
			in:    "k,ts,node,value\n0,1,a,1\n",
			opts:  with(func(o *CSVOptions) { o.IgnoreCols = []string{"K"} }),
			shape: "long",
			want:  []pt{{"a", 1000, 1, ""}},
			nodes: []string{"a"},
		},
		{
			name:  "period mode",
			in:    "a,b\n1,2\n3,4\n,6\n",
			opts:  with(func(o *CSVOptions) { o.Period = 100 * time.Millisecond; o.StartMs = 1000 }),
			shape: "wide",
			want: []pt{{"a", 1000, 1, ""}, {"b", 1000, 2, ""}, {"a", 1100, 3, ""}, {"b", 1100, 4, ""},
				{"b", 1200, 6, ""}},
			nodes:   []string{"a", "b"},
			missing: 1,
		},
		{
			name:  "period mode keeps time slots of skipped rows",
			in:    "a\n1\nbad\n3\n",
			opts:  with(func(o *CSVOptions) { o.Period = time.Second; o.SkipBad = true }),
			shape: "wide",
			want:  []pt{{"a", 0, 1, ""}, {"a", 2000, 3, ""}},
			nodes: []string{"a"},
		},
		{
			name:    "one column: a blank line is a missing cell, trailing blank lines are not rows",
			in:      "a\n1\n\n  \n4\n\n\n",
			opts:    with(func(o *CSVOptions) { o.Period = time.Second }),
			shape:   "wide",
			want:    []pt{{"a", 0, 1, ""}, {"a", 3000, 4, ""}},
			nodes:   []string{"a"},
			missing: 2,
		},
		{
			name:  "BOM, CRLF, blank lines, spaces",
			in:    "\ufefftime , a ,b\r\n 1 , 2 ,\t3\r\n\r\n  \r\n2,4,5\r\n",
			opts:  ctxOpts,
			shape: "wide",
			want:  []pt{{"a", 1000, 2, ""}, {"b", 1000, 3, ""}, {"a", 2000, 4, ""}, {"b", 2000, 5, ""}},
			nodes: []string{"a", "b"},
		},
		{
			name:  "no newline at end of file",
			in:    "time,a\n1,2",
			opts:  ctxOpts,
			shape: "wide",
			want:  []pt{{"a", 1000, 2, ""}},
			nodes: []string{"a"},
		},
		{
			name: "quoted cells",
			in: "\"time\",\"x,1\",\"y \"\"q\"\"\",note\n" +
				"\"1\",\" 2 \", \"3\" ,\"multi\nline, with comma\"\n" +
				"2,\"\",\"4\",plain\n",
			opts:  with(func(o *CSVOptions) { o.IgnoreCols = []string{"note"} }),
			shape: "wide",
			want:  []pt{{"x,1", 1000, 2, ""}, {"y \"q\"", 1000, 3, ""}, {"y \"q\"", 2000, 4, ""}},
			nodes: []string{"x,1", "y \"q\""},
			// x,1 at 2
			missing: 1,
		},
		{
			name:    "missing spellings",
			in:      "time,a,b,c,d,e,f\n1,,nan,NaN,NA,null,NULL\n2,1,2,3,4,5,6\n",
			opts:    ctxOpts,
			shape:   "wide",
			want:    []pt{{"a", 2000, 1, ""}, {"b", 2000, 2, ""}, {"c", 2000, 3, ""}, {"d", 2000, 4, ""}, {"e", 2000, 5, ""}, {"f", 2000, 6, ""}},
			nodes:   []string{"a", "b", "c", "d", "e", "f"},
			missing: 6,
		},
		{
			name:  "nodes list only nodes with samples, in header order",
			in:    "time,a,b,c\n1,,,1\n2,,2,\n",
			opts:  ctxOpts,
			shape: "wide",
			want:  []pt{{"c", 1000, 1, ""}, {"b", 2000, 2, ""}},
			nodes: []string{"b", "c"},
			// a,b at 1; a,c at 2
			missing: 4,
		},
		{
			name:  "small batches",
			in:    "time,a,b,c\n1,1,2,3\n2,4,5,6\n3,7,8,9\n",
			opts:  with(func(o *CSVOptions) { o.BatchSize = 2 }),
			shape: "wide",
			want: []pt{{"a", 1000, 1, ""}, {"b", 1000, 2, ""}, {"c", 1000, 3, ""},
				{"a", 2000, 4, ""}, {"b", 2000, 5, ""}, {"c", 2000, 6, ""},
				{"a", 3000, 7, ""}, {"b", 3000, 8, ""}, {"c", 3000, 9, ""}},
			nodes: []string{"a", "b", "c"},
		},
		{
			name:  "exact decimal values",
			in:    "time,a\n1,0.1\n2,-0.30000000000000004\n3,123456789012345678901234567890\n4,1e-320\n5,+.5\n6,7.\n",
			opts:  ctxOpts,
			shape: "wide",
			want: []pt{{"a", 1000, 0.1, ""}, {"a", 2000, -0.30000000000000004, ""},
				{"a", 3000, 123456789012345678901234567890, ""}, {"a", 4000, 1e-320, ""},
				{"a", 5000, 0.5, ""}, {"a", 6000, 7, ""}},
			nodes: []string{"a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, got, err := parseAll(t, "a.csv", tc.in, tc.opts)
			if err != nil {
				t.Fatalf("ParseCSV: %v", err)
			}
			var want []core.Sample
			for _, p := range tc.want {
				st := p.state
				if st == "" {
					st = core.StateOK
				}
				want = append(want, core.Sample{Node: p.node, TsUs: p.ts * 1000, Value: p.v, State: st,
					Line: tc.opts.Line, Product: tc.opts.Product, Recipe: tc.opts.Recipe, Run: tc.opts.Run})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("samples\n got %v\nwant %v", got, want)
			}
			if rep.Shape != tc.shape {
				t.Errorf("shape %q, want %q", rep.Shape, tc.shape)
			}
			if !reflect.DeepEqual(rep.Nodes, tc.nodes) {
				t.Errorf("nodes %q, want %q", rep.Nodes, tc.nodes)
			}
			if rep.Samples != len(want) || rep.Missing != tc.missing {
				t.Errorf("samples %d missing %d, want %d %d", rep.Samples, rep.Missing, len(want), tc.missing)
			}
			lo, hi := want[0].TsUs/1000, want[0].TsUs/1000
			for _, s := range want {
				lo, hi = min(lo, core.UsToMs(s.TsUs)), max(hi, core.UsToMs(s.TsUs))
			}
			if rep.FirstTs != lo || rep.LastTs != hi {
				t.Errorf("FirstTs..LastTs %d..%d, want %d..%d", rep.FirstTs, rep.LastTs, lo, hi)
			}
			if rep.File != "a.csv" || rep.Run != tc.opts.Run {
				t.Errorf("file %q run %q", rep.File, rep.Run)
			}
		})
	}
}

func TestParseRowsCount(t *testing.T) {
	rep, _, err := parseAll(t, "a.csv", "time,a\n1,\n2,3\n\n3,4\n", ctxOpts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 3 || rep.Samples != 2 || rep.Missing != 1 || rep.Skipped != 0 {
		t.Errorf("report %+v", rep)
	}
}

func TestParseBad(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		opts  CSVOptions
		field string   // want Error.Field
		msg   []string // substrings of Error.Message
		code  string   // default AML_INGEST_INVALID
	}{
		{name: "empty file", in: "", field: "a.csv", msg: []string{"a.csv", "empty file"}},
		{name: "only blank lines", in: "\n \r\n\n", field: "a.csv", msg: []string{"empty file"}},
		{name: "only a BOM", in: "\ufeff", field: "a.csv", msg: []string{"empty file"}},
		{name: "header only", in: "time,a\n", field: "a.csv", msg: []string{"no data rows"}},
		{name: "header and blank lines", in: "time,a\r\n\r\n", field: "a.csv", msg: []string{"no data rows"}},
		{name: "duplicate header", in: "time,x,y,x\n1,2,3,4\n", field: "a.csv:1:4", msg: []string{`duplicate column "x"`, "column 2"}},
		{name: "duplicate header after trim", in: "time,x, x\n1,2,3\n", field: "a.csv:1:3", msg: []string{`duplicate column "x"`}},
		{name: "empty header name", in: "time,,x\n1,2,3\n", field: "a.csv:1:2", msg: []string{"empty column name"}},
		{name: "empty name inside the header", in: "time,,x\n1,2,3\n", field: "a.csv:1:2", msg: []string{"empty column name"}},
		{name: "header with control character", in: "time,\"a\x01\"\n1,2\n", field: "a.csv:1:2", msg: []string{"control or invisible character"}},
		{name: "header bad quote", in: "time,\"a\"b\n1,2\n", field: "a.csv:1:2", msg: []string{"closing quote"}},
		{name: "only time column", in: "time\n1\n", field: "a.csv:1", msg: []string{"no value columns"}},
		{name: "only time and ignored", in: "time,k\n1,2\n", opts: CSVOptions{IgnoreCols: []string{"k"}}, field: "a.csv:1", msg: []string{"no value columns"}},
		{name: "no time column", in: "a,b\n1,2\n", field: "a.csv:1", msg: []string{"no time column"}},
		{name: "semicolon file", in: "time;a\n1;2\n", field: "a.csv:1", msg: []string{"delimiter must be a comma"}},
		{name: "named time column absent", in: "time,a\n1,2\n", opts: CSVOptions{TimeCol: "when"}, field: "a.csv:1", msg: []string{`time column "when" not in the header`}},
		{name: "named time column ignored", in: "time,a\n1,2\n", opts: CSVOptions{TimeCol: "time", IgnoreCols: []string{"TIME"}}, field: "a.csv:1", msg: []string{"also in the ignored columns"}},
		{name: "several time columns", in: "time,ts,a\n1,2,3\n", field: "a.csv:1", msg: []string{"several time-like columns (time, ts)"}},
		{name: "period with a time column", in: "a,time\n1,2\n", opts: CSVOptions{Period: time.Second}, field: "a.csv:1:2", msg: []string{"period", `"time"`}},
		{name: "UTF-16", in: "\xff\xfet\x00", field: "a.csv", msg: []string{"UTF-16"}},

		{name: "bad value", in: "time,a,b\n1,2,3\n2,3,abc\n", field: "a.csv:3:3", msg: []string{"a.csv:3:", "bad value", `"abc"`, `column 3 "b"`}},
		{name: "Inf value", in: "time,a\n1,Inf\n", field: "a.csv:2:2", msg: []string{`"Inf"`, `column 2 "a"`}},
		{name: "-infinity value", in: "time,a\n1,-infinity\n", field: "a.csv:2:2", msg: []string{"bad value"}},
		{name: "overflowing value", in: "time,a\n1,1e400\n", field: "a.csv:2:2", msg: []string{`"1e400"`}},
		{name: "hex value", in: "time,a\n1,0x10\n", field: "a.csv:2:2", msg: []string{`"0x10"`}},
		{name: "underscore value", in: "time,a\n1,1_000\n", field: "a.csv:2:2", msg: []string{"bad value"}},
		{name: "comma decimal value", in: "time,a\n1,\"1,5\"\n", field: "a.csv:2:2", msg: []string{`"1,5"`}},
		{name: "bad time", in: "time,a\n1,2\nxyz,3\n", field: "a.csv:3:1", msg: []string{"bad time", `"xyz"`, `column 1 "time"`, "epoch seconds"}},
		{name: "empty time", in: "time,a\n,3\n", field: "a.csv:2:1", msg: []string{"bad time"}},
		{name: "RFC 3339 without zone", in: "time,a\n2024-01-01T00:00:00,1\n", field: "a.csv:2:1", msg: []string{"bad time"}},
		{name: "RFC 3339 impossible date", in: "time,a\n2023-02-29T00:00:00Z,1\n", field: "a.csv:2:1", msg: []string{"bad time"}},
		{name: "numbers then RFC 3339", in: "time,a\n1,1\n2024-01-01T00:00:00Z,1\n", field: "a.csv:3:1", msg: []string{"bad time", "epoch seconds"}},
		{name: "RFC 3339 then numbers", in: "time,a\n2024-01-01T00:00:00Z,1\n5,1\n", field: "a.csv:3:1", msg: []string{"RFC 3339"}},
		{name: "time overflow", in: "time_s,a\n99999999999999999999,1\n", field: "a.csv:2:1", msg: []string{"bad time"}},
		{name: "too few cells", in: "time,a,b\n1,2\n", field: "a.csv:2:3", msg: []string{"column count", "2 cells, the header has 3", `column 3 "b"`}},
		{name: "too many cells", in: "time,a\n1,2,3\n", field: "a.csv:2:3", msg: []string{"column count", "3 cells"}},
		{name: "long empty node", in: "ts,node,value\n1,a,1\n2, ,2\n", field: "a.csv:3:2", msg: []string{"empty node", `column 2 "node"`}},
		{name: "long bad value", in: "ts,node,value,state\n1,a,x,ok\n", field: "a.csv:2:3", msg: []string{"bad value", `"x"`}},
		{name: "long too many cells", in: "ts,node,value\n1,a,1,ok\n", field: "a.csv:2:4", msg: []string{"column count"}},
		{name: "long node with control character", in: "ts,node,value\n1,\"a\tb\x02\",1\n", field: "a.csv:2:2", msg: []string{"bad node"}},
		{name: "text after closing quote", in: "time,a\n1,\"2\"x\n", field: "a.csv:2:2", msg: []string{"bad quote"}},
		{name: "bare quote", in: "time,a\n1,2\"\n", field: "a.csv:2:2", msg: []string{"bad quote"}},
		{name: "unclosed quote", in: "time,a\n1,2\n3,\"4\n5,6\n", field: "a.csv:3:2", msg: []string{"not closed"}},
		{name: "line after multi-line cell", in: "time,note,a\n1,\"two\nlines\",2\n3,x,bad\n", opts: CSVOptions{IgnoreCols: []string{"note"}}, field: "a.csv:4:3", msg: []string{"a.csv:4:"}},
		{name: "line after blank lines and BOM", in: "\ufefftime,a\r\n\r\n1,2\r\n\r\n\r\nx,3\r\n", field: "a.csv:6:1", msg: []string{"a.csv:6:"}},
		{name: "bad row error names the row even with SkipBad off for the first row", in: "time,a\nq,1\n", field: "a.csv:2:1", msg: []string{"bad time"}},
		{name: "all rows skipped", in: "time,a\nq,1\n", opts: CSVOptions{SkipBad: true}, field: "a.csv", msg: []string{"no valid data rows", "1 bad rows skipped"}},

		{name: "unknown time unit", in: "time,a\n1,2\n", opts: CSVOptions{TimeUnit: "d"}, field: "time-unit", code: core.CodeInvalidArgument},
		{name: "sub-µs period", in: "a\n1\n", opts: CSVOptions{Period: 1500 * time.Nanosecond}, field: "period", code: core.CodeInvalidArgument},
		{name: "period and time column", in: "a\n1\n", opts: CSVOptions{Period: time.Second, TimeCol: "t"}, field: "period", code: core.CodeInvalidArgument},
		{name: "period and time unit", in: "a\n1\n", opts: CSVOptions{Period: time.Second, TimeUnit: "s"}, field: "time-unit", code: core.CodeInvalidArgument},
		{name: "negative batch", in: "time,a\n1,2\n", opts: CSVOptions{BatchSize: -1}, field: "batch-size", code: core.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseAll(t, "a.csv", tc.in, tc.opts)
			var ae *core.Error
			if !errors.As(err, &ae) {
				t.Fatalf("want *core.Error, got %v", err)
			}
			code := tc.code
			if code == "" {
				code = core.CodeIngestInvalid
			}
			if ae.Code != code {
				t.Errorf("code %s, want %s (%v)", ae.Code, code, err)
			}
			if ae.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ae.Field, tc.field, err)
			}
			for _, m := range tc.msg {
				if !strings.Contains(ae.Message, m) {
					t.Errorf("message %q lacks %q", ae.Message, m)
				}
			}
		})
	}
}

func TestParseSkipBad(t *testing.T) {
	in := "time,a,b\n" +
		"1,1,1\n" + // 2 ok
		"2,x,1\n" + // 3 bad value
		"3,1\n" + // 4 column count
		"zz,1,1\n" + // 5 bad time
		"5,1,1,1\n" + // 6 column count
		"6,\"1\"x,1\n" + // 7 bad quote
		"7,inf,1\n" + // 8 bad value
		"8,2,\n" // 9 ok, one missing
	rep, got, err := parseAll(t, "s.csv", in, with(func(o *CSVOptions) { o.SkipBad = true }))
	if err != nil {
		t.Fatal(err)
	}
	wantReasons := map[string]int{ReasonBadValue: 2, ReasonColumnCount: 2, ReasonBadTime: 1, ReasonBadQuote: 1}
	if !reflect.DeepEqual(rep.SkipReasons, wantReasons) {
		t.Errorf("reasons %v, want %v", rep.SkipReasons, wantReasons)
	}
	if rep.Skipped != 6 || rep.Rows != 2 || rep.Samples != 3 || rep.Missing != 1 || len(got) != 3 {
		t.Errorf("report %+v, %d samples", rep, len(got))
	}
	wantFirst := []string{"s.csv:3: bad value:", "s.csv:4: column count:", "s.csv:5: bad time:", "s.csv:6: column count:", "s.csv:7: bad quote:"}
	if len(rep.FirstSkipped) != 5 {
		t.Fatalf("FirstSkipped %q", rep.FirstSkipped)
	}
	for i, w := range wantFirst {
		if !strings.HasPrefix(rep.FirstSkipped[i], w) {
			t.Errorf("FirstSkipped[%d] = %q, want prefix %q", i, rep.FirstSkipped[i], w)
		}
	}
	// A bad value late in a row takes back the row's earlier samples.
	if rep.FirstTs != 1000 || rep.LastTs != 8000 {
		t.Errorf("ts range %d..%d", rep.FirstTs, rep.LastTs)
	}
	for _, s := range got {
		if s.TsUs != 1_000_000 && s.TsUs != 8_000_000 {
			t.Errorf("sample of a skipped row: %+v", s)
		}
	}
}

func TestParseBadRowRollsBackItsSamples(t *testing.T) {
	// Column c fails after a and b were appended: none of row 3 may leak,
	// and b must not be listed as a node (its only sample was in row 3).
	rep, got, err := parseAll(t, "a.csv", "time,a,b,c\n1,1,,1\n2,1,5,x\n", with(func(o *CSVOptions) { o.SkipBad = true }))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(rep.Nodes, []string{"a", "c"}) || rep.Missing != 1 {
		t.Errorf("got %v, report %+v", got, rep)
	}
}

func TestParseEmitError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ParseCSV(strings.NewReader("time,a\n1,2\n"), "a.csv", CSVOptions{}, func([]core.Sample) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("want emit error, got %v", err)
	}
}

func TestParseBatchesNeverSplitRows(t *testing.T) {
	var in strings.Builder
	in.WriteString("time,a,b,c\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&in, "%d,1,2,3\n", i)
	}
	var sizes []int
	_, err := ParseCSV(strings.NewReader(in.String()), "a.csv", CSVOptions{BatchSize: 10}, func(b []core.Sample) error {
		sizes = append(sizes, len(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range sizes {
		if n%3 != 0 {
			t.Errorf("batch of %d samples splits a row", n)
		}
		total += n
	}
	if total != 300 {
		t.Errorf("total %d", total)
	}
}

func TestParseRecordTooLong(t *testing.T) {
	huge := strings.Repeat("1", maxRecordBytes+10)
	for name, in := range map[string]string{
		"line":        "time,a\n1,2\n" + huge + "\n",
		"quoted cell": "time,a\n1,2\n3,\"" + huge + "\"\n",
	} {
		_, _, err := parseAll(t, "a.csv", in, CSVOptions{SkipBad: true})
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeIngestInvalid || ae.Field != "a.csv:3" {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// Times are kept to the microsecond: decimal seconds and milliseconds,
// RFC 3339 and local fractions, epoch µs (by unit, name or magnitude) and a
// sub-millisecond period, each rounded to the nearest µs.
func TestParseMicroseconds(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		opts CSVOptions
		want []int64 // µs
	}{
		{"decimal seconds", "t,x\n12.0000004,1\n12.0000005,2\n-1.0000005,3\n1700000000.123456,4\n0.001638,5\n",
			ctxOpts, []int64{12_000_000, 12_000_001, -1_000_001, 1_700_000_000_123_456, 1638}},
		{"decimal ms", "time_ms,x\n1.638,1\n3.2765,2\n1700000000000.5,3\n",
			ctxOpts, []int64{1638, 3277, 1_700_000_000_000_500}},
		{"epoch us by unit", "t,x\n1638,1\n3277,2\n", with(func(o *CSVOptions) { o.TimeUnit = "us" }), []int64{1638, 3277}},
		{"epoch us by name", "time_us,x\n1638,1\n", ctxOpts, []int64{1638}},
		{"epoch us by magnitude", "t,x\n1700000000000001,1\n", ctxOpts, []int64{1_700_000_000_000_001}},
		{"RFC 3339 fractions", "t,x\n2024-03-01T10:00:00.0016384Z,1\n2024-03-01T10:00:00.000001+00:00,2\n",
			ctxOpts, []int64{us(2024, 3, 1, 10, 0, 0, 1638), us(2024, 3, 1, 10, 0, 0, 1)}},
		{"local fraction", "t,x\n2024-03-01 11:00:00.0000015,1\n", with(func(o *CSVOptions) { o.TZ = "Europe/Berlin" }),
			[]int64{us(2024, 3, 1, 10, 0, 0, 2)}},
		{"sub-ms period", "a\n1\n2\n3\n", with(func(o *CSVOptions) { o.Period, o.StartMs = 1638*time.Microsecond, 5 }),
			[]int64{5000, 6638, 8276}},
		{"minutes", "t,x\n0.5,1\n", with(func(o *CSVOptions) { o.TimeUnit = "min" }), []int64{30_000_000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, got, err := parseAll(t, "us.csv", c.in, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d samples %+v, want %d", len(got), got, len(c.want))
			}
			for i, w := range c.want {
				if got[i].TsUs != w {
					t.Errorf("sample %d at %d µs, want %d", i, got[i].TsUs, w)
				}
			}
			if lo := core.UsToMs(slices.Min(c.want)); rep.FirstTs != lo {
				t.Errorf("FirstTs %d, want %d (the ms holding the first sample)", rep.FirstTs, lo)
			}
		})
	}
}

func us(y int, mo time.Month, d, h, mi, s, usec int) int64 {
	return time.Date(y, mo, d, h, mi, s, usec*1e3, time.UTC).UnixMicro()
}

// A header and rows that end with a delimiter (Silverbox's "V1","V2",)
// have an unnamed last column that must stay empty; an empty name
// elsewhere is still refused.
func TestTrailingDelimiter(t *testing.T) {
	rep, got, err := parseAll(t, "sb.csv", "\"V1\",\"V2\",\n0.5,1.5,\n0.25,,\n", with(func(o *CSVOptions) { o.Period = 1638 * time.Microsecond }))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].TsUs != 1638 || got[2].Node != "V1" || !reflect.DeepEqual(rep.Nodes, []string{"V1", "V2"}) || rep.Missing != 1 {
		t.Fatalf("samples %+v nodes %v missing %d", got, rep.Nodes, rep.Missing)
	}
	_, _, err = parseAll(t, "sb.csv", "V1,V2,\n0.5,1.5,7\n", with(func(o *CSVOptions) { o.Period = time.Millisecond }))
	if err == nil || !strings.Contains(err.Error(), "unnamed last column") {
		t.Fatalf("a value under the unnamed column: %v", err)
	}
	_, _, err = parseAll(t, "sb.csv", "V1,,V2\n0.5,1.5,7\n", with(func(o *CSVOptions) { o.Period = time.Millisecond }))
	if err == nil || !strings.Contains(err.Error(), "empty column name") {
		t.Fatalf("an empty name inside the header: %v", err)
	}
}
