package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/proxy"
)

// Run measures what c asks for and returns the report; its notes say what was
// cut short and why. Every lab it builds is gone when it returns, whatever
// happened (cancelling ctx stops it at the next step, and the report holds what
// was measured until then).
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := lab.CheckPrivileges(); err != nil {
		return nil, err
	}
	for _, m := range c.Modes {
		mode, _ := proxy.Lookup(m)
		if err := mode.Available(); err != nil {
			return nil, fmt.Errorf("mode %s: %w", m, err)
		}
	}
	r := &runner{c: c, rep: &Report{Config: c, Started: time.Now()}, log: c.Log,
		perRule: map[string]perRuleRun{}, cold: map[string][]coldPoint{}, cut: map[string]bool{}, took: map[string]groupTime{}, timeCut: map[string]bool{}}
	if r.log == nil {
		r.log = io.Discard
	}
	backends := c.Backends
	if !slices.Contains(c.Modes, "iptables") {
		backends = nil
	}
	r.rep.Machine = readMachine(c.Where, backends)
	err := r.run(ctx)
	r.rep.Machine.LoadEnd = LoadAvg()
	r.rep.Rows = r.res.Rows()
	r.rep.Elapsed = time.Since(r.rep.Started)
	return r.rep, err
}

type runner struct {
	c   Config
	rep *Report
	res Results
	log io.Writer
	// perRule remembers, per backend and E, the last per-rule cold sync, to
	// predict the next size's.
	perRule map[string]perRuleRun
	// cold remembers the cold syncs of each mode, backend and E, to predict
	// the next size's; cut marks the curves stopped at a size.
	cold map[string][]coldPoint
	cut  map[string]bool
	// took remembers how long each curve's last lab took.
	took map[string]groupTime
	// timeCut remembers the subjects (and E) cut for time, to note each once.
	timeCut map[string]bool
}

type perRuleRun struct {
	n    int
	cold time.Duration
}

// coldPoint is one cold sync: its size and what in it grows with the size
// (the restore, or the whole sync for other modes), the rest being fixed
// (starting the programs that ensure the jumps, mostly).
type coldPoint struct {
	n              int
	growing, fixed time.Duration
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "bench: "+format+"\n", args...)
}

func (r *runner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.rep.Notes = append(r.rep.Notes, msg)
	r.logf("note: %s", msg)
}

// group is one lab: a mode (and backend) at one N and E.
type group struct {
	mode, backend string
	n, e          int
}

func (g group) label() string {
	if g.backend != "" {
		return g.mode + "/" + g.backend
	}
	return g.mode
}

// curve names the sizes of one mode, backend and E, for predictions and cuts.
func (g group) curve() string { return fmt.Sprintf("%s/%s/E=%d", g.mode, g.backend, g.e) }

// subjects are the plot lines a group measures.
func (r *runner) subjects(g group) []subject {
	if g.mode != "iptables" {
		return []subject{{g.mode, methodOf(g.mode), ""}}
	}
	var out []subject
	for _, m := range r.c.Methods {
		out = append(out, subject{g.mode, m, g.backend})
	}
	return out
}

// groups orders the labs so that a run cut short by its deadline loses the
// least: E in the order given (the smaller first); for each E the modes other
// than iptables first, each curve whole by growing N (they are the other side
// of every comparison); then iptables by growing N, every backend at a size
// before either goes on to the next, so that a curve stops where it gets too
// slow and the backends stay comparable.
func (r *runner) groups() []group {
	var gs []group
	for _, e := range r.c.Endpoints {
		for _, m := range r.c.Modes {
			if m == "iptables" {
				continue
			}
			for _, n := range r.c.Services {
				gs = append(gs, group{m, "", n, e})
			}
		}
		if !slices.Contains(r.c.Modes, "iptables") {
			continue
		}
		for _, n := range r.c.Services {
			for _, b := range r.c.Backends {
				gs = append(gs, group{"iptables", b, n, e})
			}
		}
	}
	return gs
}

// quickerFirst reorders the iptables labs at the head of gs that share the
// first one's N and E, by predicted duration (unknown counts as quick).
func (r *runner) quickerFirst(gs []group) {
	if len(gs) == 0 || gs[0].mode != "iptables" {
		return
	}
	same := 1
	for same < len(gs) && gs[same].mode == "iptables" && gs[same].n == gs[0].n && gs[same].e == gs[0].e {
		same++
	}
	predicted := func(g group) time.Duration {
		d, _ := r.predictGroup(g)
		return d
	}
	slices.SortStableFunc(gs[:same], func(a, b group) int { return cmp.Compare(predicted(a), predicted(b)) })
}

// pastDeadline tells whether the run's time is up.
func (r *runner) pastDeadline() bool {
	return r.c.Deadline > 0 && time.Since(r.rep.Started) > r.c.Deadline
}

// cutForTime notes, once, that subject s was not measured (or not entirely)
// from g's size on, and stops g's curve.
func (r *runner) cutForTime(s subject, g group) {
	r.cut[g.curve()] = true
	key := fmt.Sprintf("%s/%d", s, g.e)
	if r.timeCut[key] {
		return
	}
	r.timeCut[key] = true
	r.note("%s E=%d cut at N=%d: the run's time budget (%s) was spent; what this size had measured by then is kept", s, g.e, g.n, r.c.Deadline)
}

// outOfTime tells whether s, measured in g, must stop for the deadline, and
// notes it when so. Checked between the steps of a lab, so that a run ends at
// most one step past its deadline.
func (r *runner) outOfTime(s subject, g group) bool {
	if !r.pastDeadline() {
		return false
	}
	r.cutForTime(s, g)
	return true
}

// groupTime is how long a curve's last lab took, and its cold sync.
type groupTime struct {
	took, cold time.Duration
}

// predictGroup extrapolates how long an iptables lab will take from the
// curve's last one: scaled as the cold sync is predicted to grow (most of such
// a lab's time is full syncs; its repetitions are bounded by the cell budget).
// Other modes are not predicted: the bench cannot tell the fixed part of their
// syncs from the growing one.
func (r *runner) predictGroup(g group) (time.Duration, bool) {
	if g.mode != "iptables" {
		return 0, false
	}
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

func (r *runner) run(ctx context.Context) error {
	gs := r.groups()
	for i := range gs {
		// Of the iptables labs of one size, the one predicted quicker goes
		// first: near the deadline, the slow one is the one to lose.
		r.quickerFirst(gs[i:])
		g := gs[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.cut[g.curve()] {
			continue
		}
		if r.pastDeadline() {
			for _, s := range r.subjects(g) {
				r.cutForTime(s, g)
			}
			continue
		}
		if pred, ok := r.predictGroup(g); ok && r.c.Deadline > 0 && time.Since(r.rep.Started)+pred > r.c.Deadline {
			for _, s := range r.subjects(g) {
				r.note("%s E=%d cut at N=%d: this size would take about %s, extrapolated from the last, and end past the run's time budget (%s)",
					s, g.e, g.n, pred.Round(time.Second), r.c.Deadline)
			}
			r.cut[g.curve()] = true
			continue
		}
		start := time.Now()
		r.logf("[%d/%d] %s N=%d E=%d (%s elapsed)", i+1, len(gs), g.label(), g.n, g.e, time.Since(r.rep.Started).Round(time.Second))
		var err error
		if g.mode == "iptables" {
			err = r.iptablesGroup(ctx, g)
		} else {
			err = r.modeGroup(ctx, g)
		}
		if err != nil && ctx.Err() != nil {
			// Stopped from outside (Ctrl-C): whatever failed failed because of it.
			return fmt.Errorf("%s N=%d E=%d: %w", g.label(), g.n, g.e, ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("%s N=%d E=%d: %w", g.label(), g.n, g.e, err)
		}
		r.took[g.curve()] = groupTime{took: time.Since(start), cold: r.lastCold(g)}
		r.logf("[%d/%d] %s N=%d E=%d done in %s", i+1, len(gs), g.label(), g.n, g.e, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// subject is one mode, method and backend: one line on the plots.
type subject struct {
	mode, method, backend string
}

func (s subject) String() string {
	out := s.mode + "/" + s.method
	if s.backend != "" {
		out += "/" + s.backend
	}
	return out
}

func (r *runner) add(s subject, n, e int, metric string, rep int, value float64, unit string) {
	r.res.Add(Row{Mode: s.mode, Method: s.method, Backend: s.backend, Services: n, Endpoints: e, Metric: metric, Rep: rep, Value: value, Unit: unit})
}

func (r *runner) addDuration(s subject, n, e int, metric string, rep int, d time.Duration) {
	r.add(s, n, e, metric, rep, d.Seconds(), unitSeconds)
}

// withNode builds the lab for one group and tears it down afterwards, also when fn
// fails or ctx is cancelled.
func (r *runner) withNode(ctx context.Context, fn func(n *node) error) (err error) {
	nd, err := upNode(ctx, r.c.Name, r.c.maxEndpoints(), r.c.proberConfig())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, nd.down()) }()
	return fn(nd)
}
