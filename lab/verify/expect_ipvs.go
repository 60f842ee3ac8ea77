package verify

import (
	"net/netip"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

func init() {
	expectations[proxy.ModelIPVS] = (*model).expectIPVS
}

// expectIPVS is what kube-proxy's IPVS mode does with a flow, derived from how the
// kernel treats it there:
//
//   - Every ClusterIP is a local address of every node (on kube-ipvs0), so the first
//     node a packet to it enters takes it: the source's own node. IPVS schedules
//     only packets addressed to the node (LOCAL_IN, or LOCAL_OUT for the node's own
//     processes), so a NodePort is scheduled by the node it is addressed to; a
//     node forwarding a packet to another node's address leaves it alone.
//   - The real servers are kube-proxy's syncEndpoint choice on that node: with
//     policy Cluster the cluster endpoints; with policy Local the node's local
//     endpoints, or the cluster endpoints when it has none (kubernetes#97081). No
//     real server at all: IPVS answers the first packet with ICMP port
//     unreachable (ip_vs_leave), so the connection is refused.
//   - Masquerade comes from the iptables rules kube-proxy keeps beside IPVS:
//     KUBE-CLUSTER-IP marks ClusterIP traffic from outside the cluster CIDR (a
//     node's own connection to a ClusterIP leaves from that ClusterIP, a local
//     address, so it is marked); KUBE-NODE-PORT marks NodePort traffic unless its
//     port is in KUBE-NODE-PORT-LOCAL-*; KUBE-LOOP-BACK masquerades a local
//     endpoint reaching itself. MASQUERADE gives the address of the interface
//     towards the endpoint: cni0's for a local pod, eth0's otherwise.
//   - IPVS undoes its translation on replies passing through the node that
//     translated (FORWARD, also for replies bridged on cni0 through br_netfilter,
//     or LOCAL_IN). An unmasqueraded flow is answered only when the replies come
//     back through that node: the endpoint is on it, or the client is a pod on it
//     or the node itself. Other replies reach the client from the pod's address and
//     are not taken as answers.
func (m *model) expectIPVS(src Source, sp *proxy.ServicePort, tgt Target) Expectation {
	if src.Kind == "client" && tgt.Node == "" {
		return Expectation{Outcome: traffic.Unreachable, Why: "ClusterIPs are not routed outside the cluster"}
	}
	// d is the node whose IPVS schedules the flow.
	d := src.Node
	if tgt.Node != "" {
		d = tgt.Node
	}
	c := proxy.Categorize(sp, d)
	onlyLocal := sp.InternalLocal
	if tgt.Node != "" {
		onlyLocal = sp.ExternalLocal
	}
	eps, why := c.Cluster, "ClusterIP virtual server on "+d+": the cluster endpoints"
	if tgt.Node != "" {
		why = "NodePort virtual server on " + d + ": the cluster endpoints"
	}
	if onlyLocal {
		if len(c.Local) > 0 {
			eps, why = c.Local, "policy Local: the virtual server on "+d+" holds its local endpoints only"
		} else {
			why = "policy Local but no endpoint on " + d + ": kube-proxy gives its virtual server the cluster endpoints (kubernetes#97081)"
		}
	}
	if len(eps) == 0 {
		return Expectation{Outcome: traffic.Refused, Why: "the virtual server on " + d + " has no real server: IPVS answers ICMP port unreachable"}
	}

	masq := false
	if tgt.Node == "" {
		// The source the KUBE-CLUSTER-IP rule sees: a node's connection to a
		// ClusterIP, a local address, leaves from that address.
		seen := src.IP
		if src.Kind == "node" {
			seen = sp.ClusterIP
		}
		switch {
		case m.cluster.MasqueradeAll:
			masq = true
		case m.cluster.ClusterCIDR.IsValid():
			masq = !m.cluster.ClusterCIDR.Contains(seen)
		default:
			masq = src.Kind == "node"
		}
		if masq {
			why += ", masqueraded (KUBE-CLUSTER-IP)"
		}
	} else if !sp.ExternalLocal {
		masq = true
		why += ", masqueraded (KUBE-NODE-PORT)"
	} else {
		why += ", client address kept (KUBE-NODE-PORT-LOCAL)"
	}

	exp := Expectation{Outcome: traffic.Answered, Backends: map[string][]netip.Addr{}, Why: why, Sticky: sp.AffinitySeconds > 0}
	if exp.Sticky {
		exp.Why += "; ClientIP affinity: persistence"
	}
	for _, e := range eps {
		local := m.nodeOf(e) == d
		if masq || (local && e.IP == src.IP) {
			// KUBE-LOOP-BACK holds the node's own endpoints: a pod reaching
			// itself through its node's virtual server is masqueraded.
			exp.Backends[e.String()] = []netip.Addr{m.masqAddr(d, e)}
			continue
		}
		if e.IP == src.IP || !returnsThroughIPVS(m, d, src, e) {
			exp.MayTimeout = true
			continue
		}
		exp.Backends[e.String()] = []netip.Addr{src.IP}
	}
	if exp.MayTimeout {
		exp.Why += "; replies from endpoints off " + d + " to an unmasqueraded client bypass its IPVS and are lost"
	}
	if len(exp.Backends) == 0 {
		return Expectation{Outcome: traffic.Timeout, Why: exp.Why}
	}
	return exp
}

// returnsThroughIPVS tells whether replies from endpoint e to src's own address
// pass through node d, whose IPVS translated the request: e is on d (its replies
// leave through d, routed or bridged), or the client is a pod on d (replies reach
// it through d), or d itself (replies are addressed to d).
func returnsThroughIPVS(m *model, d string, src Source, e proxy.Endpoint) bool {
	if m.nodeOf(e) == d {
		return true
	}
	return (src.Kind == "pod" || src.Kind == "node") && src.Node == d
}
