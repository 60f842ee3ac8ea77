package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/svclab/svclab/lab/proxy/iptables"
)

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

// cutCurve stops a curve at g's size, with a note per subject.
func (r *runner) cutCurve(g group, why string) {
	r.cut[g.curve()] = true
	for _, s := range r.subjects(g) {
		r.note("%s E=%d cut at N=%d: %s", s, g.e, g.n, why)
	}
}

// iptablesGroup measures every iptables method of one backend at one size: the
// cold sync by the first restore method (and a bare iptables-restore of the same
// input beside it), the data path, then each method's updates. The later
// restore methods start as kube-proxy restarting on a programmed node does.
func (r *runner) iptablesGroup(ctx context.Context, g group) error {
	restoreMethods := slices.DeleteFunc(slices.Clone(r.c.Methods), func(m string) bool { return m == MethodPerRule })
	if len(restoreMethods) > 0 && r.c.ColdCap > 0 {
		if pred, ok := r.predictCold(g.curve(), g.n); ok && pred > r.c.ColdCap {
			r.cutCurve(g, fmt.Sprintf("its cold sync would take about %s, extrapolated from the smaller sizes (cap %s)", pred.Round(time.Second), r.c.ColdCap))
			return nil
		}
	}
	return r.withNode(ctx, func(nd *node) (err error) {
		x, err := newXtables(g.backend, nd.nodeNS, nd.target.RunDir)
		if err != nil {
			return err
		}
		// Empty the tables before the namespace goes, so the kernel does not free
		// a large ruleset in the background of the next measurement.
		defer func() { err = errors.Join(err, x.wipe()) }()
		if err := x.wipe(); err != nil {
			return err
		}
		if err := r.baseline(ctx, nd, g); err != nil {
			return err
		}
		if len(restoreMethods) > 0 {
			done, err := r.restoreMethods(ctx, nd, x, g, restoreMethods)
			if err != nil || !done {
				return err
			}
		}
		if slices.Contains(r.c.Methods, MethodPerRule) {
			if r.outOfTime(subject{"iptables", MethodPerRule, g.backend}, g) {
				return nil
			}
			if err := r.perRuleGroup(ctx, nd, x, g); err != nil {
				return fmt.Errorf("iptables/per-rule/%s: %w", g.backend, err)
			}
		}
		return nil
	})
}

// restoreMethods runs the methods that write with iptables-restore: the first
// one from empty (its cold sync, the data path, its updates), then bare
// iptables-restore of the same input beside svclab's, then each other method
// starting as kube-proxy restarting on a programmed node does. done is false
// when the cold sync hit the cap and the curve was cut.
func (r *runner) restoreMethods(ctx context.Context, nd *node, x xtables, g group, methods []string) (done bool, err error) {
	n, e := g.n, g.e
	first := subject{"iptables", methods[0], g.backend}
	st := newState(n, e, r.c.Reps, nd.bk)
	p, input, cold, err := r.firstCold(ctx, nd, x, g, first, st)
	if err != nil || p == nil {
		return false, err
	}
	err = func() error {
		if err := r.dataPath(ctx, nd, st, first); err != nil {
			return err
		}
		return r.updates(ctx, nd, st, p, first)
	}()
	if err = errors.Join(err, p.Close()); err != nil {
		return false, fmt.Errorf("%s: %w", first, err)
	}
	// Past the deadline even the bare restore beside the cold sync is not run
	// (it takes as long as the cold sync): the size stops here for every
	// restore method, the first one included.
	if r.pastDeadline() {
		for _, m := range methods {
			r.cutForTime(subject{"iptables", m, g.backend}, g)
		}
		return true, nil
	}
	if err := r.overhead(ctx, nd, x, g, first, input, cold); err != nil {
		return false, err
	}
	for _, m := range methods[1:] {
		s := subject{"iptables", m, g.backend}
		if r.outOfTime(s, g) {
			continue
		}
		st := newState(n, e, r.c.Reps, nd.bk)
		p, err := iptables.New(nd.targetFor(g.backend, m))
		if err != nil {
			return false, err
		}
		err = func() error {
			// A new proxier's first sync writes everything over the rules already
			// there: kube-proxy restarting on a busy node.
			d, err := timedSync(ctx, p, st.current())
			if err != nil {
				return err
			}
			r.addDuration(s, n, e, "restart_sync", 0, d)
			r.logf("  %s: restart sync %s", s, d.Round(time.Millisecond))
			return r.updates(ctx, nd, st, p, s)
		}()
		if err = errors.Join(err, p.Close()); err != nil {
			return false, fmt.Errorf("%s: %w", s, err)
		}
	}
	return true, nil
}

// capped is ctx bounded by ColdCap, if one is set.
func (r *runner) capped(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.c.ColdCap > 0 {
		return context.WithTimeout(ctx, r.c.ColdCap)
	}
	return context.WithCancel(ctx)
}

// firstCold programs the empty node with a proxier of subject s's method and
// returns it, with the restore input it wrote: the cold sync, with the kernel
// memory it took and the rules counted by the kernel. A nil proxier (and nil
// error) means the sync ran past ColdCap and the curve was cut.
func (r *runner) firstCold(ctx context.Context, nd *node, x xtables, g group, s subject, st *state) (p *iptables.Proxier, input []byte, cold time.Duration, err error) {
	n, e := g.n, g.e
	settle()
	before, err := kernelMemory()
	if err != nil {
		return nil, nil, 0, err
	}
	p, err = iptables.New(nd.targetFor(g.backend, s.method))
	if err != nil {
		return nil, nil, 0, err
	}
	defer func() {
		if err != nil {
			p.Close()
			p = nil
		}
	}()
	cctx, cancel := r.capped(ctx)
	cold, err = timedSync(cctx, p, st.current())
	capped := errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil && ctx.Err() == nil && capped {
		p.Close()
		r.cutCurve(g, fmt.Sprintf("its cold sync did not finish within %s (cap) and was stopped", r.c.ColdCap))
		return nil, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, err
	}
	stats := p.LastSync()
	r.cold[g.curve()] = append(r.cold[g.curve()], coldPoint{n: n, growing: stats.Write + stats.Generate, fixed: cold - stats.Write - stats.Generate})
	r.recordCold(s, n, e, 0, cold, stats)
	settle()
	after, err := kernelMemory()
	if err != nil {
		return nil, nil, 0, err
	}
	r.add(s, n, e, "kernel_memory", 0, float64(after-before), unitBytes)
	input = []byte(p.Ruleset().Restore())
	r.add(s, n, e, "rules", 0, float64(stats.Rules), unitCount)
	r.add(s, n, e, "chains", 0, float64(stats.Chains), unitCount)
	r.add(s, n, e, "restore_bytes", 0, float64(len(input)), unitBytes)
	kr, err := x.kernelRules(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	r.add(s, n, e, "kernel_rules", 0, float64(kr), unitCount)
	r.logf("  %s: cold sync %s (of which iptables-restore %s), %d rules, kernel memory %+.1f MiB", s, cold.Round(time.Millisecond),
		stats.Write.Round(time.Millisecond), stats.Rules, float64(after-before)/(1<<20))
	return p, input, cold, nil
}

func (r *runner) recordCold(s subject, n, e, rep int, d time.Duration, stats iptables.SyncStats) {
	r.addDuration(s, n, e, "cold_sync", rep, d)
	r.addDuration(s, n, e, "cold_generate", rep, stats.Generate)
	r.addDuration(s, n, e, "cold_setup", rep, stats.Setup)
	r.addDuration(s, n, e, "cold_save", rep, stats.Save)
	r.addDuration(s, n, e, "cold_write", rep, stats.Write)
}

// overhead sets bare iptables-restore of the cold sync's input beside svclab's
// cold sync: one bare restore after the measured cold sync, then, while a cold
// sync takes under a second, more pairs of both, alternating on the emptied
// node. The node is left holding the bare restore's rules.
func (r *runner) overhead(ctx context.Context, nd *node, x xtables, g group, s subject, input []byte, cold time.Duration) error {
	n, e := g.n, g.e
	bare := subject{"iptables", "bare-restore", g.backend}
	for i := 0; i < r.c.OverheadPairs; i++ {
		if i > 0 {
			if cold > time.Second {
				break
			}
			if err := x.wipe(); err != nil {
				return err
			}
			p, err := iptables.New(nd.targetFor(g.backend, s.method))
			if err != nil {
				return err
			}
			d, err := timedSync(ctx, p, newState(n, e, r.c.Reps, nd.bk).current())
			stats := p.LastSync()
			p.Close()
			if err != nil {
				return err
			}
			r.recordCold(s, n, e, i, d, stats)
		}
		if err := x.wipe(); err != nil {
			return err
		}
		cctx, cancel := r.capped(ctx)
		d, err := x.restore(cctx, input)
		capped := errors.Is(cctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil && ctx.Err() == nil && capped {
			r.note("%s N=%d E=%d: bare iptables-restore stopped at the %s cap", bare, n, e, r.c.ColdCap)
			return nil
		}
		if err != nil {
			return fmt.Errorf("bare restore: %w", err)
		}
		r.addDuration(bare, n, e, "cold_sync", i, d)
		r.logf("  bare iptables-restore of the same input: %s", d.Round(time.Millisecond))
	}
	return nil
}

// settle lets RCU callbacks and deferred frees run before memory is read.
func settle() { time.Sleep(300 * time.Millisecond) }

// perRuleGroup runs the per-rule method where its predicted cost fits the cap.
// Its syncs cannot be stopped half-way (each rule is a go-iptables call that
// takes no context), so it is not started where it would run past the cap: the
// method makes one call per chain and rule, each costing what an iptables call
// reading a chain costs on a table of that size, which the bench measures on
// an empty table and on the full one the restore methods left.
func (r *runner) perRuleGroup(ctx context.Context, nd *node, x xtables, g group) error {
	s := subject{"iptables", MethodPerRule, g.backend}
	n, e := g.n, g.e
	key := fmt.Sprintf("%s/%d", g.backend, e)
	if prev, ok := r.perRule[key]; ok && prev.n < 0 {
		return nil
	}
	st := newState(n, e, r.c.Reps, nd.bk)
	rs, err := iptables.Generate(iptables.ConfigFor(nd.target), st.current())
	if err != nil {
		return err
	}
	chains, rules := rs.Counts()
	calls := chains + rules + len(rs.Setup)
	// One call costs c0 on a small table and cFull on one as large as the
	// table being written (measured on the rules the restore methods left, if
	// they ran), so about their mean on average.
	c0, err := x.callCost(ctx, "filter", "INPUT")
	if err != nil {
		return err
	}
	cFull := c0
	if slices.ContainsFunc(r.c.Methods, func(m string) bool { return m != MethodPerRule }) {
		if cFull, err = x.callCost(ctx, "nat", "KUBE-SERVICES"); err != nil {
			return err
		}
	}
	perCall := (c0 + max(c0, cFull)) / 2
	predicted := time.Duration(calls) * perCall
	why := fmt.Sprintf("%d iptables calls of about %s each: %s on an empty table, %s on a full one", calls,
		perCall.Round(100*time.Microsecond), c0.Round(100*time.Microsecond), cFull.Round(100*time.Microsecond))
	if prev, ok := r.perRule[key]; ok {
		if lin := time.Duration(float64(prev.cold) * float64(n) / float64(prev.n)); lin > predicted {
			predicted = lin
			why = fmt.Sprintf("%s at N=%d, scaled linearly", prev.cold.Round(time.Millisecond), prev.n)
		}
	}
	if predicted > r.c.PerRuleCap {
		r.note("%s E=%d cut at N=%d: a cold sync would take about %s (%s; cap %s)", s, e, n, predicted.Round(time.Second), why, r.c.PerRuleCap)
		r.perRule[key] = perRuleRun{n: -1}
		return nil
	}
	if err := x.wipe(); err != nil {
		return err
	}
	p, err := iptables.New(nd.targetFor(g.backend, MethodPerRule))
	if err != nil {
		return err
	}
	defer p.Close()
	d, err := timedSync(ctx, p, st.current())
	if err != nil {
		return err
	}
	stats := p.LastSync()
	r.addDuration(s, n, e, "cold_sync", 0, d)
	r.add(s, n, e, "cold_commands", 0, float64(stats.Commands), unitCount)
	r.perRule[key] = perRuleRun{n: n, cold: d}
	r.logf("  per-rule cold sync: %s, %d iptables calls", d.Round(time.Millisecond), stats.Commands)
	syncCall := d / time.Duration(max(stats.Commands, 1))
	// Adding a Service rewrites KUBE-SERVICES rule by rule: about N calls.
	if addCost := syncCall * time.Duration(n+2*e+8); addCost > r.c.PerRuleCap {
		r.note("%s N=%d E=%d: add-one not run: about %d iptables calls at %s each predict %s a repetition (cap %s)",
			s, n, e, n+2*e+8, syncCall.Round(time.Microsecond), addCost.Round(time.Second), r.c.PerRuleCap)
		return r.updates(ctx, nd, st, p, s, phaseChange)
	}
	return r.updates(ctx, nd, st, p, s)
}
