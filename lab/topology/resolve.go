package topology

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/svclab/svclab/lab/version"
)

// resolver turns a decoded File into a Topology: it checks every rule, fills in
// defaults and allocates what a cluster would allocate. It collects every problem
// instead of stopping at the first.
type resolver struct {
	source string
	pos    Positions // nil when the file was not read from YAML (a mutation)
	errs   ErrorList
	t      *Topology

	// names holds node, client and pod names, one space because each names a
	// network namespace; the value is the path that took the name.
	names map[string]string
	// reserved are the names of members the lab adds by itself, with what they
	// are for.
	reserved map[string]string
	// addrs holds every address given to someone: nodes, clients, pods, ClusterIPs.
	addrs map[netip.Addr]string
	// nodes indexes the valid nodes by name.
	nodes map[string]Node
	// pods is the set of pod keys, for lookups once every pod is known.
	pods map[string]bool
	// claimedAt is the field that gave each address the file gives a node or
	// client, for messages about it.
	claimedAt map[netip.Addr]string
	// cursors remembers where nextFree stopped in each prefix.
	cursors map[netip.Prefix]netip.Addr
}

func (r *resolver) errorf(path, format string, args ...any) {
	r.errs = append(r.errs, Error{Source: r.source, Line: r.pos.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (r *resolver) errorsf(path string, msgs []string) {
	for _, m := range msgs {
		r.errorf(path, "%s", m)
	}
}

// resolve checks and completes f. pos may be nil.
func resolve(source string, f *File, pos Positions) (*Topology, ErrorList) {
	r := &resolver{
		source:    source,
		pos:       pos,
		t:         &Topology{Source: source},
		names:     map[string]string{},
		reserved:  map[string]string{},
		addrs:     map[netip.Addr]string{},
		nodes:     map[string]Node{},
		claimedAt: map[netip.Addr]string{},
		cursors:   map[netip.Prefix]netip.Addr{},
	}
	r.lab(f)
	// Members the lab adds by itself claim their names first, so that a node,
	// client or pod of that name is the one told.
	if f.ControlPlane && r.t.DualStack() {
		r.errorf("controlPlane", "a dual-stack lab's control plane is not built yet (issue 35: the API server, Nodes and EndpointSlices of both families)")
	}
	if f.ControlPlane {
		r.reserve(ControlPlaneMember, "controlPlane", "the control plane's member (controlPlane: true)")
	}
	implicitLB := implicitLoadBalancer(f)
	if implicitLB {
		r.reserve(DefaultLoadBalancer, "services", "the lab's load balancer (a LoadBalancer Service needs one; name yours in loadBalancers)")
	}
	r.nodeSpecs(f.Nodes)
	r.clientSpecs(f.Clients)
	r.loadBalancerNames(f.LoadBalancers)
	r.nodeNetwork(f.NodeCIDR)
	r.loadBalancerPool(f.LoadBalancerCIDR)
	// Addresses the file gives come before any allocation on the node network.
	r.reserveServiceAddresses(f.Services)
	r.loadBalancerAddresses(f.LoadBalancers)
	if f.ControlPlane {
		r.controlPlane()
	}
	r.loadBalancers(f.LoadBalancers, implicitLB)
	r.dnsSettings(f)
	r.podSpecs(f.Pods)
	for i := range f.Services {
		if !r.replaced(&f.Services[i]) {
			r.t.DeclaredServices = append(r.t.DeclaredServices, *f.Services[i].DeepCopy())
		}
	}
	r.dnsService(f.Services)
	r.services(f.Services)
	r.ingress()
	r.externalIPRoutes(f.ExternalIPRoutes)
	r.coreDNS()
	r.endpointSlices(f.EndpointSlices, f.Services)
	r.namedTargetPorts()
	if len(r.errs) > 0 {
		return nil, r.errs.sorted()
	}
	return r.t, nil
}

var labName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// maxLabName keeps the lab name short enough to prefix the names of the lab's
// network namespaces and interfaces.
const maxLabName = 32

func (r *resolver) lab(f *File) {
	switch {
	case f.Name == "":
		r.errorf("name", "required: the lab's name, such as %q", "web")
	case len(f.Name) > maxLabName:
		r.errorf("name", "%q is %d characters long; a lab name has at most %d", f.Name, len(f.Name), maxLabName)
	case !labName.MatchString(f.Name):
		r.errorf("name", "%q must consist of lowercase letters, digits and '-', and start and end with a letter or digit", f.Name)
	}
	r.t.Name = f.Name
	r.t.ClusterCIDR, r.t.ClusterCIDR6 = r.cidrs("clusterCIDR", f.ClusterCIDR, "10.244.0.0/16", "fd00:10:244::/56")
	r.t.ServiceCIDR, r.t.ServiceCIDR6 = r.cidrs("serviceCIDR", f.ServiceCIDR, "10.96.0.0/12", "fd00:10:96::/108")
	if overlaps(r.t.ClusterCIDR, r.t.ServiceCIDR) {
		r.errorf("serviceCIDR", "%s overlaps clusterCIDR %s", r.t.ServiceCIDR, r.t.ClusterCIDR)
	}
	if overlaps(r.t.ClusterCIDR6, r.t.ServiceCIDR6) {
		r.errorf("serviceCIDR", "%s overlaps clusterCIDR %s", r.t.ServiceCIDR6, r.t.ClusterCIDR6)
	}
	if r.t.ServiceCIDR6.IsValid() && !r.t.DualStack() {
		r.errorf("serviceCIDR", "%s is IPv6, but clusterCIDR names no IPv6 prefix: a dual-stack lab has both families in both", r.t.ServiceCIDR6)
	}
	if f.KubeProxyVersion != "" {
		if _, err := version.Parse(f.KubeProxyVersion); err != nil {
			r.errorf("kubeProxyVersion", "%v", err)
		}
	}
	r.t.KubeProxyVersion = f.KubeProxyVersion
	r.t.NodePortRange = r.portRange("nodePortRange", f.NodePortRange)
}

// nodePortRangeHint ends an error about a node port outside the range.
const nodePortRangeHint = " (a cluster with another --service-node-port-range states it in nodePortRange)"

// portRange reads "first-last" as the API server's --service-node-port-range
// takes it; empty is the default range.
func (r *resolver) portRange(path, s string) PortRange {
	if s == "" {
		return DefaultNodePortRange
	}
	first, last, ok := strings.Cut(s, "-")
	a, errA := strconv.ParseInt(strings.TrimSpace(first), 10, 32)
	b, errB := strconv.ParseInt(strings.TrimSpace(last), 10, 32)
	if !ok || errA != nil || errB != nil || a < 1 || b > 65535 || a > b {
		r.errorf(path, "%q: want FIRST-LAST, ports from 1 to 65535, such as %s", s, DefaultNodePortRange)
		return DefaultNodePortRange
	}
	return PortRange{int32(a), int32(b)}
}

// controlPlane gives the control plane the first free address of the node
// network.
func (r *resolver) controlPlane() {
	net := r.t.NodeCIDR
	if !net.IsValid() {
		return // the node network is in error, and said so
	}
	ip, ok := r.nextFree(net, net.Masked().Addr().Next())
	if !ok {
		r.errorf("controlPlane", "no address of the node network %s is free for the control plane", net)
		return
	}
	r.claim("controlPlane", ip, "the control plane")
	r.t.ControlPlane = &ControlPlane{Name: ControlPlaneMember, IP: ip}
}

// reservedMember is the name of the namespace that joins the lab's nodes and
// clients; no member may take it.
const reservedMember = "fabric"

// memberName checks a node, client or pod name and claims it in the lab's one
// name space.
func (r *resolver) memberName(path, name string) bool {
	if name == "" {
		r.errorf(path, "required")
		return false
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		r.errorf(path, "%q: %s", name, msgs[0])
		return false
	}
	if name == reservedMember {
		r.errorf(path, "%q is reserved for the namespace that joins the lab's nodes and clients", name)
		return false
	}
	if why, reserved := r.reserved[name]; reserved {
		r.errorf(path, "%q is reserved for %s", name, why)
		return false
	}
	if first, taken := r.names[name]; taken {
		r.errorf(path, "%q is already the name of %s (node, client and pod names share one space: each names a network namespace)", name, first)
		return false
	}
	r.names[name] = parentPath(path)
	return true
}

// reserve takes a member name for a member the lab adds by itself; by is the
// field that makes it, why what a member that takes the name is told.
func (r *resolver) reserve(name, by, why string) {
	r.names[name] = by
	r.reserved[name] = why
}

// claim gives a to owner, or says who already has it.
func (r *resolver) claim(path string, a netip.Addr, owner string) bool {
	if first, taken := r.addrs[a]; taken {
		r.errorf(path, "%s is already the address of %s", a, first)
		return false
	}
	r.addrs[a] = owner
	r.claimedAt[a] = path
	return true
}

// address reads an address where only IPv4 is built (see notBuilt6).
func (r *resolver) address(path, s string) (netip.Addr, bool) {
	if s == "" {
		r.errorf(path, "required")
		return netip.Addr{}, false
	}
	a, msg := parseIPv4(s)
	if msg != "" {
		r.errorf(path, "%s", msg)
		return netip.Addr{}, false
	}
	return a, true
}

func (r *resolver) nodeSpecs(specs []NodeSpec) {
	if len(specs) == 0 {
		r.errorf("nodes", "a lab needs at least one node")
	}
	for i, s := range specs {
		path := index("nodes", i)
		n := Node{Name: s.Name}
		nameOK := r.memberName(child(path, "name"), s.Name)
		v4, v6, _ := r.memberIPs(path, s.IP, s.IPs)
		switch {
		case s.IP == "" && len(s.IPs) == 0:
			r.errorf(child(path, "ip"), "required")
		case v4.ip.IsValid() && r.claim(v4.path, v4.ip, "node "+s.Name):
			n.IP = v4.ip
		}
		if v6.ip.IsValid() && r.claim(v6.path, v6.ip, "node "+s.Name) {
			n.IP6 = v6.ip
		}
		n.PodCIDR, n.PodCIDR6 = r.podCIDRs(path, i, s)
		// A node routes its IPv6 pods' traffic by its IPv6 address, as the other
		// nodes reach its IPv6 podCIDR through it.
		if r.t.DualStack() && n.IP.IsValid() && !v6.ip.IsValid() && len(s.IPs) < 2 {
			r.errorf(child(path, "ips"), "required in a dual-stack lab: the node's addresses of both families, such as [%s, fd00::%d]", n.IP, 10+i)
		}
		r.t.Nodes = append(r.t.Nodes, n)
		dualOK := !r.t.DualStack() || (n.IP6.IsValid() && n.PodCIDR6.IsValid())
		if nameOK && n.IP.IsValid() && n.PodCIDR.IsValid() && dualOK {
			r.nodes[n.Name] = n
		}
	}
}

func (r *resolver) clientSpecs(specs []ClientSpec) {
	for i, s := range specs {
		path := index("clients", i)
		c := Client{Name: s.Name}
		r.memberName(child(path, "name"), s.Name)
		v4, v6, _ := r.memberIPs(path, s.IP, s.IPs)
		switch {
		case s.IP == "" && len(s.IPs) == 0:
			r.errorf(child(path, "ip"), "required")
		case v4.ip.IsValid() && r.claim(v4.path, v4.ip, "client "+s.Name):
			c.IP = v4.ip
		}
		if v6.ip.IsValid() && r.claim(v6.path, v6.ip, "client "+s.Name) {
			c.IP6 = v6.ip
		}
		r.t.Clients = append(r.t.Clients, c)
	}
}

// nodeNetwork settles the network that joins nodes and clients, in each
// family the lab has, and checks that every node and client address is a host
// address in it.
func (r *resolver) nodeNetwork(given string) {
	var v4, v6 netip.Prefix
	if given != "" {
		v4, v6 = r.cidrs("nodeCIDR", given, "192.168.1.0/24", "fd00:1::/64")
		if v6.IsValid() && !r.t.DualStack() {
			r.errorf("nodeCIDR", "%s is IPv6, but clusterCIDR names no IPv6 prefix: a dual-stack lab has both families in both", v6)
			v6 = netip.Prefix{}
		}
		if !v4.IsValid() {
			return // said why
		}
	}
	var addrs4, addrs6 []memberIP
	for i, n := range r.t.Nodes {
		addrs4 = r.appendValid(addrs4, child(index("nodes", i), "ip"), n.IP)
		addrs6 = r.appendValid(addrs6, child(index("nodes", i), "ips"), n.IP6)
	}
	for i, c := range r.t.Clients {
		addrs4 = r.appendValid(addrs4, child(index("clients", i), "ip"), c.IP)
		addrs6 = r.appendValid(addrs6, child(index("clients", i), "ips"), c.IP6)
	}
	r.t.NodeCIDR = r.familyNodeNetwork(given != "", v4, 24, addrs4, r.t.ClusterCIDR, r.t.ServiceCIDR)
	if r.t.DualStack() {
		r.t.NodeCIDR6 = r.familyNodeNetwork(given != "" && v6.IsValid(), v6, 64, addrs6, r.t.ClusterCIDR6, r.t.ServiceCIDR6)
	}
}

// appendValid adds a, when valid, with the field that gave it (or path).
func (r *resolver) appendValid(l []memberIP, path string, a netip.Addr) []memberIP {
	if !a.IsValid() {
		return l
	}
	if at, ok := r.claimedAt[a]; ok {
		path = at
	}
	return append(l, memberIP{path, a})
}

// familyNodeNetwork settles the node network of one family: net when given,
// else the smallest prefix, at most maxBits long, that holds every member's
// address of the family.
func (r *resolver) familyNodeNetwork(given bool, net netip.Prefix, maxBits int, members []memberIP, cluster, service netip.Prefix) netip.Prefix {
	// name is what messages call the node network; where is the path they
	// blame when it overlaps another network.
	name, where := "nodeCIDR", "nodeCIDR"
	if !given {
		// Left to us: the smallest network, at most maxBits long (an IPv4 /24,
		// an IPv6 /64), that holds every node and client address of the family.
		name, where = "the derived node network", "nodes"
		var addrs []netip.Addr
		for _, m := range members {
			addrs = append(addrs, m.ip)
		}
		net = CoveringPrefix(addrs, maxBits)
		if !net.IsValid() {
			return net
		}
	}
	for _, other := range []struct {
		name string
		p    netip.Prefix
	}{{"clusterCIDR", cluster}, {"serviceCIDR", service}} {
		switch {
		case !overlaps(net, other.p):
		case given:
			r.errorf(where, "%s overlaps %s %s", net, other.name, other.p)
		default:
			r.errorf(where, "the node network %s, derived from the node and client addresses, overlaps %s %s (set nodeCIDR, or move the nodes)",
				net, other.name, other.p)
		}
	}
	for _, m := range members {
		if !net.Contains(m.ip) {
			r.errorf(m.path, "%s is outside nodeCIDR %s", m.ip, net)
		} else if why := reservedIn(m.ip, net); why != "" {
			r.errorf(m.path, "%s is %s of %s %s", m.ip, why, name, net)
		}
	}
	return net
}
