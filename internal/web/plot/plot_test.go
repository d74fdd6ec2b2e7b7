package plot

import (
	"encoding/xml"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden SVG files")

func seq(n int, f func(i int) float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// charts are the golden cases: each renders to testdata/NAME.svg.
func charts() map[string]*Chart {
	x := seq(41, func(i int) float64 { return float64(i) * 0.5 })
	y := seq(41, func(i int) float64 { return 32 + math.Sin(float64(i)/6) })
	lo := seq(41, func(i int) float64 { return y[i] - 0.2 })
	hi := seq(41, func(i int) float64 { return y[i] + 0.2 })
	gap := append([]float64(nil), y...)
	gap[10], gap[11] = math.NaN(), math.Inf(1)
	return map[string]*Chart{
		"predicted_actual": {
			Title: "part_weight: predicted vs actual", XLabel: "time since run start", XUnit: "min", YLabel: "part_weight", YUnit: "g",
			Series: []Series{{Name: "actual", X: x, Y: gap}, {Name: "predicted", X: x, Y: y}},
			Bands:  []Band{{Name: "90% conformal band", X: x, Lo: lo, Hi: hi, Color: "#d55e00"}},
		},
		"trial_tube": {
			Title: "melt_temperature", XLabel: "horizon", XUnit: "s", YLabel: "melt temperature", YUnit: "degC", Width: 480, Height: 240,
			Series: []Series{
				{Name: "candidate", X: seq(6, func(i int) float64 { return float64(i) * 10 }), Y: []float64{249, 248.5, 248, 247.8, 247.6, 247.5}, Markers: true},
				{Name: "baseline (hold)", X: seq(6, func(i int) float64 { return float64(i) * 10 }), Y: []float64{249, 249, 249, 249, 249, 249}, Dash: true},
			},
			Bands:  []Band{{Name: "tube", X: seq(6, func(i int) float64 { return float64(i) * 10 }), Lo: []float64{248, 247.3, 246.8, 246.5, 246.2, 246}, Hi: []float64{250, 249.7, 249.2, 249.1, 249, 249}}},
			Limits: []Limit{{Name: "max", Y: 252}, {Name: "min", Y: 100}},
		},
		"empty": {Title: "no samples", XLabel: "time", XUnit: "min", YUnit: "bar"},
	}
}

func TestGoldenSVG(t *testing.T) {
	for name, c := range charts() {
		t.Run(name, func(t *testing.T) {
			got := c.SVG()
			path := filepath.Join("testdata", name+".svg")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update once to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the golden file (go test ./internal/web/plot -update to accept)\n got: %.400s", path, got)
			}
			// Rendering twice gives the same bytes.
			if again := c.SVG(); again != got {
				t.Error("rendering is not deterministic")
			}
			wellFormed(t, got)
		})
	}
}

// wellFormed parses the SVG as XML.
func wellFormed(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
}

func TestChartContent(t *testing.T) {
	cs := charts()
	tests := []struct {
		name     string
		contains []string
		absent   []string
	}{
		{"predicted_actual", []string{
			`data-points="121"`, // 39 + 41 series points and 41 band points
			`class="series" data-series="actual" data-points="39"`, // NaN and +Inf break the line and are not drawn
			`class="series" data-series="predicted" data-points="41"`,
			`class="band" data-series="90% conformal band" data-points="41"`,
			`part_weight [g]`, `time since run start [min]`, `>actual<`, `>predicted<`,
		}, []string{"NaN", "Inf", `class="limit"`}},
		{"trial_tube", []string{
			`class="limit" data-series="max"`, `max = 252`, `min = 100 (off scale, below)`, `stroke-dasharray="5 3"`, `<circle`, `melt temperature [degC]`,
		}, []string{`class="limit" data-series="min"`}},
		{"empty", []string{`class="no-data"`, `data-points="0"`, `[bar]`}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := cs[tc.name].SVG()
			for _, c := range tc.contains {
				if !strings.Contains(s, c) {
					t.Errorf("missing %q", c)
				}
			}
			for _, c := range tc.absent {
				if strings.Contains(s, c) {
					t.Errorf("unexpected %q", c)
				}
			}
		})
	}
	// The line breaks at the gap: two subpaths.
	s := cs["predicted_actual"].SVG()
	m := regexp.MustCompile(`data-series="actual" data-points="39" d="([^"]*)"`).FindStringSubmatch(s)
	if m == nil || strings.Count(m[1], "M") != 2 {
		t.Errorf("actual line should have 2 subpaths around the gap: %v", m)
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		n      int
		want   []string
	}{
		{0, 10, 6, []string{"0", "2", "4", "6", "8", "10"}},
		{0.1, 0.95, 5, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{31.2, 33.9, 6, []string{"31.0", "31.5", "32.0", "32.5", "33.0", "33.5", "34.0"}},
		{-3, 3, 7, []string{"-3", "-2", "-1", "0", "1", "2", "3"}},
		{5, 5, 5, []string{"4.7", "4.8", "4.9", "5.0", "5.1", "5.2", "5.3"}},
		{0, 2e7, 5, []string{"0", "5e+06", "1e+07", "1.5e+07", "2e+07"}},
		{math.NaN(), 1, 3, []string{"0.0", "0.5", "1.0"}},
	}
	for _, tc := range tests {
		ts := Ticks(tc.lo, tc.hi, tc.n)
		var got []string
		for _, v := range ts.Values {
			got = append(got, ts.Label(v))
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("Ticks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
		}
		if ts.Lo > tc.lo && !math.IsNaN(tc.lo) || ts.Hi < tc.hi {
			t.Errorf("Ticks(%v, %v) = [%v, %v] does not cover the range", tc.lo, tc.hi, ts.Lo, ts.Hi)
		}
	}
}

func TestPointsCountsFiniteOnly(t *testing.T) {
	c := &Chart{Series: []Series{{X: []float64{0, 1, 2}, Y: []float64{1, math.NaN(), 3}}}, Bands: []Band{{X: []float64{0, 1}, Lo: []float64{0, 0}, Hi: []float64{1, math.Inf(-1)}}}}
	if got := c.Points(); got != 3 {
		t.Errorf("Points = %d, want 3", got)
	}
}
