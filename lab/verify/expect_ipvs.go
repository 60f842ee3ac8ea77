package verify

import (
	"net/netip"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// ipvsRules is what kube-proxy's proxy.ModelIPVS mode does with a flow, derived from how the
// kernel treats it there:
//
//   - Every ClusterIP is a local address of every node (on kube-ipvs0), so the first
//     node a packet to it enters takes it: the source's own node. proxy.ModelIPVS schedules
//     only packets addressed to the node (LOCAL_IN, or LOCAL_OUT for the node's own
//     processes), so a NodePort is scheduled by the node it is addressed to; a
//     node forwarding a packet to another node's address leaves it alone.
//   - The real servers are kube-proxy's syncEndpoint choice on that node: with
//     policy Cluster the cluster endpoints; with policy Local the node's local
//     endpoints, or the cluster endpoints when it has none (kubernetes#97081). No
//     real server at all: proxy.ModelIPVS answers the first packet with ICMP port
//     unreachable (ip_vs_leave), so the connection is refused.
//   - Masquerade comes from the iptables rules kube-proxy keeps beside IPVS:
//     KUBE-CLUSTER-IP marks ClusterIP traffic from outside the cluster CIDR (a
//     node's own connection to a ClusterIP leaves from that ClusterIP, a local
//     address, so it is marked); KUBE-NODE-PORT marks NodePort traffic unless its
//     port is in KUBE-NODE-PORT-LOCAL-*; KUBE-LOOP-BACK masquerades a local
//     endpoint reaching itself. MASQUERADE gives the address of the interface
//     towards the endpoint: cni0's for a local pod, eth0's otherwise.
//   - proxy.ModelIPVS undoes its translation on replies passing through the node that
//     translated (FORWARD, also for replies bridged on cni0 through br_netfilter,
//     or LOCAL_IN). An unmasqueraded flow is answered only when the replies come
//     back through that node: the endpoint is on it, or the client is a pod on it
//     or the node itself. Other replies reach the client from the pod's address and
//     are not taken as answers.
type ipvsRules struct{}

// view: the proxy.ModelIPVS proxier programs every release's endpoints alike.
func (ipvsRules) view(sp proxy.ServicePort, _ version.Version) proxy.ServicePort { return sp }

func (ipvsRules) choose(m *model, f flowAt) choice {
	src, sp, c, d := f.src, f.sp, f.c, f.d
	external := !f.tgt.isClusterIP()
	onlyLocal := sp.InternalLocal
	if external {
		onlyLocal = sp.ExternalLocal
	}
	eps, why := c.Cluster, "ClusterIP virtual server on "+d+": the cluster endpoints"
	if external {
		why = externalKind(f.tgt) + " virtual server on " + d + ": the cluster endpoints"
	}
	if onlyLocal {
		if len(c.Local) > 0 {
			eps, why = c.Local, "policy Local: the virtual server on "+d+" holds its local endpoints only"
		} else {
			why = "policy Local but no endpoint on " + d + ": kube-proxy gives its virtual server the cluster endpoints (kubernetes#97081)"
		}
	}
	if len(eps) == 0 {
		return choice{none: traffic.Refused, why: "the virtual server on " + d + " has no real server: proxy.ModelIPVS answers ICMP port unreachable"}
	}

	masq := false
	switch {
	case !external:
		// The source the KUBE-CLUSTER-IP rule sees: a node's connection to a
		// ClusterIP, a local address, leaves from that address.
		seen := src.IP
		if src.Kind == member.KindNode {
			seen = sp.ClusterIP
		}
		switch {
		case m.cluster.MasqueradeAll:
			masq = true
		case m.cluster.ClusterCIDR.IsValid():
			masq = !m.cluster.ClusterCIDR.Contains(seen)
		default:
			masq = src.Kind == member.KindNode
		}
		if masq {
			why += ", masqueraded (KUBE-CLUSTER-IP)"
		}
	case !sp.ExternalLocal:
		masq = true
		why += ", masqueraded (" + map[string]string{"": "KUBE-NODE-PORT", LoadBalancer: "KUBE-LOAD-BALANCER", ExternalIP: "KUBE-EXTERNAL-IP"}[f.tgt.External] + ")"
	default:
		why += ", client address kept (" + map[string]string{"": "KUBE-NODE-PORT-LOCAL", LoadBalancer: "KUBE-LOAD-BALANCER-LOCAL", ExternalIP: "KUBE-EXTERNAL-IP-LOCAL"}[f.tgt.External] + ")"
	}
	if sp.AffinitySeconds > 0 {
		why += "; ClientIP affinity: persistence"
	}
	return choice{eps: eps, masq: masq, why: why}
}

// replyAddr: external and load balancer IPs are local addresses of every node
// (on kube-ipvs0), so a node's own connection to one leaves from that very
// address; its endpoints reply to it, and a reply that reaches another node
// ends there.
func (ipvsRules) replyAddr(src Source, tgt Target) (netip.Addr, bool) {
	if src.Kind == member.KindNode && tgt.External != "" {
		return tgt.Addr.Addr(), true
	}
	return src.IP, false
}

func (ipvsRules) dataplane() proxy.Model { return proxy.ModelIPVS }

// firewalled: KUBE-PROXY-FIREWALL (from INPUT) sends traffic to a load balancer
// IP with source ranges through KUBE-SOURCE-RANGES-FIREWALL, which lets the
// admitted sources on and drops the rest, endpoints or not. A node's own
// connection leaves from the IP itself: allowed (KUBE-LOAD-BALANCER-SOURCE-IP)
// when the node's address is in a range, else dropped by KUBE-IPVS-OUT-FILTER
// once IPVS has scheduled it (refusedBeforeFirewall).
func (ipvsRules) firewalled(src Source, addr netip.Addr) string {
	if src.Kind == member.KindNode {
		return "the node's address is outside loadBalancerSourceRanges: KUBE-IPVS-OUT-FILTER drops its connections from the IP to itself"
	}
	return "source " + addr.String() + " is outside loadBalancerSourceRanges: KUBE-SOURCE-RANGES-FIREWALL drops it"
}

// refusedBeforeFirewall: a node's own connection meets IPVS in LOCAL_OUT
// (ip_vs_local_request4, priority NF_IP_PRI_NAT_DST+2) before the filter
// table's OUTPUT (priority 0) where KUBE-IPVS-OUT-FILTER sits; a virtual server
// without real servers answers it there with ICMP port unreachable
// (ip_vs_leave), and the filter rule, which matches IPVS connections only
// (-m ipvs --vaddr), never sees it. Other sources pass KUBE-PROXY-FIREWALL in
// INPUT (priority 0) before IPVS schedules in LOCAL_IN (NF_IP_PRI_NAT_SRC-1).
func (ipvsRules) refusedBeforeFirewall(src Source) bool { return src.Kind == member.KindNode }

// hairpinMasqueraded: KUBE-LOOP-BACK holds the node's own endpoints, so a pod
// reaching itself through its own node's virtual server is masqueraded; through
// another node's, its replies to itself bypass that node.
func (ipvsRules) hairpinMasqueraded(local bool) bool { return local }

func (ipvsRules) lost(d string) string {
	return "replies from endpoints off " + d + " to an unmasqueraded client bypass its proxy.ModelIPVS and are lost"
}
