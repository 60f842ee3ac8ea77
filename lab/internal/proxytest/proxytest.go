// Package proxytest holds the nodes, endpoints and Services that the proxy modes'
// tests share: the lab of topologies/web.yaml (cluster CIDR 10.244.0.0/16, service
// CIDR 10.96.0.0/12) and its Service.
package proxytest

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxy"
)

// The lab's nodes, each with its own pod CIDR.
var (
	Node1 = proxy.Node{Name: "node-1", IP: netip.MustParseAddr("192.168.1.10"), PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	Node2 = proxy.Node{Name: "node-2", IP: netip.MustParseAddr("192.168.1.11"), PodCIDR: netip.MustParsePrefix("10.244.2.0/24")}
	Node3 = proxy.Node{Name: "node-3", IP: netip.MustParseAddr("192.168.1.12"), PodCIDR: netip.MustParsePrefix("10.244.3.0/24")}
)

// Target is node n of the lab, with kube-proxy release v.
func Target(n proxy.Node, v proxy.Version) proxy.Target {
	return proxy.Target{Node: n, Config: proxy.Config{
		KubeProxy:   proxy.KubeProxyConfiguration{ClusterCIDR: "10.244.0.0/16"},
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
