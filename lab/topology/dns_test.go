package topology

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestClusterDNS: a lab with a control plane gets kubeadm's cluster DNS (two
// CoreDNS pods on the first two nodes, the kube-dns Service at the tenth address
// of the service range) without moving any pod or Service of its file; dns: false
// and a lab without a control plane have none; clusterDomain and clusterDNS set
// the zone and the address.
func TestClusterDNS(t *testing.T) {
	plain, err := Embedded("httpd")
	if err != nil {
		t.Fatal(err)
	}
	if plain.DNS != nil {
		t.Fatalf("a lab without a control plane has cluster DNS %+v", plain.DNS)
	}
	top := plain.Clone()
	if err := top.EnableControlPlane(); err != nil {
		t.Fatal(err)
	}
	if top.DNS == nil || top.DNS.Domain != "cluster.local" || top.DNS.ServiceIP != netip.MustParseAddr("10.96.0.10") {
		t.Fatalf("DNS = %+v, want cluster.local at 10.96.0.10", top.DNS)
	}
	type placed struct{ key, node, ip, component string }
	var got []placed
	for _, p := range top.Pods {
		got = append(got, placed{p.Key(), p.Node, p.IP.String(), p.Component})
	}
	want := []placed{
		{"default/httpservice-deployment-1", "node1", "10.244.1.27", ""},
		{"default/httpservice-deployment-2", "node1", "10.244.1.28", ""},
		{"default/httpservice-deployment-3", "node2", "10.244.2.21", ""},
		{"default/busybox", "node2", "10.244.2.2", ""},
		{"kube-system/coredns-1", "master", "10.244.0.2", ComponentCoreDNS},
		{"kube-system/coredns-2", "node1", "10.244.1.2", ComponentCoreDNS},
	}
	if !slices.Equal(got, want) {
		t.Errorf("pods:\n got %v\nwant %v", got, want)
	}
	svc, ok := top.Service(DNSNamespace, DNSServiceName)
	if !ok {
		t.Fatal("no kube-dns Service")
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+" "+p.TargetPort.String()+"/"+string(p.Protocol))
	}
	if svc.Spec.ClusterIP != "10.96.0.10" || !slices.Equal(ports, []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}) ||
		svc.Spec.Selector[DNSAppLabel] != DNSServiceName {
		t.Errorf("kube-dns: %s %v %v, want kubeadm's", svc.Spec.ClusterIP, ports, svc.Spec.Selector)
	}
	if !slices.ContainsFunc(top.DeclaredServices, func(s corev1.Service) bool { return IsDNSService(s.Namespace, s.Name) }) {
		t.Error("kube-dns is not among the Services a control plane creates")
	}
	if got := top.DNS.Searches("default"); !slices.Equal(got, []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}) {
		t.Errorf("Searches(default) = %v", got)
	}

	off := parseOK(t, `
name: off
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
controlPlane: true
dns: false
nodes: [{name: n, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}]
`)
	if off.DNS != nil || len(off.Pods) != 0 || len(off.Services) != 0 {
		t.Errorf("dns: false: DNS %+v, pods %v, Services %d", off.DNS, off.Pods, len(off.Services))
	}
	set := parseOK(t, `
name: set
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
controlPlane: true
clusterDomain: lab.example
clusterDNS: 10.96.0.53
nodes: [{name: n, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}]
pods: [{name: coredns-1, node: n}]
`)
	if set.DNS.Domain != "lab.example" || set.DNS.ServiceIP != netip.MustParseAddr("10.96.0.53") {
		t.Errorf("DNS = %+v, want lab.example at 10.96.0.53", set.DNS)
	}
	// One node holds both replicas; a pod of the file keeps its name.
	var names []string
	for _, p := range set.Pods {
		if p.Component == ComponentCoreDNS {
			names = append(names, p.Name+"@"+p.Node)
		}
	}
	if !slices.Equal(names, []string{"coredns-2@n", "coredns-3@n"}) {
		t.Errorf("CoreDNS pods %v, want coredns-2 and coredns-3 on n", names)
	}
}

// TestClusterDNSMutations: changes made the way a running lab makes them keep the
// CoreDNS pods where they are and the kube-dns Service the lab's own, however
// other pods come and go and whatever Services the API server lists.
func TestClusterDNSMutations(t *testing.T) {
	top, err := Embedded("httpd")
	if err != nil {
		t.Fatal(err)
	}
	if err := top.EnableControlPlane(); err != nil {
		t.Fatal(err)
	}
	coredns := func(t *Topology) []string {
		var out []string
		for _, p := range t.Pods {
			if p.Component == ComponentCoreDNS {
				out = append(out, p.Key()+" "+p.IP.String())
			}
		}
		return out
	}
	before := coredns(top)
	// A pod whose address comes before a CoreDNS pod's goes, another comes.
	if _, err := top.RemovePod("default/busybox"); err != nil {
		t.Fatal(err)
	}
	if _, err := top.AddPod(PodSpec{Name: "extra", Node: "master"}); err != nil {
		t.Fatal(err)
	}
	if err := top.UpdatePod("kube-system/coredns-1", func(p *Pod) { p.Ready = false }); err != nil {
		t.Fatal(err)
	}
	if got := coredns(top); !slices.Equal(got, before) {
		t.Errorf("CoreDNS pods moved: %v, were %v", got, before)
	}
	if p, _ := top.Pod("kube-system/coredns-1"); p.Ready || p.Component != ComponentCoreDNS {
		t.Errorf("coredns-1 after its readiness changed: ready %t, component %q", p.Ready, p.Component)
	}
	// The API server lists kube-dns with the others: it stays the lab's.
	api := slices.Clone(top.Services)
	if err := top.SetServices(api); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range top.Services {
		if IsDNSService(s.Namespace, s.Name) {
			n++
		}
	}
	if n != 1 || len(top.Services) != 2 {
		t.Errorf("after SetServices: %d kube-dns Services among %d, want 1 among 2", n, len(top.Services))
	}
}

func parseOK(t *testing.T, text string) *Topology {
	t.Helper()
	top, err := Parse(t.Name()+".yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// TestClusterDNSMovesWhenTaken: a lab that gains a control plane its file did not
// ask for, with a Service of its own at the tenth address, gets its cluster DNS
// at the first free address after it; a file that asks for a control plane is
// held to its own clusterDNS (the tenth address when unset) and told the clash.
func TestClusterDNSMovesWhenTaken(t *testing.T) {
	text := `name: taken
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
services:
  - metadata: {name: a}
    spec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}
  - metadata: {name: b}
    spec: {clusterIP: 10.96.0.11, ports: [{port: 80}]}
`
	top := parseOK(t, text)
	if err := top.EnableControlPlane(); err != nil {
		t.Fatal(err)
	}
	if top.DNS == nil || top.DNS.ServiceIP != netip.MustParseAddr("10.96.0.12") {
		t.Fatalf("DNS = %+v, want it at 10.96.0.12, the first address from the tenth no Service holds", top.DNS)
	}
	if _, err := Parse("taken.yaml", []byte(text+"controlPlane: true\n")); err == nil {
		t.Fatal("a file asking for a control plane with a Service at the cluster DNS's address parsed")
	}
}
