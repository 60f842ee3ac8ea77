package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
)

// loadBalancerSysctls make a load balancer a router that hashes each flow onto
// one of the next hops by its 5-tuple, so that two connections of one client
// may go to different nodes and every packet of one goes to the same node.
// The hash is of the packet's own fields (policy 3, fields 0x37: addresses,
// protocol, ports), not policy 1: that one takes the hash a packet carries when
// it has one, and a packet from a lab client keeps across the veth the hash of
// its socket, which TCP draws anew for every SYN it sends again, so one
// connection's SYNs would go to different nodes (a real router hashes a NIC's
// RSS hash, a function of the 5-tuple). It sends no ICMP redirects: forwarding
// out of the interface a packet came in by, it would otherwise tell each client
// to send to the node directly, and the client's next packets would bypass it.
var loadBalancerSysctls = append(append(noIPv6[:len(noIPv6):len(noIPv6)], flowHash...),
	namespaces.Setting{Key: "net.ipv4.ip_forward", Value: "1"},
	namespaces.Setting{Key: "net.ipv4.conf.all.send_redirects", Value: "0"},
	namespaces.Setting{Key: "net.ipv4.conf.default.send_redirects", Value: "0"},
)

// flowHash picks a multipath route's next hop by the 5-tuple. A client with a
// multipath route (an external IP routed to several nodes) gets it too: the
// default hash of a namespace's own connections is of the addresses only, and
// would send every connection of a client to one node.
var flowHash = []namespaces.Setting{
	{Key: "net.ipv4.fib_multipath_hash_policy", Value: "3"},
	{Key: "net.ipv4.fib_multipath_hash_fields", Value: "0x0037"},
}

// buildLoadBalancer puts t's load balancer i on the node network.
func (n *Network) buildLoadBalancer(fabric *handle, t *topology.Topology, i int) error {
	lb := t.LoadBalancers[i]
	return n.plugIntoFabric(fabric, "load balancer "+lb.Name, lb.Name, loadBalancerSysctls, fabricPort(member.KindLoadBalancer, i), netip.PrefixFrom(lb.IP, t.NodeCIDR.Bits()))
}

// AddLoadBalancer creates the namespace of t's load balancer i, which the lab
// gained while it runs (a first LoadBalancer Service applied to it), and puts
// it on the node network.
func (n *Network) AddLoadBalancer(t *topology.Topology, i int) error {
	lb := t.LoadBalancers[i]
	m, err := n.members.Member(lb.Name)
	if err != nil {
		return err
	}
	if err := namespaces.Create(m.NetNS); err != nil {
		return fmt.Errorf("load balancer %s: %w", lb.Name, err)
	}
	fabric, err := n.open(Fabric)
	if err != nil {
		return err
	}
	defer fabric.Close()
	return n.buildLoadBalancer(fabric, t, i)
}

// Route is a route towards one address (an ingress or external IP): via
// gateways, or onto the link when there are none.
type Route struct {
	Dst netip.Addr
	Via []netip.Addr
}

// String is the route's next hops, which tell two routes to one destination
// apart.
func (r Route) String() string { return fmt.Sprint(r.Via) }

// ReplaceRoutes makes the routes towards single addresses in m's namespace
// want, where have are those installed before (by destination, with their
// next hops as Route.String); it returns those installed now.
func (n *Network) ReplaceRoutes(m *member.Member, have map[netip.Addr]string, want []Route) (map[netip.Addr]string, error) {
	h, err := openHandle(m.NetNS)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	eth, err := h.Netlink.LinkByName(Eth0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
	}
	next := map[netip.Addr]string{}
	for _, r := range want {
		next[r.Dst] = r.String()
		if have[r.Dst] == r.String() {
			continue
		}
		nr := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: hostNet(r.Dst), Protocol: unix.RTPROT_STATIC}
		switch len(r.Via) {
		case 0:
			nr.Scope = netlink.SCOPE_LINK
		case 1:
			nr.Gw = r.Via[0].AsSlice()
		default:
			nr.LinkIndex = 0
			for _, gw := range r.Via {
				nr.MultiPath = append(nr.MultiPath, &netlink.NexthopInfo{LinkIndex: eth.Attrs().Index, Gw: gw.AsSlice()})
			}
		}
		if len(nr.MultiPath) > 0 {
			if err := namespaces.Sysctl(m.NetNS, flowHash); err != nil {
				return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
			}
		}
		if err := h.Netlink.RouteReplace(nr); err != nil {
			return nil, fmt.Errorf("%s %s: route %s via %v: %w", m.Kind, m.Name, r.Dst, r.Via, err)
		}
	}
	for dst := range have {
		if _, ok := next[dst]; ok {
			continue
		}
		if err := h.Netlink.RouteDel(&netlink.Route{Dst: hostNet(dst)}); err != nil && !errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("%s %s: delete route %s: %w", m.Kind, m.Name, dst, err)
		}
	}
	return next, nil
}

func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}
}
