package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
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
	if err := namespaces.CheckPrivileges(); err != nil {
		return nil, err
	}
	measured, err := c.Measured()
	if err != nil {
		return nil, err
	}
	for _, me := range measured {
		if err := me.Mode.Available(); err != nil {
			return nil, fmt.Errorf("mode %s: %w", me.Mode.Name, err)
		}
	}
	for _, name := range c.KubeProxyModes {
		m, err := proxy.Lookup(name)
		if err != nil {
			return nil, err
		}
		if err := m.Available(); err != nil {
			return nil, fmt.Errorf("kube-proxy mode %s: %w", m.Name, err)
		}
	}
	r := &runner{c: c, measured: measured, rep: &Report{Config: c, Started: time.Now()}, log: c.Log,
		cold: map[string][]coldPoint{}, cut: map[string]bool{}, took: map[string]groupTime{}, timeCut: map[string]bool{},
		done: map[string]bool{}}
	if r.log == nil {
		r.log = io.Discard
	}
	r.rep.Machine = readMachine(c.Where, measured)
	err = r.run(ctx)
	if err == nil {
		err = r.runKubeProxies(ctx)
	}
	r.interrupted(ctx)
	r.rep.Machine.LoadEnd = LoadAvg()
	r.rep.Rows = r.res.Rows()
	r.rep.Elapsed = time.Since(r.rep.Started)
	return r.rep, err
}

type runner struct {
	c        Config
	measured []Measured
	rep      *Report
	res      Results
	log      io.Writer
	// cold remembers the cold syncs of each curve, to predict the next
	// size's; cut marks the curves stopped at a size.
	cold map[string][]coldPoint
	cut  map[string]bool
	// took remembers how long each curve's last lab took.
	took map[string]groupTime
	// timeCut remembers the subjects (and E) cut for time, to note each once.
	timeCut map[string]bool
	// done are the labs that ran whole (cellName), for an interrupted run's
	// list of what did not.
	done map[string]bool
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "bench: "+format+"\n", args...)
}

func (r *runner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.rep.Notes = append(r.rep.Notes, msg)
	r.logf("note: %s", msg)
}

// pastDeadline tells whether the run's time is up.
func (r *runner) pastDeadline() bool {
	return r.c.Deadline > 0 && time.Since(r.rep.Started) > r.c.Deadline
}

// cutForTime stops s's curve from g's size on, and notes, once for each, that
// every subject on that curve was not measured (or not entirely) from there.
func (r *runner) cutForTime(s Subject, g group) {
	curve := g.curveOf(s.Method)
	r.cut[curve] = true
	for _, t := range g.subjects() {
		key := fmt.Sprintf("%s/%d", t, g.e)
		if g.curveOf(t.Method) != curve || r.timeCut[key] {
			continue
		}
		r.timeCut[key] = true
		r.note("%s E=%d cut at N=%d: the run's time budget (%s) was spent; what this size had measured by then is kept", t, g.e, g.n, r.c.Deadline)
	}
}

// outOfTime tells whether s, measured in g, must stop for the deadline, and
// notes it when so. Checked between the steps of a lab, so that a run ends at
// most one step past its deadline.
func (r *runner) outOfTime(s Subject, g group) bool {
	if !r.pastDeadline() {
		return false
	}
	r.cutForTime(s, g)
	return true
}

func (r *runner) run(ctx context.Context) error {
	gs := r.groups()
	for i := range gs {
		// Of the labs of one mode and size (its variants), the one predicted
		// quicker goes first: near the deadline, the slow one is the one to
		// lose.
		r.quickerFirst(gs[i:])
		g := gs[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.allCut(g) {
			continue
		}
		if r.pastDeadline() {
			for _, s := range g.subjects() {
				r.cutForTime(s, g)
			}
			continue
		}
		if pred, ok := r.predictGroup(g); ok && r.c.Deadline > 0 && time.Since(r.rep.Started)+pred > r.c.Deadline {
			for _, s := range g.subjects() {
				r.note("%s E=%d cut at N=%d: this size would take about %s, extrapolated from the last, and end past the run's time budget (%s)",
					s, g.e, g.n, pred.Round(time.Second), r.c.Deadline)
			}
			r.cut[g.curve()] = true
			continue
		}
		start := time.Now()
		r.logf("[%d/%d] %s N=%d E=%d (%s elapsed)", i+1, len(gs), g.label(), g.n, g.e, time.Since(r.rep.Started).Round(time.Second))
		err := r.measureGroup(ctx, g)
		if err != nil && ctx.Err() != nil {
			// Stopped from outside (Ctrl-C): whatever failed failed because of it.
			return fmt.Errorf("%s N=%d E=%d: %w", g.label(), g.n, g.e, ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("%s N=%d E=%d: %w", g.label(), g.n, g.e, err)
		}
		r.took[g.curve()] = groupTime{took: time.Since(start), cold: r.lastCold(g)}
		r.done[cellName(g.label(), g.n, g.e)] = true
		r.logf("[%d/%d] %s N=%d E=%d done in %s", i+1, len(gs), g.label(), g.n, g.e, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

func (r *runner) add(s Subject, n, e int, metric string, rep int, value float64, unit string) {
	r.res.Add(Row{Mode: s.Mode, Method: s.Method, Backend: s.Backend, Services: n, Endpoints: e, Metric: metric, Rep: rep, Value: value, Unit: unit})
}

func (r *runner) addDuration(s Subject, n, e int, metric string, rep int, d time.Duration) {
	r.add(s, n, e, metric, rep, d.Seconds(), UnitSeconds)
}

// withNode builds the lab for one group and tears it down afterwards, also when fn
// fails or ctx is cancelled. A mode that can take its rules off a node starts
// from a clean one and cleans it before its namespace goes, so the kernel does
// not free a large ruleset in the background of the next measurement.
func (r *runner) withNode(ctx context.Context, g group, fn func(n *node) error) (err error) {
	nd, err := upNode(ctx, r.c.Name, r.c.maxEndpoints(), r.c.proberConfig(), false, "")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, nd.down()) }()
	if err := g.cleanup(nd); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, g.cleanup(nd)) }()
	return fn(nd)
}
