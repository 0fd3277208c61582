package report

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/dqnflow/dqnflow/market/sim"
)

// Curve is one named line: a value per bar.
type Curve struct {
	Name   string
	Values []float64
	Color  color.Color
}

// Colours of the agent, buy-and-hold and flat in every plot.
var (
	AgentColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	HoldColor  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	FlatColor  = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
)

// Curves returns the equity curves of r (agent, buy-and-hold, flat), each
// divided by the initial equity, so 1 is where they start.
func Curves(r sim.Report) []Curve {
	n := len(r.Equity)
	e0 := 1.0
	if n > 0 && r.Equity[0] > 0 {
		e0 = r.Equity[0]
	}
	norm := func(x []float64) []float64 {
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v / e0
		}
		return out
	}
	flat := make([]float64, n)
	for i := range flat {
		flat[i] = 1
	}
	return []Curve{
		{"agent", norm(r.Equity), AgentColor},
		{"buy & hold", norm(r.BuyAndHoldEquity), HoldColor},
		{"flat", flat, FlatColor},
	}
}

// Drawdown is 1 − E_t / max_{s≤t} E_s for each bar, as a positive
// fraction (sim.MaxDrawdown is its maximum).
func Drawdown(e []float64) []float64 {
	out := make([]float64, len(e))
	peak := 0.0
	for i, v := range e {
		peak = max(peak, v)
		if peak > 0 {
			out[i] = 1 - v/peak
		}
	}
	return out
}

// WritePNG draws curves against the bar number and saves a PNG of 8×4
// inches at path. yLabel names the values.
func WritePNG(path, title, yLabel string, curves []Curve) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "bar of the test range"
	p.X.Tick.Marker = wholeTicks{}
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	for _, c := range curves {
		if len(c.Values) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(c.Values))
		for i, v := range c.Values {
			xy[i].X, xy[i].Y = float64(i), v
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("plot %s: %s: %w", path, c.Name, err)
		}
		l.Color = c.Color
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(c.Name, l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	if err := p.Save(8*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// WritePlots writes equity and drawdown PNGs of r as DIR/NAME-equity.png
// and DIR/NAME-drawdown.png and returns their base names.
func WritePlots(dir, name, title string, r sim.Report) (equity, drawdown string, err error) {
	curves := Curves(r)
	equity, drawdown = name+"-equity.png", name+"-drawdown.png"
	if err := WritePNG(dir+"/"+equity, title+": equity (1 = start)", "equity / initial", curves); err != nil {
		return "", "", err
	}
	dd := make([]Curve, 0, 2)
	for _, c := range curves[:2] {
		v := Drawdown(c.Values)
		for i := range v {
			v[i] *= -100
		}
		dd = append(dd, Curve{c.Name, v, c.Color})
	}
	if err := WritePNG(dir+"/"+drawdown, title+": drawdown", "drawdown (%)", dd); err != nil {
		return "", "", err
	}
	return equity, drawdown, nil
}

// wholeTicks are gonum's default ticks labelled as whole numbers (bar
// numbers have no fraction).
type wholeTicks struct{}

// Ticks implements plot.Ticker.
func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
		}
	}
	return ts
}
