package bench

import (
	"context"
	"net/netip"
	"time"
)

// baseline times TCP handshakes from the client pod straight to a backend pod
// before the node has any rule: the path without NAT and without a table to
// walk. (With rules installed even this connection walks KUBE-SERVICES: the
// pods share the node's bridge, and br_netfilter shows bridged packets to
// iptables.)
func (r *runner) baseline(ctx context.Context, nd *node, g group) error {
	pod := nd.bk.realEndpoints(1, true)[0]
	to := netip.AddrPortFrom(pod.IP, uint16(pod.Port))
	samples, failures, err := connectSamples(ctx, nd.client, []netip.AddrPort{to}, r.c.Connects, 2*time.Second)
	if err != nil {
		return err
	}
	// The rows go with the data path's: the first method that writes the whole
	// table at once, which makes the cold sync.
	method := g.m.Methods[0]
	if shared, _ := g.split(); len(shared) > 0 {
		method = shared[0]
	}
	r.connectRows(g.subject(method), g.n, g.e, "connect_baseline", to, samples[0], failures[0])
	return nil
}

// connectRows records one target's handshakes, and its failures: a failed
// connection is a finding, reported with the first error, not a reason to
// stop (seen in IPVS mode, for a few connections straight to a pod that had
// just been reached through ClusterIPs from the same client).
func (r *runner) connectRows(s Subject, n, e int, metric string, to netip.AddrPort, samples []time.Duration, f connectFailures) {
	for rep, d := range samples {
		r.addDuration(s, n, e, metric, rep, d)
	}
	if f.n > 0 {
		r.add(s, n, e, metric+"_failures", 0, float64(f.n), UnitCount)
		r.note("%s N=%d E=%d data path: %d of %d connections to %s (%s) failed; the first: %v", s, n, e, f.n, f.n+len(samples), to, metric, f.first)
	}
}

// dataPath times TCP handshakes from the client pod to the first and the last
// Service in the table and, without NAT, to a backend pod. The rows carry the
// method that installed the rules; the rules, and so the data path, are the
// same whichever of the methods that share the cold sync wrote them.
func (r *runner) dataPath(ctx context.Context, nd *node, st *state, s Subject) error {
	pod := nd.bk.realEndpoints(1, true)[0]
	metrics := []string{"connect_first", "connect_last", "connect_pod"}
	addrs := []netip.AddrPort{st.target(st.first()), st.target(st.last()), netip.AddrPortFrom(pod.IP, uint16(pod.Port))}
	samples, failures, err := connectSamples(ctx, nd.client, addrs, r.c.Connects, 2*time.Second)
	if err != nil {
		return err
	}
	for i, metric := range metrics {
		r.connectRows(s, st.n, st.e, metric, addrs[i], samples[i], failures[i])
	}
	r.logf("  data path p50: first %s, last %s, pod %s", median(samples[0]), median(samples[1]), median(samples[2]))
	return nil
}
