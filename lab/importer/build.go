package importer

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
)

// Options cut a big cluster down and name the lab.
type Options struct {
	// Name is the lab's name ("imported" when empty).
	Name string
	// Namespaces keeps only the Services of these namespaces (all when empty).
	Namespaces []string
	// Selector keeps only the Services whose labels it matches (nil: all).
	Selector labels.Selector
	// Nodes keeps at most this many nodes (0: all): those with the most endpoints
	// of the kept Services, ties broken by name.
	Nodes int
	// Clients are the machines outside the cluster (name and IPv4 address on the
	// node network); when none is given, one called outside at the highest free
	// address.
	Clients []topology.ClientSpec
	// ExternalIPRoutes say which nodes outside traffic to an external IP
	// reaches, which no dump holds; an external IP without one goes to the
	// first node.
	ExternalIPRoutes []topology.ExternalIPRouteSpec
}

// Result is the topology file and what it says of itself.
type Result struct {
	File topology.File
	// Cut says how the cluster was cut down; empty when it was not.
	Cut []string
	// Notes list what the file could not hold as the cluster had it, each with
	// what was done instead.
	Notes []string
	// Manifest is set when the input was a manifest no cluster ran, which the
	// import completed (Dump.isManifest).
	Manifest bool
}

// ManagedBy is the manager of the EndpointSlices an import writes: the lab's
// Services are selectorless, so the slices are the dump's, as they were.
const ManagedBy = "svclab-import"

// ClientName is the outside client an import adds on the node network.
const ClientName = "outside"

type builder struct {
	o     Options
	res   *Result
	nodes map[string]*topology.NodeSpec // by the cluster's node name
	byIP  map[netip.Addr]string         // node addresses
	pods  map[netip.Addr]*topology.PodSpec
	names map[string]bool // member names taken
	// manifest is set for input no cluster ran (Dump.isManifest): Services keep
	// their selectors and the lab completes them.
	manifest bool
	// kubernetesIP is default/kubernetes's ClusterIP: the first host of the
	// service range, which tells where the range starts.
	kubernetesIP netip.Addr
}

func (b *builder) notef(format string, args ...any) {
	b.res.Notes = append(b.res.Notes, fmt.Sprintf(format, args...))
}

// Build makes the topology of d. Errors are bad input (an InputError).
func Build(d *Dump, o Options) (*Result, error) {
	b := &builder{o: o, res: &Result{}, nodes: map[string]*topology.NodeSpec{}, byIP: map[netip.Addr]string{},
		pods: map[netip.Addr]*topology.PodSpec{}, names: map[string]bool{ClientName: true, topology.ControlPlaneMember: true, "fabric": true}}
	f := &b.res.File
	f.Name = cmp.Or(o.Name, "imported")
	b.manifest = d.isManifest()
	b.res.Manifest = b.manifest
	if len(d.Nodes) == 0 && b.manifest && len(d.Services)+len(d.Pods)+len(d.Workloads) > 0 {
		d.Nodes = madeNodes()
		b.notef("no Node in the input (a manifest): made node-1 and node-2 (192.168.1.10 and .11, podCIDRs 10.244.1.0/24 and 10.244.2.0/24)")
	}
	if len(d.Nodes) == 0 {
		return nil, inputErrorf("input", "no Node: dump them with the Services (`kubectl get nodes,services,endpointslices -A -o yaml`)")
	}
	if err := b.readNodes(d.Nodes); err != nil {
		return nil, err
	}
	services, slicesOf, err := b.keptServices(d)
	if err != nil {
		return nil, err
	}
	b.cutNodes(services, slicesOf)
	for _, svc := range services {
		id := svc.Obj.Namespace + "/" + svc.Obj.Name
		if err := checkPorts(svc); err != nil {
			return nil, err
		}
		s, ok := b.service(svc)
		if !ok {
			continue
		}
		f.Services = append(f.Services, s)
		for _, sl := range slicesOf[id] {
			if out, ok := b.slice(sl, &s); ok {
				f.EndpointSlices = append(f.EndpointSlices, out)
			}
		}
	}
	b.nodePortRange()
	for _, n := range d.Nodes {
		if spec, ok := b.nodes[n.Obj.Name]; ok {
			f.Nodes = append(f.Nodes, *spec)
		}
	}
	b.podsOf(d.Pods)
	for _, ip := range slices.SortedFunc(maps.Keys(b.pods), netip.Addr.Compare) {
		f.Pods = append(f.Pods, *b.pods[ip])
	}
	if b.manifest {
		f.Pods = append(f.Pods, b.manifestPods(d)...)
		b.unselected()
	} else {
		// A cluster's dump has the pods its workloads made.
		for _, w := range d.Workloads {
			d.Ignored[w.Obj.Kind]++
		}
	}
	b.kubeProxy(d)
	b.cidrs()
	if err := b.clients(); err != nil {
		return nil, err
	}
	b.externalIPRoutes()
	if len(d.Ignored) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(d.Ignored)) {
			kinds = append(kinds, fmt.Sprintf("%d %s", d.Ignored[k], k))
		}
		b.notef("ignored objects of other kinds (%s): the topology is made of Nodes, Services and EndpointSlices", strings.Join(kinds, ", "))
	}
	return b.res, nil
}

// memberName is name, of a member of kind (node, pod), made a DNS label
// unique among the lab's members; a name changed on the way is noted.
func (b *builder) memberName(kind, name string) string {
	n := cmp.Or(topology.MemberBase(name), "member")
	out := n
	for i := 2; b.names[out]; i++ {
		out = fmt.Sprintf("%s-%d", n, i)
	}
	b.names[out] = true
	if out != name {
		b.notef("%s %s: named %s in the lab (a member's name is a DNS label of at most 55 characters, unique among nodes, pods and clients; svclab compare --node takes either)", kind, name, out)
	}
	return out
}

func (b *builder) readNodes(nodes []Object[corev1.Node]) error {
	var kpVersions []string
	for _, n := range nodes {
		if _, dup := b.nodes[n.Obj.Name]; dup {
			return inputErrorf(n.Where, "metadata.name: node %q is in the input twice", n.Obj.Name)
		}
		var ip netip.Addr
		var v6 []string // the node's IPv6 half, which a lab cannot hold yet
		for _, a := range n.Obj.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			x, err := netip.ParseAddr(a.Address)
			switch {
			case err == nil && x.Is4() && !ip.IsValid():
				ip = x
			case err == nil && x.Is6():
				v6 = append(v6, "InternalIP "+a.Address)
			}
		}
		if !ip.IsValid() {
			b.notef("node %s: no IPv4 InternalIP in status.addresses (IPv6 is not supported): left out, with its endpoints", n.Obj.Name)
			continue
		}
		spec := &topology.NodeSpec{Name: b.memberName("node", n.Obj.Name), IP: ip.String()}
		cidrs := n.Obj.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Obj.Spec.PodCIDR != "" {
			cidrs = []string{n.Obj.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			p, err := netip.ParsePrefix(c)
			switch {
			case err != nil:
				return inputErrorf(n.Where, "spec.podCIDRs: %q is no CIDR", c)
			case p.Addr().Is4() && spec.PodCIDR == "":
				spec.PodCIDR = p.Masked().String()
			case p.Addr().Is6():
				v6 = append(v6, "podCIDR "+c)
			}
		}
		if len(v6) > 0 {
			// A dual-stack node: its IPv4 half is the lab's node; what is
			// dropped is said, not lost without a word.
			b.notef("node %s: dual-stack: kept its IPv4 half only, left out its %s (svclab labs are IPv4-only)", n.Obj.Name, strings.Join(v6, ", "))
		}
		b.nodes[n.Obj.Name] = spec
		b.byIP[ip] = n.Obj.Name
		kpVersions = append(kpVersions, n.Obj.Status.NodeInfo.KubeProxyVersion)
	}
	if len(b.nodes) == 0 {
		return inputErrorf("input", "no node with an IPv4 InternalIP")
	}
	// Nodes report kube-proxy's version (status.nodeInfo.kubeProxyVersion)
	// until 1.31; the rules' shape depends on it.
	slices.Sort(kpVersions)
	kpVersions = slices.Compact(kpVersions)
	if len(kpVersions) == 1 && kpVersions[0] != "" {
		if v, err := version.Parse(kpVersions[0]); err == nil {
			b.res.File.KubeProxyVersion = v.String()
		} else {
			b.notef("kube-proxy %s (status.nodeInfo.kubeProxyVersion): %v; the file leaves the version to svclab's default", kpVersions[0], err)
		}
	} else if len(kpVersions) > 1 {
		b.notef("nodes report different kube-proxy versions (%s): the file leaves the version to svclab's default; choose one with --kube-proxy-version", strings.Join(kpVersions, ", "))
	}
	return nil
}

// keptServices are the Services the cut keeps, in namespace/name order, and
// their slices by namespace/name.
// A Service with no slice in the input gets stand-ins (standInSlices); a cut
// that keeps none of the input's Services is an error naming what it has.
func (b *builder) keptServices(d *Dump) ([]Object[corev1.Service], map[string][]Object[discoveryv1.EndpointSlice], error) {
	var kept []Object[corev1.Service]
	ids := map[string]bool{}
	cutNS, cutSel := 0, 0
	for _, s := range d.Services {
		switch {
		case len(b.o.Namespaces) > 0 && !slices.Contains(b.o.Namespaces, s.Obj.Namespace):
			cutNS++
			continue
		case b.o.Selector != nil && !b.o.Selector.Matches(labels.Set(s.Obj.Labels)):
			cutSel++
			continue
		}
		kept = append(kept, s)
		ids[s.Obj.Namespace+"/"+s.Obj.Name] = true
	}
	if len(b.o.Namespaces) > 0 {
		b.res.Cut = append(b.res.Cut, fmt.Sprintf("--namespace %s: left out %d Services of other namespaces", strings.Join(b.o.Namespaces, ","), cutNS))
	}
	if b.o.Selector != nil {
		b.res.Cut = append(b.res.Cut, fmt.Sprintf("-l %s: left out %d Services whose labels do not match", b.o.Selector, cutSel))
	}
	slices.SortFunc(kept, func(x, y Object[corev1.Service]) int {
		return cmp.Or(cmp.Compare(x.Obj.Namespace, y.Obj.Namespace), cmp.Compare(x.Obj.Name, y.Obj.Name))
	})
	slicesOf := map[string][]Object[discoveryv1.EndpointSlice]{}
	for _, s := range d.Slices {
		name := s.Obj.Labels[discoveryv1.LabelServiceName]
		id := s.Obj.Namespace + "/" + name
		if name == "" || !ids[id] {
			continue
		}
		slicesOf[id] = append(slicesOf[id], s)
	}
	for id := range slicesOf {
		slices.SortFunc(slicesOf[id], func(x, y Object[discoveryv1.EndpointSlice]) int { return cmp.Compare(x.Obj.Name, y.Obj.Name) })
	}
	for _, s := range kept {
		// A manifest's Services keep their selectors: the lab derives
		// their endpoints.
		if b.manifest {
			continue
		}
		if id := s.Obj.Namespace + "/" + s.Obj.Name; len(slicesOf[id]) == 0 {
			if standIn := b.standInSlices(s, d); len(standIn) > 0 {
				slicesOf[id] = standIn
			}
		}
	}
	if len(kept) == 0 && len(d.Services) > 0 {
		return nil, nil, inputErrorf("input", "the cut leaves no Service: the input's %d Services are in namespaces %s", len(d.Services), strings.Join(serviceNamespaces(d.Services), ", "))
	}
	return kept, slicesOf, nil
}

// serviceNamespaces are the namespaces of services, sorted, each once.
func serviceNamespaces(services []Object[corev1.Service]) []string {
	var out []string
	for _, s := range services {
		out = append(out, s.Obj.Namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cutNodes keeps the o.Nodes nodes with the most endpoints of the kept
// Services (ties by name), so that the cut lab keeps as many backends as it can.
func (b *builder) cutNodes(services []Object[corev1.Service], slicesOf map[string][]Object[discoveryv1.EndpointSlice]) {
	if b.o.Nodes <= 0 || b.o.Nodes >= len(b.nodes) {
		return
	}
	count := map[string]int{}
	for _, sls := range slicesOf {
		for _, s := range sls {
			for _, e := range s.Obj.Endpoints {
				if e.NodeName != nil {
					count[*e.NodeName]++
				}
			}
		}
	}
	names := slices.Collect(maps.Keys(b.nodes))
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(count[y], count[x]), cmp.Compare(x, y)) })
	for _, n := range names[b.o.Nodes:] {
		delete(b.byIP, netip.MustParseAddr(b.nodes[n].IP))
		delete(b.nodes, n)
	}
	kept := names[:b.o.Nodes]
	slices.Sort(kept)
	b.res.Cut = append(b.res.Cut, fmt.Sprintf("--nodes %d: kept %s (the nodes with the most endpoints of the kept Services, ties by name), left out %d", b.o.Nodes, strings.Join(kept, ", "), len(names)-b.o.Nodes))
}

// service is svc as the lab can hold it: IPv4 only, no selector (its slices
// are the dump's), without what svclab's nodes cannot have.
func (b *builder) service(in Object[corev1.Service]) (corev1.Service, bool) {
	s := in.Obj
	id := s.Namespace + "/" + s.Name
	// The cluster's own Services are kept as the cluster has them (a real
	// node holds their rules), marked so that a lab making its own leaves
	// these out.
	clusterOwn := false
	if topology.IsKubernetesService(s.Namespace, s.Name) {
		if a, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil && a.Is4() {
			b.kubernetesIP = a
		}
		clusterOwn = true
		b.notef("Service default/kubernetes: kept as the cluster has it, its endpoints the API servers' (those on no node of the lab are left out); a lab with a control plane (--control-plane) makes its own instead, at its control plane's address")
	}
	if topology.IsDNSService(s.Namespace, s.Name) {
		if a, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil && a.Is4() {
			b.res.File.ClusterDNS = a.String()
		}
		clusterOwn = true
		b.notef("Service %s: kept as the cluster has it; a lab with a control plane (--control-plane) makes its own instead, at clusterDNS %s, with its CoreDNS pods (the dump's kube-system pods labelled %s=%s)",
			id, b.res.File.ClusterDNS, topology.DNSAppLabel, topology.DNSServiceName)
	}
	for _, l := range []string{"service.kubernetes.io/service-proxy-name", corev1.IsHeadlessService} {
		if v, ok := s.Labels[l]; ok {
			b.notef("Service %s: left out: label %s=%s makes kube-proxy ignore it", id, l, v)
			return s, false
		}
	}
	out := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
		Spec:       *s.Spec.DeepCopy(),
	}
	if clusterOwn {
		out.Annotations = map[string]string{topology.ClusterOwnAnnotation: "true"}
	}
	spec := &out.Spec
	if !b.manifest {
		spec.Selector = nil
	}
	if serviceIPsAllocated(&s) {
		b.notef("Service %s: no ClusterIP in the input: the lab allocates one from serviceCIDR, as the API server would", id)
	} else if spec.Type != corev1.ServiceTypeExternalName && spec.ClusterIP != corev1.ClusterIPNone {
		ips := ipv4Only(spec.ClusterIPs)
		if len(spec.ClusterIPs) == 0 && spec.ClusterIP != "" {
			ips = ipv4Only([]string{spec.ClusterIP})
		}
		switch {
		case len(ips) == 0:
			b.notef("Service %s: left out: no IPv4 ClusterIP (%s); svclab labs are IPv4-only", id, strings.Join(append([]string{spec.ClusterIP}, spec.ClusterIPs...), ", "))
			return s, false
		case len(spec.ClusterIPs) > 1:
			b.notef("Service %s: dual-stack: kept its IPv4 ClusterIP %s only", id, ips[0])
		}
		spec.ClusterIP, spec.ClusterIPs = ips[0], ips[:1]
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		if ptr.Deref(spec.IPFamilyPolicy, "") == corev1.IPFamilyPolicyRequireDualStack {
			spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
		}
	} else if spec.Type == corev1.ServiceTypeExternalName {
		spec.IPFamilies, spec.IPFamilyPolicy = nil, nil
	} else {
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	}
	if v4 := ipv4Only(spec.ExternalIPs); len(v4) < len(spec.ExternalIPs) {
		b.notef("Service %s: left out its IPv6 externalIPs", id)
		spec.ExternalIPs = v4
	}
	var ranges []string
	for _, r := range spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && p.Addr().Is4() {
			ranges = append(ranges, r)
		}
	}
	if len(ranges) < len(spec.LoadBalancerSourceRanges) {
		b.notef("Service %s: left out its IPv6 loadBalancerSourceRanges", id)
		spec.LoadBalancerSourceRanges = ranges
	}
	if spec.TrafficDistribution != nil {
		b.notef("Service %s: trafficDistribution %s left out: svclab nodes have no zones", id, *spec.TrafficDistribution)
		spec.TrafficDistribution = nil
	}
	for _, ing := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && a.Is4() {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ing.IP, IPMode: ing.IPMode})
		} else {
			b.notef("Service %s: load balancer ingress %s left out (only IPv4 addresses can be routed in a lab)", id, cmp.Or(ing.IP, ing.Hostname))
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && len(out.Status.LoadBalancer.Ingress) == 0 && len(s.Status.LoadBalancer.Ingress) == 0 {
		b.notef("Service %s: LoadBalancer without ingress in its status: the lab's load balancer gives it one from loadBalancerCIDR", id)
	}
	if spec.LoadBalancerIP != "" && !slices.ContainsFunc(out.Status.LoadBalancer.Ingress, func(i corev1.LoadBalancerIngress) bool { return i.IP == spec.LoadBalancerIP }) {
		b.notef("Service %s: loadBalancerIP %s left out: it is not among its ingress", id, spec.LoadBalancerIP)
		spec.LoadBalancerIP = ""
	}
	return out, true
}

func ipv4Only(ips []string) []string {
	var out []string
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			out = append(out, s)
		}
	}
	return out
}

// slice is one of the dump's slices as the lab holds it: the endpoints whose
// address the lab can have (a pod made for it on its node, or a node), with
// their conditions as they were.
func (b *builder) slice(in Object[discoveryv1.EndpointSlice], svc *corev1.Service) (discoveryv1.EndpointSlice, bool) {
	s := in.Obj
	id := svc.Namespace + "/" + svc.Name
	if s.AddressType != discoveryv1.AddressTypeIPv4 {
		b.notef("EndpointSlice %s/%s of %s: addressType %s left out (svclab labs are IPv4-only; kube-proxy ignores FQDN)", s.Namespace, s.Name, id, s.AddressType)
		return s, false
	}
	out := discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range s.Ports {
		if p.Port == nil {
			b.notef("EndpointSlice %s/%s: a port without a number (all ports) left out", s.Namespace, s.Name)
			continue
		}
		out.Ports = append(out.Ports, discoveryv1.EndpointPort{Name: ptr.To(ptr.Deref(p.Name, "")), Protocol: p.Protocol, Port: p.Port})
	}
	for _, e := range s.Endpoints {
		if ep, ok := b.endpoint(s, id, e, out.Ports); ok {
			out.Endpoints = append(out.Endpoints, ep)
		}
	}
	return out, true
}

func (b *builder) endpoint(s discoveryv1.EndpointSlice, id string, e discoveryv1.Endpoint, ports []discoveryv1.EndpointPort) (discoveryv1.Endpoint, bool) {
	if len(e.Addresses) == 0 {
		return e, false
	}
	addr := e.Addresses[0]
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is4() {
		b.notef("endpoint %s of %s: not an IPv4 address: left out", addr, id)
		return e, false
	}
	if len(e.Addresses) > 1 {
		b.notef("endpoint %s of %s: kept its first address only, as kube-proxy uses only that", addr, id)
	}
	node := ptr.Deref(e.NodeName, "")
	spec, nodeKept := b.nodes[node]
	out := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: e.Conditions}
	if e.Hostname != nil && len(validation.IsDNS1123Label(*e.Hostname)) == 0 {
		out.Hostname = e.Hostname
	}
	if e.Zone != nil || e.Hints != nil {
		b.notef("endpoint %s of %s: zone and hints left out (svclab nodes have no zones)", addr, id)
	}
	if owner, isNode := b.byIP[ip]; isNode {
		// A host-network endpoint (kube-apiserver, node-local agents): the node
		// itself serves it.
		if node != "" && nodeKept {
			out.NodeName = ptr.To(b.nodes[node].Name)
		} else {
			out.NodeName = ptr.To(b.nodes[owner].Name)
		}
		return out, true
	}
	switch {
	case node == "":
		b.notef("endpoint %s of %s: no nodeName, so no node to put its pod on: left out", addr, id)
		return e, false
	case !nodeKept:
		b.notef("endpoint %s of %s: on node %s, which the lab does not have: left out", addr, id, node)
		return e, false
	case spec.PodCIDR == "":
		spec.PodCIDR = netip.PrefixFrom(ip, 24).Masked().String()
		b.notef("node %s: no podCIDR in its spec: given %s, the /24 of its first endpoint", node, spec.PodCIDR)
	}
	cidr := netip.MustParsePrefix(spec.PodCIDR)
	gateway := cidr.Addr().Next()
	switch {
	case !cidr.Contains(ip):
		b.notef("endpoint %s of %s: outside its node %s's podCIDR %s (an IPAM svclab does not model): left out", addr, id, node, cidr)
		return e, false
	case ip == gateway || ip == cidr.Addr():
		b.notef("endpoint %s of %s: the network or gateway address of node %s's podCIDR, where a lab's node has its bridge: left out", addr, id, node)
		return e, false
	}
	pod := b.pod(ip, spec.Name, s.Namespace, e)
	for _, p := range ports {
		cp := corev1.ContainerPort{ContainerPort: *p.Port, Protocol: ptr.Deref(p.Protocol, corev1.ProtocolTCP)}
		if !slices.ContainsFunc(pod.Ports, func(x corev1.ContainerPort) bool {
			return x.ContainerPort == cp.ContainerPort && x.Protocol == cp.Protocol
		}) {
			pod.Ports = append(pod.Ports, cp)
		}
	}
	out.NodeName = ptr.To(spec.Name)
	out.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}
	return out, true
}

// pod is the pod at ip, made on first sight from the endpoint: named after its
// targetRef, ready and terminating as its conditions say.
func (b *builder) pod(ip netip.Addr, node, namespace string, e discoveryv1.Endpoint) *topology.PodSpec {
	if p, ok := b.pods[ip]; ok {
		return p
	}
	name := "pod-" + strings.ReplaceAll(ip.String(), ".", "-")
	if ref := e.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" {
		name = ref.Name
		namespace = cmp.Or(ref.Namespace, namespace)
	}
	p := &topology.PodSpec{Name: b.memberName("pod", name), Namespace: namespace, Node: node, IP: ip.String()}
	if namespace == metav1.NamespaceDefault {
		p.Namespace = ""
	}
	if !ptr.Deref(e.Conditions.Ready, true) {
		p.Ready = ptr.To(false)
	}
	if ptr.Deref(e.Conditions.Terminating, false) {
		p.Terminating = true
		// A terminating pod's endpoint is serving while the pod is Ready.
		p.Ready = ptr.To(ptr.Deref(e.Conditions.Serving, false))
	}
	b.pods[ip] = p
	return p
}
