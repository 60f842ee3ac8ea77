package network

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
)

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

// addrGenModeNone is IN6_ADDR_GEN_MODE_NONE of linux/if_link.h, which
// golang.org/x/sys does not define.
const addrGenModeNone = 1

// silenceIPv6 keeps the link called name from ever having an IPv6 address
// (`ip link set NAME addrgenmode none`, before it is up): with none, not even
// a link-local one, it sends no router solicitation, neighbour discovery or MLD
// report, as if IPv6 were off, without a sysctl (see noIPv6).
func (h *handle) silenceIPv6(name string) error {
	link, err := h.Netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("netns %s: link %s: %w", h.Name, name, err)
	}
	if err := h.Netlink.LinkSetIP6AddrGenMode(link, addrGenModeNone); err != nil {
		return fmt.Errorf("netns %s: IPv6 address generation off on %s: %w", h.Name, name, err)
	}
	return nil
}

// addAddr gives link addr. An IPv6 address skips duplicate address detection
// (IFA_F_NODAD): the lab hands out every address once, and DAD would keep a
// fresh address tentative, unusable, for a second or more.
func (h *handle) addAddr(link netlink.Link, addr netip.Prefix) error {
	a := &netlink.Addr{IPNet: ipNet(addr)}
	if addr.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
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

// plug sets h's sysctls and connects it to the node network: eth0 inside it
// with addrs (one a family), the other end, called port, on the fabric
// bridge. Errors name the member as what.
func (h *handle) plug(fabric *handle, what string, sysctls []namespaces.Setting, port string, addrs ...netip.Prefix) error {
	if err := namespaces.Sysctl(h.Name, sysctls); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	br, err := fabric.Netlink.LinkByName(fabricBridge)
	if err != nil {
		return fmt.Errorf("%s: fabric: %w", what, err)
	}
	if err := fabric.addVeth(port, br, h, Eth0); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := h.linkUp("lo"); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	eth, err := h.linkUp(Eth0)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, addr := range addrs {
		if err := h.addAddr(eth, addr); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// routePodCIDRs routes each node's podCIDR via the node, host-gw style, out of
// h's eth0.
func (h *handle) routePodCIDRs(what string, nodes []topology.Node) error {
	eth, err := h.Netlink.LinkByName(Eth0)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, n := range nodes {
		r := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(n.PodCIDR), Gw: n.IP.AsSlice()}
		if err := h.Netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("%s: route %s via %s: %w", what, n.PodCIDR, n.IP, err)
		}
		if !n.PodCIDR6.IsValid() {
			continue
		}
		r = &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(n.PodCIDR6), Gw: n.IP6.AsSlice()}
		if err := h.Netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("%s: route %s via %s: %w", what, n.PodCIDR6, n.IP6, err)
		}
	}
	return nil
}
