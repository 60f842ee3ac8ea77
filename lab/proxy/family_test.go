package proxy

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
)

// TestLocalDetectorFamily: each family's proxier matches pod traffic by the
// clusterCIDR or podCIDR of its own family (kube-proxy's getLocalDetectors),
// and has no source-range detector when there is none of its family.
func TestLocalDetectorFamily(t *testing.T) {
	n6 := Node{Name: "node-1", IP: netip.MustParseAddr("fd00:1::10"), PodCIDR: netip.MustParsePrefix("fd00:10:244:1::/64")}
	n4 := Node{Name: "node-1", IP: netip.MustParseAddr("192.168.1.10"), PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	cfg := func(f corev1.IPFamily, mode, cidr string) Config {
		return Config{Family: f, KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: cidr, DetectLocalMode: kubeproxyconfig.LocalMode(mode)}}
	}
	for _, tc := range []struct {
		c    Config
		n    Node
		want []string
	}{
		{cfg(corev1.IPv6Protocol, "", "10.244.0.0/16,fd00:10:244::/56"), n6, []string{"-s", "fd00:10:244::/56"}},
		{cfg(corev1.IPv6Protocol, "", "fd00:10:244::1/56 , 10.244.0.0/16"), n6, []string{"-s", "fd00:10:244::/56"}},
		{cfg(corev1.IPv4Protocol, "", "10.244.0.0/16,fd00:10:244::/56"), n4, []string{"-s", "10.244.0.0/16"}},
		{cfg("", "", "10.244.0.0/16"), n4, []string{"-s", "10.244.0.0/16"}},
		{cfg(corev1.IPv6Protocol, "", "10.244.0.0/16"), n6, nil},
		{cfg(corev1.IPv6Protocol, LocalModeNodeCIDR, ""), n6, []string{"-s", "fd00:10:244:1::/64"}},
		{cfg(corev1.IPv6Protocol, LocalModeNodeCIDR, ""), n4, nil},
	} {
		if got := tc.c.LocalDetector(tc.n).IfLocal(); !slices.Equal(got, tc.want) {
			t.Errorf("%s %q %q on %s: IfLocal = %q, want %q", tc.c.Family, tc.c.KubeProxy.DetectLocalMode, tc.c.KubeProxy.ClusterCIDR, tc.n.PodCIDR, got, tc.want)
		}
	}
	if err := (Config{Family: "IPv5"}).Validate(SectionIPTables); err == nil {
		t.Error("family IPv5 validated")
	}
}

// TestClusterIPOfFamily reads a Service's ClusterIP per family as kube-proxy's
// GetClusterIPByFamily does.
func TestClusterIPOfFamily(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	svc := func(ip string, ips []string, fams ...corev1.IPFamily) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: ips, IPFamilies: fams}}
	}
	for _, tc := range []struct {
		s      *corev1.Service
		f      corev1.IPFamily
		want   string
		wantOK bool
	}{
		{svc("fd00:10:96::1", []string{"fd00:10:96::1", "10.96.0.1"}, v6, v4), v6, "fd00:10:96::1", true},
		{svc("fd00:10:96::1", []string{"fd00:10:96::1", "10.96.0.1"}, v6, v4), v4, "10.96.0.1", true},
		{svc("10.96.0.1", []string{"10.96.0.1"}, v4), v6, "", false},
		{svc("fd00:10:96::1", nil), v6, "fd00:10:96::1", true},
		{svc("fd00:10:96::1", nil), v4, "", false},
		{svc("10.96.0.1", nil, v4), v4, "10.96.0.1", true},
		// RequireDualStack whose second address is not allocated (yet).
		{svc("10.96.0.1", []string{"10.96.0.1"}, v4, v6), v6, "", false},
	} {
		a, ok := clusterIPOf(tc.s, tc.f)
		if ok != tc.wantOK || (ok && a.String() != tc.want) {
			t.Errorf("%v %v for %s: %v %v, want %s %v", tc.s.Spec.ClusterIPs, tc.s.Spec.IPFamilies, tc.f, a, ok, tc.want, tc.wantOK)
		}
	}
	for _, tc := range []struct {
		t     discoveryv1.AddressType
		f     corev1.IPFamily
		reads bool
	}{
		{discoveryv1.AddressTypeIPv6, v6, true}, {discoveryv1.AddressTypeIPv6, v4, false},
		{discoveryv1.AddressTypeIPv4, v6, false}, {discoveryv1.AddressTypeFQDN, v6, false}, {discoveryv1.AddressTypeFQDN, v4, false},
		{"", v4, true}, {"", v6, false},
	} {
		if got := sliceOfFamily(&discoveryv1.EndpointSlice{AddressType: tc.t}, tc.f); got != tc.reads {
			t.Errorf("slice of type %q read by %s: %v", tc.t, tc.f, got)
		}
	}
}
