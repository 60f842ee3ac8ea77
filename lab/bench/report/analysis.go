package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/bench"
)

// analysis is one report's rows grouped by subject, size and metric, read once,
// with every growth fit computed once: the summary and the plots both read it.
type analysis struct {
	r      *bench.Report
	values map[key][]float64
	ns, es []int
	// order is every subject present, in reading order.
	order []bench.Subject
	fits  map[fitKey]growth
}

type key struct {
	s      bench.Subject
	n, e   int
	metric string
}

type fitKey struct {
	s      bench.Subject
	e      int
	metric string
}

// growth is a curve's fit over every size and between the two largest.
type growth struct {
	all, last bench.Fit
	ok        bool
}

func analyse(r *bench.Report) *analysis {
	a := &analysis{r: r, values: map[key][]float64{}, fits: map[fitKey]growth{}}
	present := map[bench.Subject]bool{}
	for _, row := range r.Rows {
		k := key{bench.SubjectOf(row), row.Services, row.Endpoints, row.Metric}
		a.values[k] = append(a.values[k], row.Value)
		a.ns = append(a.ns, row.Services)
		a.es = append(a.es, row.Endpoints)
		present[k.s] = true
	}
	slices.Sort(a.ns)
	slices.Sort(a.es)
	a.ns, a.es = slices.Compact(a.ns), slices.Compact(a.es)
	a.order = readingOrder(r.Config, present)
	return a
}

// readingOrder puts the subjects present as the run measured them: modes,
// variants and methods in the configuration's order (bench.Config.Subjects);
// a subject the configuration does not name (a bare apply) after the last of
// its mode and variant; anything else at the end, sorted.
func readingOrder(c bench.Config, present map[bench.Subject]bool) []bench.Subject {
	order, _ := c.Subjects()
	var extra []bench.Subject
	for s := range present {
		if !slices.Contains(order, s) {
			extra = append(extra, s)
		}
	}
	slices.SortFunc(extra, func(a, b bench.Subject) int { return strings.Compare(a.String(), b.String()) })
	for _, s := range extra {
		i := slices.IndexFunc(order, func(o bench.Subject) bool { return o.Mode == s.Mode && o.Backend == s.Backend })
		if i < 0 {
			order = append(order, s)
			continue
		}
		for i+1 < len(order) && order[i+1].Mode == s.Mode && order[i+1].Backend == s.Backend {
			i++
		}
		order = slices.Insert(order, i+1, s)
	}
	return slices.DeleteFunc(order, func(s bench.Subject) bool { return !present[s] })
}

func (a *analysis) get(s bench.Subject, n, e int, metric string) []float64 {
	return a.values[key{s, n, e, metric}]
}

// p is the q-quantile of a series, NaN when empty.
func (a *analysis) p(s bench.Subject, n, e int, metric string, q float64) float64 {
	return bench.Percentile(a.get(s, n, e, metric), q)
}

// has tells whether s has metric at any size and E.
func (a *analysis) has(s bench.Subject, metric string) bool {
	for _, e := range a.es {
		for _, n := range a.ns {
			if len(a.get(s, n, e, metric)) > 0 {
				return true
			}
		}
	}
	return false
}

// subjects lists the subjects that have metric, in reading order.
func (a *analysis) subjects(metric string) []bench.Subject {
	var out []bench.Subject
	for _, s := range a.order {
		if a.has(s, metric) {
			out = append(out, s)
		}
	}
	return out
}

// sizes are the Ns at which s has metric with e endpoints.
func (a *analysis) sizes(s bench.Subject, e int, metric string) []int {
	var out []int
	for _, n := range a.ns {
		if len(a.get(s, n, e, metric)) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// curve is metric's p50 at each size measured.
func (a *analysis) curve(s bench.Subject, e int, metric string) (xs, ys []float64) {
	for _, n := range a.sizes(s, e, metric) {
		xs = append(xs, float64(n))
		ys = append(ys, a.p(s, n, e, metric, 0.5))
	}
	return xs, ys
}

// fit is the growth exponent of metric's p50 over N for one subject and E,
// over every size measured and between the two largest (where a curve that
// is a constant plus a growing part is headed); computed once.
func (a *analysis) fit(s bench.Subject, e int, metric string) growth {
	k := fitKey{s, e, metric}
	if g, ok := a.fits[k]; ok {
		return g
	}
	xs, ys := a.curve(s, e, metric)
	var g growth
	g.all, g.ok = bench.FitPowerLaw(xs, ys)
	g.last = g.all
	if len(xs) > 2 {
		g.last, _ = bench.FitPowerLaw(xs[len(xs)-2:], ys[len(ys)-2:])
	}
	a.fits[k] = g
	return g
}

// String is the fit over every size and, when there are more than two, the
// slope between the two largest.
func (g growth) String() string {
	switch {
	case !g.ok:
		return "–"
	case g.all.Points == 2:
		return fmt.Sprintf("%.2f (2 sizes)", g.all.Exponent)
	}
	return fmt.Sprintf("%.2f (R² %.2f, %d sizes; last two %.2f)", g.all.Exponent, g.all.R2, g.all.Points, g.last.Exponent)
}

// partNames lists the parts recorded under phase for subject s, in the order
// the proxier reports them (the order of its rows).
func (a *analysis) partNames(s bench.Subject, phase string) []string {
	var names []string
	for _, row := range a.r.Rows {
		if bench.SubjectOf(row) != s {
			continue
		}
		if name, ok := strings.CutPrefix(row.Metric, phase+"_part_"); ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// kernelCounts lists the names X of the kernel_X counts s has: what the
// kernel reported holding after the cold sync.
func (a *analysis) kernelCounts(s bench.Subject) []string {
	var names []string
	for _, row := range a.r.Rows {
		if bench.SubjectOf(row) != s || row.Unit == bench.UnitBytes {
			continue
		}
		if name, ok := strings.CutPrefix(row.Metric, "kernel_"); ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// methodColors gives each method one colour on every plot of the report, in
// reading order.
func (a *analysis) methodColors() map[string]int {
	colors := map[string]int{}
	for _, s := range a.order {
		if _, ok := colors[s.Method]; !ok {
			colors[s.Method] = len(colors)
		}
	}
	return colors
}

// dashed tells whether s is drawn dashed: every variant of its mode but the
// first in reading order.
func (a *analysis) dashed(s bench.Subject) bool {
	for _, o := range a.order {
		if o.Mode == s.Mode {
			return o.Backend != s.Backend
		}
	}
	return false
}
