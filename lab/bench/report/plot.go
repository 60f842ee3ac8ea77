package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"github.com/svclab/svclab/lab/bench"
	gonumplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotFile is one PNG, by its path relative to the report directory.
type plotFile struct {
	Title string
	Path  string
}

// plot is one PNG to draw: its file and its lines.
type plot struct {
	plotFile
	name  string
	lines []line
}

// plotted are the metrics drawn against N, a line per subject.
var plotted = []struct{ metric, title string }{
	{"cold_sync", "cold sync: N Services from empty"},
	{"add_sync", "add one Service with N present: sync"},
	{"add_programming", "add one Service: network-programming latency"},
	{"change_sync", "change one Service's endpoints with N present: sync"},
	{"change_programming", "change one Service's endpoints: network-programming latency"},
}

// plots are, for each E, each metric's p50 against N on log-log axes, and the
// data path's handshake times. A method keeps its colour on every plot; every
// variant of a mode but the first is dashed.
func (a *analysis) plots() []plot {
	colors := a.methodColors()
	var out []plot
	for _, e := range a.es {
		for _, pm := range plotted {
			var lines []line
			for _, s := range a.subjects(pm.metric) {
				if l := a.line(s, e, pm.metric, s.String()); len(l.xys) > 0 {
					l.color, l.shape, l.dashed = colors[s.Method], colors[s.Method], a.dashed(s)
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				name := fmt.Sprintf("%s-e%d.png", pm.metric, e)
				out = append(out, plot{plotFile{fmt.Sprintf("%s (p50, E=%d)", pm.title, e), PlotsDir + "/" + name}, name, lines})
			}
		}
		var lines []line
		for i, s := range a.subjects("connect_last") {
			for j, target := range []string{"first", "last", "pod", "baseline"} {
				if l := a.line(s, e, "connect_"+target, modeBackend(s)+" "+target); len(l.xys) > 0 {
					l.color, l.dashed, l.shape = i, j%2 == 1, j
					lines = append(lines, l)
				}
			}
		}
		if len(lines) > 0 {
			name := fmt.Sprintf("connect-e%d.png", e)
			title := fmt.Sprintf("TCP handshake from a pod: first and last Service, pod without NAT (p50, E=%d)", e)
			out = append(out, plot{plotFile{title, PlotsDir + "/" + name}, name, lines})
		}
	}
	return out
}

// drawPlots draws every plot into dir's plots directory, once.
func drawPlots(dir string, plots []plot) ([]plotFile, error) {
	if err := os.MkdirAll(filepath.Join(dir, PlotsDir), 0o755); err != nil {
		return nil, err
	}
	files := make([]plotFile, len(plots))
	for i, p := range plots {
		if err := drawLines(filepath.Join(dir, PlotsDir, p.name), p.Title, "seconds", p.lines); err != nil {
			return nil, err
		}
		files[i] = p.plotFile
	}
	return files, nil
}

type line struct {
	label string
	xys   plotter.XYs
	// color and shape index plotutil's palettes; dashed lines are a mode's
	// later variants (or, on the data path plot, every other target).
	color, shape int
	dashed       bool
}

func (a *analysis) line(s bench.Subject, e int, metric, label string) line {
	l := line{label: label}
	for _, n := range a.sizes(s, e, metric) {
		if p := a.p(s, n, e, metric, 0.5); p > 0 {
			l.xys = append(l.xys, plotter.XY{X: float64(n), Y: p})
		}
	}
	return l
}

func drawLines(path, title, ylabel string, lines []line) error {
	p := gonumplot.New()
	p.Title.Text = title
	p.X.Label.Text = "Services (N)"
	p.Y.Label.Text = ylabel + " (log scale)"
	p.X.Scale, p.Y.Scale = gonumplot.LogScale{}, gonumplot.LogScale{}
	p.X.Tick.Marker = logTicks{label: func(v float64) string { return fmt.Sprintf("%g", v) }}
	p.Y.Tick.Marker = logTicks{label: fmtSeconds}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	for _, l := range lines {
		ln, pts, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, l.label, err)
		}
		c := plotutil.Color(l.color)
		ln.Color, pts.Color = c, c
		if l.dashed {
			ln.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		ln.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(l.shape)
		pts.Radius = vg.Points(2.5)
		p.Add(ln, pts)
		p.Legend.Add(l.label, legendThumb{c, ln.Dashes, pts.Shape})
	}
	// A plot of one point (one size, one line) has an axis of no width, which
	// the plotting library widens by ±1: below zero on a log scale, where it
	// panics. A factor of two either way keeps the point in the middle.
	for _, ax := range []*gonumplot.Axis{&p.X, &p.Y} {
		if ax.Min == ax.Max {
			ax.Min, ax.Max = ax.Min/2, ax.Max*2
		}
	}
	if err := p.Save(9*vg.Inch, 6*vg.Inch, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// legendThumb draws a line with its point shape in the legend.
type legendThumb struct {
	c      color.Color
	dashes []vg.Length
	shape  draw.GlyphDrawer
}

func (t legendThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle{Color: t.c, Width: vg.Points(1.5), Dashes: t.dashes}, c.Min.X, y, c.Max.X, y)
	c.DrawGlyph(draw.GlyphStyle{Color: t.c, Radius: vg.Points(2.5), Shape: t.shape}, vg.Point{X: c.Center().X, Y: y})
}

// logTicks marks a log axis at 1, 2 and 5 times each power of ten, labelled
// by label (gonum's LogTicks labels powers of ten only, which leaves a narrow
// range without a single label), with unlabelled minor ticks in between.
type logTicks struct{ label func(float64) string }

func (t logTicks) Ticks(min, max float64) []gonumplot.Tick {
	if min <= 0 || max <= min {
		return nil
	}
	var ticks []gonumplot.Tick
	for p := math.Floor(math.Log10(min)); math.Pow(10, p) <= max; p++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, p)
			if v < min || v > max {
				continue
			}
			tick := gonumplot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				tick.Label = t.label(v)
			}
			ticks = append(ticks, tick)
		}
	}
	return ticks
}
