package report

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/svclab/svclab/lab/bench"
)

// writeKubeProxy writes what the real kube-proxy reported of itself, when the
// run measured it, beside svclab's proxier of the same mode and variant (as
// ratios, kube-proxy's over svclab's; never thresholds).
func (a *analysis) writeKubeProxy(w io.Writer, h int) {
	var kp []bench.Subject
	for _, s := range a.order {
		if s.Method == bench.KubeProxyMethod {
			kp = append(kp, s)
		}
	}
	if len(kp) == 0 {
		return
	}
	heading(w, h, "The real kube-proxy, by its own metrics")
	fmt.Fprintln(w, "kube-proxy (its defaults: minSyncPeriod 1 s in iptables and nftables mode) followed the same Services, written into the lab's API server as selectorless Services and EndpointSlices, on the same node; each mode ran in turn from a clean node over the N Services already there, so its first sync is its cold sync (as after a restart). cold sync: kubeproxy_sync_proxy_rules_duration_seconds of that first sync; to first sync: from its exec to the end of it; to first connection: from its exec to the first connection through the last Service. For each update: sync, kube-proxy's syncs for it (the mean of its histogram between readings before and after; syncs: how many); kube-proxy: kubeproxy_network_programming_duration_seconds, from the trigger time stamped on the EndpointSlices written to the end of the sync that programmed them; wire: svclab's prober, from the start of the API write to the first connection that succeeded. Adding a Service writes the Service, then its EndpointSlice, as the EndpointSlice controller does: kube-proxy syncs the Service at once and its endpoints a minSyncPeriod later, which the add latencies show. svclab ÷: kube-proxy's p50 over svclab's proxier's of the same mode and variant (its first method), where the run measured one. Every figure is a p50.")
	for _, e := range a.es {
		t := newTable("kube-proxy", "N", "cold sync", "svclab ÷", "to first sync", "to first connection",
			"add sync", "syncs", "svclab ÷", "add kube-proxy", "add wire", "change sync", "syncs", "svclab ÷", "change kube-proxy", "change wire")
		for _, s := range kp {
			mine, hasMine := a.svclabBeside(s)
			for _, n := range a.sizes(s, e, "cold_sync") {
				p := func(metric string) float64 { return a.p(s, n, e, metric, 0.5) }
				ratio := func(metric string) string {
					if !hasMine {
						return "–"
					}
					return fmtRatio(p(metric) / a.p(mine, n, e, metric, 0.5))
				}
				t.add(s.String(), fmt.Sprint(n),
					fmtSeconds(p("cold_sync")), ratio("cold_sync"), fmtSeconds(p("cold_startup_sync")), fmtSeconds(p("cold_programming")),
					fmtSeconds(p("add_sync")), fmtMedian(p("add_syncs")), ratio("add_sync"), fmtSeconds(p("add_kube_programming")), fmtSeconds(p("add_programming")),
					fmtSeconds(p("change_sync")), fmtMedian(p("change_syncs")), ratio("change_sync"), fmtSeconds(p("change_kube_programming")), fmtSeconds(p("change_programming")))
			}
		}
		fmt.Fprintf(w, "\nE=%d:\n\n", e)
		t.write(w)
	}
}

// svclabBeside is svclab's proxier of s's mode and variant that made the cold
// sync (the first of its methods in reading order).
func (a *analysis) svclabBeside(s bench.Subject) (bench.Subject, bool) {
	i := slices.IndexFunc(a.order, func(o bench.Subject) bool {
		return o.Mode == s.Mode && o.Backend == s.Backend && o.Method != bench.KubeProxyMethod && o.Method != bench.BareMethod && a.has(o, "cold_sync")
	})
	if i < 0 {
		return bench.Subject{}, false
	}
	return a.order[i], true
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtMedian prints the median of a count.
func fmtMedian(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%g", v)
}
