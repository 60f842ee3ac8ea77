package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/loadbalancer"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// A lab's load balancers are members on the node network (see package
// loadbalancer). Clients reach an ingress IP through the load balancer that
// serves it, by a host route via its address, as a router that learned the IP
// from the load balancer would send them; they reach an external IP through
// the nodes externalIPRoutes names. Nodes route both onto the node network, as
// their default route would carry them, for the traffic kube-proxy does not
// translate.

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

// loadBalancing is the part of a lab that its load balancers make: the
// balancers, and the routes towards ingress and external IPs the lab gave its
// clients and nodes.
type loadBalancing struct {
	mu        sync.Mutex
	started   bool
	balancers map[string]*loadbalancer.Balancer
	// routes are the routes installed in each member, by destination, with
	// their next hops as text.
	routes map[string]map[netip.Addr]string
}

// buildLoadBalancers puts every load balancer of the topology on the node
// network and routes the ingress and external IPs in the clients and nodes.
func (l *Lab) buildLoadBalancers(fabric *handle) error {
	t := l.Topology()
	for i := range t.LoadBalancers {
		if err := l.buildLoadBalancer(fabric, t, i); err != nil {
			return err
		}
	}
	l.lbs.mu.Lock()
	defer l.lbs.mu.Unlock()
	return l.syncServiceRoutes(t)
}

// buildLoadBalancer puts t's load balancer i on the node network.
func (l *Lab) buildLoadBalancer(fabric *handle, t *topology.Topology, i int) error {
	lb := t.LoadBalancers[i]
	l.mu.Lock()
	m := l.members[lb.Name]
	l.mu.Unlock()
	h, err := openHandle(m.NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := namespaces.Sysctl(h.Name, loadBalancerSysctls); err != nil {
		return fmt.Errorf("load balancer %s: %w", lb.Name, err)
	}
	if err := l.plugIntoFabric(fabric, h, fabricPort(member.KindLoadBalancer, i), netip.PrefixFrom(lb.IP, t.NodeCIDR.Bits())); err != nil {
		return fmt.Errorf("load balancer %s: %w", lb.Name, err)
	}
	return nil
}

// startLoadBalancers starts a balancer for each load balancer, once the nodes
// answer their health checks.
func (l *Lab) startLoadBalancers() error {
	l.lbs.mu.Lock()
	defer l.lbs.mu.Unlock()
	l.lbs.started = true
	t := l.Topology()
	for _, lb := range t.LoadBalancers {
		if err := l.startBalancer(t, lb); err != nil {
			return err
		}
	}
	return nil
}

// startBalancer starts lb's balancer; lbs.mu is held.
func (l *Lab) startBalancer(t *topology.Topology, lb topology.LoadBalancer) error {
	m, err := l.Member(lb.Name)
	if err != nil {
		return err
	}
	var nodes []loadbalancer.Node
	for _, n := range t.Nodes {
		nodes = append(nodes, loadbalancer.Node{Name: n.Name, IP: n.IP})
	}
	b, err := loadbalancer.Start(loadbalancer.Config{NetNS: m.NetNS, Link: eth0, Nodes: nodes, Interval: lb.ProbeInterval}, vipsOf(t, lb.Name))
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", lb.Name, err)
	}
	if l.lbs.balancers == nil {
		l.lbs.balancers = map[string]*loadbalancer.Balancer{}
	}
	l.lbs.balancers[lb.Name] = b
	return nil
}

func vipsOf(t *topology.Topology, lb string) []loadbalancer.VIP {
	var out []loadbalancer.VIP
	for _, ing := range t.Ingresses(lb) {
		out = append(out, loadbalancer.VIP{IP: ing.IP, Service: ing.Service, Local: ing.Local, HealthCheckNodePort: ing.HealthCheckNodePort})
	}
	return out
}

// syncLoadBalancers follows a change of the topology: a load balancer it gained
// is built and started, every balancer routes the ingress IPs it now serves,
// and the routes towards ingress and external IPs follow.
func (l *Lab) syncLoadBalancers(ctx context.Context) error {
	l.lbs.mu.Lock()
	defer l.lbs.mu.Unlock()
	if !l.lbs.started {
		return nil
	}
	t := l.Topology()
	var errs []error
	for i, lb := range t.LoadBalancers {
		if _, ok := l.lbs.balancers[lb.Name]; !ok {
			if err := l.addLoadBalancer(t, lb, i); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, l.lbs.balancers[lb.Name].SetVIPs(vipsOf(t, lb.Name)))
	}
	errs = append(errs, l.syncServiceRoutes(t), ctx.Err())
	return errors.Join(errs...)
}

// addLoadBalancer adds a member for a load balancer the topology gained while
// the lab runs (a first LoadBalancer Service applied to it) and starts it.
func (l *Lab) addLoadBalancer(t *topology.Topology, lb topology.LoadBalancer, i int) error {
	l.mu.Lock()
	m := l.addMember(lb.Name, member.KindLoadBalancer, lb.IP, "")
	l.record.Members = l.memberRecords()
	err := record.Write(l.dir, l.record)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if err := namespaces.Create(m.NetNS); err != nil {
		return fmt.Errorf("load balancer %s: %w", lb.Name, err)
	}
	f, err := l.Member(fabricMember)
	if err != nil {
		return err
	}
	fabric, err := openHandle(f.NetNS)
	if err != nil {
		return err
	}
	defer fabric.Close()
	if err := l.buildLoadBalancer(fabric, t, i); err != nil {
		return err
	}
	return l.startBalancer(t, lb)
}

// stopLoadBalancers stops every balancer; their routes go with the namespaces.
func (l *Lab) stopLoadBalancers() error {
	l.lbs.mu.Lock()
	defer l.lbs.mu.Unlock()
	var errs []error
	for name, b := range l.lbs.balancers {
		errs = append(errs, b.Close())
		delete(l.lbs.balancers, name)
	}
	l.lbs.started = false
	return errors.Join(errs...)
}

// LoadBalancer is the running balancer of the load balancer called name.
func (l *Lab) LoadBalancer(name string) (*loadbalancer.Balancer, error) {
	l.lbs.mu.Lock()
	defer l.lbs.mu.Unlock()
	b, ok := l.lbs.balancers[name]
	if !ok {
		return nil, fmt.Errorf("lab %s has no load balancer %q", l.ID, name)
	}
	return b, nil
}

// serviceRoute is one route towards an ingress or external IP: via gateways,
// or onto the link when there are none.
type serviceRoute struct {
	dst netip.Addr
	via []netip.Addr
}

func (r serviceRoute) String() string { return fmt.Sprint(r.via) }

// serviceRoutes are the routes each client and node needs for t's ingress and
// external IPs.
func serviceRoutes(t *topology.Topology) map[string][]serviceRoute {
	out := map[string][]serviceRoute{}
	var viaClients []serviceRoute
	var offNetwork []netip.Addr
	for _, lb := range t.LoadBalancers {
		for _, ing := range t.Ingresses(lb.Name) {
			viaClients = append(viaClients, serviceRoute{dst: ing.IP, via: []netip.Addr{lb.IP}})
			offNetwork = append(offNetwork, ing.IP)
		}
	}
	for _, r := range t.ExternalIPRoutes {
		var via []netip.Addr
		for _, name := range r.Nodes {
			n, _ := t.Node(name)
			via = append(via, n.IP)
		}
		viaClients = append(viaClients, serviceRoute{dst: r.IP, via: via})
		offNetwork = append(offNetwork, r.IP)
	}
	for _, c := range t.Clients {
		out[c.Name] = viaClients
	}
	for _, n := range t.Nodes {
		for _, a := range offNetwork {
			if !t.NodeCIDR.Contains(a) {
				out[n.Name] = append(out[n.Name], serviceRoute{dst: a})
			}
		}
	}
	return out
}

// syncServiceRoutes makes the routes the lab installed for ingress and external
// IPs those t needs, in every client and node.
func (l *Lab) syncServiceRoutes(t *topology.Topology) error {
	want := serviceRoutes(t)
	if l.lbs.routes == nil {
		l.lbs.routes = map[string]map[netip.Addr]string{}
	}
	members := make([]string, 0, len(want)+len(l.lbs.routes))
	for m := range want {
		members = append(members, m)
	}
	for m := range l.lbs.routes {
		if _, ok := want[m]; !ok {
			members = append(members, m)
		}
	}
	sort.Strings(members)
	var errs []error
	for _, name := range members {
		errs = append(errs, l.syncMemberRoutes(name, want[name]))
	}
	return errors.Join(errs...)
}

func (l *Lab) syncMemberRoutes(name string, routes []serviceRoute) error {
	have := l.lbs.routes[name]
	same := len(have) == len(routes) && !slices.ContainsFunc(routes, func(r serviceRoute) bool { return have[r.dst] != r.String() })
	if same {
		return nil
	}
	m, err := l.Member(name)
	if err != nil {
		return err
	}
	h, err := openHandle(m.NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	eth, err := h.Netlink.LinkByName(eth0)
	if err != nil {
		return fmt.Errorf("%s %s: %w", m.Kind, name, err)
	}
	next := map[netip.Addr]string{}
	for _, r := range routes {
		next[r.dst] = r.String()
		if have[r.dst] == r.String() {
			continue
		}
		nr := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: hostNet(r.dst), Protocol: unix.RTPROT_STATIC}
		switch len(r.via) {
		case 0:
			nr.Scope = netlink.SCOPE_LINK
		case 1:
			nr.Gw = r.via[0].AsSlice()
		default:
			nr.LinkIndex = 0
			for _, gw := range r.via {
				nr.MultiPath = append(nr.MultiPath, &netlink.NexthopInfo{LinkIndex: eth.Attrs().Index, Gw: gw.AsSlice()})
			}
		}
		if len(nr.MultiPath) > 0 {
			if err := namespaces.Sysctl(m.NetNS, flowHash); err != nil {
				return fmt.Errorf("%s %s: %w", m.Kind, name, err)
			}
		}
		if err := h.Netlink.RouteReplace(nr); err != nil {
			return fmt.Errorf("%s %s: route %s via %v: %w", m.Kind, name, r.dst, r.via, err)
		}
	}
	for dst := range have {
		if _, ok := next[dst]; ok {
			continue
		}
		if err := h.Netlink.RouteDel(&netlink.Route{Dst: hostNet(dst)}); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%s %s: delete route %s: %w", m.Kind, name, dst, err)
		}
	}
	l.lbs.routes[name] = next
	return nil
}

func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}
}
