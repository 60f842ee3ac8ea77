package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/internal/meminfo"
	"github.com/svclab/svclab/lab/proxy"
)

// measureGroup measures every method of one mode and variant at one size: the
// cold sync by the first method that writes the whole table at once (and, when
// the proxier offers it, a bare apply of the same rules beside it), the data
// path, then each such method's updates, the later ones starting as kube-proxy
// restarting on a programmed node does; then each method that writes rule by
// rule, from an empty node of its own.
func (r *runner) measureGroup(ctx context.Context, g group) error {
	shared, perRule := g.split()
	if len(shared) > 0 && r.c.ColdCap > 0 {
		if pred, ok := r.predictCold(g.curve(), g.n); ok && pred > r.c.ColdCap {
			r.cutCurve(g, fmt.Sprintf("its cold sync would take about %s, extrapolated from the smaller sizes (cap %s)", pred.Round(time.Second), r.c.ColdCap))
			return nil
		}
	}
	return r.withNode(ctx, g, func(nd *node) error {
		if err := r.baseline(ctx, nd, g); err != nil {
			return err
		}
		if len(shared) > 0 {
			done, err := r.sharedMethods(ctx, nd, g, shared)
			if err != nil || !done {
				return err
			}
		}
		for _, m := range perRule {
			s := g.subject(m)
			if r.outOfTime(s, g) {
				continue
			}
			if err := r.perRuleMethod(ctx, nd, g, m); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
}

// recordSync records a sync of d by p, under phase: the sync, and the parts and
// counts p reports of it.
func (r *runner) recordSync(s Subject, n, e int, phase string, rep int, d time.Duration, p proxy.Proxier) {
	r.addDuration(s, n, e, phase+"_sync", rep, d)
	sr, ok := p.(proxy.StatsReporter)
	if !ok {
		return
	}
	st := sr.Stats()
	for _, pt := range st.Parts {
		r.addDuration(s, n, e, phase+"_part_"+pt.Name, rep, pt.D)
	}
	if len(st.Parts) > 0 {
		r.addDuration(s, n, e, phase+"_own", rep, st.Own())
	}
	for _, c := range st.Counts {
		r.add(s, n, e, phase+"_"+c.Name, rep, float64(c.N), unitOfCount(c.Name))
	}
}

// sharedMethods runs the methods that write the whole table at once: the first
// one from empty (its cold sync, the data path, its updates), then a bare apply
// of the same rules beside svclab's cold sync, then each other method starting
// as kube-proxy restarting on a programmed node does. done is false when the
// cold sync hit the cap and the curve was cut.
func (r *runner) sharedMethods(ctx context.Context, nd *node, g group, methods []string) (done bool, err error) {
	n, e := g.n, g.e
	first := g.subject(methods[0])
	st := newState(n, e, r.c.Reps, nd.bk)
	p, cold, err := r.firstCold(ctx, nd, g, first, st)
	if err != nil || p == nil {
		return false, err
	}
	err = func() error {
		if err := r.dataPath(ctx, nd, st, first); err != nil {
			return err
		}
		return r.updates(ctx, nd, st, p, g, first)
	}()
	// The first bare apply is the first proxier's: it has synced, so it writes
	// with the configuration its syncs use.
	bare, hasBare := p.(proxy.BareApplier)
	switch {
	case err != nil:
	case (hasBare || len(methods) > 1) && r.pastDeadline():
		// Past the deadline even the bare apply beside the cold sync is not run
		// (it takes as long as the cold sync): the size stops here for every
		// such method, the first one included.
		r.cutForTime(first, g)
		return true, p.Close()
	case hasBare:
		err = r.overhead(ctx, nd, g, first, bare, cold)
	}
	if err = errors.Join(err, p.Close()); err != nil {
		return false, fmt.Errorf("%s: %w", first, err)
	}
	for _, m := range methods[1:] {
		s := g.subject(m)
		if r.outOfTime(s, g) {
			continue
		}
		if err := r.restart(ctx, nd, g, s); err != nil {
			return false, fmt.Errorf("%s: %w", s, err)
		}
	}
	return true, nil
}

// restart starts a new proxier of s's method over the rules the node holds:
// its first sync writes everything over them (kube-proxy restarting on a busy
// node); then its updates.
func (r *runner) restart(ctx context.Context, nd *node, g group, s Subject) error {
	st := newState(g.n, g.e, r.c.Reps, nd.bk)
	p, err := g.m.Mode.New(g.target(nd, s.Method))
	if err != nil {
		return err
	}
	err = func() error {
		d, err := timedSync(ctx, p, st.current())
		if err != nil {
			return err
		}
		r.recordSync(s, g.n, g.e, "restart", 0, d, p)
		r.logf("  %s: restart sync %s", s, d.Round(time.Millisecond))
		return r.updates(ctx, nd, st, p, g, s)
	}()
	return errors.Join(err, p.Close())
}

// capped is ctx bounded by ColdCap, if one is set.
func (r *runner) capped(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.c.ColdCap > 0 {
		return context.WithTimeout(ctx, r.c.ColdCap)
	}
	return context.WithCancel(ctx)
}

// cappedRun runs f under ColdCap; stopped tells that the cap, not ctx,
// stopped it.
func (r *runner) cappedRun(ctx context.Context, f func(context.Context) error) (stopped bool, err error) {
	cctx, cancel := r.capped(ctx)
	defer cancel()
	err = f(cctx)
	return err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded), err
}

// firstCold programs the empty node with a proxier of subject s's method and
// returns it: the cold sync, with the kernel memory it took and what the kernel
// reports holding. A nil proxier (and nil error) means the sync ran past
// ColdCap and the curve was cut.
func (r *runner) firstCold(ctx context.Context, nd *node, g group, s Subject, st *state) (proxy.Proxier, time.Duration, error) {
	n, e := g.n, g.e
	settle()
	before, err := meminfo.Kernel()
	if err != nil {
		return nil, 0, err
	}
	p, err := g.m.Mode.New(g.target(nd, s.Method))
	if err != nil {
		return nil, 0, err
	}
	keep := false
	defer func() {
		if !keep {
			p.Close()
		}
	}()
	var cold time.Duration
	stopped, err := r.cappedRun(ctx, func(ctx context.Context) error {
		cold, err = timedSync(ctx, p, st.current())
		return err
	})
	if stopped {
		r.cutCurve(g, fmt.Sprintf("its cold sync did not finish within %s (cap) and was stopped", r.c.ColdCap))
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	r.recordSync(s, n, e, "cold", 0, cold, p)
	r.addCold(g.curve(), n, cold, p)
	settle()
	after, err := meminfo.Kernel()
	if err != nil {
		return nil, 0, err
	}
	r.add(s, n, e, "kernel_memory", 0, float64(after-before), UnitBytes)
	var held []string
	if kc, ok := p.(proxy.KernelCounter); ok {
		counts, err := kc.KernelCounts(ctx)
		if err != nil {
			return nil, 0, err
		}
		for _, c := range counts {
			r.add(s, n, e, "kernel_"+c.Name, 0, float64(c.N), unitOfCount(c.Name))
			held = append(held, fmt.Sprintf("%d %s", c.N, strings.ReplaceAll(c.Name, "_", " ")))
		}
	}
	r.logf("  %s: cold sync %s, kernel memory %+.1f MiB%s", s, cold.Round(time.Millisecond),
		float64(after-before)/(1<<20), prefixed("; the kernel holds ", strings.Join(held, ", ")))
	keep = true
	return p, cold, nil
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// overhead sets a bare apply of the cold sync's rules by the mode's own
// program beside svclab's cold sync: one bare apply (by p, which made the
// measured cold sync) after the measured cold sync, then, while a cold sync
// takes under a second, more pairs of both, alternating on the emptied node.
// The node is left holding the bare apply's rules.
func (r *runner) overhead(ctx context.Context, nd *node, g group, s Subject, p proxy.BareApplier, cold time.Duration) error {
	coldState := proxy.StateOf(newState(g.n, g.e, r.c.Reps, nd.bk).current())
	for i := 0; i < r.c.OverheadPairs; i++ {
		if i > 0 && cold > time.Second {
			break
		}
		stopped, err := r.overheadPair(ctx, nd, g, s, i, p, coldState)
		if stopped || err != nil {
			return err
		}
	}
	return nil
}

// overheadPair is pair i: a cold sync by a new proxier on the emptied node
// (but for the first pair, whose cold sync was measured before), then a bare
// apply by the same proxier on the node emptied again. stopped tells that the
// bare apply ran past ColdCap, and a note says so.
func (r *runner) overheadPair(ctx context.Context, nd *node, g group, s Subject, i int, first proxy.BareApplier, st *proxy.State) (stopped bool, err error) {
	n, e := g.n, g.e
	bare := first
	if i > 0 {
		if err := g.cleanup(nd); err != nil {
			return false, err
		}
		q, err := g.m.Mode.New(g.target(nd, s.Method))
		if err != nil {
			return false, err
		}
		defer func() { err = errors.Join(err, q.Close()) }()
		d, err := timedSync(ctx, q, st.Ports)
		if err != nil {
			return false, err
		}
		r.recordSync(s, n, e, "cold", i, d, q)
		var ok bool
		if bare, ok = q.(proxy.BareApplier); !ok {
			return false, fmt.Errorf("%T offers no bare apply", q)
		}
	}
	if err := g.cleanup(nd); err != nil {
		return false, err
	}
	var d time.Duration
	stopped, err = r.cappedRun(ctx, func(ctx context.Context) error {
		var err error
		d, err = bare.BareApply(ctx, st)
		return err
	})
	if stopped {
		r.note("%s N=%d E=%d: bare apply stopped at the %s cap", s.Bare(), n, e, r.c.ColdCap)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("bare apply: %w", err)
	}
	r.addDuration(s.Bare(), n, e, "cold_sync", i, d)
	r.logf("  bare apply of the same rules by the mode's own program: %s", d.Round(time.Millisecond))
	return false, nil
}

// settle lets RCU callbacks and deferred frees run before memory is read.
func settle() { time.Sleep(300 * time.Millisecond) }

// perRuleMethod runs a method that writes rule by rule where its predicted
// cost fits PerRuleCap. Its syncs cannot be stopped part-way, so it is not
// started where it would run past the cap: the cold sync is predicted from the
// smaller sizes and, when the proxier can tell (proxy.SyncEstimator), by the
// proxier itself, asked on the node as the methods before left it; the larger
// prediction counts.
func (r *runner) perRuleMethod(ctx context.Context, nd *node, g group, method string) error {
	s := g.subject(method)
	n, e := g.n, g.e
	curve := g.curveOf(method)
	if r.cut[curve] {
		return nil
	}
	st := newState(n, e, r.c.Reps, nd.bk)
	p, err := g.m.Mode.New(g.target(nd, method))
	if err != nil {
		return err
	}
	defer p.Close()
	predicted, ok := r.predictCold(curve, n)
	why := "extrapolated from the smaller sizes"
	if est, isEst := p.(proxy.SyncEstimator); isEst {
		d, w, err := est.EstimateSync(ctx, proxy.StateOf(st.current()))
		if err != nil {
			return err
		}
		if !ok || d > predicted {
			predicted, why, ok = d, w, true
		}
	}
	if ok && predicted > r.c.PerRuleCap {
		r.note("%s E=%d cut at N=%d: a cold sync would take about %s (%s; cap %s)", s, e, n, predicted.Round(time.Second), why, r.c.PerRuleCap)
		r.cut[curve] = true
		return nil
	}
	if err := g.cleanup(nd); err != nil {
		return err
	}
	d, err := timedSync(ctx, p, st.current())
	if err != nil {
		return err
	}
	r.recordSync(s, n, e, "cold", 0, d, p)
	r.addCold(curve, n, d, p)
	r.logf("  %s: cold sync %s", s, d.Round(time.Millisecond))
	return r.updates(ctx, nd, st, p, g, s)
}
