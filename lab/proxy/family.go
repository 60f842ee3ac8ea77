package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// kube-proxy runs one proxier per IP family (NewDualStackProxier of each mode
// builds an IPv4 and an IPv6 one behind pkg/proxy/metaproxier, which hands
// each EndpointSlice to the proxier of its addressType). Each proxier sees the
// Services through the eyes of its family: the ClusterIP of that family, the
// external IPs, load balancer IPs and source ranges of that family, and the
// EndpointSlices of that address type only. svclab's proxiers do the same: a
// Config's Family picks the family, a State holds one family's ports
// (NewStateFor), and a dual-stack node runs two proxiers.

// IPFamily is the family c's proxier programs: c.Family, IPv4 when unset.
func (c Config) IPFamily() corev1.IPFamily {
	if c.Family == "" {
		return corev1.IPv4Protocol
	}
	return c.Family
}

// checkFamily refuses a family that is neither IPv4 nor IPv6.
func checkFamily(f corev1.IPFamily) error {
	switch f {
	case "", corev1.IPv4Protocol, corev1.IPv6Protocol:
		return nil
	}
	return fmt.Errorf("IP family %q: want %s or %s", f, corev1.IPv4Protocol, corev1.IPv6Protocol)
}

// FamilyOf is the family of a, "" for an invalid address. An IPv4-mapped IPv6
// address (::ffff:10.0.0.1) is neither family here: kube-proxy's parser would
// read it as IPv4, and the API server refuses it in the fields kube-proxy reads.
func FamilyOf(a netip.Addr) corev1.IPFamily {
	switch {
	case a.Is4():
		return corev1.IPv4Protocol
	case a.Is6() && !a.Is4In6():
		return corev1.IPv6Protocol
	}
	return ""
}

// ClusterCIDRFor is the first range of family f in kube-proxy's clusterCIDR
// (a comma-separated list, one range per family in a dual-stack cluster),
// masked: the range kube-proxy's ClusterCIDR local-traffic detector of that
// family matches (getLocalDetectors in cmd/kube-proxy/app/server_linux.go
// takes the first CIDR of each family, proxyutil.MapCIDRsByIPFamily). Invalid
// when there is none: that family's proxier then has no detector.
func (c Config) ClusterCIDRFor(f corev1.IPFamily) netip.Prefix {
	for _, s := range strings.Split(c.KubeProxy.ClusterCIDR, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err == nil && FamilyOf(p.Addr()) == f {
			return p.Masked()
		}
	}
	return netip.Prefix{}
}

// NewStateFor is NewState for the proxier of family f: its ports are the
// Services as that family's proxier sees them (FromObjectsFor).
func NewStateFor(f corev1.IPFamily, services []corev1.Service, slices []discoveryv1.EndpointSlice, node *corev1.Node) *State {
	return &State{Services: services, EndpointSlices: slices, Node: node, Ports: FromObjectsFor(f, services, slices)}
}

// clusterIPOf is the Service's ClusterIP of family f, as kube-proxy's
// GetClusterIPByFamily (pkg/proxy/util) reads it: with spec.ipFamilies, the
// entry of clusterIPs at that family's index; without (objects older than
// dual-stack), spec.clusterIP when it is of family f. A Service without one
// is not programmed by that family's proxier (serviceToServiceMap). The API
// server fills clusterIPs from clusterIP; an object that did not go through
// one (a topology file, a test) may give only clusterIP, which then stands
// for clusterIPs[0].
func clusterIPOf(svc *corev1.Service, f corev1.IPFamily) (netip.Addr, bool) {
	s := ""
	if len(svc.Spec.IPFamilies) == 0 {
		s = svc.Spec.ClusterIP
	} else {
		i := slices.Index(svc.Spec.IPFamilies, f)
		switch {
		case i >= 0 && i < len(svc.Spec.ClusterIPs):
			s = svc.Spec.ClusterIPs[i]
		case i == 0:
			s = svc.Spec.ClusterIP
		}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || FamilyOf(a) != f {
		return netip.Addr{}, false
	}
	return a, true
}

// sliceOfFamily tells whether family f's proxier reads slice s: kube-proxy's
// EndpointsChangeTracker ignores every slice whose addressType is not its
// family's (IPv4 or IPv6; FQDN slices are nobody's). A slice with no
// addressType, which the API server refuses, counts as IPv4, as svclab's
// hand-made slices did before families.
func sliceOfFamily(s *discoveryv1.EndpointSlice, f corev1.IPFamily) bool {
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4:
		return f == corev1.IPv4Protocol
	case discoveryv1.AddressTypeIPv6:
		return f == corev1.IPv6Protocol
	case "":
		return f == corev1.IPv4Protocol
	}
	return false
}
