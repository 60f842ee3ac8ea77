// Package proxytest holds the nodes, endpoints and Services that the proxy modes'
// tests share: the lab of topologies/web.yaml (cluster CIDR 10.244.0.0/16, service
// CIDR 10.96.0.0/12), its Service, and a sequence of states that the readers'
// tests program and read back.
package proxytest

import (
	"net/netip"
	"slices"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

// The lab's nodes, each with its own pod CIDR.
var (
	Node1 = proxy.Node{Name: "node-1", IP: netip.MustParseAddr("192.168.1.10"), PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	Node2 = proxy.Node{Name: "node-2", IP: netip.MustParseAddr("192.168.1.11"), PodCIDR: netip.MustParsePrefix("10.244.2.0/24")}
	Node3 = proxy.Node{Name: "node-3", IP: netip.MustParseAddr("192.168.1.12"), PodCIDR: netip.MustParsePrefix("10.244.3.0/24")}
)

// Target is node n of the lab, with kube-proxy release v.
func Target(n proxy.Node, v version.Version) proxy.Target {
	return proxy.Target{Node: n, Config: proxy.Config{
		KubeProxy:   kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: "10.244.0.0/16"},
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
		Version:     v,
	}}
}

// Endpoint is a ready endpoint on node.
func Endpoint(ip string, port int, node string) proxy.Endpoint {
	return proxy.Endpoint{IP: netip.MustParseAddr(ip), Port: port, NodeName: node, Ready: true, Serving: true}
}

// Terminating is an endpoint of a pod being deleted that still serves.
func Terminating(ip string, port int, node string) proxy.Endpoint {
	e := Endpoint(ip, port, node)
	e.Ready, e.Terminating = false, true
	return e
}

// Port is a ClusterIP Service port.
func Port(ns, name, portName string, proto corev1.Protocol, clusterIP string, p int, eps ...proxy.Endpoint) proxy.ServicePort {
	return proxy.ServicePort{
		Name:      proxy.ServicePortName{Namespace: ns, Name: name, Port: portName},
		Protocol:  proto,
		ClusterIP: netip.MustParseAddr(clusterIP),
		Port:      p,
		Endpoints: eps,
	}
}

// Web is topologies/web.yaml's Service: NodePort 30080, one backend per node.
func Web() proxy.ServicePort {
	sp := Port("default", "web", "http", corev1.ProtocolTCP, "10.96.123.45", 80,
		Endpoint("10.244.1.10", 8080, "node-1"), Endpoint("10.244.2.10", 8080, "node-2"))
	sp.NodePort = 30080
	return sp
}

// Step is one state of a sequence of Service changes, named for messages.
type Step struct {
	Name  string
	Ports []proxy.ServicePort
}

// Sequence is a series of states of node-1's Services that covers every kind of
// frontend a reader must tell apart: ClusterIP and NodePort, UDP, a multi-port
// Service, no endpoints, not-ready endpoints, internal and external Local policy
// with and without a local endpoint, the fallback to serving terminating
// endpoints (cluster-wide and local), ClientIP affinity, external IPs and load
// balancer IPs with and without source ranges (LoadBalancers); the steps add and
// remove endpoints and Services, change a timeout, a load balancer IP and its
// ranges.
func Sequence() []Step {
	nodePort := func(sp proxy.ServicePort, np int, externalLocal bool) proxy.ServicePort {
		sp.NodePort, sp.ExternalLocal = np, externalLocal
		return sp
	}
	internalLocal := func(sp proxy.ServicePort) proxy.ServicePort {
		sp.InternalLocal = true
		return sp
	}
	affinity := func(sp proxy.ServicePort, seconds int) proxy.ServicePort {
		sp.AffinitySeconds = seconds
		return sp
	}
	notReady := Endpoint("10.244.2.60", 80, "node-2")
	notReady.Ready, notReady.Serving = false, false
	notServing := Terminating("10.244.2.41", 8080, "node-2")
	notServing.Serving = false

	dnsUDP := Port("kube-system", "kube-dns", "dns", corev1.ProtocolUDP, "10.96.0.10", 53,
		Endpoint("10.244.1.2", 53, "node-1"), Endpoint("10.244.2.2", 53, "node-2"))
	dnsTCP := Port("kube-system", "kube-dns", "dns-tcp", corev1.ProtocolTCP, "10.96.0.10", 53,
		Endpoint("10.244.1.2", 53, "node-1"), Endpoint("10.244.2.2", 53, "node-2"))
	edge := nodePort(Port("default", "edge", "http", corev1.ProtocolTCP, "10.96.0.80", 80,
		Endpoint("10.244.1.20", 8080, "node-1")), 30081, true)
	edgeRemote := nodePort(Port("default", "edge-remote", "http", corev1.ProtocolTCP, "10.96.0.83", 80,
		Endpoint("10.244.2.23", 8080, "node-2")), 30083, true)
	edgeDraining := nodePort(Port("default", "edge-draining", "http", corev1.ProtocolTCP, "10.96.0.82", 80,
		Terminating("10.244.1.21", 8080, "node-1"), Endpoint("10.244.2.21", 8080, "node-2")), 30082, true)
	empty := nodePort(Port("default", "empty", "http", corev1.ProtocolTCP, "10.96.0.100", 80), 30100, false)
	unready := Port("default", "unready", "", corev1.ProtocolTCP, "10.96.0.101", 80, notReady)
	sticky := affinity(Port("default", "sticky", "", corev1.ProtocolTCP, "10.96.0.120", 80,
		Endpoint("10.244.1.50", 80, "node-1"), Endpoint("10.244.2.50", 80, "node-2")), 60)
	cache := internalLocal(Port("default", "cache", "", corev1.ProtocolTCP, "10.96.0.90", 6379,
		Endpoint("10.244.1.30", 6379, "node-1"), Endpoint("10.244.2.30", 6379, "node-2")))
	cacheRemote := internalLocal(Port("default", "cache-remote", "", corev1.ProtocolTCP, "10.96.0.91", 6379,
		Endpoint("10.244.2.31", 6379, "node-2")))
	draining := Port("default", "draining", "", corev1.ProtocolTCP, "10.96.0.110", 80,
		Terminating("10.244.1.40", 8080, "node-1"), Terminating("10.244.2.40", 8080, "node-2"), notServing)
	lbLocal, lbCluster, lbRemote, lbEmpty, extLocal := LoadBalancers()
	s0 := []proxy.ServicePort{Web(), dnsUDP, dnsTCP, edge, edgeRemote, edgeDraining, empty, unready, sticky, cache, cacheRemote, draining,
		lbLocal, lbCluster, lbRemote, lbEmpty, extLocal}

	web1 := Web()
	web1.Endpoints = append(web1.Endpoints, Endpoint("10.244.2.11", 8080, "node-2"))
	dnsUDP1 := dnsUDP
	dnsUDP1.Endpoints = dnsUDP.Endpoints[:1]
	edgeRemote1 := edgeRemote
	edgeRemote1.Endpoints = []proxy.Endpoint{Endpoint("10.244.1.23", 8080, "node-1"), edgeRemote.Endpoints[0]}
	cacheRemote1 := cacheRemote
	cacheRemote1.Endpoints = []proxy.Endpoint{Endpoint("10.244.1.31", 6379, "node-1"), cacheRemote.Endpoints[0]}
	empty1 := empty
	empty1.Endpoints = []proxy.Endpoint{Endpoint("10.244.2.100", 80, "node-2")}
	sticky1 := sticky
	sticky1.Endpoints = sticky.Endpoints[1:]
	lbCluster1 := lbCluster
	lbCluster1.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.168.1.245")}
	lbCluster1.SourceRanges = lbCluster.SourceRanges[:1]
	lbRemote1 := lbRemote
	lbRemote1.Endpoints = append([]proxy.Endpoint{Endpoint("10.244.1.142", 8080, "node-1")}, lbRemote.Endpoints...)
	// Two ingress IPs outside the ranges, one range holding node-1's address:
	// kube-proxy then admits both IPs as sources of either (iptables,
	// nftables) or each IP from itself (IPVS).
	lbPair := Port("default", "lb-pair", "http", corev1.ProtocolTCP, "10.96.0.145", 80, Endpoint("10.244.2.145", 8080, "node-2"))
	lbPair.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.4"), netip.MustParseAddr("198.51.100.8")}
	lbPair.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/28"), netip.MustParsePrefix("203.0.113.0/24")}
	s1 := []proxy.ServicePort{web1, dnsUDP1, dnsTCP, edge, edgeRemote1, edgeDraining, empty1, unready, sticky1, cache, cacheRemote1, draining,
		lbLocal, lbCluster1, lbRemote1, lbEmpty, extLocal, lbPair}

	web2 := Web()
	web2.Endpoints = web2.Endpoints[1:]
	draining2 := draining
	draining2.Endpoints = append(slices.Clone(draining.Endpoints), Endpoint("10.244.2.42", 8080, "node-2"))
	fresh := Port("default", "fresh", "", corev1.ProtocolTCP, "10.96.0.130", 80, Endpoint("10.244.2.70", 80, "node-2"))
	s2 := []proxy.ServicePort{web2, edgeRemote1, edgeDraining, empty1, unready, sticky1, cache, cacheRemote1, draining2, fresh,
		lbLocal, lbCluster1, lbRemote1, extLocal, lbPair}

	web3 := Web()
	web3.Endpoints = nil
	edgeDraining3 := edgeDraining
	edgeDraining3.Endpoints = edgeDraining.Endpoints[1:]
	sticky3 := affinity(sticky1, 30)
	lbLocal3 := lbLocal
	lbLocal3.Endpoints = lbLocal.Endpoints[1:]
	lbPair3 := lbPair
	lbPair3.Endpoints = nil
	s3 := []proxy.ServicePort{web3, edgeRemote1, edgeDraining3, empty1, unready, sticky3, cache, cacheRemote1, draining2, fresh,
		lbLocal3, lbCluster1, lbRemote1, extLocal, lbPair3}

	return []Step{
		{"every kind of Service", s0},
		{"endpoints added and removed, a load balancer IP and its source ranges changed, two ingress IPs behind a range holding the node", s1},
		{"Services removed and added, fallback ended", s2},
		{"last endpoint gone, local terminating gone, affinity timeout changed, the two ingress IPs' last endpoint gone", s3},
	}
}

// LoadBalancers are Services reached by addresses of their own, as node-1 sees
// them: a Local LoadBalancer with endpoints on node-1 and node-2 whose source
// range holds node-1's address; a Cluster one without node ports
// (allocateLoadBalancerNodePorts: false) that has an external IP too and source
// ranges without node-1; a Local one with no endpoint on node-1; one without
// endpoints; and a ClusterIP Service whose external IP has policy Local.
func LoadBalancers() (lbLocal, lbCluster, lbRemote, lbEmpty, extLocal proxy.ServicePort) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	ranges := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	lbLocal = Port("default", "lb-local", "http", corev1.ProtocolTCP, "10.96.0.140", 80,
		Endpoint("10.244.1.140", 8080, "node-1"), Endpoint("10.244.2.140", 8080, "node-2"))
	lbLocal.NodePort, lbLocal.ExternalLocal, lbLocal.HealthCheckNodePort = 30140, true, 32140
	lbLocal.LoadBalancerIPs, lbLocal.SourceRanges = addrs("192.168.1.240"), ranges("192.168.1.0/24")
	lbCluster = Port("default", "lb-cluster", "http", corev1.ProtocolTCP, "10.96.0.141", 80, Endpoint("10.244.2.141", 8080, "node-2"))
	lbCluster.LoadBalancerIPs, lbCluster.SourceRanges = addrs("192.168.1.241"), ranges("203.0.113.0/24", "10.0.0.0/8")
	lbCluster.ExternalIPs = addrs("203.0.113.141")
	lbRemote = Port("default", "lb-remote", "http", corev1.ProtocolTCP, "10.96.0.142", 80, Endpoint("10.244.2.142", 8080, "node-2"))
	lbRemote.NodePort, lbRemote.ExternalLocal, lbRemote.HealthCheckNodePort = 30142, true, 32142
	lbRemote.LoadBalancerIPs, lbRemote.SourceRanges = addrs("192.168.1.242"), ranges("192.168.1.0/24")
	lbEmpty = Port("default", "lb-empty", "http", corev1.ProtocolTCP, "10.96.0.143", 80)
	lbEmpty.NodePort = 30143
	lbEmpty.LoadBalancerIPs, lbEmpty.SourceRanges = addrs("192.168.1.243"), ranges("10.0.0.0/8")
	extLocal = Port("default", "ext-local", "http", corev1.ProtocolTCP, "10.96.0.144", 80, Endpoint("10.244.1.144", 8080, "node-1"))
	extLocal.ExternalIPs, extLocal.ExternalLocal = addrs("203.0.113.144"), true
	return lbLocal, lbCluster, lbRemote, lbEmpty, extLocal
}
