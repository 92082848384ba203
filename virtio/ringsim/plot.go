package ringsim

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteSVG draws transfers per buffer against ring fullness, one line per
// curve: solid for an interrupt-driven driver, dashed for a polling one.
func WriteSVG(w io.Writer, cs []Curve, line uint64) error {
	return writePlot(w, cs, line, "svg")
}

func writePlot(w io.Writer, cs []Curve, line uint64, format string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Cache-line transfers per buffer (%d-byte lines, ring of %d, chains of 2)", line, QueueSize)
	p.X.Label.Text = "ring fullness: share of the ring's descriptors in flight (log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		var ts []plot.Tick
		for _, v := range []float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1} {
			if v >= min/1.01 && v <= max*1.01 {
				ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%g%%", 100*v)})
			}
		}
		return ts
	})
	p.Y.Label.Text = "transfers per buffer (driver + device)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	palette := []color.RGBA{{0x1f, 0x77, 0xb4, 0xff}, {0x9e, 0xcb, 0xe9, 0xff},
		{0xd6, 0x27, 0x28, 0xff}, {0xf4, 0xa5, 0x82, 0xff}}
	for i, c := range cs {
		pts := make(plotter.XYs, len(c.Points))
		for j, r := range c.Points {
			pts[j].X, pts[j].Y = r.Scenario.Fullness(), r.Total
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		col := palette[i%len(palette)]
		l.Color, s.Color = col, col
		l.Width = vg.Points(1.5)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			s.Shape = draw.BoxGlyph{}
		} else {
			s.Shape = draw.CircleGlyph{}
		}
		p.Add(l, s)
		p.Legend.Add(c.Label, l, s)
	}
	// Room above the curves for the legend.
	p.Y.Min = 0
	top := 0.0
	for _, c := range cs {
		for _, r := range c.Points {
			top = max(top, r.Total)
		}
	}
	p.Y.Max = 1.9 * top
	wt, err := p.WriterTo(9*vg.Inch, 5.5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
