// Package plot renders small, deterministic SVG line charts for the web UI:
// axes with "nice" ticks and units, lines (broken at NaN gaps), shaded
// bands (prediction intervals, tubes, min–max envelopes), horizontal limit
// lines (constraint bounds) and a legend.
//
// Why our own renderer: the UI must work without external network, scripts
// or fonts, and tests compare the output byte for byte with golden files.
// The same input always gives the same bytes — coordinates are printed with
// a fixed precision, colours come from a fixed palette in series order, and
// nothing depends on map order or the clock.
//
// Every drawn data element carries data attributes (data-series,
// data-points) so a browser test can tell that a chart rendered data, not
// just an empty frame.
package plot

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Palette is the colour cycle (Okabe–Ito, readable for colour-blind
// viewers). A series, band or limit without a Color takes the next one.
var Palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442"}

// Series is one line. X and Y have the same length; a NaN or infinite Y
// (or X) breaks the line.
type Series struct {
	Name  string
	X, Y  []float64
	Color string
	// Dash draws the line dashed (e.g. a baseline next to a candidate).
	Dash bool
	// Markers draws a dot at every point (useful for short series).
	Markers bool
}

// Band is a shaded area between Lo and Hi over X (same lengths); NaN
// values break it.
type Band struct {
	Name   string
	X      []float64
	Lo, Hi []float64
	Color  string
}

// Limit is a horizontal line at Y, e.g. a constraint bound.
type Limit struct {
	Name  string
	Y     float64
	Color string
}

// Chart is one plot.
type Chart struct {
	Title  string
	XLabel string
	XUnit  string
	YLabel string
	YUnit  string
	// Width and Height in pixels (defaults 720×320).
	Width, Height int
	Series        []Series
	Bands         []Band
	Limits        []Limit
}

// Layout constants (pixels).
const (
	defaultW  = 720
	defaultH  = 320
	marginL   = 64
	marginR   = 16
	marginT   = 28
	marginB   = 44
	legendRow = 16
)

type span struct{ lo, hi float64 }

func (s *span) add(v float64) {
	if !finite(v) {
		return
	}
	if v < s.lo {
		s.lo = v
	}
	if v > s.hi {
		s.hi = v
	}
}

func (s span) empty() bool { return s.lo > s.hi }

func newSpan() span { return span{lo: math.Inf(1), hi: math.Inf(-1)} }

// Points is the number of finite data points the chart draws (series
// points plus band points), what tests assert on.
func (c *Chart) Points() int {
	n := 0
	for _, s := range c.Series {
		for i := range s.Y {
			if i < len(s.X) && finite(s.X[i]) && finite(s.Y[i]) {
				n++
			}
		}
	}
	for _, b := range c.Bands {
		for i := range b.X {
			if i < len(b.Lo) && i < len(b.Hi) && finite(b.X[i]) && finite(b.Lo[i]) && finite(b.Hi[i]) {
				n++
			}
		}
	}
	return n
}

// SVG renders the chart. It never fails: a chart without finite data
// renders its frame with a "no data" note.
func (c *Chart) SVG() string {
	W, H := c.Width, c.Height
	if W <= 0 {
		W = defaultW
	}
	if H <= 0 {
		H = defaultH
	}
	// Legend entries, laid out in columns under the plot area.
	var legend []legendEntry
	ci := 0
	next := func(c string) string {
		if c != "" {
			return c
		}
		c = Palette[ci%len(Palette)]
		ci++
		return c
	}
	seriesColor := make([]string, len(c.Series))
	for i, s := range c.Series {
		seriesColor[i] = next(s.Color)
	}
	bandColor := make([]string, len(c.Bands))
	for i, b := range c.Bands {
		if b.Color != "" {
			bandColor[i] = b.Color
		} else if i < len(seriesColor) {
			bandColor[i] = seriesColor[i] // a band usually belongs to the series of the same index
		} else {
			bandColor[i] = next("")
		}
	}
	limitColor := make([]string, len(c.Limits))
	for i, l := range c.Limits {
		if l.Color != "" {
			limitColor[i] = l.Color
		} else {
			limitColor[i] = "#b00020"
		}
	}

	// Data ranges.
	xs, ys := newSpan(), newSpan()
	for _, s := range c.Series {
		for i := range s.Y {
			if i < len(s.X) && finite(s.X[i]) && finite(s.Y[i]) {
				xs.add(s.X[i])
				ys.add(s.Y[i])
			}
		}
	}
	for _, b := range c.Bands {
		for i := range b.X {
			if i < len(b.Lo) && i < len(b.Hi) && finite(b.X[i]) && finite(b.Lo[i]) && finite(b.Hi[i]) {
				xs.add(b.X[i])
				ys.add(b.Lo[i])
				ys.add(b.Hi[i])
			}
		}
	}
	// A limit is drawn when it is near the data (within one data span of
	// it); a far one would squash the data into a line, so it is only
	// named in the legend as off scale.
	offScale := make([]string, len(c.Limits))
	if !ys.empty() {
		d := ys.hi - ys.lo
		if d == 0 {
			d = math.Max(math.Abs(ys.hi), 1)
		}
		for i, l := range c.Limits {
			if !finite(l.Y) {
				continue
			}
			switch {
			case l.Y > ys.hi+d:
				offScale[i] = "above"
			case l.Y < ys.lo-d:
				offScale[i] = "below"
			}
		}
		for i, l := range c.Limits {
			if offScale[i] == "" {
				ys.add(l.Y)
			}
		}
	}

	for i, s := range c.Series {
		legend = append(legend, legendEntry{s.Name, seriesColor[i], "line", s.Dash})
	}
	for i, b := range c.Bands {
		if b.Name != "" {
			legend = append(legend, legendEntry{b.Name, bandColor[i], "band", false})
		}
	}
	for i, l := range c.Limits {
		name := l.Name
		if name == "" {
			name = "limit"
		}
		name += " = " + num(l.Y)
		if offScale[i] != "" {
			name += " (off scale, " + offScale[i] + ")"
		}
		legend = append(legend, legendEntry{name, limitColor[i], "limit", true})
	}
	legendH := legendRowsHeight(len(legend), W)
	H += legendH

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" data-points="%d">`+"\n",
		W, H, W, H, esc(c.Title), c.Points())
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", W, H)
	if c.Title != "" {
		fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13" font-weight="bold" font-family="sans-serif">%s</text>`+"\n", marginL, esc(c.Title))
	}
	pw := float64(W - marginL - marginR)
	ph := float64(H - legendH - marginT - marginB)
	x0, y0 := float64(marginL), float64(marginT)
	fmt.Fprintf(&b, `<rect class="plot-area" x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#888888" stroke-width="1"/>`+"\n", f(x0), f(y0), f(pw), f(ph))

	if xs.empty() || ys.empty() {
		fmt.Fprintf(&b, `<text class="no-data" x="%s" y="%s" text-anchor="middle" font-size="12" font-family="sans-serif" fill="#666666">no data</text>`+"\n", f(x0+pw/2), f(y0+ph/2))
		writeAxisLabels(&b, c, x0, y0, pw, ph)
		writeLegend(&b, legend, W, H-legendH)
		b.WriteString("</svg>\n")
		return b.String()
	}
	xt := Ticks(xs.lo, xs.hi, 7)
	yt := Ticks(ys.lo, ys.hi, 6)
	// The axes span the ticks so every tick is inside.
	xlo, xhi := math.Min(xs.lo, xt.Lo), math.Max(xs.hi, xt.Hi)
	ylo, yhi := math.Min(ys.lo, yt.Lo), math.Max(ys.hi, yt.Hi)
	if xhi == xlo {
		xlo, xhi = xlo-1, xhi+1
	}
	if yhi == ylo {
		ylo, yhi = ylo-1, yhi+1
	}
	px := func(v float64) float64 { return x0 + (v-xlo)/(xhi-xlo)*pw }
	py := func(v float64) float64 { return y0 + ph - (v-ylo)/(yhi-ylo)*ph }

	// Grid and ticks.
	b.WriteString(`<g class="axis x-axis" font-size="11" font-family="sans-serif" fill="#333333">` + "\n")
	for _, v := range xt.Values {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e5e5e5"/>`, f(x), f(y0), f(x), f(y0+ph))
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#888888"/>`, f(x), f(y0+ph), f(x), f(y0+ph+4))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f(x), f(y0+ph+16), esc(xt.Label(v)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="axis y-axis" font-size="11" font-family="sans-serif" fill="#333333">` + "\n")
	for _, v := range yt.Values {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e5e5e5"/>`, f(x0), f(y), f(x0+pw), f(y))
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#888888"/>`, f(x0-4), f(y), f(x0), f(y))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", f(x0-6), f(y+4), esc(yt.Label(v)))
	}
	b.WriteString("</g>\n")
	writeAxisLabels(&b, c, x0, y0, pw, ph)

	// Bands under lines.
	for i, bd := range c.Bands {
		n := min(len(bd.X), len(bd.Lo), len(bd.Hi))
		pts := 0
		var d strings.Builder
		for _, seg := range segments(n, func(k int) bool { return finite(bd.X[k]) && finite(bd.Lo[k]) && finite(bd.Hi[k]) }) {
			for j, k := 0, seg[0]; k < seg[1]; j, k = j+1, k+1 {
				cmd := "L"
				if j == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&d, "%s%s %s ", cmd, f(px(bd.X[k])), f(py(bd.Hi[k])))
				pts++
			}
			for k := seg[1] - 1; k >= seg[0]; k-- {
				fmt.Fprintf(&d, "L%s %s ", f(px(bd.X[k])), f(py(bd.Lo[k])))
			}
			d.WriteString("Z ")
		}
		if pts == 0 {
			continue
		}
		fmt.Fprintf(&b, `<path class="band" data-series="%s" data-points="%d" d="%s" fill="%s" fill-opacity="0.18" stroke="none"/>`+"\n",
			esc(bd.Name), pts, strings.TrimSpace(d.String()), bandColor[i])
	}
	// Limits.
	for i, l := range c.Limits {
		if offScale[i] != "" || !finite(l.Y) {
			continue
		}
		y := py(l.Y)
		fmt.Fprintf(&b, `<line class="limit" data-series="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n",
			esc(l.Name), f(x0), f(y), f(x0+pw), f(y), limitColor[i])
	}
	// Lines.
	for i, s := range c.Series {
		n := min(len(s.X), len(s.Y))
		pts := 0
		var d strings.Builder
		segs := segments(n, func(k int) bool { return finite(s.X[k]) && finite(s.Y[k]) })
		for _, seg := range segs {
			for j, k := 0, seg[0]; k < seg[1]; j, k = j+1, k+1 {
				cmd := "L"
				if j == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&d, "%s%s %s ", cmd, f(px(s.X[k])), f(py(s.Y[k])))
				pts++
			}
		}
		if pts == 0 {
			continue
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(&b, `<path class="series" data-series="%s" data-points="%d" d="%s" fill="none" stroke="%s" stroke-width="1.6"%s/>`+"\n",
			esc(s.Name), pts, strings.TrimSpace(d.String()), seriesColor[i], dash)
		// Markers: always for a lone point (a path of one M is invisible).
		if s.Markers || pts == 1 {
			fmt.Fprintf(&b, `<g class="markers" data-series="%s" fill="%s">`, esc(s.Name), seriesColor[i])
			for _, seg := range segs {
				for k := seg[0]; k < seg[1]; k++ {
					fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5"/>`, f(px(s.X[k])), f(py(s.Y[k])))
				}
			}
			b.WriteString("</g>\n")
		}
	}
	writeLegend(&b, legend, W, H-legendH)
	b.WriteString("</svg>\n")
	return b.String()
}

type legendEntry struct {
	name, color, kind string
	dash              bool
}

// legendRowsHeight is the height of the legend: entries are laid out in
// columns of legendColW pixels.
func legendRowsHeight(n, W int) int {
	if n == 0 {
		return 0
	}
	cols := max(1, (W-marginL)/legendColW)
	rows := (n + cols - 1) / cols
	return rows*legendRow + 4
}

const legendColW = 220

func writeLegend(b *strings.Builder, es []legendEntry, W, top int) {
	if len(es) == 0 {
		return
	}
	cols := max(1, (W-marginL)/legendColW)
	b.WriteString(`<g class="legend" font-size="11" font-family="sans-serif" fill="#333333">` + "\n")
	for i, e := range es {
		x := marginL + (i%cols)*legendColW
		y := top + (i/cols)*legendRow + 6
		switch e.kind {
		case "band":
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="18" height="10" fill="%s" fill-opacity="0.25"/>`, x, y, e.color)
		default:
			dash := ""
			if e.dash {
				dash = ` stroke-dasharray="5 3"`
			}
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, x, y+5, x+18, y+5, e.color, dash)
		}
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+24, y+9, esc(truncate(e.name, 34)))
	}
	b.WriteString("</g>\n")
}

func writeAxisLabels(b *strings.Builder, c *Chart, x0, y0, pw, ph float64) {
	if xl := axisLabel(c.XLabel, c.XUnit); xl != "" {
		fmt.Fprintf(b, `<text class="x-label" x="%s" y="%s" text-anchor="middle" font-size="12" font-family="sans-serif">%s</text>`+"\n", f(x0+pw/2), f(y0+ph+34), esc(xl))
	}
	if yl := axisLabel(c.YLabel, c.YUnit); yl != "" {
		cx, cy := 14.0, y0+ph/2
		fmt.Fprintf(b, `<text class="y-label" x="%s" y="%s" text-anchor="middle" font-size="12" font-family="sans-serif" transform="rotate(-90 %s %s)">%s</text>`+"\n", f(cx), f(cy), f(cx), f(cy), esc(yl))
	}
}

// axisLabel is "label [unit]" (the unit alone, or the label alone, when
// the other is empty; a dimensionless "1" unit is not shown).
func axisLabel(label, unit string) string {
	if unit == "" || unit == "1" {
		return label
	}
	if label == "" {
		return "[" + unit + "]"
	}
	return label + " [" + unit + "]"
}

// segments returns the [start, end) index ranges of consecutive points
// for which ok holds.
func segments(n int, ok func(int) bool) [][2]int {
	var out [][2]int
	start := -1
	for k := 0; k <= n; k++ {
		good := k < n && ok(k)
		if good && start < 0 {
			start = k
		}
		if !good && start >= 0 {
			out = append(out, [2]int{start, k})
			start = -1
		}
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// f prints a coordinate with two decimals ("-0.00" normalised to "0.00").
func f(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	if s == "-0.00" {
		return "0.00"
	}
	return s
}

// num prints a value for a legend: up to 6 significant digits.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func esc(s string) string { return html.EscapeString(s) }

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
