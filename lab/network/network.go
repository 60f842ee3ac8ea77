// Package network builds a lab's network out of namespaces: the fabric, whose
// bridge is the node network; each node with eth0 on that bridge and a cni0
// bridge for its pods; each pod, client, load balancer and the control plane
// with its links, addresses and routes. It knows the lab's members only
// through Members, so it needs nothing of the package that assembles a lab.
package network

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// Fabric is the reserved member name of the namespace that holds the node
// network's bridge.
const Fabric = "fabric"

// Interface names inside lab namespaces. Every one fits IFNAMSIZ (15 characters).
const (
	// Eth0 is every member's link to its network: the node network for nodes,
	// clients, load balancers and the control plane, its node's cni0 for a pod.
	Eth0         = "eth0"
	fabricBridge = "br0"  // the node network's switch, in the fabric namespace
	podBridge    = "cni0" // the bridge CNI plugin's default bridge name
	// controlPlanePort is the fabric-side end of the control plane's eth0.
	controlPlanePort = "cp0"
)

// fabricPort is the fabric-side end of a node's, client's or load balancer's
// eth0: n0, n1, ..., c0, c1, ... and l0, l1, ..., by position in the topology,
// since member names can be longer than an interface name may be.
func fabricPort(kind string, index int) string {
	return fmt.Sprintf("%c%d", kind[0], index)
}

// podVeth is the node-side end of a pod's eth0, named like the bridge CNI plugin's
// (veth + 8 hex characters), derived from the pod and the run so it is stable.
func podVeth(podKey, run string) string {
	sum := sha256.Sum256([]byte(podKey + "/" + run))
	return "veth" + hex.EncodeToString(sum[:4])
}

// Sysctls of each kind of member. In an IPv4-only lab IPv6 is off in every
// member but the pods (dualstack.go has a dual-stack lab's): router
// solicitations and MLD reports would only clutter captures. Pods keep it on
// (as a bridge CNI's pods do) with no address on eth0 (silenceIPv6): writing a sysctl costs a walk of every network namespace's
// /proc/sys/net entry, one hash chain in the kernel's dentry cache, so at
// thousands of pods the writes took most of the lab's build (100 nodes of 100
// pods: 99 s of namespaces and links, about two thirds of the CPU in
// proc_sys_compare by perf).
var (
	noIPv6 = []namespaces.Setting{
		{Key: "net.ipv6.conf.all.disable_ipv6", Value: "1"},
		{Key: "net.ipv6.conf.default.disable_ipv6", Value: "1"},
	}
	// The fabric is a plain switch: its bridged frames need no netfilter.
	fabricSysctls = append(noIPv6[:len(noIPv6):len(noIPv6)],
		namespaces.Setting{Key: "net.bridge.bridge-nf-call-iptables", Value: "0"})
	// A node routes for its pods, and br_netfilter must see bridged pod-to-pod
	// frames: a reply from a pod to a pod on the same bridge is bridged, not routed,
	// and only br_netfilter lets conntrack undo the Service DNAT on it.
	nodeSysctls = append(noIPv6[:len(noIPv6):len(noIPv6)],
		namespaces.Setting{Key: "net.ipv4.ip_forward", Value: "1"},
		namespaces.Setting{Key: "net.bridge.bridge-nf-call-iptables", Value: "1"})
)

// Members is what the network needs of the lab it builds: where each member
// lives.
type Members interface {
	// Member is the member called name.
	Member(name string) (*member.Member, error)
	// Members lists every member.
	Members() []record.Member
}

// Network builds the namespaces of one run of a lab and the links between
// them. It holds no state of its own beyond how it builds: the namespaces and
// links are the kernel's, the members the lab's.
type Network struct {
	members  Members
	run      string
	parallel int
}

// New is the network of the lab whose members are members, for run (which
// names the pods' veths), setting up at most parallel namespaces at once.
func New(members Members, run string, parallel int) *Network {
	return &Network{members: members, run: run, parallel: parallel}
}

// Build creates every member's namespace and the links and addresses of t:
// the fabric, nodes, clients, the control plane, load balancers and pods.
func (n *Network) Build(ctx context.Context, t *topology.Topology) error {
	if err := fanout.Each(ctx, n.parallel, n.members.Members(), func(_ context.Context, m record.Member) error {
		if err := namespaces.Create(m.NetNS); err != nil {
			return fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	fabric, err := n.open(Fabric)
	if err != nil {
		return err
	}
	defer fabric.Close()
	if err := buildFabric(fabric, t.DualStack()); err != nil {
		return err
	}
	if err := fanout.Each(ctx, n.parallel, indexes(len(t.Nodes)), func(_ context.Context, i int) error {
		return n.buildNode(fabric, t, i)
	}); err != nil {
		return err
	}
	if err := fanout.Each(ctx, n.parallel, indexes(len(t.Clients)), func(_ context.Context, i int) error {
		c := t.Clients[i]
		if c.IP6.IsValid() {
			return n.plugIntoFabric(fabric, "client "+c.Name, c.Name, dualStackSysctls, fabricPort(member.KindClient, i),
				netip.PrefixFrom(c.IP, t.NodeCIDR.Bits()), netip.PrefixFrom(c.IP6, t.NodeCIDR6.Bits()))
		}
		return n.plugIntoFabric(fabric, "client "+c.Name, c.Name, noIPv6, fabricPort(member.KindClient, i), netip.PrefixFrom(c.IP, t.NodeCIDR.Bits()))
	}); err != nil {
		return err
	}
	if t.ControlPlane != nil {
		if err := n.buildControlPlane(fabric, t); err != nil {
			return err
		}
	}
	for i := range t.LoadBalancers {
		if err := n.buildLoadBalancer(fabric, t, i); err != nil {
			return err
		}
	}
	return n.buildPods(ctx, t, t.Pods)
}

func indexes(n int) []int {
	ix := make([]int, n)
	for i := range ix {
		ix[i] = i
	}
	return ix
}

// open holds the namespace of the member called name open.
func (n *Network) open(name string) (*handle, error) {
	m, err := n.members.Member(name)
	if err != nil {
		return nil, err
	}
	return openHandle(m.NetNS)
}

func buildFabric(fabric *handle, dualStack bool) error {
	sysctls := fabricSysctls
	if dualStack {
		sysctls = fabricDualStackSysctls
	}
	if err := namespaces.Sysctl(fabric.Name, sysctls); err != nil {
		return err
	}
	if _, err := fabric.linkUp("lo"); err != nil {
		return err
	}
	_, err := fabric.addBridge(fabricBridge)
	return err
}

// buildNode gives t's node i eth0 on the node network, the cni0 bridge holding
// its pods' gateway address, host-gw routes to the other nodes' podCIDRs, and a
// route for the service CIDR.
func (n *Network) buildNode(fabric *handle, t *topology.Topology, i int) error {
	node := t.Nodes[i]
	what := "node " + node.Name
	h, err := n.open(node.Name)
	if err != nil {
		return err
	}
	defer h.Close()
	sysctls, addrs := nodeSysctls, []netip.Prefix{netip.PrefixFrom(node.IP, t.NodeCIDR.Bits())}
	if t.DualStack() {
		sysctls = nodeDualStackSysctls
		addrs = append(addrs, netip.PrefixFrom(node.IP6, t.NodeCIDR6.Bits()))
	}
	if err := h.plug(fabric, what, sysctls, fabricPort(member.KindNode, i), addrs...); err != nil {
		return err
	}
	cni, err := h.addBridge(podBridge)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.addAddr(cni, netip.PrefixFrom(node.Gateway(), node.PodCIDR.Bits())); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if t.DualStack() {
		if err := h.addAddr(cni, netip.PrefixFrom(node.Gateway6(), node.PodCIDR6.Bits())); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	var others []topology.Node
	for _, o := range t.Nodes {
		if o.Name != node.Name {
			others = append(others, o)
		}
	}
	if err := h.routePodCIDRs(what, others); err != nil {
		return err
	}
	eth, err := h.Netlink.LinkByName(Eth0)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// A real node reaches ClusterIPs through its default route before any rule
	// rewrites them; the lab has no router, so the service CIDR is routed onto the
	// node network instead. Packets no rule translates are never answered there.
	for _, cidr := range []netip.Prefix{t.ServiceCIDR, t.ServiceCIDR6} {
		if !cidr.IsValid() {
			continue
		}
		svc := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(cidr), Scope: netlink.SCOPE_LINK}
		if err := h.Netlink.RouteAdd(svc); err != nil {
			return fmt.Errorf("%s: route %s: %w", what, cidr, err)
		}
	}
	return nil
}

// buildControlPlane puts the control plane on the node network, with host-gw
// routes to every node's podCIDR: pods (CoreDNS, a pod's kubectl) reach the API
// server through their node, and its replies go back the same way.
func (n *Network) buildControlPlane(fabric *handle, t *topology.Topology) error {
	cp := t.ControlPlane
	h, err := n.open(cp.Name)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.plug(fabric, "control plane", noIPv6, controlPlanePort, netip.PrefixFrom(cp.IP, t.NodeCIDR.Bits())); err != nil {
		return err
	}
	return h.routePodCIDRs("control plane", t.Nodes)
}

// plugIntoFabric sets up the member called name with sysctls and plugs it
// into the node network at port with addrs; what names it in errors.
func (n *Network) plugIntoFabric(fabric *handle, what, name string, sysctls []namespaces.Setting, port string, addrs ...netip.Prefix) error {
	h, err := n.open(name)
	if err != nil {
		return err
	}
	defer h.Close()
	return h.plug(fabric, what, sysctls, port, addrs...)
}

// Delete removes the namespaces called names, at most parallel at once.
func (n *Network) Delete(names []string) error {
	return fanout.Each(context.Background(), n.parallel, names, func(_ context.Context, name string) error {
		return namespaces.Delete(name)
	})
}
