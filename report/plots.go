package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot sizes: wide enough to read on a laptop screen at 1×.
const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 3.2 * vg.Inch
)

// palette is colour-blind safe (Okabe and Ito, 2008).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{0, 158, 115, 255},   // green
	color.RGBA{204, 121, 167, 255}, // purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 0, 0, 255},       // black
}

// series is one named line of a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// linePlot draws the series as lines (with points when there are few) and
// returns the PNG. With timeX the x values are Unix seconds, labelled as
// dates.
func linePlot(title, xLabel, yLabel string, timeX bool, ss ...series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	if timeX {
		p.X.Tick.Marker = plot.TimeTicks{Format: "2006-01-02"}
	} else {
		p.X.Tick.Marker = integerTicks{}
	}
	drawn := 0
	for i, s := range ss {
		xy := finite(s.xy)
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("plot %s, %s: %w", title, s.name, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		if len(xy) <= 60 {
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, fmt.Errorf("plot %s, %s: %w", title, s.name, err)
			}
			sc.Color = l.Color
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = vg.Points(2.2)
			p.Add(sc)
		}
		if len(ss) > 1 {
			p.Legend.Add(s.name, l)
		}
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	p.Legend.Top = true
	return encodePNG(p)
}

// stackedPlot draws shares that sum to one as stacked areas.
func stackedPlot(title, xLabel string, x []float64, names []string, shares [][]float64) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "share of bars"
	p.X.Tick.Marker = plot.TimeTicks{Format: "2006-01-02"}
	p.Y.Min, p.Y.Max = 0, 1
	// Draw the cumulative tops from the highest down, each polygon filled
	// to the x axis, so the lower layers paint over the higher ones.
	cum := make([][]float64, len(names))
	run := make([]float64, len(x))
	for k := range names {
		cum[k] = make([]float64, len(x))
		for i := range x {
			run[i] += shares[k][i]
			cum[k][i] = run[i]
		}
	}
	for k := len(names) - 1; k >= 0; k-- {
		pts := make(plotter.XYs, 0, len(x)+2)
		pts = append(pts, plotter.XY{X: x[0], Y: 0})
		for i := range x {
			pts = append(pts, plotter.XY{X: x[i], Y: cum[k][i]})
		}
		pts = append(pts, plotter.XY{X: x[len(x)-1], Y: 0})
		poly, err := plotter.NewPolygon(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		poly.Color = palette[k%len(palette)]
		poly.LineStyle.Width = 0
		p.Add(poly)
		p.Legend.Add(names[k], poly)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return encodePNG(p)
}

// barPlot draws one bar per label.
func barPlot(title, yLabel string, labels []string, values []float64) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	vals := make(plotter.Values, len(values))
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			v = 0
		}
		vals[i] = v
	}
	b, err := plotter.NewBarChart(vals, vg.Points(28))
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", title, err)
	}
	b.Color = palette[0]
	b.LineStyle.Width = 0
	p.Add(b)
	p.NominalX(labels...)
	return encodePNG(p)
}

func encodePNG(p *plot.Plot) ([]byte, error) {
	wt, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// finite drops points with a NaN or infinite coordinate, which gonum/plot
// refuses.
func finite(xy plotter.XYs) plotter.XYs {
	out := xy[:0:0]
	for _, p := range xy {
		if !math.IsNaN(p.X) && !math.IsNaN(p.Y) && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0) {
			out = append(out, p)
		}
	}
	return out
}

// integerTicks labels whole numbers only (epochs).
type integerTicks struct{}

// Ticks returns the default ticks that fall on integers.
func (integerTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
		if t.Value == math.Trunc(t.Value) {
			if t.Label != "" {
				t.Label = fmt.Sprintf("%d", int64(t.Value))
			}
			out = append(out, t)
		}
	}
	return out
}

// unix is a time as a plot's x value.
func unix(t time.Time) float64 { return float64(t.Unix()) }

// intervalSeries is one strategy's estimates with their intervals, one
// per label of an interval plot; NaN estimates are not drawn.
type intervalSeries struct {
	name        string
	est, lo, hi []float64
	hasInterval []bool
}

// add appends an estimate and its interval [lo, hi] (drawn only with ok).
func (s *intervalSeries) add(est, lo, hi float64, ok bool) {
	s.est, s.lo, s.hi, s.hasInterval = append(s.est, est), append(s.lo, lo), append(s.hi, hi), append(s.hasInterval, ok)
}

// errorPoints are points with their errors below and above, what
// gonum's YErrorBars draws.
type errorPoints struct {
	plotter.XYs
	plotter.YErrors
}

// intervalPlot draws, at each label, a dot per series for its estimate
// and a bar for its interval, the series side by side, with a line at 0.
func intervalPlot(title, yLabel string, labels []string, ss ...intervalSeries) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color = color.Gray{Y: 0x60}
	p.Add(zero)
	width := 0.6 // of the unit between two labels, shared by the series
	for k, s := range ss {
		off := 0.0
		if len(ss) > 1 {
			off = -width/2 + width*float64(k)/float64(len(ss)-1)
		}
		var dots plotter.XYs
		var bars errorPoints
		for i, e := range s.est {
			if math.IsNaN(e) || math.IsInf(e, 0) {
				continue
			}
			x := float64(i) + off
			dots = append(dots, plotter.XY{X: x, Y: e})
			if s.hasInterval[i] && !math.IsNaN(s.lo[i]) && !math.IsNaN(s.hi[i]) {
				bars.XYs = append(bars.XYs, plotter.XY{X: x, Y: e})
				bars.YErrors = append(bars.YErrors, struct{ Low, High float64 }{math.Max(e-s.lo[i], 0), math.Max(s.hi[i]-e, 0)})
			}
		}
		if len(dots) == 0 {
			continue
		}
		c := palette[k%len(palette)]
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return nil, fmt.Errorf("plot %s, %s: %w", title, s.name, err)
		}
		sc.Color = c
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(3)
		p.Add(sc)
		if len(bars.XYs) > 0 {
			eb, err := plotter.NewYErrorBars(bars)
			if err != nil {
				return nil, fmt.Errorf("plot %s, %s: %w", title, s.name, err)
			}
			eb.Color = c
			eb.Width = vg.Points(1.2)
			p.Add(eb)
		}
		if len(ss) > 1 {
			p.Legend.Add(s.name, sc)
		}
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.7, float64(len(labels))-0.3
	p.Legend.Top = true
	return encodePNG(p)
}
