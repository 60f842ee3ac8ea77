package topology

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// A lab's load balancers play the part of a cloud's, or of MetalLB behind a BGP
// router: each is a member on the node network that clients reach the ingress
// IPs of its Services through, and that routes their packets on to nodes with
// destination and source intact (kube-proxy's rules for the ingress IP do the
// rest). Ingress IPs are allocated here, from the topology alone, as a load
// balancer controller would write them into the Services' status: a lab with a
// control plane can write these very addresses through the API.

// LoadBalancerSpec is one load balancer as the file gives it.
type LoadBalancerSpec struct {
	Name string `json:"name"`
	// IP is its address on the node network; the first free one when empty.
	IP string `json:"ip,omitempty"`
	// Class is the loadBalancerClass of the Services it serves; empty serves
	// the Services that name none, as a cluster's default load balancer does.
	Class string `json:"class,omitempty"`
	// ProbeInterval is how often it probes every node (a Go duration such as
	// "1s", the default).
	ProbeInterval string `json:"probeInterval,omitempty"`
}

// ExternalIPRouteSpec routes one external IP to nodes.
type ExternalIPRouteSpec struct {
	IP    string   `json:"ip"`
	Nodes []string `json:"nodes"`
}

// LoadBalancer is a validated LoadBalancerSpec.
type LoadBalancer struct {
	Name          string
	IP            netip.Addr
	Class         string
	ProbeInterval time.Duration
}

// ExternalIPRoute is where the clients route an external IP: one node, or
// several with a multipath route.
type ExternalIPRoute struct {
	IP    netip.Addr
	Nodes []string
}

// Ingress is one ingress IP a load balancer routes, and how it picks nodes for
// it.
type Ingress struct {
	IP netip.Addr
	// Service is "namespace/name".
	Service string
	// Local is externalTrafficPolicy Local: the load balancer sends traffic only
	// to nodes whose HealthCheckNodePort answers 200. With policy Cluster it
	// sends it to every node whose kube-proxy is healthy (its /healthz on
	// proxy.HealthzPort), as cloud load balancers do since KEP-3836.
	Local               bool
	HealthCheckNodePort int
}

// DefaultLoadBalancer names the load balancer a lab gets when it gives none and
// has a LoadBalancer Service without a loadBalancerClass.
const DefaultLoadBalancer = "lb"

// DefaultProbeInterval is how often a load balancer probes each node unless
// told otherwise.
const DefaultProbeInterval = time.Second

// Probe intervals are bounded: below the lower bound the probes would load the
// lab's nodes more than its traffic, above the upper one a withdrawal would take
// longer than any spec waits.
const (
	minProbeInterval = 100 * time.Millisecond
	maxProbeInterval = time.Minute
)

// LoadBalancerOf is the load balancer that serves svc (a LoadBalancer Service),
// by its loadBalancerClass.
func (t *Topology) LoadBalancerOf(svc *corev1.Service) (LoadBalancer, bool) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return LoadBalancer{}, false
	}
	class := ptr.Deref(svc.Spec.LoadBalancerClass, "")
	i := slices.IndexFunc(t.LoadBalancers, func(lb LoadBalancer) bool { return lb.Class == class })
	if i < 0 {
		return LoadBalancer{}, false
	}
	return t.LoadBalancers[i], true
}

// Ingresses lists the ingress IPs the load balancer called lb routes, in the
// order of the Services.
func (t *Topology) Ingresses(lb string) []Ingress {
	var out []Ingress
	for i := range t.Services {
		svc := &t.Services[i]
		owner, ok := t.LoadBalancerOf(svc)
		if !ok || owner.Name != lb {
			continue
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			a, err := netip.ParseAddr(ing.IP)
			if err != nil {
				continue
			}
			local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
			out = append(out, Ingress{IP: a, Service: svc.Namespace + "/" + svc.Name, Local: local,
				HealthCheckNodePort: int(svc.Spec.HealthCheckNodePort)})
		}
	}
	return out
}

// ExternalIPRoute is the route of external IP a, if some Service has it.
func (t *Topology) ExternalIPRoute(a netip.Addr) (ExternalIPRoute, bool) {
	i := slices.IndexFunc(t.ExternalIPRoutes, func(r ExternalIPRoute) bool { return r.IP == a })
	if i < 0 {
		return ExternalIPRoute{}, false
	}
	return t.ExternalIPRoutes[i], true
}

// implicitLoadBalancer tells whether the lab gets the default load balancer: it
// gives none, and a LoadBalancer Service asks for the default class.
func implicitLoadBalancer(f *File) bool {
	if len(f.LoadBalancers) > 0 {
		return false
	}
	return slices.ContainsFunc(f.Services, func(s corev1.Service) bool {
		return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil
	})
}

// loadBalancerNames claims the name of each load balancer the file gives.
func (r *resolver) loadBalancerNames(specs []LoadBalancerSpec) {
	for i, s := range specs {
		r.memberName(child(index("loadBalancers", i), "name"), s.Name)
	}
}

// loadBalancerPool settles where ingress IPs are allocated from.
func (r *resolver) loadBalancerPool(given string) {
	if given == "" {
		r.t.LoadBalancerCIDR = r.t.NodeCIDR
		return
	}
	p, msg := parsePrefixV4(given)
	if msg != "" {
		r.errorf("loadBalancerCIDR", "%s", msg)
		return
	}
	for _, other := range []struct {
		name string
		p    netip.Prefix
	}{{"clusterCIDR", r.t.ClusterCIDR}, {"serviceCIDR", r.t.ServiceCIDR}} {
		if overlaps(p, other.p) {
			r.errorf("loadBalancerCIDR", "%s overlaps %s %s", p, other.name, other.p)
			return
		}
	}
	r.t.LoadBalancerCIDR = p
}

// serviceAddress checks an address a Service gives outside its ClusterIP (an
// ingress IP, an external IP): an IPv4 host address no pod or Service range
// holds, and not the node network's network or broadcast address.
func (r *resolver) serviceAddress(path, s string) (netip.Addr, bool) {
	a, ok := r.address(path, s)
	if !ok {
		return a, false
	}
	for _, other := range []struct {
		name string
		p    netip.Prefix
	}{{"clusterCIDR", r.t.ClusterCIDR}, {"serviceCIDR", r.t.ServiceCIDR}} {
		if other.p.IsValid() && other.p.Contains(a) {
			r.errorf(path, "%s is in %s %s", a, other.name, other.p)
			return a, false
		}
	}
	if net := r.t.NodeCIDR; net.IsValid() && net.Contains(a) {
		if why := reservedIn(a, net); why != "" {
			r.errorf(path, "%s is %s of the node network %s", a, why, net)
			return a, false
		}
	}
	return a, true
}

// reserveServiceAddresses claims the ingress IPs and external IPs the Services
// give before anything is allocated on the node network, so that no member is
// given one of them, whatever the order of the file. Problems with the fields'
// meaning are reported by loadBalancer and externalIPs.
func (r *resolver) reserveServiceAddresses(services []corev1.Service) {
	for i := range services {
		svc := &services[i]
		path := index("services", i)
		ns := svc.Namespace
		if ns == "" {
			ns = defaultNamespace
		}
		id := ns + "/" + svc.Name
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			for j, ing := range svc.Status.LoadBalancer.Ingress {
				p := child(index(child(path, "status.loadBalancer.ingress"), j), "ip")
				if ing.IP == "" {
					continue
				}
				if a, ok := r.serviceAddress(p, ing.IP); ok {
					r.claim(p, a, "Service "+id+" (load balancer ingress)")
				}
			}
			if lbip := svc.Spec.LoadBalancerIP; lbip != "" && len(svc.Status.LoadBalancer.Ingress) == 0 {
				p := child(path, "spec.loadBalancerIP")
				if a, ok := r.serviceAddress(p, lbip); ok {
					r.claim(p, a, "Service "+id+" (load balancer ingress)")
				}
			}
		}
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		seen := map[string]int{}
		for j, s := range svc.Spec.ExternalIPs {
			p := index(child(path, "spec.externalIPs"), j)
			if first, dup := seen[s]; dup {
				r.errorf(p, "%s is already spec.externalIPs[%d]", s, first)
				continue
			}
			seen[s] = j
			if a, ok := r.serviceAddress(p, s); ok {
				r.claim(p, a, "Service "+id+" (external IP)")
			}
		}
	}
}

// loadBalancerAddresses claims the addresses the file gives its load balancers.
func (r *resolver) loadBalancerAddresses(specs []LoadBalancerSpec) {
	for i, s := range specs {
		path := child(index("loadBalancers", i), "ip")
		if s.IP == "" {
			continue
		}
		a, ok := r.address(path, s.IP)
		if !ok || !r.inNodeNetwork(path, a) {
			continue
		}
		r.claim(path, a, "load balancer "+s.Name)
	}
}

// inNodeNetwork tells whether a is a host address of the node network, and
// says why not.
func (r *resolver) inNodeNetwork(path string, a netip.Addr) bool {
	net := r.t.NodeCIDR
	if !net.IsValid() {
		return false // in error, and said so
	}
	if !net.Contains(a) {
		r.errorf(path, "%s is outside the node network %s", a, net)
		return false
	}
	if why := reservedIn(a, net); why != "" {
		r.errorf(path, "%s is %s of the node network %s", a, why, net)
		return false
	}
	return true
}

// loadBalancers validates the load balancers (the default one when the file
// gives none and needs it) and gives those without an address the first free
// one of the node network.
func (r *resolver) loadBalancers(specs []LoadBalancerSpec, implicit bool) {
	if implicit {
		specs = []LoadBalancerSpec{{Name: DefaultLoadBalancer}}
	}
	classes := map[string]int{}
	for i, s := range specs {
		path := index("loadBalancers", i)
		if implicit {
			path = "services"
		}
		lb := LoadBalancer{Name: s.Name, Class: s.Class, ProbeInterval: DefaultProbeInterval}
		if s.Class != "" {
			r.loadBalancerClass(child(path, "class"), s.Class)
		}
		if first, dup := classes[s.Class]; dup {
			what := "the load balancer of Services without a loadBalancerClass"
			if s.Class != "" {
				what = "the load balancer of class " + s.Class
			}
			r.errorf(child(path, "class"), "loadBalancers[%d] is already %s", first, what)
		} else {
			classes[s.Class] = i
		}
		if s.ProbeInterval != "" {
			d, err := time.ParseDuration(s.ProbeInterval)
			switch {
			case err != nil:
				r.errorf(child(path, "probeInterval"), "%q is not a duration (such as 1s or 500ms)", s.ProbeInterval)
			case d < minProbeInterval || d > maxProbeInterval:
				r.errorf(child(path, "probeInterval"), "%s: must be between %s and %s", d, minProbeInterval, maxProbeInterval)
			default:
				lb.ProbeInterval = d
			}
		}
		if s.IP != "" {
			if a, err := netip.ParseAddr(s.IP); err == nil && r.addrs[a] == "load balancer "+s.Name {
				lb.IP = a
			}
		} else if net := r.t.NodeCIDR; net.IsValid() {
			a, ok := r.nextFree(net, net.Masked().Addr().Next())
			if !ok {
				r.errorf(path, "no address of the node network %s is free for load balancer %s", net, s.Name)
			} else {
				r.claim(child(path, "ip"), a, "load balancer "+s.Name)
				lb.IP = a
			}
		}
		r.t.LoadBalancers = append(r.t.LoadBalancers, lb)
	}
}

// loadBalancerClass checks a class name as the API server checks
// spec.loadBalancerClass: a qualified name with a domain prefix.
func (r *resolver) loadBalancerClass(path, class string) {
	msgs := validation.IsQualifiedName(class)
	if len(msgs) == 0 && !strings.Contains(class, "/") {
		msgs = []string{"must be domain-prefixed, such as example.com/lb"}
	}
	r.errorsf(path, quoted(class, msgs))
}

// loadBalancer checks the fields a LoadBalancer Service's load balancer reads,
// and defaults what the API server defaults. Which load balancer serves the
// Service, and its ingress IP, are settled once every Service is read
// (ingress).
func (r *resolver) loadBalancer(path string, svc *corev1.Service) {
	spec := &svc.Spec
	sp := child(path, "spec")
	isLB := spec.Type == corev1.ServiceTypeLoadBalancer
	onlyLB := func(field string, set bool) {
		if set && !isLB {
			r.errorf(child(sp, field), "may only be used when type is LoadBalancer")
		}
	}
	onlyLB("loadBalancerIP", spec.LoadBalancerIP != "")
	onlyLB("loadBalancerSourceRanges", len(spec.LoadBalancerSourceRanges) > 0)
	onlyLB("loadBalancerClass", spec.LoadBalancerClass != nil)
	onlyLB("allocateLoadBalancerNodePorts", spec.AllocateLoadBalancerNodePorts != nil)
	if isLB && spec.AllocateLoadBalancerNodePorts == nil {
		spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
	if c := spec.LoadBalancerClass; c != nil && isLB {
		r.loadBalancerClass(child(sp, "loadBalancerClass"), *c)
	}
	for i, s := range spec.LoadBalancerSourceRanges {
		p := index(child(sp, "loadBalancerSourceRanges"), i)
		if msg := sourceRange(strings.TrimSpace(s)); msg != "" {
			r.errorf(p, "%s", msg)
		}
	}
	if a := corev1.AnnotationLoadBalancerSourceRangesKey; svc.Annotations[a] != "" {
		r.errorf(key(child(child(path, "metadata"), "annotations"), a),
			"not supported: kube-proxy reads spec.loadBalancerSourceRanges only; give the ranges there")
	}

	st := child(path, "status")
	ingress := svc.Status.LoadBalancer.Ingress
	if len(ingress) > 0 && !isLB {
		r.errorf(child(st, "loadBalancer.ingress"), "may only be used when type is LoadBalancer")
	}
	for i := range ingress {
		ing := &ingress[i]
		p := index(child(st, "loadBalancer.ingress"), i)
		if ing.Hostname != "" {
			r.errorf(child(p, "hostname"), "not supported: svclab's load balancers have addresses, not names")
		}
		if len(ing.Ports) > 0 {
			r.errorf(child(p, "ports"), "not supported: the port status of a load balancer is its controller's, which svclab's load balancers leave empty")
		}
		switch {
		case ing.IP == "":
			if ing.Hostname == "" {
				r.errorf(child(p, "ip"), "required: the ingress IP")
			}
		case ing.IPMode == nil:
			// The API server's default for an IP.
			ing.IPMode = ptr.To(corev1.LoadBalancerIPModeVIP)
		case *ing.IPMode == corev1.LoadBalancerIPModeProxy:
			r.errorf(child(p, "ipMode"), "Proxy is not supported: svclab's load balancers route packets to the nodes with the ingress IP intact (VIP), and kube-proxy leaves a Proxy ingress to the load balancer")
		case *ing.IPMode != corev1.LoadBalancerIPModeVIP:
			r.errorf(child(p, "ipMode"), "%q: must be VIP or Proxy", *ing.IPMode)
		}
	}
	if lbip := spec.LoadBalancerIP; lbip != "" && isLB && len(ingress) > 0 &&
		!slices.ContainsFunc(ingress, func(ing corev1.LoadBalancerIngress) bool { return ing.IP == lbip }) {
		r.errorf(child(sp, "loadBalancerIP"), "%s is not among status.loadBalancer.ingress, which the load balancer would have given it", lbip)
	}
	if len(svc.Status.Conditions) > 0 {
		r.errorf(child(st, "conditions"), "not supported: svclab's load balancers set no Service conditions")
	}
}

// sourceRange tells what is wrong with one loadBalancerSourceRanges entry.
func sourceRange(s string) string {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return `"` + s + `" is not a CIDR (want address/length, such as 192.168.1.0/24)`
	case p.Addr().Is6():
		return s + " is IPv6: " + notBuilt6
	case p.Masked() != p:
		return s + " is not a network address; did you mean " + p.Masked().String() + "?"
	}
	return ""
}

// externalIPs checks that a Service's external IPs are ones kube-proxy programs.
func (r *resolver) externalIPs(sp string, svc *corev1.Service) {
	if len(svc.Spec.ExternalIPs) == 0 {
		return
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		r.errorf(child(sp, "externalIPs"), "may not be set for ExternalName Services")
	case isHeadless(svc):
		r.errorf(child(sp, "externalIPs"), "not supported for headless Services, which kube-proxy leaves alone")
	}
}

// ingress gives each LoadBalancer Service that has no ingress IP one from the
// pool, once every address the file gives is claimed, and checks that a load
// balancer serves it.
func (r *resolver) ingress() {
	for i := range r.t.Services {
		svc := &r.t.Services[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		path := index("services", i)
		if _, ok := r.t.LoadBalancerOf(svc); !ok {
			if c := svc.Spec.LoadBalancerClass; c != nil {
				r.errorf(child(path, "spec.loadBalancerClass"), "no load balancer of the lab has class %s (give one in loadBalancers with class: %s)", *c, *c)
			} else {
				r.errorf(child(path, "spec.type"), "LoadBalancer, but no load balancer of the lab serves Services without a loadBalancerClass (give one in loadBalancers without a class)")
			}
			continue
		}
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			continue
		}
		id := svc.Namespace + "/" + svc.Name
		var a netip.Addr
		if lbip := svc.Spec.LoadBalancerIP; lbip != "" {
			// Asked for, as MetalLB honours it; claimed with the other given
			// addresses, or in error and said so.
			parsed, err := netip.ParseAddr(lbip)
			if err != nil || r.addrs[parsed] != "Service "+id+" (load balancer ingress)" {
				continue
			}
			a = parsed
		} else {
			pool := r.t.LoadBalancerCIDR
			if !pool.IsValid() {
				continue
			}
			free, ok := r.nextFree(pool, pool.Masked().Addr().Next())
			if !ok {
				r.errorf(child(path, "status.loadBalancer.ingress"), "loadBalancerCIDR %s has no free address left for Service %s", pool, id)
				continue
			}
			r.claim(child(path, "status.loadBalancer.ingress"), free, "Service "+id+" (load balancer ingress)")
			a = free
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: a.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
	}
}

// externalIPRoutes settles which nodes each external IP is routed to.
func (r *resolver) externalIPRoutes(specs []ExternalIPRouteSpec) {
	given := map[netip.Addr]ExternalIPRoute{}
	routed := map[netip.Addr]int{}
	for i, s := range specs {
		path := index("externalIPRoutes", i)
		a, ok := r.address(child(path, "ip"), s.IP)
		if ok {
			if first, dup := routed[a]; dup {
				r.errorf(child(path, "ip"), "%s is routed by externalIPRoutes[%d] already", a, first)
				ok = false
			} else if routed[a] = i; !r.isExternalIP(a) {
				r.errorf(child(path, "ip"), "%s is no Service's external IP (spec.externalIPs)", a)
				ok = false
			}
		}
		if len(s.Nodes) == 0 {
			r.errorf(child(path, "nodes"), "required: the nodes %s is routed to", s.IP)
		}
		seen := map[string]bool{}
		for j, n := range s.Nodes {
			p := index(child(path, "nodes"), j)
			switch {
			case seen[n]:
				r.errorf(p, "%q is listed twice", n)
				ok = false
			case r.nodes[n] == (Node{}):
				if !slices.ContainsFunc(r.t.Nodes, func(node Node) bool { return node.Name == n }) {
					r.errorf(p, "unknown node %q%s", n, r.knownNodes())
				}
				ok = false
			}
			seen[n] = true
		}
		if ok {
			given[a] = ExternalIPRoute{IP: a, Nodes: slices.Clone(s.Nodes)}
		}
	}
	done := map[netip.Addr]bool{}
	for i := range r.t.Services {
		for _, s := range r.t.Services[i].Spec.ExternalIPs {
			a, err := netip.ParseAddr(s)
			if err != nil || done[a] {
				continue
			}
			done[a] = true
			route, ok := given[a]
			if !ok {
				if len(r.t.Nodes) == 0 {
					continue
				}
				route = ExternalIPRoute{IP: a, Nodes: []string{r.t.Nodes[0].Name}}
			}
			r.t.ExternalIPRoutes = append(r.t.ExternalIPRoutes, route)
		}
	}
}

func (r *resolver) isExternalIP(a netip.Addr) bool {
	for i := range r.t.Services {
		for _, s := range r.t.Services[i].Spec.ExternalIPs {
			if s == a.String() {
				return true
			}
		}
	}
	return false
}

// loadBalancerSpecs is the lab's load balancers written back as a file gives
// them, with every default made explicit.
func loadBalancerSpecs(lbs []LoadBalancer) []LoadBalancerSpec {
	var out []LoadBalancerSpec
	for _, lb := range lbs {
		out = append(out, LoadBalancerSpec{Name: lb.Name, IP: addrString(lb.IP), Class: lb.Class, ProbeInterval: lb.ProbeInterval.String()})
	}
	return out
}

func externalIPRouteSpecs(routes []ExternalIPRoute) []ExternalIPRouteSpec {
	var out []ExternalIPRouteSpec
	for _, r := range routes {
		out = append(out, ExternalIPRouteSpec{IP: r.IP.String(), Nodes: slices.Clone(r.Nodes)})
	}
	return out
}
