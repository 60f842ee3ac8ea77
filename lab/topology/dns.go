package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// The cluster DNS of a lab with a control plane is what kubeadm installs: CoreDNS
// pods in kube-system labelled k8s-app: kube-dns, behind the kube-dns Service at
// the tenth address of the service range. The pods are pods of the lab (their own
// namespaces, reached through the dataplane like any pod); the topology holds them
// among its Pods, marked with the component they run, so that everything that
// reads the topology sees them and only what serves pods tells them apart.
//
// A file may declare the CoreDNS pods itself (namespace kube-system, label
// k8s-app: kube-dns); when it declares none, two replicas are added on the first
// two nodes, with addresses allocated after every pod of the file. A topology
// written back (a mutation) declares them with their addresses, so they keep
// them whatever pods come and go. The Service is always the lab's own: it is
// made from clusterDNS, never declared, and never written back, as the API
// server keeps default/kubernetes.

// DefaultClusterDomain is the DNS zone of a lab's Services, as kubeadm's default.
const DefaultClusterDomain = "cluster.local"

// The cluster DNS's names, as kubeadm makes them.
const (
	DNSNamespace   = "kube-system"
	DNSServiceName = "kube-dns"
	// DNSAppLabel selects the CoreDNS pods (the Deployment's and the Service's
	// selector, k8s-app: kube-dns).
	DNSAppLabel = "k8s-app"
	// ComponentCoreDNS is Pod.Component of a CoreDNS pod.
	ComponentCoreDNS = "coredns"
	// dnsReplicas is kubeadm's replica count of the CoreDNS Deployment.
	dnsReplicas = 2
	// dnsServiceIndex places the Service's default address: kubeadm takes the
	// tenth address of the service range (10.96.0.10 in 10.96.0.0/12).
	dnsServiceIndex = 10
)

// DNS is a lab's cluster DNS.
type DNS struct {
	// Domain is the cluster domain ("cluster.local").
	Domain string
	// ServiceIP is the kube-dns Service's ClusterIP, every pod's nameserver.
	ServiceIP netip.Addr
}

// dnsFields are the file's cluster DNS settings as written.
type dnsFields struct {
	enabled    *bool
	domain, ip string
}

// IsDNSService tells whether namespace/name is the cluster DNS's Service.
func IsDNSService(namespace, name string) bool {
	return namespace == DNSNamespace && name == DNSServiceName
}

// isCoreDNSPod tells whether a pod is declared as a CoreDNS replica: in
// kube-system, labelled k8s-app: kube-dns, as the Deployment's pods are.
func isCoreDNSPod(namespace string, labels map[string]string) bool {
	return namespace == DNSNamespace && labels[DNSAppLabel] == DNSServiceName
}

// CoreDNSPorts are the CoreDNS container's ports in kubeadm's Deployment.
func CoreDNSPorts() []corev1.ContainerPort {
	return []corev1.ContainerPort{
		{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
		{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
	}
}

// dnsSettings checks the file's cluster DNS fields and, in a lab with a control
// plane and DNS on, settles the domain and claims the Service's address. It runs
// before the Services, so that a Service asking for that address is the one told.
func (r *resolver) dnsSettings(f *File) {
	r.t.dnsFile = dnsFields{enabled: f.DNS, domain: f.ClusterDomain, ip: f.ClusterDNS}
	off := f.DNS != nil && !*f.DNS
	domain := f.ClusterDomain
	if domain != "" {
		if msgs := validation.IsDNS1123Subdomain(domain); len(msgs) > 0 {
			r.errorf("clusterDomain", "%q: %s", domain, msgs[0])
			domain = ""
		} else if off {
			r.errorf("clusterDomain", "set, but the cluster DNS is off (dns: false)")
		}
	}
	if domain == "" {
		domain = DefaultClusterDomain
	}
	var ip netip.Addr
	if f.ClusterDNS != "" {
		a, ok := r.address("clusterDNS", f.ClusterDNS)
		switch {
		case !ok:
		case off:
			r.errorf("clusterDNS", "set, but the cluster DNS is off (dns: false)")
		case r.t.ServiceCIDR.IsValid() && !r.t.ServiceCIDR.Contains(a):
			r.errorf("clusterDNS", "%s is outside serviceCIDR %s", a, r.t.ServiceCIDR)
		case r.t.ServiceCIDR.IsValid() && a == r.t.ServiceCIDR.Addr().Next():
			r.errorf("clusterDNS", "%s is the kubernetes Service's address (the first host of serviceCIDR %s)", a, r.t.ServiceCIDR)
		case r.t.ServiceCIDR.IsValid() && reservedIn(a, r.t.ServiceCIDR) != "":
			r.errorf("clusterDNS", "%s is %s of serviceCIDR %s", a, reservedIn(a, r.t.ServiceCIDR), r.t.ServiceCIDR)
		default:
			ip = a
		}
	}
	if !f.ControlPlane || off || !r.t.ServiceCIDR.IsValid() {
		return
	}
	if f.ClusterDNS == "" {
		ip = nthAddr(r.t.ServiceCIDR, dnsServiceIndex)
		if !ip.IsValid() || reservedIn(ip, r.t.ServiceCIDR) != "" {
			r.errorf("serviceCIDR", "%s has no tenth address for the cluster DNS (kubeadm's choice): set clusterDNS, or dns: false", r.t.ServiceCIDR)
			return
		}
	}
	if !ip.IsValid() {
		return // said above
	}
	path := "clusterDNS"
	if f.ClusterDNS == "" {
		path = "controlPlane"
	}
	if r.claim(path, ip, "Service "+DNSNamespace+"/"+DNSServiceName+" (the cluster DNS; clusterDNS moves it)") {
		r.t.DNS = &DNS{Domain: domain, ServiceIP: ip}
	}
}

// nthAddr is the address n after p's network address, invalid past p's end.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	if !p.Contains(a) {
		return netip.Addr{}
	}
	return a
}

// dnsService refuses a declared kube-system/kube-dns in a lab whose cluster DNS
// makes its own.
func (r *resolver) dnsService(in []corev1.Service) {
	if r.t.DNS == nil {
		return
	}
	for i := range in {
		ns := in[i].Namespace
		if ns == "" {
			ns = defaultNamespace
		}
		if IsDNSService(ns, in[i].Name) && !r.replaced(&in[i]) {
			r.errorf(child(index("services", i), "metadata.name"),
				"%s/%s is the cluster DNS's Service, which the lab makes itself (clusterDNS sets its address; dns: false leaves the name to you)", ns, in[i].Name)
		}
	}
}

// coreDNS marks the declared CoreDNS pods, or adds kubeadm's two replicas when
// the file declares none, and adds the kube-dns Service. It runs after the pods
// and the Services of the file, so that their addresses do not depend on the
// cluster DNS.
func (r *resolver) coreDNS() {
	d := r.t.DNS
	if d == nil {
		return
	}
	declared := false
	for i := range r.t.Pods {
		p := &r.t.Pods[i]
		if !isCoreDNSPod(p.Namespace, p.Labels) {
			continue
		}
		declared = true
		p.Component = ComponentCoreDNS
		switch {
		case len(p.Ports) == 0:
			p.Ports = CoreDNSPorts()
		case !slices.Equal(p.Ports, CoreDNSPorts()):
			r.errorf(child(index("pods", i), "ports"), "a CoreDNS pod (namespace %s, label %s: %s) has the ports of kubeadm's CoreDNS container (%s): leave ports out",
				DNSNamespace, DNSAppLabel, DNSServiceName, describePorts(CoreDNSPorts()))
		}
	}
	if !declared {
		r.addCoreDNSPods()
	}
	svc := dnsServiceOf(d)
	r.t.Services = append(r.t.Services, svc)
	r.t.DeclaredServices = append(r.t.DeclaredServices, *svc.DeepCopy())
}

// addCoreDNSPods adds kubeadm's replicas, one a node on the first nodes (its
// Deployment prefers to spread them), named coredns-1, coredns-2 unless a member
// of the lab has the name already.
func (r *resolver) addCoreDNSPods() {
	var nodes []Node
	for _, n := range r.t.Nodes {
		if _, ok := r.nodes[n.Name]; ok {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return // the nodes are in error, and said so
	}
	next := 1
	for i := range dnsReplicas {
		name := ""
		for ; name == ""; next++ {
			if _, taken := r.names[fmt.Sprintf("coredns-%d", next)]; !taken {
				name = fmt.Sprintf("coredns-%d", next)
			}
		}
		r.names[name] = "the cluster DNS"
		n := nodes[i%len(nodes)]
		p := Pod{
			Name: name, Namespace: DNSNamespace, Node: n.Name,
			Labels: map[string]string{DNSAppLabel: DNSServiceName},
			Ready:  true, Ports: CoreDNSPorts(), Component: ComponentCoreDNS,
		}
		ip, ok := r.nextFree(n.PodCIDR, n.Gateway().Next())
		if !ok {
			r.errorf("controlPlane", "node %s's podCIDR %s has no free address left for the cluster DNS's pod %s/%s (dns: false turns the cluster DNS off)", n.Name, n.PodCIDR, DNSNamespace, name)
			continue
		}
		r.claim("controlPlane", ip, "pod "+p.Key())
		p.IP = ip
		r.t.Pods = append(r.t.Pods, p)
	}
}

// dnsServiceOf is kubeadm's kube-dns Service at d's address, with the defaults
// the API server fills in.
func dnsServiceOf(d *DNS) corev1.Service {
	ip := d.ServiceIP.String()
	port := func(name string, n int32, proto corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: n, Protocol: proto, TargetPort: intstr.FromInt32(n)}
	}
	var svc corev1.Service
	svc.APIVersion, svc.Kind = "v1", "Service"
	svc.Name, svc.Namespace = DNSServiceName, DNSNamespace
	svc.Labels = map[string]string{DNSAppLabel: DNSServiceName, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}
	svc.Annotations = map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}
	svc.Spec = corev1.ServiceSpec{
		Type:      corev1.ServiceTypeClusterIP,
		ClusterIP: ip, ClusterIPs: []string{ip},
		IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
		IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack),
		SessionAffinity:       corev1.ServiceAffinityNone,
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		Selector:              map[string]string{DNSAppLabel: DNSServiceName},
		Ports: []corev1.ServicePort{
			port("dns", 53, corev1.ProtocolUDP),
			port("dns-tcp", 53, corev1.ProtocolTCP),
			port("metrics", 9153, corev1.ProtocolTCP),
		},
	}
	return svc
}

func describePorts(ports []corev1.ContainerPort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = fmt.Sprintf("%s %d/%s", p.Name, p.ContainerPort, p.Protocol)
	}
	return strings.Join(parts, ", ")
}

// Searches are the search domains kubelet gives a pod in namespace ns with the
// ClusterFirst DNS policy, before the host's own.
func (d *DNS) Searches(ns string) []string {
	return []string{ns + ".svc." + d.Domain, "svc." + d.Domain, d.Domain}
}

// ServiceName is the fully qualified name of a Service in the cluster domain,
// with the final dot.
func (d *DNS) ServiceName(namespace, name string) string {
	return name + "." + namespace + ".svc." + d.Domain + "."
}
