package report

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// EpochSeries is one named line of a learning curve: a value per epoch,
// epoch 1 first (NaN where there is none).
type EpochSeries struct {
	Name   string
	Values []float64
}

// EpochPanel is one plot of learning curves: a quantity (its axis label)
// per epoch, one line per series.
type EpochPanel struct {
	Title, YLabel string
	Series        []EpochSeries
}

// WriteEpochPanels draws the panels one above the other, each against the
// epoch, in the report's colour-blind-safe palette (series i has the same
// colour in every panel, named in the first panel's legend), and writes
// the PNG to path.
func WriteEpochPanels(path string, panels []EpochPanel) error {
	if len(panels) == 0 {
		return fmt.Errorf("write %s: no panels", path)
	}
	rows := make([][]*plot.Plot, len(panels))
	for r, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.Title
		p.X.Label.Text = "epoch"
		p.Y.Label.Text = pn.YLabel
		p.X.Tick.Marker = integerTicks{}
		p.Add(plotter.NewGrid())
		for i, s := range pn.Series {
			xy := make(plotter.XYs, len(s.Values))
			for e, v := range s.Values {
				xy[e] = plotter.XY{X: float64(e + 1), Y: v}
			}
			xy = finite(xy)
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return fmt.Errorf("plot %s, %s: %w", pn.Title, s.Name, err)
			}
			l.Color = palette[i%len(palette)]
			l.Width = vg.Points(1.5)
			p.Add(l)
			if r == 0 {
				p.Legend.Add(s.Name, l)
			}
		}
		p.Legend.Top = true
		rows[r] = []*plot.Plot{p}
	}
	img := vgimg.New(plotWidth, plotHeight*vg.Length(len(panels)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadY: vg.Points(10)}
	canvases := plot.Align(rows, tiles, dc)
	for r := range rows {
		rows[r][0].Draw(canvases[r][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
