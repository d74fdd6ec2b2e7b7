package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Plant exports: local times in the plant's zone, ';' between cells and
// decimal commas, minutes and hours as time units.
func TestPlantExports(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(y int, mo time.Month, d, h, mi, s int) int64 {
		return time.Date(y, mo, d, h, mi, s, 0, berlin).UnixMilli()
	}
	for _, c := range []struct {
		name string
		in   string
		opts func(o *CSVOptions)
		want []pt
	}{
		{"local times with --tz, ';' and decimal commas", "Zeit;Temp;Druck\n2026-11-03 06:00:00;215,5;1,25\n2026-11-03 06:00:01;215,75;\n",
			func(o *CSVOptions) { o.TZ, o.Delimiter, o.DecimalComma, o.TimeCol = "Europe/Berlin", ";", true, "Zeit" },
			[]pt{{"Temp", at(2026, 11, 3, 6, 0, 0), 215.5, ""}, {"Druck", at(2026, 11, 3, 6, 0, 0), 1.25, ""}, {"Temp", at(2026, 11, 3, 6, 0, 1), 215.75, ""}}},
		{"local times without seconds, summer offset", "time,x\n2026-07-01T12:30,1\n",
			func(o *CSVOptions) { o.TZ = "Europe/Berlin" },
			[]pt{{"x", at(2026, 7, 1, 12, 30, 0), 1, ""}}},
		{"a time with an offset wins over --tz", "time,x\n2026-07-01T12:30:00Z,1\n",
			func(o *CSVOptions) { o.TZ = "Europe/Berlin" },
			[]pt{{"x", ms(2026, 7, 1, 12, 30, 0, 0), 1, ""}}},
		{"tab-separated", "time\tx\n1700000000000\t2\n",
			func(o *CSVOptions) { o.Delimiter = "tab" },
			[]pt{{"x", 1700000000000, 2, ""}}},
		{"minutes", "t;x\n0;1\n1,5;2\n",
			func(o *CSVOptions) { o.TimeUnit, o.Delimiter, o.DecimalComma = "min", ";", true },
			[]pt{{"x", 0, 1, ""}, {"x", 90_000, 2, ""}}},
		{"hours", "t,x\n2,1\n",
			func(o *CSVOptions) { o.TimeUnit = "h" },
			[]pt{{"x", 7_200_000, 1, ""}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, got, err := parseAll(t, "plant.csv", c.in, with(c.opts))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d samples %+v, want %d", len(got), got, len(c.want))
			}
			for i, w := range c.want {
				if g := got[i]; g.Node != w.node || g.TsUs != w.ts*1000 || g.Value != w.v {
					t.Errorf("sample %d: %s %d µs %g, want %s %d ms %g", i, g.Node, g.TsUs, g.Value, w.node, w.ts, w.v)
				}
			}
		})
	}
}

// Each refusal names what is wrong: a local time without --tz, the hour a
// DST change repeats (ambiguous) or skips, bad option values.
func TestPlantExportRefusals(t *testing.T) {
	for _, c := range []struct {
		name, in string
		opts     func(o *CSVOptions)
		field    string
		want     string
	}{
		{"local time without --tz", "time,x\n2026-11-03 06:00:00,1\n", func(o *CSVOptions) {}, "plant.csv:2:1", "needs --tz"},
		{"ambiguous hour (DST ends)", "time,x\n2026-10-25 02:30:00,1\n", func(o *CSVOptions) { o.TZ = "Europe/Berlin" }, "plant.csv:2:1", "ambiguous in Europe/Berlin"},
		{"skipped hour (DST starts)", "time,x\n2026-03-29 02:30:00,1\n", func(o *CSVOptions) { o.TZ = "Europe/Berlin" }, "plant.csv:2:1", "does not exist in Europe/Berlin"},
		{"unknown zone", "time,x\n1,1\n", func(o *CSVOptions) { o.TZ = "Mars/Olympus" }, "tz", "IANA zone"},
		{"unknown delimiter", "time,x\n1,1\n", func(o *CSVOptions) { o.Delimiter = "::" }, "delimiter", "want"},
		{"decimal comma with comma cells", "time,x\n1,1\n", func(o *CSVOptions) { o.DecimalComma = true }, "decimal-comma", "another cell delimiter"},
		{"thousands separator", "time;x\n1;1.234,5\n", func(o *CSVOptions) { o.Delimiter, o.DecimalComma = ";", true }, "plant.csv:2:2", "not a finite number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := parseAll(t, "plant.csv", c.in, with(c.opts))
			e, ok := err.(*core.Error)
			if !ok {
				t.Fatalf("want *core.Error, got %v", err)
			}
			if e.Field != c.field || !strings.Contains(e.Message, c.want) {
				t.Fatalf("field %q message %q; want field %q and %q", e.Field, e.Message, c.field, c.want)
			}
		})
	}
}
