package topology

import (
	"net/netip"
	"strings"
)

// A lab is IPv4-only or dual-stack with IPv4 as its primary family: IPv4
// comes first wherever a field takes one value a family. IPv6-primary and
// IPv6-only labs wait until the proxiers speak IPv6 (issue 35), since a
// Service of such a cluster gets an IPv6 ClusterIP by default.

// notIPv6Primary ends the message about an IPv6 value where the primary,
// IPv4 one is wanted.
const notIPv6Primary = "svclab builds IPv4-primary labs: IPv6-only and IPv6-first ones are not built yet (issue 35)"

// cidrs reads a field of one prefix a family, "IPV4[,IPV6]"; v6 is not valid
// when the field names no IPv6 prefix. example and example6 are prefixes of
// each family for messages.
func (r *resolver) cidrs(path, s, example, example6 string) (v4, v6 netip.Prefix) {
	if s == "" {
		r.errorf(path, "required, such as %s", example)
		return
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		r.errorf(path, "%q names %d prefixes; give one, or an IPv4 and an IPv6 one (such as %s,%s)", s, len(parts), example, example6)
		return
	}
	for i, part := range parts {
		p, msg := parsePrefix(strings.TrimSpace(part))
		switch {
		case msg != "":
			r.errorf(path, "%s", msg)
		case i == 0 && p.Addr().Is6():
			r.errorf(path, "%s is IPv6 and comes first: %s; give the IPv4 prefix first, such as %s,%s", p, notIPv6Primary, example, p)
		case i == 0:
			v4 = p
		case p.Addr().Is4() && v4.IsValid():
			r.errorf(path, "%s and %s are both IPv4; give one prefix a family, the IPv6 one second", v4, p)
		case p.Addr().Is4():
			// The first is wrong, and said so.
		default:
			v6 = p
		}
	}
	return v4, v6
}

// memberIP is one address of a node, pod or client and the field that gave it.
type memberIP struct {
	path string
	ip   netip.Addr
}

// memberIPs reads a member's ip and ips, which Kubernetes would call podIP and
// podIPs: ips lists one address a family, ip first, and ip may be left out
// when ips gives it. A family not given comes back not valid; ok is false when
// something given is wrong, and said so.
func (r *resolver) memberIPs(path, ip string, ips []string) (v4, v6 memberIP, ok bool) {
	ok = true
	ipPath, ipsPath := child(path, "ip"), child(path, "ips")
	if ip != "" {
		a, msg := parseAddr(ip)
		switch {
		case strings.Contains(ip, ","):
			r.errorf(ipPath, "%q: ip takes one address; list one a family in ips, IPv4 first, such as [%s]", ip, listOf(ip))
			ok = false
		case msg != "":
			r.errorf(ipPath, "%s", msg)
			ok = false
		case a.Is6():
			r.errorf(ipPath, "%s is IPv6: ip is the primary address, and %s; give the IPv6 address in ips, after the IPv4 one", a, notIPv6Primary)
			ok = false
		default:
			v4 = memberIP{ipPath, a}
		}
	}
	if len(ips) > 2 {
		r.errorf(ipsPath, "%d addresses; give one a family, IPv4 first", len(ips))
		return v4, v6, false
	}
	for i, s := range ips {
		p := index(ipsPath, i)
		a, msg := parseAddr(s)
		switch {
		case msg != "":
			r.errorf(p, "%s", msg)
			ok = false
		case i == 0 && a.Is6():
			r.errorf(p, "%s is IPv6 and comes first: %s", a, notIPv6Primary)
			ok = false
		case i == 0 && ip != "" && v4.ip.IsValid() && a != v4.ip:
			r.errorf(p, "%s must be the same as ip %s", a, v4.ip)
			ok = false
		case i == 0 && ip == "":
			v4 = memberIP{p, a}
		case i == 1 && a.Is4() && v4.ip.IsValid():
			r.errorf(p, "%s is IPv4 like ips[0]; give one address a family, the IPv6 one second", a)
			ok = false
		case i == 1 && a.Is4():
			ok = false // ips[0] is wrong, and said so
		case i == 1:
			v6 = memberIP{p, a}
		}
	}
	if v6.ip.IsValid() && !r.t.DualStack() {
		r.errorf(v6.path, "%s is IPv6, but the lab is IPv4-only: clusterCIDR names no IPv6 prefix (write it as %s,fd00:10:244::/56 for a dual-stack lab)",
			v6.ip, prefixString(r.t.ClusterCIDR))
		v6, ok = memberIP{}, false
	}
	return v4, v6, ok
}

// podCIDRs reads a node's podCIDR and podCIDRs, as Kubernetes' Node has them:
// podCIDRs lists one prefix a family, podCIDR first. Each must be in
// clusterCIDR's prefix of its family and overlap no other node's.
func (r *resolver) podCIDRs(path string, i int, s NodeSpec) (v4, v6 netip.Prefix) {
	one, many := child(path, "podCIDR"), child(path, "podCIDRs")
	if s.PodCIDR == "" && len(s.PodCIDRs) == 0 {
		r.errorf(one, "required: the node's share of clusterCIDR, such as 10.244.%d.0/24", i+1)
		return
	}
	if len(s.PodCIDRs) > 2 {
		r.errorf(many, "%d prefixes; give one a family, IPv4 first", len(s.PodCIDRs))
		return
	}
	v4Path := one
	if strings.Contains(s.PodCIDR, ",") {
		r.errorf(one, "%q: podCIDR takes one prefix; list one a family in podCIDRs, IPv4 first, such as [%s]", s.PodCIDR, listOf(s.PodCIDR))
	} else if s.PodCIDR != "" {
		if p, msg := parsePrefix(s.PodCIDR); msg != "" {
			r.errorf(one, "%s", msg)
		} else if p.Addr().Is6() {
			r.errorf(one, "%s is IPv6: podCIDR is the primary one, and %s; give the IPv6 podCIDR in podCIDRs, after the IPv4 one", p, notIPv6Primary)
		} else {
			v4 = p
		}
	}
	v6Path := ""
	for k, str := range s.PodCIDRs {
		pp := index(many, k)
		p, msg := parsePrefix(str)
		switch {
		case msg != "":
			r.errorf(pp, "%s", msg)
		case k == 0 && p.Addr().Is6():
			r.errorf(pp, "%s is IPv6 and comes first: %s", p, notIPv6Primary)
		case k == 0 && s.PodCIDR != "":
			if v4.IsValid() && p != v4 {
				r.errorf(pp, "%s must be the same as podCIDR %s", p, v4)
			}
		case k == 0:
			v4, v4Path = p, pp
		case p.Addr().Is4() && v4.IsValid():
			r.errorf(pp, "%s is IPv4 like podCIDRs[0]; give one prefix a family, the IPv6 one second", p)
		case p.Addr().Is4():
			// podCIDRs[0] is wrong, and said so.
		default:
			v6, v6Path = p, pp
		}
	}
	v4 = r.podCIDRIn(v4Path, v4, r.t.ClusterCIDR, func(n Node) netip.Prefix { return n.PodCIDR })
	switch {
	case v6.IsValid() && !r.t.DualStack():
		r.errorf(v6Path, "%s is IPv6, but the lab is IPv4-only: clusterCIDR names no IPv6 prefix", v6)
		v6 = netip.Prefix{}
	case v6.IsValid():
		v6 = r.podCIDRIn(v6Path, v6, r.t.ClusterCIDR6, func(n Node) netip.Prefix { return n.PodCIDR6 })
	case r.t.DualStack() && v4.IsValid() && len(s.PodCIDRs) < 2:
		r.errorf(many, "required in a dual-stack lab: the node's podCIDRs of both families, such as [%s, %s]", v4, exampleIn(r.t.ClusterCIDR6, i+1, 64))
	}
	return v4, v6
}

// podCIDRIn checks that p, given at path, lies in the cluster's prefix of its
// family and overlaps no earlier node's podCIDR of that family (of returns it).
func (r *resolver) podCIDRIn(path string, p, cluster netip.Prefix, of func(Node) netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	if cluster.IsValid() && !(cluster.Contains(p.Addr()) && p.Bits() >= cluster.Bits()) {
		r.errorf(path, "%s is outside clusterCIDR %s", p, cluster)
	}
	for _, earlier := range r.t.Nodes {
		if overlaps(p, of(earlier)) {
			r.errorf(path, "%s overlaps the podCIDR %s of node %s", p, of(earlier), earlier.Name)
		}
	}
	return p
}

// exampleIn is the i-th prefix of length bits inside p, for a message.
func exampleIn(p netip.Prefix, i, bits int) string {
	if !p.IsValid() || bits <= p.Bits() {
		return "fd00:10:244:1::/64"
	}
	a := p.Masked().Addr().As16()
	// Add i at the last bit of the prefix: byte (bits-1)/8, shifted by the
	// bits of that byte that follow.
	b := (bits - 1) / 8
	v := uint(i) << (7 - uint((bits-1)%8))
	for ; b >= 0 && v > 0; b-- {
		v += uint(a[b])
		a[b] = byte(v)
		v >>= 8
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), bits).String()
}

// listOf writes a comma-separated value as the YAML list a plural field
// takes, for a message.
func listOf(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if strings.Contains(p, ":") {
			p = `"` + p + `"` // an IPv6 value reads better quoted in YAML
		}
		parts[i] = p
	}
	return strings.Join(parts, ", ")
}

// family names an address's family in messages.
func family(a netip.Addr) string {
	if a.Is6() {
		return "IPv6"
	}
	return "IPv4"
}
