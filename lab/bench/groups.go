package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/svclab/svclab/lab/proxy"
)

// group is one lab: a mode in one variant at one N and E, measured with each
// of its methods.
type group struct {
	m       Measured
	variant proxy.Variant
	n, e    int
}

func (g group) label() string {
	if g.variant.Name != "" {
		return g.m.Mode.Name + "/" + g.variant.Name
	}
	return g.m.Mode.Name
}

func (g group) subject(method string) Subject {
	return Subject{g.m.Mode.Name, method, g.variant.Name}
}

// subjects are the plot lines a group measures.
func (g group) subjects() []Subject {
	out := make([]Subject, len(g.m.Methods))
	for i, m := range g.m.Methods {
		out[i] = g.subject(m)
	}
	return out
}

// shared are the methods whose first sync from empty is one write of the
// whole table, the same for each: one cold sync measures it for all, and the
// others start over the rules it left. perRule are the methods that write
// rule by rule, each measured from an empty node of its own.
func (g group) split() (shared, perRule []string) {
	for _, m := range g.m.Methods {
		if g.m.Mode.WritesPerRule(m) {
			perRule = append(perRule, m)
		} else {
			shared = append(shared, m)
		}
	}
	return shared, perRule
}

// curve names the lab's sizes of one mode, variant and E, for predictions
// and cuts: the shared cold sync's curve.
func (g group) curve() string {
	return fmt.Sprintf("%s/%s/E=%d", g.m.Mode.Name, g.variant.Name, g.e)
}

// curveOf is the curve a method's cold syncs lie on: the lab's, or for a
// method that writes rule by rule, its own.
func (g group) curveOf(method string) string {
	if g.m.Mode.WritesPerRule(method) {
		return fmt.Sprintf("%s/%s/%s/E=%d", g.m.Mode.Name, g.variant.Name, method, g.e)
	}
	return g.curve()
}

// target is the node's target with g's variant and method set.
func (g group) target(nd *node, method string) proxy.Target {
	t := nd.target
	t.Config.Backend, t.Config.Method = g.variant.Backend, method
	if method == unnamedMethod {
		t.Config.Method = ""
	}
	return t
}

// cleanup takes the mode's rules off the node, when the mode can.
func (g group) cleanup(nd *node) error {
	if g.m.Mode.Cleanup == nil {
		return nil
	}
	return g.m.Mode.Cleanup(g.target(nd, ""))
}

// groups orders the labs so that a run cut short by its deadline loses the
// least: E in the order given (the smaller first); for each E first the modes
// that run one way (no variants), each curve whole by growing N (they are the
// other side of every comparison); then the modes whose variants are compared
// with each other, by growing N, every variant at a size before any goes on to
// the next, so that a curve stops where it gets too slow and the variants stay
// comparable.
func (r *runner) groups() []group {
	var gs []group
	for _, e := range r.c.Endpoints {
		for _, me := range r.measured {
			if len(me.Mode.Variants) > 0 {
				continue
			}
			for _, n := range r.c.Services {
				gs = append(gs, group{me, me.Variants[0], n, e})
			}
		}
		for _, me := range r.measured {
			if len(me.Mode.Variants) == 0 {
				continue
			}
			for _, n := range r.c.Services {
				for _, v := range me.Variants {
					gs = append(gs, group{me, v, n, e})
				}
			}
		}
	}
	return gs
}

// quickerFirst reorders the labs at the head of gs that share the first one's
// mode, N and E (its variants), by predicted duration (unknown counts as
// quick).
func (r *runner) quickerFirst(gs []group) {
	if len(gs) == 0 {
		return
	}
	same := 1
	for same < len(gs) && gs[same].m.Mode.Name == gs[0].m.Mode.Name && gs[same].n == gs[0].n && gs[same].e == gs[0].e {
		same++
	}
	predicted := func(g group) time.Duration {
		d, _ := r.predictGroup(g)
		return d
	}
	slices.SortStableFunc(gs[:same], func(a, b group) int { return cmp.Compare(predicted(a), predicted(b)) })
}

// allCut tells whether nothing is left to measure in g: its lab's curve, or
// every method's, was stopped at a smaller size.
func (r *runner) allCut(g group) bool {
	if r.cut[g.curve()] {
		return true
	}
	for _, m := range g.m.Methods {
		if !r.cut[g.curveOf(m)] {
			return false
		}
	}
	return true
}

// cutCurve stops g's curve at its size, with a note per subject on it.
func (r *runner) cutCurve(g group, why string) {
	r.cut[g.curve()] = true
	for _, s := range g.subjects() {
		r.note("%s E=%d cut at N=%d: %s", s, g.e, g.n, why)
	}
}

// coldPoint is one cold sync: its size and what in it grows with the size
// (the proxier's own work: computing and writing the rules), the rest being
// fixed (kube-proxy's housekeeping: starting the programs that ensure its
// chains and jumps, mostly).
type coldPoint struct {
	n              int
	growing, fixed time.Duration
}

// addCold remembers a cold sync of d by p on curve, split as p accounts for it
// (all of it growing when p does not say).
func (r *runner) addCold(curve string, n int, d time.Duration, p proxy.Proxier) {
	growing := d
	if sr, ok := p.(proxy.StatsReporter); ok {
		if st := sr.Stats(); len(st.Parts) > 0 {
			growing = min(st.Own(), d)
		}
	}
	r.cold[curve] = append(r.cold[curve], coldPoint{n: n, growing: growing, fixed: d - growing})
}

// predictCold extrapolates a curve's cold sync to n: its fixed part as it was,
// its growing part along the slope of the last two sizes on log-log axes,
// never less steep than linear.
func (r *runner) predictCold(curve string, n int) (time.Duration, bool) {
	pts := r.cold[curve]
	if len(pts) == 0 {
		return 0, false
	}
	last := pts[len(pts)-1]
	k := 1.0
	if len(pts) >= 2 {
		prev := pts[len(pts)-2]
		if f, ok := FitPowerLaw([]float64{float64(prev.n), float64(last.n)}, []float64{prev.growing.Seconds(), last.growing.Seconds()}); ok {
			k = max(k, f.Exponent)
		}
	}
	return last.fixed + time.Duration(float64(last.growing)*math.Pow(float64(n)/float64(last.n), k)), true
}

// groupTime is how long a curve's last lab took, and its cold sync.
type groupTime struct {
	took, cold time.Duration
}

// predictGroup extrapolates how long a lab will take from the curve's last
// one: scaled as the cold sync is predicted to grow (most of such a lab's time
// is syncs of the whole table; its repetitions are bounded by the cell budget).
func (r *runner) predictGroup(g group) (time.Duration, bool) {
	last, ok := r.took[g.curve()]
	if !ok || last.cold <= 0 {
		return 0, false
	}
	cold, ok := r.predictCold(g.curve(), g.n)
	if !ok {
		return 0, false
	}
	return time.Duration(float64(last.took) * max(1, float64(cold)/float64(last.cold))), true
}

// lastCold is the cold sync of g's curve at g's size, if it was measured.
func (r *runner) lastCold(g group) time.Duration {
	pts := r.cold[g.curve()]
	if len(pts) == 0 || pts[len(pts)-1].n != g.n {
		return 0
	}
	return pts[len(pts)-1].growing + pts[len(pts)-1].fixed
}
