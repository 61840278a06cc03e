package sim

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// regionColors tell regions apart (Okabe-Ito blue, orange, green, purple,
// vermillion).
var regionColors = []color.Color{
	color.NRGBA{R: 0, G: 114, B: 178, A: 255},
	color.NRGBA{R: 230, G: 159, B: 0, A: 255},
	color.NRGBA{R: 0, G: 158, B: 115, A: 255},
	color.NRGBA{R: 204, G: 121, B: 167, A: 255},
	color.NRGBA{R: 213, G: 94, B: 0, A: 255},
}

// Plot writes a PNG to path of a run's shares against demand over time:
// per region, the share it enforced (solid) and its demand (dashed), both
// as fractions of the global limit, and outages shaded.
func Plot(path string, tr Trace, r Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: efficiency %.1f%%, overshoot %.0f units", tr.Name, 100*r.Efficiency, r.Overshoot)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "fraction of the global limit"
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, 1.05
	for _, o := range tr.Outages {
		poly, err := plotter.NewPolygon(plotter.XYs{
			{X: o.From.Seconds(), Y: 0}, {X: o.To.Seconds(), Y: 0},
			{X: o.To.Seconds(), Y: 1.05}, {X: o.From.Seconds(), Y: 1.05},
		})
		if err != nil {
			return fmt.Errorf("sim: plot outage: %w", err)
		}
		poly.Color, poly.LineStyle.Width = color.NRGBA{R: 255, G: 80, B: 80, A: 40}, 0
		p.Add(poly)
	}
	for i, name := range tr.Config.Regions {
		share := make(plotter.XYs, len(r.Samples))
		demand := make(plotter.XYs, len(r.Samples))
		for j, s := range r.Samples {
			share[j] = plotter.XY{X: s.At.Seconds(), Y: s.Share[i]}
			demand[j] = plotter.XY{X: s.At.Seconds(), Y: s.Demand[i]}
		}
		clr := regionColors[i%len(regionColors)]
		sl, err := plotter.NewLine(share)
		if err != nil {
			return fmt.Errorf("sim: plot %s: %w", name, err)
		}
		sl.Color, sl.Width = clr, vg.Points(1.5)
		dl, err := plotter.NewLine(demand)
		if err != nil {
			return fmt.Errorf("sim: plot %s: %w", name, err)
		}
		dl.Color, dl.Width, dl.Dashes = clr, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(sl, dl)
		p.Legend.Add(name+" share", sl)
		p.Legend.Add(name+" demand", dl)
	}
	if err := p.Save(10*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("sim: plot %s: %w", path, err)
	}
	return nil
}
