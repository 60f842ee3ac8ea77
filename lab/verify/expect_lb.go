package verify

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// Flows to a load balancer ingress IP or an external IP enter the cluster at a
// node that is not fixed by the address: a pod's or a node's at its own node,
// whose rules take the address first; a client's where the network sends it. A
// client reaches an ingress IP through the lab's load balancer, which sends each
// flow to one of the nodes whose health check passes (the nodes with a ready
// local endpoint for policy Local, every node for policy Cluster, whose
// kube-proxy /healthz always answers 200 in a lab), chosen by the kernel's hash
// of the flow; and an external IP through the nodes externalIPRoutes names. At
// each of those nodes the mode's semantics decide as for a NodePort, after the
// firewall of a load balancer IP (proxy.ServicePort.FirewallSources, checked
// against the address the flow carries); the flow's expectation is what every
// entry node's has in common.

// expectExternal is what happens to a flow to an ingress or external IP.
func (m *model) expectExternal(s semantics, src Source, port proxy.ServicePort, tgt Target) Expectation {
	nodes, how := m.entries(src, port, tgt)
	if len(nodes) == 0 {
		return Expectation{Outcome: traffic.Timeout, Why: how}
	}
	var parts []Expectation
	var picks [][]proxy.Endpoint
	for _, d := range nodes {
		if tgt.External == LoadBalancer {
			sp := s.view(port, m.cluster.Version)
			addr, _ := s.replyAddr(src, tgt)
			if sources := sp.FirewallSources(tgt.Addr.Addr(), m.nodes[d].IP, s.dataplane()); sources != nil && !inRanges(sources, addr) {
				if exp, _ := m.expectAt(s, src, port, tgt, d); exp.Outcome != traffic.Refused || !s.refusedBeforeFirewall(src) {
					parts, picks = append(parts, Expectation{Outcome: traffic.Timeout, Why: s.firewalled(src, addr)}), append(picks, nil)
					continue
				}
			}
		}
		exp, eps := m.expectAt(s, src, port, tgt, d)
		parts, picks = append(parts, exp), append(picks, eps)
	}
	exp := merge(parts)
	if how != "" {
		exp.Why = how + ": " + exp.Why
	}
	if exp.Outcome != traffic.Answered || len(nodes) == 1 {
		return exp
	}
	// Per-node affinity: each node keeps its own list of clients, so the flow's
	// connections stick to one backend per node, not to one overall.
	if exp.Sticky {
		exp.Sticky, exp.SomeOf = false, true
		exp.Why += "; ClientIP affinity is per node, so each node keeps the client on a backend of its own"
	}
	exp.MinShare = minShare(exp.Backends, picks)
	return exp
}

// entries are the nodes a flow to tgt enters the cluster at, each as likely, and
// how it gets there.
func (m *model) entries(src Source, port proxy.ServicePort, tgt Target) ([]string, string) {
	if src.Kind != member.KindClient {
		return []string{src.Node}, ""
	}
	switch tgt.External {
	case ExternalIP:
		r, ok := m.t.ExternalIPRoute(tgt.Addr.Addr())
		if !ok {
			return nil, "no route to the external IP"
		}
		return r.Nodes, "routed to " + strings.Join(r.Nodes, ", ")
	}
	svc, ok := m.service(port)
	if !ok {
		return nil, "no Service holds the ingress IP"
	}
	lb, ok := m.t.LoadBalancerOf(&svc)
	if !ok {
		return nil, "no load balancer serves the Service"
	}
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		var all []string
		for _, n := range m.t.Nodes {
			all = append(all, n.Name)
		}
		return all, "load balancer " + lb.Name + " sends it to any node (kube-proxy's /healthz: 200 on each)"
	}
	healthy := m.healthyNodes(svc)
	if len(healthy) == 0 {
		return nil, "load balancer " + lb.Name + " drops it: no node has a ready local endpoint, so every health check answers 503"
	}
	return healthy, "load balancer " + lb.Name + " sends it to " + strings.Join(healthy, ", ") + " (health check 200)"
}

// service is the Service object of a port.
func (m *model) service(sp proxy.ServicePort) (corev1.Service, bool) {
	return m.t.Service(sp.Name.Namespace, sp.Name.Name)
}

// healthyNodes are the nodes whose health check node port for svc answers 200:
// those with a ready endpoint of the Service, over all its ports, as
// kube-proxy counts them (proxy.HealthServer).
func (m *model) healthyNodes(svc corev1.Service) []string {
	local := map[string]bool{}
	for _, sp := range proxy.FromObjects([]corev1.Service{svc}, m.t.EndpointSlices()) {
		for _, e := range sp.Endpoints {
			if e.Ready {
				local[m.nodeOf(e)] = true
			}
		}
	}
	var out []string
	for _, n := range m.t.Nodes {
		if local[n.Name] {
			out = append(out, n.Name)
		}
	}
	return out
}

// merge is one expectation for a flow that goes through one of several nodes,
// each as likely: answered by any backend some node's rules reach, with every
// source address it may see there; picks some nodes leave unanswered may time
// out. When no node answers, the nodes agree (they refuse, or drop, alike: a
// Service has endpoints everywhere or nowhere, and a source is in its ranges or
// not).
func merge(parts []Expectation) Expectation {
	var whys []string
	for _, p := range parts {
		if !slices.Contains(whys, p.Why) {
			whys = append(whys, p.Why)
		}
	}
	why := strings.Join(whys, " / ")
	answered := slices.IndexFunc(parts, func(p Expectation) bool { return p.Outcome == traffic.Answered })
	if answered < 0 {
		return Expectation{Outcome: parts[0].Outcome, Why: why}
	}
	exp := Expectation{Outcome: traffic.Answered, Backends: map[string][]netip.Addr{}, Why: why}
	for _, p := range parts {
		if p.Outcome != traffic.Answered {
			exp.MayTimeout = true
			continue
		}
		exp.MayTimeout = exp.MayTimeout || p.MayTimeout
		exp.Sticky = exp.Sticky || p.Sticky
		for b, srcs := range p.Backends {
			for _, a := range srcs {
				if !slices.Contains(exp.Backends[b], a) {
					exp.Backends[b] = append(exp.Backends[b], a)
				}
			}
			if _, ok := exp.Backends[b]; !ok {
				exp.Backends[b] = nil
			}
		}
	}
	for b := range exp.Backends {
		slices.SortFunc(exp.Backends[b], netip.Addr.Compare)
	}
	return exp
}

// minShare is the least chance with which one connection reaches each expected
// backend when every entry node is as likely and each picks uniformly among its
// endpoints (picks, one list per node; nil where the node answers nothing).
func minShare(backends map[string][]netip.Addr, picks [][]proxy.Endpoint) float64 {
	share := map[string]float64{}
	for _, eps := range picks {
		for _, e := range eps {
			share[e.String()] += 1 / float64(len(picks)) / float64(len(eps))
		}
	}
	least := 1.0
	for b := range backends {
		least = min(least, share[b])
	}
	return least
}

// inRanges tells whether a is in one of ranges.
func inRanges(ranges []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(a) })
}
