package network

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
)

// AddPod creates the namespace of a pod the lab gained while it runs and wires
// it to its node, which t holds.
func (n *Network) AddPod(ctx context.Context, t *topology.Topology, pod topology.Pod) error {
	m, err := n.members.Member(pod.Name)
	if err != nil {
		return err
	}
	if err := namespaces.Create(m.NetNS); err != nil {
		return err
	}
	return n.buildPods(ctx, t, []topology.Pod{pod})
}

// buildPods wires pods to their nodes' cni0 bridges, as the bridge CNI plugin does:
// a veth whose node end is a bridge port with hairpin mode on (so a pod reaching
// itself through a Service gets its packets back out of the port they came in by),
// and a default route via the node's cni0 address.
func (n *Network) buildPods(ctx context.Context, t *topology.Topology, pods []topology.Pod) error {
	nodes := map[string]*handle{}
	for _, p := range pods {
		if nodes[p.Node] != nil {
			continue
		}
		h, err := n.open(p.Node)
		if err != nil {
			return err
		}
		defer h.Close()
		nodes[p.Node] = h
	}
	return fanout.Each(ctx, n.parallel, pods, func(_ context.Context, p topology.Pod) error {
		return n.buildPod(nodes[p.Node], t, p)
	})
}

func (n *Network) buildPod(node *handle, t *topology.Topology, p topology.Pod) error {
	nd, _ := t.Node(p.Node)
	h, err := n.open(p.Name)
	if err != nil {
		return err
	}
	defer h.Close()
	cni, err := node.Netlink.LinkByName(podBridge)
	if err != nil {
		return fmt.Errorf("pod %s: node %s: %w", p.Key(), p.Node, err)
	}
	host := podVeth(p.Key(), n.run)
	if err := node.addVeth(host, cni, h, Eth0); err != nil {
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
	if err := h.silenceIPv6(Eth0); err != nil {
		return fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	eth, err := h.linkUp(Eth0)
	if err != nil {
		return err
	}
	if err := h.addAddr(eth, netip.PrefixFrom(p.IP, nd.PodCIDR.Bits())); err != nil {
		return err
	}
	def := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: nd.Gateway().AsSlice()}
	if err := h.Netlink.RouteAdd(def); err != nil {
		return fmt.Errorf("pod %s: default route via %s: %w", p.Key(), nd.Gateway(), err)
	}
	if !p.IP6.IsValid() {
		return nil
	}
	// eth0 has no link-local address (silenceIPv6): neighbour discovery with
	// the gateway goes from the pod's own address, and no router solicitation
	// is ever sent, so the default route is the one written here.
	if err := h.addAddr(eth, netip.PrefixFrom(p.IP6, nd.PodCIDR6.Bits())); err != nil {
		return err
	}
	def6 := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: nd.Gateway6().AsSlice()}
	if err := h.Netlink.RouteAdd(def6); err != nil {
		return fmt.Errorf("pod %s: default route via %s: %w", p.Key(), nd.Gateway6(), err)
	}
	return nil
}

// UnplugPod takes a pod off the network by deleting its veth's node end, which
// removes both ends at once: the pod is cut off even while the lab still holds
// its sockets. A node or veth already gone is no error.
func (n *Network) UnplugPod(pod topology.Pod) error {
	h, err := n.open(pod.Node)
	if err != nil {
		return nil
	}
	defer h.Close()
	link, err := h.Netlink.LinkByName(podVeth(pod.Key(), n.run))
	if err != nil {
		return nil
	}
	return h.Netlink.LinkDel(link)
}
