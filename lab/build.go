package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
)

// forEach runs fn for every item, at most parallel at once, stopping at the first
// error or when ctx ends.
func forEach[T any](ctx context.Context, parallel int, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, it := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(gctx, it)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// Sysctls of each kind of member. IPv6 is off everywhere: the lab is IPv4 and
// router solicitations and MLD reports would only clutter captures.
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

// build creates every namespace and link of the lab.
func (l *Lab) build(ctx context.Context) error {
	all := make([]*member.Member, 0, len(l.members))
	for _, m := range l.members {
		all = append(all, m)
	}
	if err := forEach(ctx, l.parallel(), all, func(_ context.Context, m *member.Member) error {
		if err := namespaces.Create(m.NetNS); err != nil {
			return fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	fabric, err := openHandle(l.members[fabricMember].NetNS)
	if err != nil {
		return err
	}
	defer fabric.Close()
	if err := l.buildFabric(fabric); err != nil {
		return err
	}
	t := l.topo
	if err := forEach(ctx, l.parallel(), indexes(len(t.Nodes)), func(_ context.Context, i int) error {
		return l.buildNode(fabric, i)
	}); err != nil {
		return err
	}
	if err := forEach(ctx, l.parallel(), indexes(len(t.Clients)), func(_ context.Context, i int) error {
		return l.buildClient(fabric, i)
	}); err != nil {
		return err
	}
	if t.ControlPlane != nil {
		if err := l.buildControlPlane(fabric); err != nil {
			return err
		}
	}
	if err := l.buildLoadBalancers(fabric); err != nil {
		return err
	}
	return l.buildPods(ctx, t.Pods)
}

func indexes(n int) []int {
	ix := make([]int, n)
	for i := range ix {
		ix[i] = i
	}
	return ix
}

// handle is a lab namespace held open, with the link-building steps a lab needs.
type handle struct{ *namespaces.NS }

func openHandle(name string) (*handle, error) {
	ns, err := namespaces.Open(name)
	if err != nil {
		return nil, err
	}
	return &handle{ns}, nil
}

func (h *handle) linkUp(name string) (netlink.Link, error) {
	link, err := h.Netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("netns %s: link %s: %w", h.Name, name, err)
	}
	if err := h.Netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("netns %s: set %s up: %w", h.Name, name, err)
	}
	return link, nil
}

func (h *handle) addAddr(link netlink.Link, addr netip.Prefix) error {
	a := &netlink.Addr{IPNet: ipNet(addr)}
	if err := h.Netlink.AddrAdd(link, a); err != nil {
		return fmt.Errorf("netns %s: add %s to %s: %w", h.Name, addr, link.Attrs().Name, err)
	}
	return nil
}

func (h *handle) addBridge(name string) (netlink.Link, error) {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := h.Netlink.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("netns %s: add bridge %s: %w", h.Name, name, err)
	}
	return h.linkUp(name)
}

// addVeth creates a veth pair from h's namespace: local stays here, enslaved to
// master, and the peer is created directly in peerNS under peerName (moving a link
// afterwards would cost an RCU barrier each).
func (h *handle) addVeth(local string, master netlink.Link, peer *handle, peerName string) error {
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: local, MasterIndex: master.Attrs().Index},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(peer.File),
	}
	if err := h.Netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("netns %s: add veth %s (peer %s in %s): %w", h.Name, local, peerName, peer.Name, err)
	}
	_, err := h.linkUp(local)
	return err
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (l *Lab) buildFabric(fabric *handle) error {
	if err := namespaces.Sysctl(fabric.Name, fabricSysctls); err != nil {
		return err
	}
	if _, err := fabric.linkUp("lo"); err != nil {
		return err
	}
	_, err := fabric.addBridge(fabricBridge)
	return err
}

// buildNode gives node i eth0 on the node network, the cni0 bridge holding its pods'
// gateway address, host-gw routes to the other nodes' podCIDRs, and a route for the
// service CIDR.
func (l *Lab) buildNode(fabric *handle, i int) error {
	t := l.topo
	n := t.Nodes[i]
	h, err := openHandle(l.members[n.Name].NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := namespaces.Sysctl(h.Name, nodeSysctls); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := l.plugIntoFabric(fabric, h, fabricPort(member.KindNode, i), netip.PrefixFrom(n.IP, t.NodeCIDR.Bits())); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	cni, err := h.addBridge(podBridge)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := h.addAddr(cni, netip.PrefixFrom(n.Gateway(), n.PodCIDR.Bits())); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	eth, err := h.Netlink.LinkByName(eth0)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	for _, other := range t.Nodes {
		if other.Name == n.Name {
			continue
		}
		r := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(other.PodCIDR), Gw: other.IP.AsSlice()}
		if err := h.Netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("node %s: route %s via %s: %w", n.Name, other.PodCIDR, other.IP, err)
		}
	}
	// A real node reaches ClusterIPs through its default route before any rule
	// rewrites them; the lab has no router, so the service CIDR is routed onto the
	// node network instead. Packets no rule translates are never answered there.
	svc := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(t.ServiceCIDR), Scope: netlink.SCOPE_LINK}
	if err := h.Netlink.RouteAdd(svc); err != nil {
		return fmt.Errorf("node %s: route %s: %w", n.Name, t.ServiceCIDR, err)
	}
	return nil
}

func (l *Lab) buildClient(fabric *handle, i int) error {
	c := l.topo.Clients[i]
	h, err := openHandle(l.members[c.Name].NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := namespaces.Sysctl(h.Name, noIPv6); err != nil {
		return fmt.Errorf("client %s: %w", c.Name, err)
	}
	if err := l.plugIntoFabric(fabric, h, fabricPort(member.KindClient, i), netip.PrefixFrom(c.IP, l.topo.NodeCIDR.Bits())); err != nil {
		return fmt.Errorf("client %s: %w", c.Name, err)
	}
	return nil
}

// buildControlPlane puts the control plane on the node network, with host-gw
// routes to every node's podCIDR: pods (CoreDNS, a pod's kubectl) reach the API
// server through their node, and its replies go back the same way.
func (l *Lab) buildControlPlane(fabric *handle) error {
	cp := l.topo.ControlPlane
	h, err := openHandle(l.members[cp.Name].NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := namespaces.Sysctl(h.Name, noIPv6); err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	if err := l.plugIntoFabric(fabric, h, controlPlanePort, netip.PrefixFrom(cp.IP, l.topo.NodeCIDR.Bits())); err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	eth, err := h.Netlink.LinkByName(eth0)
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	for _, n := range l.topo.Nodes {
		r := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(n.PodCIDR), Gw: n.IP.AsSlice()}
		if err := h.Netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("control plane: route %s via %s: %w", n.PodCIDR, n.IP, err)
		}
	}
	return nil
}

// plugIntoFabric connects a member to the node network: eth0 inside it, the other
// end, called port, on the fabric bridge.
func (l *Lab) plugIntoFabric(fabric, member *handle, port string, addr netip.Prefix) error {
	br, err := fabric.Netlink.LinkByName(fabricBridge)
	if err != nil {
		return fmt.Errorf("fabric: %w", err)
	}
	if err := fabric.addVeth(port, br, member, eth0); err != nil {
		return err
	}
	if _, err := member.linkUp("lo"); err != nil {
		return err
	}
	eth, err := member.linkUp(eth0)
	if err != nil {
		return err
	}
	return member.addAddr(eth, addr)
}

// buildPods wires pods to their nodes' cni0 bridges, as the bridge CNI plugin does:
// a veth whose node end is a bridge port with hairpin mode on (so a pod reaching
// itself through a Service gets its packets back out of the port they came in by),
// and a default route via the node's cni0 address.
func (l *Lab) buildPods(ctx context.Context, pods []topology.Pod) error {
	nodes := map[string]*handle{}
	for _, p := range pods {
		if nodes[p.Node] != nil {
			continue
		}
		l.mu.Lock()
		m := l.members[p.Node]
		l.mu.Unlock()
		h, err := openHandle(m.NetNS)
		if err != nil {
			return err
		}
		defer h.Close()
		nodes[p.Node] = h
	}
	return forEach(ctx, l.parallel(), pods, func(_ context.Context, p topology.Pod) error {
		return l.buildPod(nodes[p.Node], p)
	})
}

func (l *Lab) buildPod(node *handle, p topology.Pod) error {
	n, _ := l.topo.Node(p.Node)
	l.mu.Lock()
	m := l.members[p.Name]
	l.mu.Unlock()
	h, err := openHandle(m.NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := namespaces.Sysctl(h.Name, noIPv6); err != nil {
		return fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	cni, err := node.Netlink.LinkByName(podBridge)
	if err != nil {
		return fmt.Errorf("pod %s: node %s: %w", p.Key(), p.Node, err)
	}
	host := podVeth(p.Key(), l.RunID)
	if err := node.addVeth(host, cni, h, eth0); err != nil {
		return fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	hostLink, err := node.Netlink.LinkByName(host)
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	if err := node.Netlink.LinkSetHairpin(hostLink, true); err != nil {
		return fmt.Errorf("pod %s: hairpin on %s: %w", p.Key(), host, err)
	}
	if _, err := h.linkUp("lo"); err != nil {
		return err
	}
	eth, err := h.linkUp(eth0)
	if err != nil {
		return err
	}
	if err := h.addAddr(eth, netip.PrefixFrom(p.IP, n.PodCIDR.Bits())); err != nil {
		return err
	}
	def := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: n.Gateway().AsSlice()}
	if err := h.Netlink.RouteAdd(def); err != nil {
		return fmt.Errorf("pod %s: default route via %s: %w", p.Key(), n.Gateway(), err)
	}
	return nil
}
