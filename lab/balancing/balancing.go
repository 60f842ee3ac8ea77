// Package balancing is the load balancing of a lab: its load balancers
// (package loadbalancer), and the routes towards ingress and external IPs it
// gives the lab's clients and nodes.
package balancing

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"

	"github.com/svclab/svclab/lab/loadbalancer"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/network"
	"github.com/svclab/svclab/lab/topology"
)

// A lab's load balancers are members on the node network (see package
// loadbalancer). Clients reach an ingress IP through the load balancer that
// serves it, by a host route via its address, as a router that learned the IP
// from the load balancer would send them; they reach an external IP through
// the nodes externalIPRoutes names. Nodes route both onto the node network, as
// their default route would carry them, for the traffic kube-proxy does not
// translate.

// Balancing is the part of a lab that its load balancers make: the
// balancers, and the routes towards ingress and external IPs the lab gave its
// clients and nodes. Its lock guards them; it is taken inside the lab's
// changeMu and never inside the lab's mu, and the ledger's is taken inside it.
type Balancing struct {
	// lab is the lab's ID, for errors.
	lab     string
	members Members
	net     *network.Network

	mu        sync.Mutex
	started   bool
	balancers map[string]*loadbalancer.Balancer
	// routes are the routes installed in each member, by destination, with
	// their next hops as text.
	routes map[string]map[netip.Addr]string
}

// New is the load balancing of lab id, whose members are members and whose
// network is net; nothing runs until Start.
func New(id string, members Members, net *network.Network) *Balancing {
	return &Balancing{lab: id, members: members, net: net}
}

// Members is what load balancing needs of the lab's members: where
// each lives, and a member for a load balancer the topology gains.
type Members interface {
	Member(name string) (*member.Member, error)
	Add(name, kind string, ip netip.Addr, node string) (*member.Member, error)
}

// Route routes the ingress and external IPs of t in the clients and nodes,
// once the network is built.
func (b *Balancing) Route(t *topology.Topology) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.syncServiceRoutes(t)
}

// Start starts a balancer for each load balancer of t, once the nodes answer
// their health checks.
func (b *Balancing) Start(t *topology.Topology) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.started = true
	for _, lb := range t.LoadBalancers {
		if err := b.startBalancer(t, lb); err != nil {
			return err
		}
	}
	return nil
}

// startBalancer starts lb's balancer; b.mu is held.
func (b *Balancing) startBalancer(t *topology.Topology, lb topology.LoadBalancer) error {
	m, err := b.members.Member(lb.Name)
	if err != nil {
		return err
	}
	var nodes []loadbalancer.Node
	for _, n := range t.Nodes {
		nodes = append(nodes, loadbalancer.Node{Name: n.Name, IP: n.IP})
	}
	bal, err := loadbalancer.Start(loadbalancer.Config{NetNS: m.NetNS, Link: network.Eth0, Nodes: nodes, Interval: lb.ProbeInterval}, vipsOf(t, lb.Name))
	if err != nil {
		return fmt.Errorf("load balancer %s: %w", lb.Name, err)
	}
	if b.balancers == nil {
		b.balancers = map[string]*loadbalancer.Balancer{}
	}
	b.balancers[lb.Name] = bal
	return nil
}

func vipsOf(t *topology.Topology, lb string) []loadbalancer.VIP {
	var out []loadbalancer.VIP
	for _, ing := range t.Ingresses(lb) {
		out = append(out, loadbalancer.VIP{IP: ing.IP, Service: ing.Service, Local: ing.Local, HealthCheckNodePort: ing.HealthCheckNodePort})
	}
	return out
}

// Sync follows a change of the topology to t: a load balancer it gained is
// built and started, every balancer routes the ingress IPs it now serves, and
// the routes towards ingress and external IPs follow.
func (b *Balancing) Sync(ctx context.Context, t *topology.Topology) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		return nil
	}
	var errs []error
	for i, lb := range t.LoadBalancers {
		if _, ok := b.balancers[lb.Name]; !ok {
			if err := b.add(t, lb, i); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, b.balancers[lb.Name].SetVIPs(vipsOf(t, lb.Name)))
	}
	errs = append(errs, b.syncServiceRoutes(t), ctx.Err())
	return errors.Join(errs...)
}

// add adds a member for a load balancer the topology gained while the lab
// runs (a first LoadBalancer Service applied to it), builds it and starts it.
func (b *Balancing) add(t *topology.Topology, lb topology.LoadBalancer, i int) error {
	if _, err := b.members.Add(lb.Name, member.KindLoadBalancer, lb.IP, ""); err != nil {
		return err
	}
	if err := b.net.AddLoadBalancer(t, i); err != nil {
		return err
	}
	return b.startBalancer(t, lb)
}

// Stop stops every balancer; their routes go with the namespaces.
func (b *Balancing) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for name, bal := range b.balancers {
		errs = append(errs, bal.Close())
		delete(b.balancers, name)
	}
	b.started = false
	return errors.Join(errs...)
}

// Balancer is the running balancer of the load balancer called name.
func (b *Balancing) Balancer(name string) (*loadbalancer.Balancer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bal, ok := b.balancers[name]
	if !ok {
		return nil, fmt.Errorf("lab %s has no load balancer %q", b.lab, name)
	}
	return bal, nil
}

// serviceRoutes are the routes each client and node needs for t's ingress and
// external IPs.
func serviceRoutes(t *topology.Topology) map[string][]network.Route {
	out := map[string][]network.Route{}
	var viaClients []network.Route
	var offNetwork []netip.Addr
	for _, lb := range t.LoadBalancers {
		for _, ing := range t.Ingresses(lb.Name) {
			viaClients = append(viaClients, network.Route{Dst: ing.IP, Via: []netip.Addr{lb.IP}})
			offNetwork = append(offNetwork, ing.IP)
		}
	}
	for _, r := range t.ExternalIPRoutes {
		var via []netip.Addr
		for _, name := range r.Nodes {
			n, _ := t.Node(name)
			via = append(via, n.IP)
		}
		viaClients = append(viaClients, network.Route{Dst: r.IP, Via: via})
		offNetwork = append(offNetwork, r.IP)
	}
	for _, c := range t.Clients {
		out[c.Name] = viaClients
	}
	for _, n := range t.Nodes {
		for _, a := range offNetwork {
			if !t.NodeCIDR.Contains(a) {
				out[n.Name] = append(out[n.Name], network.Route{Dst: a})
			}
		}
	}
	return out
}

// syncServiceRoutes makes the routes the lab installed for ingress and external
// IPs those t needs, in every client and node; b.mu is held.
func (b *Balancing) syncServiceRoutes(t *topology.Topology) error {
	want := serviceRoutes(t)
	if b.routes == nil {
		b.routes = map[string]map[netip.Addr]string{}
	}
	members := make([]string, 0, len(want)+len(b.routes))
	for m := range want {
		members = append(members, m)
	}
	for m := range b.routes {
		if _, ok := want[m]; !ok {
			members = append(members, m)
		}
	}
	sort.Strings(members)
	var errs []error
	for _, name := range members {
		errs = append(errs, b.syncMemberRoutes(name, want[name]))
	}
	return errors.Join(errs...)
}

func (b *Balancing) syncMemberRoutes(name string, routes []network.Route) error {
	have := b.routes[name]
	same := len(have) == len(routes) && !slices.ContainsFunc(routes, func(r network.Route) bool { return have[r.Dst] != r.String() })
	if same {
		return nil
	}
	m, err := b.members.Member(name)
	if err != nil {
		return err
	}
	next, err := b.net.ReplaceRoutes(m, have, routes)
	if err != nil {
		return err
	}
	b.routes[name] = next
	return nil
}
