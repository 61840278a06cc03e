package report

import (
	"bufio"
	"fmt"
	"image/color"
	"os"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/weirhq/weir/chaos/checker"
	"github.com/weirhq/weir/chaos/history"
)

// Plot sizes and what is drawn.
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 4 * vg.Inch
	// plotLimits is how many limits are drawn (their most admitted key).
	plotLimits = 3
	// plotWindow is the trailing window admissions are counted in.
	plotWindow = time.Second
	// maxSamples bounds the points of one line.
	maxSamples = 2000
)

// faultFill shades fault windows.
var faultFill = color.NRGBA{R: 255, G: 80, B: 80, A: 48}

// lineColors are the limits' colours (Okabe-Ito blue, green, orange),
// chosen to stand apart from the red fault shading.
var lineColors = []color.Color{
	color.NRGBA{R: 0, G: 114, B: 178, A: 255},
	color.NRGBA{R: 0, G: 158, B: 115, A: 255},
	color.NRGBA{R: 230, G: 159, B: 0, A: 255},
}

// Plot writes a PNG to path of the run's admissions against the bound:
// for the most admitted key of each of up to three limits (the limits
// admitting most first), the units admitted in a trailing 1s window
// normally (solid line) and normally plus by a failure policy (dashed, when
// a failure policy admitted anything), the bound B + 1s/T as a dotted
// horizontal line, and every fault shaded and labelled. x is seconds since
// the start of the run.
func Plot(path string, h *history.History, r checker.Result) error {
	p := plot.New()
	p.Title.Text = r.Scenario
	if p.Title.Text == "" {
		p.Title.Text = h.Header.Scenario
	}
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = fmt.Sprintf("units admitted in trailing %s", plotWindow)
	p.Legend.Top = true
	entries := 0

	span := seconds(r.End, r.Start)
	if span <= 0 {
		span = 1
	}
	step := max(time.Duration(span*float64(time.Second)/maxSamples), 50*time.Millisecond)

	bands := faultBands{style: p.X.Tick.Label}
	bands.style.XAlign, bands.style.YAlign = draw.XLeft, draw.YTop
	for _, f := range r.Faults {
		bands.bands = append(bands.bands, band{x0: seconds(f.Start, r.Start), x1: seconds(f.End, r.Start), label: f.Name})
	}
	p.Add(bands)
	if len(bands.bands) > 0 {
		p.Legend.Add("fault", bands)
		entries++
	}

	ymax := 1.0
	for i, l := range topLimits(r.Limits, plotLimits) {
		clr := lineColors[i%len(lineColors)]
		s := checker.Series(h, l.Spec.Name, l.TopKey, plotWindow, step)
		name := l.Spec.Name + "/" + l.TopKey

		normal := make(plotter.XYs, len(s.Times))
		total := make(plotter.XYs, len(s.Times))
		anyFallback := false
		for j, t := range s.Times {
			normal[j] = plotter.XY{X: t, Y: s.Admitted[j]}
			total[j] = plotter.XY{X: t, Y: s.Admitted[j] + s.Fallback[j]}
			anyFallback = anyFallback || s.Fallback[j] > 0
			ymax = max(ymax, total[j].Y)
		}
		if len(normal) > 0 {
			ln, err := plotter.NewLine(normal)
			if err != nil {
				return fmt.Errorf("plot %s: %w", name, err)
			}
			ln.Color, ln.Width = clr, vg.Points(1.2)
			p.Add(ln)
			p.Legend.Add(name, ln)
			entries++
		}
		if anyFallback {
			ln, err := plotter.NewLine(total)
			if err != nil {
				return fmt.Errorf("plot %s: %w", name, err)
			}
			ln.Color, ln.Width = clr, vg.Points(1.2)
			ln.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(ln)
			p.Legend.Add(name+" incl. fallback", ln)
			entries++
		}
		bound := l.Spec.Bound(plotWindow)
		ymax = max(ymax, bound)
		bl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: bound}, {X: span, Y: bound}})
		if err != nil {
			return fmt.Errorf("plot %s bound: %w", l.Spec.Name, err)
		}
		bl.Color, bl.Width = clr, vg.Points(1)
		bl.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(bl)
		p.Legend.Add(fmt.Sprintf("%s bound %s", l.Spec.Name, checker.Units(bound)), bl)
		entries++
	}
	p.X.Min, p.X.Max = 0, span
	// Leave the legend (top right) room above the data.
	p.Y.Min, p.Y.Max = 0, ymax/(1-min(0.6, 0.05+0.055*float64(entries)))

	wt, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if _, err := wt.WriteTo(bw); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// topLimits returns up to n limits that admitted anything, the most
// admitted top key first.
func topLimits(ls []checker.LimitResult, n int) []checker.LimitResult {
	var out []checker.LimitResult
	for _, l := range ls {
		if l.TopKey != "" {
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TopKeyAdmitted > out[j].TopKeyAdmitted })
	return out[:min(len(out), n)]
}

// band is one fault window, in seconds since the start.
type band struct {
	x0, x1 float64
	label  string
}

// faultBands shades fault windows over the full height of the plot and
// labels each at its top left.
type faultBands struct {
	bands []band
	style draw.TextStyle
}

// Plot implements plot.Plotter.
func (f faultBands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, b := range f.bands {
		x0, x1 := trX(b.x0), trX(b.x1)
		if x1-x0 < vg.Points(1) {
			x1 = x0 + vg.Points(1)
		}
		pts := []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}
		if clipped := c.ClipPolygonX(pts); len(clipped) > 0 {
			c.FillPolygon(faultFill, clipped)
		}
		if b.label != "" && c.ContainsX(x0) {
			c.FillText(f.style, vg.Point{X: x0 + vg.Points(2), Y: c.Max.Y - vg.Points(2)}, b.label)
		}
	}
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (f faultBands) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(faultFill, pts)
}
