package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot size and resolution: 960 × 432 pixels, shown at up to 900 CSS pixels.
const (
	plotW   = 8 * vg.Inch
	plotH   = 3.6 * vg.Inch
	plotDPI = 120
)

// Colours (colour-blind safe: blue/orange contrast, red only for the marker).
var (
	colBlue      = color.RGBA{0x1f, 0x5f, 0xa8, 0xff}
	colLightBlue = color.RGBA{0x9e, 0xc3, 0xe6, 0xff}
	colOrange    = color.RGBA{0xe0, 0x7b, 0x24, 0xff}
	colPeach     = color.RGBA{0xf4, 0xb9, 0x84, 0xff}
	colRed       = color.RGBA{0xc6, 0x28, 0x28, 0xff}
	colGreen     = color.RGBA{0x2e, 0x7d, 0x32, 0xff}
	colGrey      = color.RGBA{0x61, 0x61, 0x61, 0xff}
	colGrid      = color.RGBA{0xe3, 0xe3, 0xe3, 0xff}
	colText      = color.RGBA{0x21, 0x21, 0x21, 0xff}
)

// newPlot returns a plot with the report's fonts, a light grid and labelled
// axes.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(14)
	p.Title.TextStyle.Color = colText
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(12)
		a.Label.TextStyle.Color = colText
		a.Tick.Label.Font = sans(10.5)
		a.Tick.Label.Color = colText
		a.Color = colGrey
		a.Tick.Color = colGrey
	}
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.TextStyle.Font = sans(10.5)
	p.Legend.TextStyle.Color = colText
	p.Legend.Top = true
	p.Legend.Padding = vg.Points(2)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = colGrid, colGrid
	p.Add(g)
	return p
}

// sans returns Liberation Sans (embedded in gonum/plot) at size points.
func sans(size float64) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(size)}
}

// dataURL is a data: URL of base64 text: only [A-Za-z0-9+/=;:,] characters,
// safe in a quoted HTML attribute.
type dataURL string

// pngURL renders p as a PNG data URL.
func pngURL(p *plot.Plot) (dataURL, error) {
	c := vgimg.NewWith(vgimg.UseWH(plotW, plotH), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return "", fmt.Errorf("report: png: %w", err)
	}
	return dataURL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}

// bars returns the bins [from, to) of h as a filled histogram. The few
// values of discrete data (up to 20 bins of width 1) get bars apart.
func bars(h histogram, from, to int, fill color.Color) *plotter.Histogram {
	hp := &plotter.Histogram{Width: h.Width, FillColor: fill}
	hp.LineStyle.Width = vg.Points(0.6)
	hp.LineStyle.Color = color.White
	gap := 0.0
	if h.Discrete && h.Width == 1 && len(h.Counts) <= 20 {
		gap = 0.15
	}
	for i := from; i < to; i++ {
		lo := h.Lo + float64(i)*h.Width
		hp.Bins = append(hp.Bins, plotter.HistogramBin{Min: lo + gap, Max: lo + h.Width - gap, Weight: float64(h.Counts[i])})
	}
	return hp
}

// histogramPlot draws h in one colour. Discrete data with few values gets a
// tick under each value.
func histogramPlot(h histogram, title, xLabel, yLabel string) *plot.Plot {
	p := newPlot(title, xLabel, yLabel)
	p.Add(bars(h, 0, len(h.Counts), colBlue))
	p.Y.Min, p.Y.Max = 0, math.Max(1, float64(slices.Max(h.Counts))*1.1)
	p.Y.Tick.Marker = countTicks{}
	if h.Discrete && h.Width == 1 && len(h.Counts) <= 20 {
		var ticks []plot.Tick
		for i := range h.Counts {
			v := h.Lo + 0.5 + float64(i)
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.X.Max = h.Lo-0.25, h.Lo+float64(len(h.Counts))+0.25
	}
	return p
}

// vline returns a vertical dashed line at x from 0 to top.
func vline(x, top float64, c color.Color) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
	l.Color = c
	l.Width = vg.Points(2)
	l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	return l
}

// hline returns a horizontal dashed line at y from x0 to x1.
func hline(y, x0, x1 float64, c color.Color) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	l.Color = c
	l.Width = vg.Points(1.2)
	l.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
	return l
}

// stdPlot draws the group std histogram: groups with equal rewards as their
// own bar left of 0, the other groups in bins from 0, those at or under the
// threshold (dropped) apart from the kept ones, and the threshold as a line.
func stdPlot(h histogram, zero int64, threshold float64) *plot.Plot {
	p := newPlot("Reward std per group (batch/task)", "reward std within the group (reward units)", "groups")
	w := h.Width
	if w == 0 {
		w = 0.05
	}
	top := float64(zero)
	zb := &plotter.Histogram{Width: w, FillColor: colOrange, Bins: []plotter.HistogramBin{{Min: -w, Max: 0, Weight: float64(zero)}}}
	zb.LineStyle.Width = 0
	p.Add(zb)
	p.Legend.Add("std = 0: all rewards equal", zb)
	split := 0 // bins [0, split) lie at or under the threshold
	for split < len(h.Counts) && h.Lo+float64(split+1)*h.Width <= threshold {
		split++
	}
	if split > 0 {
		d := bars(h, 0, split, colPeach)
		p.Add(d)
		p.Legend.Add("0 < std ≤ threshold: dropped", d)
	}
	if split < len(h.Counts) {
		k := bars(h, split, len(h.Counts), colBlue)
		p.Add(k)
		p.Legend.Add("std > threshold: kept", k)
	}
	for _, c := range h.Counts {
		top = math.Max(top, float64(c))
	}
	l := vline(threshold, top*1.08, colRed)
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("std_threshold = %g", threshold), l)
	p.Y.Min = 0
	p.Y.Max = math.Max(1, top*1.5) // room for the legend
	p.Y.Tick.Marker = countTicks{}
	p.X.Min = -w * 1.5
	p.X.Max = math.Max(p.X.Max, threshold+w)
	return p
}

// batchPlot draws the mean reward per batch, a moving average when there are
// many batches, and the overall mean.
func batchPlot(xs, ys []float64, overall float64, xLabel string) (*plot.Plot, error) {
	p := newPlot("Mean reward per explore batch", xLabel, "mean reward (reward units)")
	pts := make(plotter.XYs, len(xs))
	for i := range xs {
		pts[i] = plotter.XY{X: xs[i], Y: ys[i]}
	}
	raw, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	raw.Width = vg.Points(1.5)
	raw.Color = colBlue
	if len(pts) > 100 {
		raw.Color = colLightBlue
		raw.Width = vg.Points(0.8)
	}
	p.Add(raw)
	p.Legend.Add("mean reward of the batch", raw)
	if len(pts) <= 60 {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Color = colBlue
		s.GlyphStyle.Radius = vg.Points(2.5)
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(s)
	}
	if win := len(pts) / 50; len(pts) > 100 {
		ma := movingAverage(pts, win)
		l, err := plotter.NewLine(ma)
		if err != nil {
			return nil, err
		}
		l.Color = colBlue
		l.Width = vg.Points(2.2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("moving average over %d batches", win), l)
	}
	ov := hline(overall, xs[0], xs[len(xs)-1], colOrange)
	p.Add(ov)
	p.Legend.Add(fmt.Sprintf("overall mean %.4g", overall), ov)
	// Room above the data for the legend, and a little below.
	lo, hi := slices.Min(ys), slices.Max(ys)
	span := math.Max(hi-lo, math.Max(math.Abs(hi)*0.05, 1e-3))
	p.Y.Min, p.Y.Max = lo-0.08*span, hi+0.3*span
	return p, nil
}

// seriesColors are the colours of linesPlot's lines, in turn (then again,
// dashed).
var seriesColors = []color.Color{colBlue, colOrange, colGreen, colRed, colGrey, colLightBlue, colPeach}

// linesPlot draws each series (an experiment's value per batch) as a line,
// named in the legend.
func linesPlot(title, yLabel, xLabel string, series []stepSeries) (*plot.Plot, error) {
	p := newPlot(title, xLabel, yLabel)
	var ys []float64
	for i, s := range series {
		pts := make(plotter.XYs, len(s.xs))
		for k := range s.xs {
			pts[k] = plotter.XY{X: s.xs[k], Y: s.ys[k]}
		}
		l, dots, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color = seriesColors[i%len(seriesColors)]
		l.Width = vg.Points(1.5)
		if i >= len(seriesColors) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		if len(pts) <= 60 { // a point per batch, so that a lone batch shows
			dots.GlyphStyle.Color = l.Color
			dots.GlyphStyle.Radius = vg.Points(2.5)
			dots.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(dots)
		}
		p.Legend.Add(s.experiment, l)
		ys = append(ys, s.ys...)
	}
	lo, hi := slices.Min(ys), slices.Max(ys)
	span := math.Max(hi-lo, math.Max(math.Abs(hi)*0.05, 1e-3))
	p.Y.Min, p.Y.Max = lo-0.08*span, hi+0.3*span
	return p, nil
}

// movingAverage returns the centred moving average of pts over win points.
func movingAverage(pts plotter.XYs, win int) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	sum, lo, hi := 0.0, 0, 0
	for i := range pts {
		for hi < len(pts) && hi <= i+win/2 {
			sum += pts[hi].Y
			hi++
		}
		for lo < i-win/2 {
			sum -= pts[lo].Y
			lo++
		}
		out[i] = plotter.XY{X: pts[i].X, Y: sum / float64(hi-lo)}
	}
	return out
}

// share is one bar of the groups plot.
type share struct {
	label  string
	groups int64
	of     int64
	color  color.Color
}

// sharesPlot draws horizontal bars of the share of groups in each category,
// the first on top.
func sharesPlot(shares []share) (*plot.Plot, error) {
	p := newPlot("Share of groups filtered or duplicated", "share of groups (%)", "")
	names := make([]string, len(shares))
	var labels plotter.XYLabels
	for k, s := range shares {
		i := len(shares) - 1 - k // NominalY counts from the bottom
		pct := 0.0
		if s.of > 0 {
			pct = 100 * float64(s.groups) / float64(s.of)
		}
		b, err := plotter.NewBarChart(plotter.Values{pct}, vg.Points(22))
		if err != nil {
			return nil, err
		}
		b.Horizontal = true
		b.XMin = float64(i)
		b.Color = s.color
		b.LineStyle.Width = 0
		p.Add(b)
		names[i] = s.label
		labels.XYs = append(labels.XYs, plotter.XY{X: pct + 1, Y: float64(i)})
		labels.Labels = append(labels.Labels, fmt.Sprintf("%.1f %% (%s of %s)", pct, fint(float64(s.groups)), fint(float64(s.of))))
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = sans(10.5)
		l.TextStyle[i].Color = colText
		l.TextStyle[i].YAlign = -0.5 // centred on the bar
	}
	p.Add(l)
	p.NominalY(names...)
	p.Y.Tick.Label.Font = sans(11)
	p.X.Min, p.X.Max = 0, 125 // room for the labels
	p.X.Tick.Marker = percentTicks{}
	p.Y.Padding = vg.Points(12)
	return p, nil
}

// countTicks marks a count axis: the default ticks, labelled only at whole
// numbers, with thousands separators.
type countTicks struct{}

// Ticks returns the tick marks of a count axis.
func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label == "" {
			continue
		}
		if t.Value != math.Trunc(t.Value) {
			ticks[i].Label = ""
		} else {
			ticks[i].Label = fint(t.Value)
		}
	}
	return ticks
}

// percentTicks marks 0, 20, …, 100 only (the axis runs on to fit labels).
type percentTicks struct{}

// Ticks returns the tick marks of a percentage axis.
func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := 0.0; v <= 100; v += 20 {
		t = append(t, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
	}
	for v := 10.0; v < 100; v += 20 {
		t = append(t, plot.Tick{Value: v})
	}
	return t
}
