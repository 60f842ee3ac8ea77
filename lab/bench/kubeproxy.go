package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/internal/progress"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/proxies"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// The real kube-proxy is measured beside svclab's proxiers, on the same node
// and the same synthetic state, with what it reports of itself. One lab with a
// control plane per size: the Services and their EndpointSlices are written
// into its API server once; then kube-proxy runs in each mode in turn on the
// node, each from a clean node over the Services already there (its first
// sync programs all of them at once, as after a restart: its cold sync), and
// is driven through the same updates as svclab's proxiers, written through
// the API server. Its rows (method KubeProxyMethod) hold
//
//   - cold_sync: kube-proxy's first sync, as it timed it
//     (kubeproxy_sync_proxy_rules_duration_seconds); cold_startup_sync: from
//     its exec to the end of that sync (kubeproxy_sync_proxy_rules_last_timestamp_seconds);
//     cold_programming: from its exec to the first connection through the
//     last Service that succeeded;
//   - PHASE_sync: the mean of the syncs kube-proxy made for one update (by its
//     histogram, read before and after), PHASE_syncs how many it made;
//     PHASE_kube_programming: kubeproxy_network_programming_duration_seconds,
//     from the update's trigger time (stamped on the EndpointSlices written)
//     to the end of the sync that programmed it; PHASE_programming: svclab's
//     prober, from the start of the API write to the first connection that
//     succeeded, as for svclab's proxiers.
//
// kube-proxy runs with its defaults, minSyncPeriod included (1 s in iptables
// and nftables mode): a change that arrives sooner after its last sync waits
// for it. Every repetition starts once that period has passed, so that what is
// timed is the change and its sync, not the rate limit.

// KubeProxyMethod labels the real kube-proxy's rows.
const KubeProxyMethod = "kube-proxy"

// kubeProxyIdle is how long after kube-proxy's last sync an update is made:
// kube-proxy's default minSyncPeriod, and a margin.
const kubeProxyIdle = time.Second + 100*time.Millisecond

// kubeProxyStartup is what a kube-proxy is given, beyond ColdCap, from its
// exec to the start of its first sync: starting a 200 MB binary and listing
// the API server's objects took minutes in svclab's VM on a loaded host.
const kubeProxyStartup = 2 * time.Minute

// kubeProxyCapped runs f (a kube-proxy's start and first sync) under ColdCap
// and kubeProxyStartup; stopped tells that the cap, not ctx, stopped it.
func (r *runner) kubeProxyCapped(ctx context.Context, f func(context.Context) error) (stopped bool, err error) {
	if r.c.ColdCap <= 0 {
		return false, f(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, r.c.ColdCap+kubeProxyStartup)
	defer cancel()
	err = f(cctx)
	return err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded), err
}

// kubeProxyCurve names a kube-proxy subject's sizes at one E, for predictions
// and cuts.
func kubeProxyCurve(s Subject, e int) string { return fmt.Sprintf("%s/E=%d", s, e) }

// runKubeProxies measures the real kube-proxy in every mode and variant c asks
// for (KubeProxySubjects), size by size.
func (r *runner) runKubeProxies(ctx context.Context) error {
	subjects, err := r.c.KubeProxySubjects()
	if err != nil || len(subjects) == 0 {
		return err
	}
	for _, e := range r.c.Endpoints {
		for _, n := range r.c.Services {
			if err := ctx.Err(); err != nil {
				return err
			}
			var todo []Subject
			for _, s := range subjects {
				curve := kubeProxyCurve(s, e)
				if r.cut[curve] {
					continue
				}
				if r.pastDeadline() {
					r.cut[curve] = true
					r.note("%s E=%d cut at N=%d: the run's time budget (%s) was spent", s, e, n, r.c.Deadline)
					continue
				}
				if pred, ok := r.predictCold(curve, n); ok && r.c.ColdCap > 0 && pred > r.c.ColdCap {
					r.cut[curve] = true
					r.note("%s E=%d cut at N=%d: its cold sync would take about %s, extrapolated from the smaller sizes (cap %s)", s, e, n, pred.Round(time.Second), r.c.ColdCap)
					continue
				}
				todo = append(todo, s)
			}
			if len(todo) == 0 {
				continue
			}
			start := time.Now()
			r.logf("[kube-proxy] N=%d E=%d: %s (%s elapsed)", n, e, joinSubjects(todo), time.Since(r.rep.Started).Round(time.Second))
			if err := r.kubeProxyLab(ctx, n, e, todo); err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				return fmt.Errorf("kube-proxy N=%d E=%d: %w", n, e, err)
			}
			r.logf("[kube-proxy] N=%d E=%d done in %s", n, e, time.Since(start).Round(100*time.Millisecond))
			for _, s := range todo {
				r.done[cellName(s.String(), n, e)] = true
			}
		}
	}
	return nil
}

func joinSubjects(ss []Subject) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return strings.Join(names, ", ")
}

// loadHeartbeat is how often the writing of a size's objects into the API
// server says how far it got: 20000 objects took over a minute on 2 cores, in
// the VM's emulated guest many minutes.
const loadHeartbeat = 20 * time.Second

// kubeProxyLab builds one lab with a control plane at size n, e, writes the
// state into its API server and measures each subject on it in turn.
func (r *runner) kubeProxyLab(ctx context.Context, n, e int, subjects []Subject) (err error) {
	nd, err := upNode(ctx, r.c.Name, r.c.maxEndpoints(), r.c.proberConfig(), true, r.c.KubeBinary)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, nd.down()) }()
	api, err := newAPIWriter(ctx, nd.lab.ControlPlane().Client())
	if err != nil {
		return err
	}
	base := newState(n, e, r.c.Reps, nd.bk)
	start := time.Now()
	progress.While(loadHeartbeat, func(elapsed time.Duration) {
		w := api.written.Load()
		r.logf("[kube-proxy] N=%d E=%d: %d objects written into the API server in %s, %.0f/s", n, e, w, elapsed.Round(time.Second), float64(w)/elapsed.Seconds())
	}, func() { err = api.move(ctx, nil, base.current(), time.Time{}) })
	if err != nil {
		return err
	}
	took := time.Since(start)
	r.note("N=%d E=%d: %d Services and EndpointSlices written into the API server in %s: %.0f objects/s (%d requests under way)",
		n, e, api.written.Load(), took.Round(time.Millisecond), float64(api.written.Load())/took.Seconds(), api.parallel)
	for i, s := range subjects {
		if i > 0 && r.pastDeadline() {
			r.cut[kubeProxyCurve(s, e)] = true
			r.note("%s E=%d cut at N=%d: the run's time budget (%s) was spent", s, e, n, r.c.Deadline)
			continue
		}
		st := base.clone()
		err := r.kubeProxySubject(ctx, nd, api, st, s)
		// The next mode starts from the same Services: the updates go.
		err = errors.Join(err, api.move(ctx, st.current(), base.current(), time.Time{}))
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// kubeProxySubject runs kube-proxy in s's mode and variant on the clean node,
// over st already in the API server: its cold sync, then the updates. The node
// is cleaned of its rules afterwards.
func (r *runner) kubeProxySubject(ctx context.Context, nd *node, api *apiWriter, st *state, s Subject) (err error) {
	m, err := proxy.Lookup(s.Mode)
	if err != nil {
		return err
	}
	target := nd.target
	target.Config.Backend = variantNamed(m, s.Backend).Backend
	clean := func() error {
		if m.Cleanup == nil {
			return nil
		}
		return m.Cleanup(target)
	}
	if err := clean(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, clean()) }()

	// The cold sync, and the time from kube-proxy's exec to the first
	// connection through the last Service.
	var p *kube.Process
	stopped := false
	got, perr, err := r.probeWhile(ctx, nd, st.target(st.last()), func(time.Time) error {
		var err error
		stopped, err = r.kubeProxyCapped(ctx, func(ctx context.Context) error {
			var err error
			p, err = nd.lab.Proxies().StartKubeProxy(ctx, proxies.KubeProxyRun{Node: nodeName, Mode: s.Mode, Backend: target.Config.Backend})
			return err
		})
		if stopped {
			return errCapped
		}
		return err
	})
	if stopped {
		// StartKubeProxy stopped the process that made no first sync.
		r.cut[kubeProxyCurve(s, st.e)] = true
		r.note("%s E=%d cut at N=%d: its first sync did not end within %s of its start (the cold-sync cap, plus %s for the process to start and list the API server's objects)",
			s, st.e, st.n, r.c.ColdCap+kubeProxyStartup, kubeProxyStartup)
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Stop(context.Background())) }()
	metrics := newKubeMetrics(nd)
	cold, err := metrics.read(ctx)
	if err != nil {
		return err
	}
	if cold.Syncs == 0 {
		return fmt.Errorf("kube-proxy's metrics show no sync after its first")
	}
	if cold.Syncs > 1 {
		r.note("%s N=%d E=%d: kube-proxy had made %d syncs when its metrics were first read: cold_sync is their mean", s, st.n, st.e, cold.Syncs)
	}
	coldSync := time.Duration(cold.SyncSeconds / float64(cold.Syncs) * float64(time.Second))
	r.addDuration(s, st.n, st.e, "cold_sync", 0, coldSync)
	r.addDuration(s, st.n, st.e, "cold_startup_sync", 0, cold.LastSync.Sub(p.Started))
	r.addCold(kubeProxyCurve(s, st.e), st.n, coldSync, nil)
	if perr != nil {
		r.add(s, st.n, st.e, "cold_failed", 0, 1, UnitCount)
		r.note("%s N=%d E=%d cold: no connection through the last Service within %s after kube-proxy's first sync: %v", s, st.n, st.e, r.c.Grace, perr)
	} else {
		r.addDuration(s, st.n, st.e, "cold_programming", 0, got.Latency)
	}
	r.logf("  %s: cold sync %s by its metrics, %s from its start to the end of it, first connection through the last Service %s after its start",
		s, coldSync.Round(time.Millisecond), cold.LastSync.Sub(p.Started).Round(time.Millisecond), got.Latency.Round(time.Millisecond))
	for _, ph := range []phase{phaseChange, phaseAdd} {
		if r.pastDeadline() {
			r.note("%s N=%d E=%d %s: not run: the run's time budget (%s) was spent", s, st.n, st.e, ph.name, r.c.Deadline)
			continue
		}
		if err := r.kubeProxyRepeat(ctx, nd, api, metrics, st, s, ph); err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
	}
	return nil
}

// kubeProxyRepeat makes one kind of update through the API server up to Reps
// times (as the cell budget allows), each once kube-proxy is idle.
func (r *runner) kubeProxyRepeat(ctx context.Context, nd *node, api *apiWriter, metrics *kubeMetrics, st *state, s Subject, ph phase) error {
	n, e := st.n, st.e
	limit := min(r.c.Reps, len(st.probes))
	if ph == phaseAdd {
		limit = r.c.Reps
	}
	start := time.Now()
	var own []time.Duration
	var seen probeTally
	rep := 0
	for ; rep < limit && r.repetitions(rep, start); rep++ {
		before, err := metrics.idle(ctx)
		if err != nil {
			return err
		}
		prev := st.current()
		next, to := st.next(ph, rep)
		if rep == 0 {
			if err := r.mustNotAnswer(nd, to); err != nil {
				return fmt.Errorf("before the update: %w", err)
			}
		}
		if err := nd.prober.drain(ctx); err != nil {
			return err
		}
		pr, perr, err := r.probeWhile(ctx, nd, to, func(at time.Time) error { return api.move(ctx, prev, next, at) })
		if err != nil {
			return err
		}
		after, err := metrics.programmed(ctx, before, r.c.Grace)
		if err != nil {
			return err
		}
		d := after.Since(before)
		r.addDuration(s, n, e, ph.name+"_sync", rep, d.MeanSync)
		r.add(s, n, e, ph.name+"_syncs", rep, float64(d.Syncs), UnitCount)
		if d.Programmed > 0 {
			own = append(own, d.MeanProgrammed)
			r.addDuration(s, n, e, ph.name+"_kube_programming", rep, d.MeanProgrammed)
		}
		if err := r.recordProbe(ctx, &seen, s, n, e, ph.name, rep, pr, perr); err != nil {
			return err
		}
	}
	if rep < r.c.Reps {
		r.note("%s N=%d E=%d %s: %d of %d repetitions (one takes %s, kube-proxy's minSyncPeriod included; cell budget %s)",
			s, n, e, ph.name, rep, r.c.Reps, (time.Since(start) / time.Duration(max(rep, 1))).Round(time.Millisecond), r.c.CellBudget)
	}
	r.logf("  %s %s: %d repetitions, first connection p50 %s, kube-proxy's network programming p50 %s, %d failed", s, ph.name, rep, median(seen.lat), median(own), seen.failed)
	return nil
}

// errCapped is what a write of probeWhile returns when the kube-proxy it starts
// was stopped at the cold-sync cap.
var errCapped = errors.New("kube-proxy stopped at the cold-sync cap")

// kubeMetrics reads the node's kube-proxy's metrics, from inside the node.
type kubeMetrics struct {
	client *http.Client
	url    string
}

func newKubeMetrics(nd *node) *kubeMetrics {
	return &kubeMetrics{client: traffic.HTTPClient(nd.nodeNS, time.Second), url: kube.ProxyMetricsURL(nd.nodeIP)}
}

func (k *kubeMetrics) read(ctx context.Context) (kube.ProxyMetrics, error) {
	return kube.ReadProxyMetrics(ctx, k.client, k.url)
}

// idle waits until kube-proxy's minSyncPeriod has passed since its last sync
// and no sync is queued, and returns the metrics then.
func (k *kubeMetrics) idle(ctx context.Context) (kube.ProxyMetrics, error) {
	for {
		m, err := k.read(ctx)
		if err != nil {
			return m, err
		}
		wait := kubeProxyIdle - time.Since(m.LastSync)
		if m.LastQueued.After(m.LastSync) {
			wait = max(wait, 50*time.Millisecond)
		}
		if wait <= 0 {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// programmed waits until kube-proxy has recorded the network programming
// latency of a change since before (or, when it records none, made a sync
// since and is idle), within grace, and returns the metrics then.
func (k *kubeMetrics) programmed(ctx context.Context, before kube.ProxyMetrics, grace time.Duration) (kube.ProxyMetrics, error) {
	deadline := time.Now().Add(grace)
	for {
		m, err := k.read(ctx)
		if err != nil {
			return m, err
		}
		synced := m.Syncs > before.Syncs && !m.LastQueued.After(m.LastSync)
		if m.Programmed > before.Programmed && synced {
			return m, nil
		}
		if time.Now().After(deadline) {
			if synced {
				return m, nil
			}
			return m, fmt.Errorf("kube-proxy made no sync within %s of the update (its metrics: %d syncs, as before)", grace, m.Syncs)
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
