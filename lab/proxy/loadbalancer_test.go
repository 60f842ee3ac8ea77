package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestFromObjectsExternal reads external and load balancer addresses as
// kube-proxy does: VIP-mode ingress IPs only, source ranges trimmed, a range of
// length 0 allowing everything, and the external policy of a ClusterIP Service
// with external IPs.
func TestFromObjectsExternal(t *testing.T) {
	lb := corev1.Service{}
	lb.Namespace, lb.Name = "default", "lb"
	lb.Spec = corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1",
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 32000,
		LoadBalancerSourceRanges: []string{" 192.168.1.0/24", "fd00::/64", "10.0.0.0/8 "},
		Ports:                    []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
		{IP: "192.168.1.240"},
		{IP: "192.168.1.241", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)},
		{IP: "192.168.1.242", IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)},
		{Hostname: "lb.example.com"},
	}
	open := *lb.DeepCopy()
	open.Name = "open"
	open.Spec.LoadBalancerSourceRanges = []string{"192.168.1.0/24", "0.0.0.0/0"}
	ext := corev1.Service{}
	ext.Namespace, ext.Name = "default", "ext"
	ext.Spec = corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.2", ExternalIPs: []string{"203.0.113.10"},
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
	}
	ports := FromObjects([]corev1.Service{lb, open, ext}, nil)
	if len(ports) != 3 {
		t.Fatalf("%d ports", len(ports))
	}
	got := ports[0]
	if want := []netip.Addr{netip.MustParseAddr("192.168.1.240"), netip.MustParseAddr("192.168.1.241")}; !slices.Equal(got.LoadBalancerIPs, want) {
		t.Errorf("load balancer IPs %v, want %v (no Proxy ingress)", got.LoadBalancerIPs, want)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.0.0.0/8")}; !slices.Equal(got.SourceRanges, want) {
		t.Errorf("source ranges %v, want %v", got.SourceRanges, want)
	}
	if !got.ExternalLocal || got.HealthCheckNodePort != 32000 || !got.UsesFirewall() || !got.ExternallyAccessible() {
		t.Errorf("lb: %+v", got)
	}
	if open := ports[1]; open.SourceRanges != nil || open.UsesFirewall() {
		t.Errorf("0.0.0.0/0 among the ranges allows everything: %v", open.SourceRanges)
	}
	if e := ports[2]; !e.ExternalLocal || e.HealthCheckNodePort != 0 || e.NodePort != 0 || !e.ExternallyAccessible() ||
		!slices.Equal(e.ExternalIPs, []netip.Addr{netip.MustParseAddr("203.0.113.10")}) {
		t.Errorf("ext: %+v", e)
	}
}

// TestExpectedExternalFrontends: external and load balancer IPs are frontends of
// the external policy; a load balancer IP admits FirewallSources only, here
// with the node inside a range (so the IP itself too); a drop meets every
// source alike.
func TestExpectedExternalFrontends(t *testing.T) {
	sp := ServicePort{Name: ServicePortName{Namespace: "default", Name: "lb"}, Protocol: corev1.ProtocolTCP,
		ClusterIP: netip.MustParseAddr("10.96.0.1"), Port: 80, ExternalLocal: true,
		ExternalIPs:     []netip.Addr{netip.MustParseAddr("203.0.113.10")},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("192.168.1.240")},
		SourceRanges:    []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.0.0.0/8")},
		Endpoints:       []Endpoint{endpoint("10.244.1.10:8080", "node-1", true, false)},
	}
	lbIP := ClusterIPFrontend(corev1.ProtocolTCP, netip.MustParseAddr("192.168.1.240"), 80)
	extIP := ClusterIPFrontend(corev1.ProtocolTCP, netip.MustParseAddr("203.0.113.10"), 80)
	local := Forwarded(backends("10.244.1.10:8080"), 0)
	node1 := Node{Name: "node-1", IP: netip.MustParseAddr("192.168.1.10")}
	node2 := Node{Name: "node-2", IP: netip.MustParseAddr("192.168.1.11")}
	for _, tc := range []struct {
		node   Node
		m      Model
		lb, ex string
	}{
		{node1, ModelIPTables, "forward to 10.244.1.10:8080 from 10.0.0.0/8 192.168.1.0/24 192.168.1.240/32 only", "forward to 10.244.1.10:8080"},
		{node2, ModelIPTables, "drop", "drop"},
		// IPVS falls back to every endpoint on a node without a local one.
		{node2, ModelIPVS, "forward to 10.244.1.10:8080 from 10.0.0.0/8 192.168.1.0/24 192.168.1.240/32 only", "forward to 10.244.1.10:8080"},
	} {
		m := ExpectedServiceMap(StateOf([]ServicePort{sp}), tc.node, tc.m)
		if got := m[lbIP].String(); got != tc.lb {
			t.Errorf("%s, %v: load balancer IP: %s, want %s", tc.node.Name, tc.m, got, tc.lb)
		}
		if got := m[extIP].String(); got != tc.ex {
			t.Errorf("%s, %v: external IP: %s, want %s", tc.node.Name, tc.m, got, tc.ex)
		}
	}
	if d := DiffServiceMaps(ServiceMap{lbIP: local.FirewalledBy(sp.SourceRanges)}, ServiceMap{lbIP: local}); len(d) != 1 {
		t.Errorf("a forward without its ranges does not differ: %v", d)
	}
}

// TestFirewallSources holds FirewallSources to kube-proxy 1.37's rules for the
// cases its proxier tests cover: a Service with two ingress IPs and ranges of
// which one holds the node's address admits both IPs as sources in iptables
// and nftables mode (one firewall chain per port lists them all) and the IP
// itself only in IPVS mode (one KUBE-LOAD-BALANCER-SOURCE-IP entry per IP);
// with the node outside every range, the ranges alone; without endpoints the
// iptables mode writes no firewall (its REJECT meets every source) while the
// others still drop outside sources; without ranges, or for an address that
// is not one of the port's ingress IPs, every source.
func TestFirewallSources(t *testing.T) {
	a, b := netip.MustParseAddr("1.2.3.4"), netip.MustParseAddr("5.6.7.8")
	sp := ServicePort{Name: ServicePortName{Namespace: "default", Name: "fw"}, Protocol: corev1.ProtocolTCP,
		ClusterIP: netip.MustParseAddr("10.96.0.50"), Port: 80,
		LoadBalancerIPs: []netip.Addr{a, b},
		SourceRanges:    []netip.Prefix{netip.MustParsePrefix("192.168.0.64/26"), netip.MustParsePrefix("192.168.0.0/28")},
		Endpoints:       []Endpoint{endpoint("10.244.2.5:80", "node-2", true, false)},
	}
	inside, outside := netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("192.168.0.40")
	noEndpoints := sp
	noEndpoints.Endpoints = nil
	open := sp
	open.SourceRanges = nil
	for _, tc := range []struct {
		name   string
		sp     ServicePort
		lb     netip.Addr
		nodeIP netip.Addr
		m      Model
		want   string
	}{
		{"iptables, node in a range", sp, a, inside, ModelIPTables, "[1.2.3.4/32 5.6.7.8/32 192.168.0.0/28 192.168.0.64/26]"},
		{"iptables, node in a range, other IP", sp, b, inside, ModelIPTables, "[1.2.3.4/32 5.6.7.8/32 192.168.0.0/28 192.168.0.64/26]"},
		{"nftables, node in a range", sp, b, inside, ModelNFTables, "[1.2.3.4/32 5.6.7.8/32 192.168.0.0/28 192.168.0.64/26]"},
		{"ipvs, node in a range", sp, b, inside, ModelIPVS, "[5.6.7.8/32 192.168.0.0/28 192.168.0.64/26]"},
		{"iptables, node outside", sp, a, outside, ModelIPTables, "[192.168.0.0/28 192.168.0.64/26]"},
		{"nftables, node outside", sp, a, outside, ModelNFTables, "[192.168.0.0/28 192.168.0.64/26]"},
		{"ipvs, node outside", sp, a, outside, ModelIPVS, "[192.168.0.0/28 192.168.0.64/26]"},
		{"iptables, no endpoints", noEndpoints, a, inside, ModelIPTables, "[]"},
		{"nftables, no endpoints", noEndpoints, a, inside, ModelNFTables, "[1.2.3.4/32 5.6.7.8/32 192.168.0.0/28 192.168.0.64/26]"},
		{"ipvs, no endpoints", noEndpoints, a, outside, ModelIPVS, "[192.168.0.0/28 192.168.0.64/26]"},
		{"no ranges", open, a, inside, ModelNFTables, "[]"},
		{"not an ingress IP", sp, netip.MustParseAddr("9.9.9.9"), inside, ModelIPTables, "[]"},
	} {
		if got := fmt.Sprint(tc.sp.FirewallSources(tc.lb, tc.nodeIP, tc.m)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
