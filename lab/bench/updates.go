package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// phase is one kind of update, repeated; name prefixes its metrics
// (NAME_sync, NAME_programming, ...).
type phase struct{ name string }

var (
	// phaseChange opens one more probe Service: its endpoints move from closed
	// ports to open ones.
	phaseChange = phase{name: "change"}
	// phaseAdd adds one more Service backed by the real pods.
	phaseAdd = phase{name: "add"}
)

// updates repeats both kinds of update with proxier p, which has st installed:
// endpoint changes first, with exactly N Services present, then additions. A
// method that writes rule by rule, whose syncs cannot be stopped, skips an
// update whose one repetition its proxier estimates past PerRuleCap (adding a
// Service rewrites the whole KUBE-SERVICES chain, say), and a note says so.
func (r *runner) updates(ctx context.Context, nd *node, st *state, p proxy.Proxier, g group, s Subject) error {
	for _, ph := range []phase{phaseChange, phaseAdd} {
		if r.outOfTime(s, g) {
			return nil
		}
		skip, err := r.tooSlow(ctx, st, p, g, s, ph)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		if err := r.repeat(ctx, nd, st, p, s, ph); err != nil {
			return err
		}
	}
	return nil
}

// tooSlow tells whether one repetition of ph by p, a proxier of a method that
// writes rule by rule, is estimated past PerRuleCap, and notes it when so.
func (r *runner) tooSlow(ctx context.Context, st *state, p proxy.Proxier, g group, s Subject, ph phase) (bool, error) {
	est, ok := p.(proxy.SyncEstimator)
	if !ok || !g.m.Mode.WritesPerRule(s.Method) {
		return false, nil
	}
	next, _ := st.clone().next(ph, 0)
	d, why, err := est.EstimateSync(ctx, proxy.StateOf(next))
	if err != nil || d <= r.c.PerRuleCap {
		return false, err
	}
	r.note("%s N=%d E=%d %s: not run: a repetition would take about %s (%s; cap %s)", s, st.n, st.e, ph.name, d.Round(time.Second), why, r.c.PerRuleCap)
	return true, nil
}

// repetitions decides whether repetition rep (0-based) of a cell that started at
// start may run: always the first; then up to Reps while the cell's budget
// lasts; and, budget or not, up to MinReps unless one repetition alone takes
// more than the budget.
func (r *runner) repetitions(rep int, start time.Time) bool {
	if rep == 0 {
		return true
	}
	if rep >= r.c.Reps {
		return false
	}
	if r.c.CellBudget <= 0 {
		return true
	}
	spent := time.Since(start)
	each := spent / time.Duration(rep)
	if spent+each <= r.c.CellBudget {
		return true
	}
	return rep < r.c.MinReps && each <= r.c.CellBudget
}

// probeTally is what the prober saw over one phase's repetitions: the
// latency to the first connection of each it saw through, and how many failed.
type probeTally struct {
	lat    []time.Duration
	failed int
}

// recordProbe records what the prober saw of one repetition of phase, and
// tallies it in t: its failure (perr), or the latency to the first connection
// and the poll interval. It returns ctx's error when the run was cut short.
func (r *runner) recordProbe(ctx context.Context, t *probeTally, s Subject, n, e int, phase string, rep int, pr probeResult, perr error) error {
	if perr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t.failed++
		r.add(s, n, e, phase+"_failed", rep, 1, UnitCount)
		r.note("%s N=%d E=%d %s repetition %d: %v", s, n, e, phase, rep, perr)
		return nil
	}
	t.lat = append(t.lat, pr.Latency)
	r.addDuration(s, n, e, phase+"_programming", rep, pr.Latency)
	r.addDuration(s, n, e, phase+"_poll_interval", rep, pr.Interval)
	return nil
}

// repeat measures one kind of update up to Reps times: the sync's duration and
// the network-programming latency seen by the prober.
func (r *runner) repeat(ctx context.Context, nd *node, st *state, p proxy.Proxier, s Subject, ph phase) error {
	n, e := st.n, st.e
	start := time.Now()
	rep := 0
	var seen probeTally
	limit := r.c.Reps
	if ph == phaseChange && len(st.probes) < limit {
		limit = len(st.probes)
		r.note("%s N=%d E=%d %s: only %d probe Services fit between the first and the last, so %d repetitions", s, n, e, ph.name, limit, limit)
	}
	for ; rep < limit && r.repetitions(rep, start); rep++ {
		next, to := st.next(ph, rep)
		if rep == 0 {
			if err := r.mustNotAnswer(nd, to); err != nil {
				return fmt.Errorf("%s before the update: %w", ph.name, err)
			}
		}
		if err := nd.prober.drain(ctx); err != nil {
			return err
		}
		sd, pr, perr, err := r.measureUpdate(ctx, nd, p, next, to)
		if err != nil {
			return fmt.Errorf("%s sync: %w", ph.name, err)
		}
		r.recordSync(s, n, e, ph.name, rep, sd, p)
		if err := r.recordProbe(ctx, &seen, s, n, e, ph.name, rep, pr, perr); err != nil {
			return err
		}
	}
	if rep < r.c.Reps && rep < limit {
		r.note("%s N=%d E=%d %s: %d of %d repetitions (one takes %s; cell budget %s)",
			s, n, e, ph.name, rep, r.c.Reps, (time.Since(start) / time.Duration(rep)).Round(time.Millisecond), r.c.CellBudget)
	}
	r.logf("  %s %s: sync and programming over %d repetitions, programming p50 %s, %d failed", s, ph.name, rep, median(seen.lat), seen.failed)
	return nil
}

// mustNotAnswer checks the premise of a latency measurement: before the update,
// the changed Service does not take connections.
func (r *runner) mustNotAnswer(nd *node, to netip.AddrPort) error {
	var cerr error
	err := namespaces.Do(nd.client, func() error {
		_, cerr = connect(to, r.c.AttemptTimeout)
		return nil
	})
	if err != nil {
		return err
	}
	if cerr == nil {
		return fmt.Errorf("%s already takes connections: the measurement would mean nothing", to)
	}
	return nil
}

// probeWhile runs write (given the time it starts at) while the prober polls
// to, and returns the prober's result (perr when no connection succeeded
// within Grace after write returned). err is write's own failure.
func (r *runner) probeWhile(ctx context.Context, nd *node, to netip.AddrPort, write func(time.Time) error) (pr probeResult, perr, err error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type probed struct {
		res probeResult
		err error
	}
	probe := make(chan probed, 1)
	start := time.Now()
	go func() {
		res, err := nd.prober.firstSuccess(pctx, to, start)
		probe <- probed{res, err}
	}()
	if err := write(start); err != nil {
		cancel()
		<-probe
		return pr, nil, err
	}
	grace := time.AfterFunc(r.c.Grace, cancel)
	defer grace.Stop()
	got := <-probe
	if errors.Is(got.err, context.Canceled) && ctx.Err() == nil {
		got.err = fmt.Errorf("%s: %w within %s after the write (a sync, an update taken by the API server, or kube-proxy started) (%d attempts)", to, errNeverAnswered, r.c.Grace, got.res.Attempts)
	}
	return got.res, got.err, nil
}

// measureUpdate syncs next while the prober polls to, and returns the sync's
// duration and the prober's result (perr when no connection succeeded within
// Grace after the sync returned). err is the sync's own failure.
func (r *runner) measureUpdate(ctx context.Context, nd *node, p proxy.Proxier, next []proxy.ServicePort, to netip.AddrPort) (sync time.Duration, pr probeResult, perr, err error) {
	pr, perr, err = r.probeWhile(ctx, nd, to, func(time.Time) error {
		var err error
		sync, err = timedSync(ctx, p, next)
		return err
	})
	return sync, pr, perr, err
}
