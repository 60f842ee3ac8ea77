package topology

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A running lab changes its topology the way kubectl changes a cluster. Every
// change is checked by turning the topology back into a File, changing that and
// resolving it again: the very checks Parse makes, with every earlier allocation
// kept because it is now written down. On error the topology is left as it was.

// AddPod adds a pod, allocating its IP from its node's podCIDR when spec has none.
func (t *Topology) AddPod(spec PodSpec) (Pod, error) {
	if spec.Namespace == "" {
		spec.Namespace = defaultNamespace
	}
	key := spec.Namespace + "/" + spec.Name
	f := t.file()
	f.Pods = append(f.Pods, clonePodSpec(spec))
	if err := t.replace("add pod "+key, f); err != nil {
		return Pod{}, err
	}
	p, _ := t.Pod(key)
	return p, nil
}

// RemovePod removes the pod with key "namespace/name" and returns it.
func (t *Topology) RemovePod(key string) (Pod, error) {
	i := t.podIndex(key)
	if i < 0 {
		return Pod{}, fmt.Errorf("remove pod %s: no such pod in lab %s", key, t.Name)
	}
	removed := clonePod(t.Pods[i])
	f := t.file()
	f.Pods = slices.Delete(f.Pods, i, i+1)
	if err := t.replace("remove pod "+key, f); err != nil {
		return Pod{}, err
	}
	return removed, nil
}

// UpdatePod changes a pod's labels, readiness or terminating flag. A pod's name,
// namespace, node, address and ports are fixed, as in Kubernetes: remove the pod
// and add another instead.
func (t *Topology) UpdatePod(key string, change func(p *Pod)) error {
	i := t.podIndex(key)
	if i < 0 {
		return fmt.Errorf("update pod %s: no such pod in lab %s", key, t.Name)
	}
	old := t.Pods[i]
	p := clonePod(old)
	change(&p)
	if p.Name != old.Name || p.Namespace != old.Namespace || p.Node != old.Node || p.IP != old.IP || p.IP6 != old.IP6 ||
		!slices.Equal(p.Ports, old.Ports) {
		return fmt.Errorf("update pod %s: only labels, ready and terminating can change; remove the pod and add another", key)
	}
	f := t.file()
	f.Pods[i] = podSpec(p)
	return t.replace("update pod "+key, f)
}

// ApplyService adds the Service, or replaces the one with the same namespace and
// name as the API server updates one: allocated values the new object leaves
// out are kept, values its new type no longer uses are released, and the
// ClusterIP cannot change.
func (t *Topology) ApplyService(svc corev1.Service) error {
	svc = *svc.DeepCopy()
	if svc.Namespace == "" {
		svc.Namespace = defaultNamespace
	}
	op := fmt.Sprintf("apply Service %s/%s", svc.Namespace, svc.Name)
	f := t.file()
	i := slices.IndexFunc(f.Services, func(s corev1.Service) bool {
		return s.Namespace == svc.Namespace && s.Name == svc.Name
	})
	if i < 0 {
		f.Services = append(f.Services, svc)
		return t.replace(op, f)
	}
	old := &f.Services[i]
	prepareUpdate(&svc, old)
	if errs := immutable(t.Source+" ("+op+")", index("services", i), &svc, old); len(errs) > 0 {
		return errs.Err()
	}
	f.Services[i] = svc
	return t.replace(op, f)
}

// EnableControlPlane gives the lab a control plane, as controlPlane: true in its
// file would.
func (t *Topology) EnableControlPlane() error {
	if t.ControlPlane != nil {
		return nil
	}
	f := t.file()
	f.ControlPlane = true
	if f.ClusterDNS == "" && (f.DNS == nil || *f.DNS) {
		f.ClusterDNS = t.freeClusterDNS(f)
	}
	return t.replace("add a control plane", f)
}

// freeClusterDNS is where the cluster DNS goes in a lab that gains a control
// plane its file did not ask for: kubeadm's tenth address of serviceCIDR, or the
// first after it no Service of the file holds already (a file written without a
// cluster DNS in mind may use the tenth). "" leaves the choice, and its errors,
// to the file's rules.
func (t *Topology) freeClusterDNS(f *File) string {
	taken := map[netip.Addr]bool{}
	for _, s := range f.Services {
		for _, ip := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
			if a, err := netip.ParseAddr(ip); err == nil {
				taken[a] = true
			}
		}
	}
	for n := dnsServiceIndex; ; n++ {
		a := nthAddr(t.ServiceCIDR, n)
		if !a.IsValid() || reservedIn(a, t.ServiceCIDR) != "" {
			return ""
		}
		if !taken[a] {
			if n == dnsServiceIndex {
				return ""
			}
			return a.String()
		}
	}
}

// SetServices makes svcs the lab's Services in place of the ones it has, as an
// API server holds them (allocated): what a lab with a control plane mirrors.
// The cluster DNS's Service stays the lab's own, as made from clusterDNS.
// What the server set about them (uid, resource version, managed fields, status)
// is left out. The user's EndpointSlices of Services that are gone go too. The
// topology is left as it was when one of them is not valid in a lab.
func (t *Topology) SetServices(svcs []corev1.Service) error {
	f := t.file()
	f.Services = nil
	names := map[string]bool{}
	for i := range svcs {
		if t.ownsService(&svcs[i]) {
			continue
		}
		svc := svcs[i].DeepCopy()
		svc.ObjectMeta = metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: svc.Labels, Annotations: svc.Annotations}
		svc.Status = corev1.ServiceStatus{LoadBalancer: t.ingressOf(svc)}
		f.Services = append(f.Services, *svc)
		names[svc.Namespace+"/"+svc.Name] = true
	}
	f.EndpointSlices = slices.DeleteFunc(f.EndpointSlices, func(s discoveryv1.EndpointSlice) bool {
		return !names[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]]
	})
	return t.replace("set Services", f)
}

// ingressOf is the load balancer status a Service set by SetServices keeps: the
// one it carries (a file's or the API server's), else the ingress the topology
// gave it already, as a load balancer keeps a Service's address while it stays
// a LoadBalancer of the same class; none for other types. Without it the
// addresses would follow the order the Services come in.
func (t *Topology) ingressOf(svc *corev1.Service) corev1.LoadBalancerStatus {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return corev1.LoadBalancerStatus{}
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		return svc.Status.LoadBalancer
	}
	cur, ok := t.Service(svc.Namespace, svc.Name)
	if !ok || cur.Spec.Type != corev1.ServiceTypeLoadBalancer || !reflect.DeepEqual(cur.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
		return corev1.LoadBalancerStatus{}
	}
	return *cur.Status.LoadBalancer.DeepCopy()
}

// RemoveService removes a Service together with the EndpointSlices the user gave
// it, which nothing would read once it is gone.
func (t *Topology) RemoveService(namespace, name string) error {
	if namespace == "" {
		namespace = defaultNamespace
	}
	f := t.file()
	i := slices.IndexFunc(f.Services, func(s corev1.Service) bool { return s.Namespace == namespace && s.Name == name })
	if i < 0 {
		return fmt.Errorf("remove Service %s/%s: no such Service in lab %s", namespace, name, t.Name)
	}
	f.Services = slices.Delete(f.Services, i, i+1)
	f.EndpointSlices = slices.DeleteFunc(f.EndpointSlices, func(s discoveryv1.EndpointSlice) bool {
		return s.Namespace == namespace && s.Labels[discoveryv1.LabelServiceName] == name
	})
	return t.replace(fmt.Sprintf("remove Service %s/%s", namespace, name), f)
}

// ownsService tells whether svc is the one the lab makes itself: the cluster
// DNS's.
func (t *Topology) ownsService(svc *corev1.Service) bool {
	return t.DNS != nil && IsDNSService(svc.Namespace, svc.Name)
}

// replace resolves f and, when it is valid, makes it the topology.
func (t *Topology) replace(op string, f *File) error {
	nt, errs := resolve(t.Source+" ("+op+")", f, nil)
	if len(errs) > 0 {
		return errs.Err()
	}
	nt.Source = t.Source
	*t = *nt
	return nil
}

// file is the topology written back as a lab file, with everything allocated.
func (t *Topology) file() *File {
	f := &File{
		Name:             t.Name,
		ClusterCIDR:      prefixesString(t.ClusterCIDR, t.ClusterCIDR6),
		ServiceCIDR:      prefixesString(t.ServiceCIDR, t.ServiceCIDR6),
		NodeCIDR:         prefixesString(t.NodeCIDR, t.NodeCIDR6),
		KubeProxyVersion: t.KubeProxyVersion,
		ControlPlane:     t.ControlPlane != nil,
		LoadBalancers:    loadBalancerSpecs(t.LoadBalancers),
		ExternalIPRoutes: externalIPRouteSpecs(t.ExternalIPRoutes),
		DNS:              t.dnsFile.enabled,
		ClusterDomain:    t.dnsFile.domain,
		ClusterDNS:       t.dnsFile.ip,
	}
	if t.LoadBalancerCIDR != t.NodeCIDR {
		f.LoadBalancerCIDR = prefixString(t.LoadBalancerCIDR)
	}
	if t.NodePortRange != DefaultNodePortRange {
		f.NodePortRange = t.NodePortRange.String()
	}
	for _, n := range t.Nodes {
		f.Nodes = append(f.Nodes, NodeSpec{Name: n.Name, IP: addrString(n.IP), IPs: addrsList(n.IP, n.IP6),
			PodCIDR: prefixString(n.PodCIDR), PodCIDRs: prefixList(n.PodCIDR, n.PodCIDR6)})
	}
	for _, p := range t.Pods {
		f.Pods = append(f.Pods, podSpec(p))
	}
	for _, c := range t.Clients {
		f.Clients = append(f.Clients, ClientSpec{Name: c.Name, IP: addrString(c.IP), IPs: addrsList(c.IP, c.IP6)})
	}
	for i := range t.Services {
		if t.ownsService(&t.Services[i]) {
			continue // made again from clusterDNS
		}
		f.Services = append(f.Services, *t.Services[i].DeepCopy())
	}
	for i := range t.UserEndpointSlices {
		f.EndpointSlices = append(f.EndpointSlices, *t.UserEndpointSlices[i].DeepCopy())
	}
	return f
}

func podSpec(p Pod) PodSpec {
	ready := p.Ready
	return PodSpec{
		Name:        p.Name,
		Namespace:   p.Namespace,
		Node:        p.Node,
		IP:          addrString(p.IP),
		IPs:         addrsList(p.IP, p.IP6),
		Labels:      maps.Clone(p.Labels),
		Ready:       &ready,
		Terminating: p.Terminating,
		Ports:       slices.Clone(p.Ports),
	}
}

func clonePodSpec(s PodSpec) PodSpec {
	s.IPs = slices.Clone(s.IPs)
	s.Labels = maps.Clone(s.Labels)
	s.Ports = slices.Clone(s.Ports)
	if s.Ready != nil {
		ready := *s.Ready
		s.Ready = &ready
	}
	return s
}

func clonePod(p Pod) Pod {
	p.Labels = maps.Clone(p.Labels)
	p.Ports = slices.Clone(p.Ports)
	return p
}

// Clone is a deep copy: changing one never changes the other.
func (t *Topology) Clone() *Topology {
	c := *t
	c.Nodes = slices.Clone(t.Nodes)
	c.Clients = slices.Clone(t.Clients)
	c.Pods = nil
	for _, p := range t.Pods {
		c.Pods = append(c.Pods, clonePod(p))
	}
	c.Services = nil
	for i := range t.Services {
		c.Services = append(c.Services, *t.Services[i].DeepCopy())
	}
	c.DeclaredServices = nil
	for i := range t.DeclaredServices {
		c.DeclaredServices = append(c.DeclaredServices, *t.DeclaredServices[i].DeepCopy())
	}
	if t.ControlPlane != nil {
		cp := *t.ControlPlane
		c.ControlPlane = &cp
	}
	c.LoadBalancers = slices.Clone(t.LoadBalancers)
	c.ExternalIPRoutes = nil
	for _, r := range t.ExternalIPRoutes {
		r.Nodes = slices.Clone(r.Nodes)
		c.ExternalIPRoutes = append(c.ExternalIPRoutes, r)
	}
	if t.DNS != nil {
		d := *t.DNS
		c.DNS = &d
	}
	c.UserEndpointSlices = nil
	for i := range t.UserEndpointSlices {
		c.UserEndpointSlices = append(c.UserEndpointSlices, *t.UserEndpointSlices[i].DeepCopy())
	}
	return &c
}

// Node finds a node by name.
func (t *Topology) Node(name string) (Node, bool) {
	i := slices.IndexFunc(t.Nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, false
	}
	return t.Nodes[i], true
}

// Pod finds a pod by "namespace/name"; the result is a copy.
func (t *Topology) Pod(key string) (Pod, bool) {
	i := t.podIndex(key)
	if i < 0 {
		return Pod{}, false
	}
	return clonePod(t.Pods[i]), true
}

// Service finds a Service; the result is a copy.
func (t *Topology) Service(namespace, name string) (corev1.Service, bool) {
	i := slices.IndexFunc(t.Services, func(s corev1.Service) bool { return s.Namespace == namespace && s.Name == name })
	if i < 0 {
		return corev1.Service{}, false
	}
	return *t.Services[i].DeepCopy(), true
}

func (t *Topology) podIndex(key string) int {
	return slices.IndexFunc(t.Pods, func(p Pod) bool { return p.Key() == key })
}
