// Package member names the parts of a running lab: each is a network namespace
// of one kind. It is a leaf, so that what only reads a lab (verify, the
// differential check, doctor) need not import the package that builds one.
package member

import "net/netip"

// Kinds of member.
const (
	// KindFabric holds the node network's bridge.
	KindFabric = "fabric"
	KindNode   = "node"
	KindPod    = "pod"
	KindClient = "client"
	// KindControlPlane runs the API server and the controllers.
	KindControlPlane = "control-plane"
	// KindLoadBalancer routes LoadBalancer Services' ingress IPs to nodes.
	KindLoadBalancer = "load-balancer"
)

// Member is one namespace of a running lab.
type Member struct {
	Name string
	Kind string
	// NetNS is the name of the member's network namespace (under /run/netns).
	NetNS string
	// IP is the member's address: the node address for nodes, the pod IP for pods.
	IP netip.Addr
	// Node is the node a pod runs on.
	Node string
}
