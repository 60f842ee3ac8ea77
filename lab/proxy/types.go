// Package proxy is the part of svclab that plays kube-proxy: the node-local view of
// Services and endpoints a proxier programs, the Proxier interface every mode
// implements, the registry of modes, and what kube-proxy does independently of its
// mode (health-check node ports, stale UDP conntrack cleanup).
package proxy

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/version"
)

// ServicePortName identifies one port of one Service, as kube-proxy's
// ServicePortName does.
type ServicePortName struct {
	Namespace, Name, Port string
}

// NamespacedName is "namespace/name".
func (n ServicePortName) NamespacedName() string { return n.Namespace + "/" + n.Name }

// String is the name kube-proxy hashes into chain names and writes into comments.
// Since 1.19 an unnamed port prints as "namespace/name"; before that the colon stayed
// ("namespace/name:"), which is what seed 002's rules show.
func (n ServicePortName) String(v version.Version) string {
	if n.Port == "" && v.AtLeast(1, 19) {
		return n.NamespacedName()
	}
	return n.NamespacedName() + ":" + n.Port
}

// ServicePort is one Service port with everything a proxier needs to program it.
type ServicePort struct {
	Name      ServicePortName
	Protocol  corev1.Protocol
	ClusterIP netip.Addr
	Port      int
	// NodePort is 0 for ClusterIP Services.
	NodePort int
	// ExternalLocal is externalTrafficPolicy: Local (NodePort and LoadBalancer only).
	ExternalLocal bool
	// InternalLocal is internalTrafficPolicy: Local.
	InternalLocal bool
	// HealthCheckNodePort is set for LoadBalancer Services with externalTrafficPolicy
	// Local; 0 otherwise.
	HealthCheckNodePort int
	// AffinitySeconds is the ClientIP session affinity timeout; 0 means no affinity.
	AffinitySeconds int
	// ExternalIPs are the Service's spec.externalIPs: addresses outside the
	// cluster that someone routes to a node, where they are translated as the
	// external destinations they are.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are the addresses of status.loadBalancer.ingress that a
	// load balancer sends on with their destination intact (ipMode VIP, or
	// unset), which kube-proxy programs; an ingress of ipMode Proxy is the load
	// balancer's own and is left out, as kube-proxy leaves it.
	LoadBalancerIPs []netip.Addr
	// SourceRanges are spec.loadBalancerSourceRanges: the sources that may reach
	// the load balancer IPs. Empty allows every source (a range of 0.0.0.0/0
	// among them allows every source too, so kube-proxy drops them all).
	SourceRanges []netip.Prefix
	// Endpoints lists every endpoint of the port, ready or not, sorted by
	// "ip:port" text.
	Endpoints []Endpoint
}

// ClonePorts copies ports deep enough that changing the copies' endpoints
// leaves the originals alone: what a proxier keeps of its last sync.
func ClonePorts(ports []ServicePort) []ServicePort {
	out := make([]ServicePort, len(ports))
	for i, sp := range ports {
		sp.Endpoints = append([]Endpoint(nil), sp.Endpoints...)
		sp.ExternalIPs = slices.Clone(sp.ExternalIPs)
		sp.LoadBalancerIPs = slices.Clone(sp.LoadBalancerIPs)
		sp.SourceRanges = slices.Clone(sp.SourceRanges)
		out[i] = sp
	}
	return out
}

// ExternallyAccessible tells whether the port takes traffic from outside the
// cluster: on a node port, an external IP or a load balancer IP.
func (sp *ServicePort) ExternallyAccessible() bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

// UsesFirewall tells whether the port's load balancer IPs take traffic only from
// its source ranges.
func (sp *ServicePort) UsesFirewall() bool {
	return len(sp.LoadBalancerIPs) > 0 && len(sp.SourceRanges) > 0
}

// FirewallSources is the sources kube-proxy 1.37 in a mode of model m lets
// reach the load balancer IP lb of sp on a node whose address is nodeIP; nil
// when every source may. Without loadBalancerSourceRanges there is no firewall.
// With them, the ranges, and, when one of them holds nodeIP, the addresses a
// node that holds a VIP as a local address sends to it from: in iptables and
// nftables mode every load balancer IP of the port (its one firewall chain
// lists them all), in IPVS mode lb alone (KUBE-LOAD-BALANCER-SOURCE-IP holds
// one entry per IP, from itself). The iptables mode writes its KUBE-FW- chain
// only while the port has endpoints, so without any the REJECT meets every
// source; nftables' firewall-ips and IPVS' KUBE-LOAD-BALANCER-FW hold the IP
// regardless, and the firewall drops outside sources before anything rejects.
func (sp *ServicePort) FirewallSources(lb, nodeIP netip.Addr, m Model) []netip.Prefix {
	if !sp.UsesFirewall() || !slices.Contains(sp.LoadBalancerIPs, lb) {
		return nil
	}
	if m == ModelIPTables && !Categorize(sp, "").HasAny {
		return nil
	}
	out := slices.Clone(sp.SourceRanges)
	if sp.RangesHold(nodeIP) {
		self := []netip.Addr{lb}
		if m != ModelIPVS {
			self = sp.LoadBalancerIPs
		}
		for _, a := range self {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	slices.SortFunc(out, comparePrefixes)
	return slices.Compact(out)
}

// RangesHold tells whether one of sp's source ranges holds a, the node's
// address: then kube-proxy lets the node reach the load balancer IPs from
// themselves (FirewallSources).
func (sp *ServicePort) RangesHold(a netip.Addr) bool {
	return slices.ContainsFunc(sp.SourceRanges, func(r netip.Prefix) bool { return r.Contains(a) })
}

// UsesLocalEndpoints tells whether some traffic to the port goes to this node's
// endpoints only, as kube-proxy's BaseServicePortInfo decides.
func (sp *ServicePort) UsesLocalEndpoints() bool {
	return sp.InternalLocal || (sp.ExternalLocal && sp.ExternallyAccessible())
}

// UsesClusterEndpoints tells whether some traffic to the port goes to endpoints on
// every node. A port that takes external traffic needs them even with policy
// Local: pods' traffic to its NodePort is short-circuited to the cluster chain.
func (sp *ServicePort) UsesClusterEndpoints() bool {
	return !sp.InternalLocal || sp.ExternallyAccessible()
}

// Endpoint is one address:port behind a ServicePort, with the EndpointSlice
// conditions kube-proxy reads.
type Endpoint struct {
	IP          netip.Addr
	Port        int
	NodeName    string
	Ready       bool
	Serving     bool
	Terminating bool
	// Pod is "namespace/name" of the pod behind the endpoint, when there is one.
	Pod string
}

// String is "ip:port", the form kube-proxy hashes into KUBE-SEP chain names.
func (e Endpoint) String() string { return netip.AddrPortFrom(e.IP, uint16(e.Port)).String() }

// Node is the node a proxier programs.
type Node struct {
	Name    string
	IP      netip.Addr
	PodCIDR netip.Prefix
}

// AsSeenBy is the port as kube-proxy release v sees it. Releases before 1.24 (the
// KUBE-XLB layout svclab reproduces for them) proxied ready endpoints only, with no
// fallback to terminating ones, and knew no internalTrafficPolicy.
func (sp ServicePort) AsSeenBy(v version.Version) ServicePort {
	if v.AtLeast(1, 24) {
		return sp
	}
	sp.InternalLocal = false
	var ready []Endpoint
	for _, e := range sp.Endpoints {
		if e.Ready {
			ready = append(ready, e)
		}
	}
	sp.Endpoints = ready
	return sp
}
