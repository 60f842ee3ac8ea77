package proxy

import "net/netip"

// ExpectedServiceMap is the ServiceMap kube-proxy 1.37 programs on node for s,
// in a mode of model m. Every ServicePort has a ClusterIP frontend, a NodePort
// frontend when it has a nodePort, and a frontend for each external IP and load
// balancer IP; their endpoints are kube-proxy's
// categorisation (Categorize: ready endpoints, else serving terminating ones):
// the ClusterIP takes the cluster endpoints, or the local ones with
// internalTrafficPolicy Local; the NodePort, external IPs and load balancer IPs
// take those of its externalTrafficPolicy, and a load balancer IP admits the
// sources ServicePort.FirewallSources says only. Where the models differ:
//
//   - iptables and nftables: no usable endpoint anywhere rejects; a Local policy
//     without a local endpoint drops.
//   - IPVS: a Local policy without a local endpoint falls back to the cluster
//     endpoints (kubernetes#97081), and a virtual server without real servers
//     rejects (IPVS answers ICMP port unreachable); nothing drops.
//
// Outside traffic is what is summarised: the short-circuits that send pods' and
// the node's own traffic to a Local-policy NodePort to every endpoint are not.
func ExpectedServiceMap(s *State, node Node, m Model) ServiceMap {
	out := ServiceMap{}
	for i := range s.Ports {
		sp := &s.Ports[i]
		cat := Categorize(sp, node.Name)
		out[ClusterIPFrontend(sp.Protocol, sp.ClusterIP, sp.Port)] = expectedForwarding(sp, cat, sp.InternalLocal, m)
		external := expectedForwarding(sp, cat, sp.ExternalLocal, m)
		if sp.NodePort != 0 {
			out[NodePortFrontend(sp.Protocol, sp.NodePort)] = external
		}
		for _, a := range sp.ExternalIPs {
			out[ClusterIPFrontend(sp.Protocol, a, sp.Port)] = external
		}
		for _, a := range sp.LoadBalancerIPs {
			out[ClusterIPFrontend(sp.Protocol, a, sp.Port)] = external.FirewalledBy(sp.FirewallSources(a, node.IP, m))
		}
	}
	return out
}

// expectedForwarding is one frontend of sp whose traffic policy is Local when
// local is set.
func expectedForwarding(sp *ServicePort, cat Categorized, local bool, m Model) Forwarding {
	if m == ModelIPVS {
		eps := cat.Cluster
		if local && len(cat.Local) > 0 {
			eps = cat.Local
		}
		return Forwarded(addrPorts(eps), sp.AffinitySeconds)
	}
	switch {
	case !cat.HasAny:
		return Forwarding{Verdict: Reject}
	case !local:
		return Forwarded(addrPorts(cat.Cluster), sp.AffinitySeconds)
	case len(cat.Local) == 0:
		return Forwarding{Verdict: Drop}
	}
	return Forwarded(addrPorts(cat.Local), sp.AffinitySeconds)
}

func addrPorts(eps []Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, len(eps))
	for i, e := range eps {
		out[i] = netip.AddrPortFrom(e.IP, uint16(e.Port))
	}
	return out
}
