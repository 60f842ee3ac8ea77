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
// endpoints (cluster-wide and local), ClientIP affinity; the steps add and remove
// endpoints and Services and change a timeout.
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
	s0 := []proxy.ServicePort{Web(), dnsUDP, dnsTCP, edge, edgeRemote, edgeDraining, empty, unready, sticky, cache, cacheRemote, draining}

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
	s1 := []proxy.ServicePort{web1, dnsUDP1, dnsTCP, edge, edgeRemote1, edgeDraining, empty1, unready, sticky1, cache, cacheRemote1, draining}

	web2 := Web()
	web2.Endpoints = web2.Endpoints[1:]
	draining2 := draining
	draining2.Endpoints = append(slices.Clone(draining.Endpoints), Endpoint("10.244.2.42", 8080, "node-2"))
	fresh := Port("default", "fresh", "", corev1.ProtocolTCP, "10.96.0.130", 80, Endpoint("10.244.2.70", 80, "node-2"))
	s2 := []proxy.ServicePort{web2, edgeRemote1, edgeDraining, empty1, unready, sticky1, cache, cacheRemote1, draining2, fresh}

	web3 := Web()
	web3.Endpoints = nil
	edgeDraining3 := edgeDraining
	edgeDraining3.Endpoints = edgeDraining.Endpoints[1:]
	sticky3 := affinity(sticky1, 30)
	s3 := []proxy.ServicePort{web3, edgeRemote1, edgeDraining3, empty1, unready, sticky3, cache, cacheRemote1, draining2, fresh}

	return []Step{
		{"every kind of Service", s0},
		{"endpoints added and removed", s1},
		{"Services removed and added, fallback ended", s2},
		{"last endpoint gone, local terminating gone, affinity timeout changed", s3},
	}
}
