package topology

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const dualStack = `
name: dual
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
serviceCIDR: 10.96.0.0/12,fd00:10:96::/108
nodes:
  - name: node-1
    ips: [192.168.1.10, "fd00:1::10"]
    podCIDRs: [10.244.1.0/24, "fd00:10:244:1::/64"]
  - name: node-2
    ip: 192.168.1.11
    ips: [192.168.1.11, "fd00:1::11"]
    podCIDR: 10.244.2.0/24
    podCIDRs: [10.244.2.0/24, "fd00:10:244:2::/64"]
pods:
  - {name: a, node: node-1}
  - {name: b, node: node-1, ips: [10.244.1.2, "fd00:10:244:1::2"]}
  - {name: c, node: node-2, ip: 10.244.2.9}
clients:
  - {name: v4, ip: 192.168.1.100}
  - {name: both, ips: [192.168.1.101, "fd00:1::101"]}
services:
  - metadata: {name: web}
    spec:
      ipFamilyPolicy: SingleStack
      ipFamilies: [IPv4]
      ports: [{port: 80}]
`

func TestDualStackParse(t *testing.T) {
	top := mustParse(t, dualStack)
	want := map[string]netip.Prefix{
		"ClusterCIDR6": netip.MustParsePrefix("fd00:10:244::/56"),
		"ServiceCIDR6": netip.MustParsePrefix("fd00:10:96::/108"),
		// Derived as the IPv4 node network is: the smallest prefix, at most a
		// /64, holding every IPv6 node and client address.
		"NodeCIDR6": netip.MustParsePrefix("fd00:1::/64"),
	}
	got := map[string]netip.Prefix{"ClusterCIDR6": top.ClusterCIDR6, "ServiceCIDR6": top.ServiceCIDR6, "NodeCIDR6": top.NodeCIDR6}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %s, want %s", k, got[k], w)
		}
	}
	if !top.DualStack() || top.ClusterCIDR.String() != "10.244.0.0/16" || top.NodeCIDR.String() != "192.168.1.0/24" {
		t.Errorf("IPv4 half: cluster %s, node network %s, dual-stack %v", top.ClusterCIDR, top.NodeCIDR, top.DualStack())
	}
	n2, _ := top.Node("node-2")
	if n2.IP.String() != "192.168.1.11" || n2.IP6.String() != "fd00:1::11" || n2.PodCIDR6.String() != "fd00:10:244:2::/64" || n2.Gateway6().String() != "fd00:10:244:2::1" {
		t.Errorf("node-2 = %+v, gateway6 %s", n2, n2.Gateway6())
	}
	// A pod gets one address a family of its node, allocated where the file
	// leaves it out, after the gateway and around the addresses given.
	pods := map[string][2]string{
		"a": {"10.244.1.3", "fd00:10:244:1::3"},
		"b": {"10.244.1.2", "fd00:10:244:1::2"},
		"c": {"10.244.2.9", "fd00:10:244:2::2"},
	}
	for _, p := range top.Pods {
		if w := pods[p.Name]; p.IP.String() != w[0] || p.IP6.String() != w[1] {
			t.Errorf("pod %s: %s, %s; want %s, %s", p.Name, p.IP, p.IP6, w[0], w[1])
		}
	}
	if c := top.Clients; c[0].IP6.IsValid() || c[1].IP.String() != "192.168.1.101" || c[1].IP6.String() != "fd00:1::101" {
		t.Errorf("clients = %+v", c)
	}
	svc := mustService(t, top, "web")
	if !slices.Equal(svc.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) || len(svc.Spec.ClusterIPs) != 1 {
		t.Errorf("web: families %v, clusterIPs %v", svc.Spec.IPFamilies, svc.Spec.ClusterIPs)
	}
}

// TestDualStackMutations: a change to a running dual-stack lab writes the
// topology back with its IPv6 half, so nothing of it is lost, and a pod added
// gets an IPv6 address too.
func TestDualStackMutations(t *testing.T) {
	top := mustParse(t, dualStack)
	p, err := top.AddPod(PodSpec{Name: "d", Node: "node-2"})
	if err != nil {
		t.Fatal(err)
	}
	if p.IP.String() != "10.244.2.2" || p.IP6.String() != "fd00:10:244:2::3" {
		t.Errorf("added pod: %s, %s", p.IP, p.IP6)
	}
	a, _ := top.Pod("default/a")
	if a.IP6.String() != "fd00:10:244:1::3" || top.ServiceCIDR6.String() != "fd00:10:96::/108" || top.NodeCIDR6.String() != "fd00:1::/64" {
		t.Errorf("after a change: pod a %s, serviceCIDR6 %s, nodeCIDR6 %s", a.IP6, top.ServiceCIDR6, top.NodeCIDR6)
	}
	if err := top.UpdatePod("default/a", func(p *Pod) { p.IP6 = netip.MustParseAddr("fd00:10:244:1::99") }); err == nil {
		t.Error("changing a pod's IPv6 address was accepted")
	}
	if err := top.ApplyService(corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "v6"},
		Spec:       corev1.ServiceSpec{IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack), Ports: []corev1.ServicePort{{Port: 80}}},
	}); err == nil {
		t.Error("a PreferDualStack Service in a dual-stack lab was accepted; the proxiers would program its IPv4 half only")
	}
}

// TestIPv4OnlyUnchanged: an IPv4 file keeps every IPv6 field empty, and
// PreferDualStack stays the one family it gives in an IPv4-only cluster.
func TestIPv4OnlyUnchanged(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - {name: a, node: node-1}
services:
  - metadata: {name: p}
    spec:
      ipFamilyPolicy: PreferDualStack
      ports: [{port: 80}]
`)
	if top.DualStack() || top.NodeCIDR6.IsValid() || top.ServiceCIDR6.IsValid() || top.Pods[0].IP6.IsValid() || top.Nodes[0].Gateway6().IsValid() {
		t.Errorf("IPv6 in an IPv4-only lab: %+v", top)
	}
	f := top.file()
	if f.ClusterCIDR != "10.244.0.0/16" || f.Nodes[0].IPs != nil || f.Nodes[0].PodCIDRs != nil || f.Pods[0].IPs != nil {
		t.Errorf("written back: %+v", f)
	}
}
