package topology

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// serviceFamilies checks a Service's ipFamilyPolicy, ipFamilies and clusterIPs
// as the API server does, against the families of the lab's serviceCIDR, and
// fills in the defaults. What the API server would accept but needs an IPv6
// ClusterIP (an IPv6 or dual-stack Service) is refused too, and says so: the
// proxiers, verify and trace speak IPv4 only, and a Service half programmed
// would pass for a whole one. ok is false when spec.clusterIP is not to be
// read further (its family was found wrong).
func (r *resolver) serviceFamilies(sp string, spec *corev1.ServiceSpec) (ok bool) {
	ok = true
	dual := r.t.ServiceCIDR6.IsValid()
	policyPath, familiesPath, ipsPath := child(sp, "ipFamilyPolicy"), child(sp, "ipFamilies"), child(sp, "clusterIPs")
	policy := ptr.Deref(spec.IPFamilyPolicy, "")
	switch policy {
	case "", corev1.IPFamilyPolicySingleStack:
	case corev1.IPFamilyPolicyPreferDualStack:
		// In an IPv4-only cluster PreferDualStack gives one family; in a
		// dual-stack one it gives both.
		if dual {
			r.errorf(policyPath, "PreferDualStack gives the Service an IPv6 ClusterIP beside its IPv4 one in a dual-stack lab: %s", notBuilt6)
		}
	case corev1.IPFamilyPolicyRequireDualStack:
		if dual {
			r.errorf(policyPath, "RequireDualStack: %s", notBuilt6)
		} else {
			r.errorf(policyPath, "RequireDualStack needs a dual-stack cluster, and serviceCIDR %s names IPv4 only", r.t.ServiceCIDR)
		}
	default:
		r.errorf(policyPath, "%q: must be SingleStack, PreferDualStack or RequireDualStack", policy)
	}

	if len(spec.IPFamilies) > 2 {
		r.errorf(familiesPath, "%d families; at most two, one of each", len(spec.IPFamilies))
	}
	for i, f := range spec.IPFamilies {
		p := index(familiesPath, i)
		switch {
		case f != corev1.IPv4Protocol && f != corev1.IPv6Protocol:
			r.errorf(p, "%q: must be IPv4 or IPv6", f)
		case i > 0 && f == spec.IPFamilies[0]:
			r.errorf(p, "%s is already ipFamilies[0]; give each family once", f)
		case f == corev1.IPv6Protocol && !dual:
			r.errorf(p, "IPv6 is not configured on this cluster: serviceCIDR %s names IPv4 only", r.t.ServiceCIDR)
		case f == corev1.IPv6Protocol:
			r.errorf(p, "IPv6: %s", notBuilt6)
		}
	}
	if len(spec.IPFamilies) > 1 && policy == corev1.IPFamilyPolicySingleStack {
		r.errorf(policyPath, "SingleStack, but ipFamilies names two families: must be RequireDualStack or PreferDualStack when multiple ipFamilies are given")
	}

	if len(spec.ClusterIPs) > 2 {
		r.errorf(ipsPath, "%d addresses; at most two, one of each family", len(spec.ClusterIPs))
	}
	if len(spec.ClusterIPs) > 0 {
		if spec.ClusterIP == "" {
			spec.ClusterIP = spec.ClusterIPs[0]
		} else if spec.ClusterIPs[0] != spec.ClusterIP {
			r.errorf(index(ipsPath, 0), "%q must be the same as clusterIP %q", spec.ClusterIPs[0], spec.ClusterIP)
		}
	}
	if len(spec.ClusterIPs) > 1 && policy == corev1.IPFamilyPolicySingleStack {
		r.errorf(policyPath, "SingleStack, but clusterIPs gives two addresses: must be RequireDualStack or PreferDualStack when multiple clusterIPs are given")
	}
	var first netip.Addr
	for i, s := range spec.ClusterIPs {
		p := index(ipsPath, i)
		if s == corev1.ClusterIPNone {
			if i > 0 || len(spec.ClusterIPs) > 1 {
				r.errorf(p, "None must be the only value of clusterIPs")
			}
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			if i > 0 {
				r.errorf(p, "%q is not an IP address", s)
			}
			continue // clusterIPs[0] is clusterIP, which says so below
		}
		if msg := familyMismatch(a, i, spec.IPFamilies); msg != "" {
			r.errorf(p, "%s", msg)
		}
		switch {
		case i == 0:
			first = a
		case first.IsValid() && first.Is6() == a.Is6():
			r.errorf(p, "%s is %s like clusterIPs[0]; a dual-stack Service has one ClusterIP of each family", a, family(a))
		case a.Is6() && !dual:
			r.errorf(p, "%s is IPv6, and IPv6 is not configured on this cluster: serviceCIDR %s names IPv4 only", a, r.t.ServiceCIDR)
		case a.Is6():
			r.errorf(p, "%s is IPv6: %s", a, notBuilt6)
		}
	}
	// clusterIP alone is checked here for its family; for the rest below.
	if a, err := netip.ParseAddr(spec.ClusterIP); err == nil && a.Is6() {
		ok = false
		path := child(sp, "clusterIP")
		switch {
		case len(spec.ClusterIPs) == 0 && familyMismatch(a, 0, spec.IPFamilies) != "":
			r.errorf(path, "%s", familyMismatch(a, 0, spec.IPFamilies))
		case !dual:
			r.errorf(path, "%s is IPv6, and IPv6 is not configured on this cluster: serviceCIDR %s names IPv4 only", a, r.t.ServiceCIDR)
		default:
			r.errorf(path, "%s is IPv6: %s", a, notBuilt6)
		}
	}
	spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	if spec.IPFamilyPolicy == nil {
		spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	}
	return ok
}

// familyMismatch says what is wrong when clusterIPs[i], a, is not of family
// ipFamilies[i].
func familyMismatch(a netip.Addr, i int, families []corev1.IPFamily) string {
	if i >= len(families) {
		return ""
	}
	want := families[i]
	if (want == corev1.IPv6Protocol) == a.Is6() || (want != corev1.IPv4Protocol && want != corev1.IPv6Protocol) {
		return ""
	}
	return fmt.Sprintf("%s is %s, but ipFamilies[%d] is %s", a, family(a), i, want)
}
