package topology

import (
	"fmt"
	"net/netip"
)

// notBuilt6 ends the message about an IPv6 value where svclab does not build
// IPv6 yet: nodes, pods and clients have it, Services and what hangs on them
// (ClusterIPs, endpoints, external and load balancer addresses) do not.
const notBuilt6 = "IPv6 Services are not built yet (issue 35); IPv6 goes on nodes, pods and clients only"

// parseIPv4 reads one address where only IPv4 is built; the message says what
// is wrong with s.
func parseIPv4(s string) (netip.Addr, string) {
	a, msg := parseAddr(s)
	if msg == "" && a.Is6() {
		return netip.Addr{}, fmt.Sprintf("%s is IPv6: %s", s, notBuilt6)
	}
	return a, msg
}

// parseAddr reads one address of either family that an interface of the lab
// can have.
func parseAddr(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Sprintf("%q is not an IP address", s)
	}
	if msg := special(a); msg != "" {
		return netip.Addr{}, fmt.Sprintf("%s is %s", s, msg)
	}
	return a, ""
}

// parsePrefixV4 reads one IPv4 CIDR, which must be written as its network
// address.
func parsePrefixV4(s string) (netip.Prefix, string) {
	p, msg := parsePrefix(s)
	if msg == "" && p.Addr().Is6() {
		return netip.Prefix{}, fmt.Sprintf("%s is IPv6: %s", s, notBuilt6)
	}
	return p, msg
}

// parsePrefix reads one CIDR of either family, written as its network address.
func parsePrefix(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Sprintf("%q is not a CIDR (want address/length, such as 10.244.0.0/16)", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Sprintf("%s is not a network address; did you mean %s?", s, p.Masked())
	}
	if msg := special(p.Addr()); msg != "" {
		return netip.Prefix{}, fmt.Sprintf("%s is %s", s, msg)
	}
	if last := LastAddr(p); special(last) != "" {
		return netip.Prefix{}, fmt.Sprintf("%s reaches %s, which is %s", s, last, special(last))
	}
	// Two addresses must be left besides the reserved ones: the gateway and a
	// host (IPv4 reserves the network and broadcast addresses, IPv6 the
	// subnet-router anycast one, and svclab never hands out the last).
	if max := p.Addr().BitLen() - 2; p.Bits() > max {
		return netip.Prefix{}, fmt.Sprintf("%s is too small: a /%d leaves no host address besides the reserved ones (at most /%d)", s, p.Bits(), max)
	}
	return p, ""
}

// special tells why an address cannot be given to an interface of a lab.
func special(a netip.Addr) string {
	if a.Is6() {
		switch {
		case a.Is4In6():
			return "an IPv4-mapped IPv6 address (write the IPv4 address itself)"
		case a.IsUnspecified():
			return "the unspecified address"
		case a.IsLoopback():
			return "a loopback address"
		case a.IsMulticast():
			return "a multicast address"
		case a.IsLinkLocalUnicast():
			return "a link-local address"
		}
		return ""
	}
	switch {
	case a.IsUnspecified() || a.As4()[0] == 0:
		return "in 0.0.0.0/8 (\"this network\")"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.As4()[0] >= 240:
		return "reserved (240.0.0.0/4)"
	}
	return ""
}

// LastAddr is the last address of a prefix: an IPv4 prefix's broadcast
// address.
func LastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	for i := range a {
		// Bits of byte i that belong to the host part.
		hostBits := min(max(len(a)*8-p.Bits()-8*(len(a)-1-i), 0), 8)
		a[i] |= byte(1<<hostBits - 1)
	}
	last, _ := netip.AddrFromSlice(a)
	return last
}

// overlaps tells whether two prefixes share an address.
func overlaps(a, b netip.Prefix) bool { return a.IsValid() && b.IsValid() && a.Overlaps(b) }

// reservedIn tells why a can be given to no one in p: it is p's network or
// broadcast address, or in IPv6 its subnet-router anycast address (RFC 4291),
// which IPv6 has instead of a broadcast one.
func reservedIn(a netip.Addr, p netip.Prefix) string {
	switch {
	case a.Is6() && a == p.Masked().Addr():
		return "the subnet-router anycast address"
	case a == p.Masked().Addr():
		return "the network address"
	case a.Is4() && a == LastAddr(p):
		return "the broadcast address"
	}
	return ""
}

// CoveringPrefix is the smallest prefix, at most maxBits long, that holds every
// address.
func CoveringPrefix(addrs []netip.Addr, maxBits int) netip.Prefix {
	if len(addrs) == 0 {
		return netip.Prefix{}
	}
	for bits := maxBits; bits >= 0; bits-- {
		p := netip.PrefixFrom(addrs[0], bits).Masked()
		all := true
		for _, a := range addrs[1:] {
			if !p.Contains(a) {
				all = false
				break
			}
		}
		if all {
			return p
		}
	}
	return netip.Prefix{}
}

// prefixString and addrString write a value back as the user would, "" when unset.
func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// prefixesString writes one prefix a family back as the user would,
// "IPV4[,IPV6]".
func prefixesString(v4, v6 netip.Prefix) string {
	if !v6.IsValid() {
		return prefixString(v4)
	}
	return prefixString(v4) + "," + v6.String()
}

// addrsList and prefixList are the plural field (ips, podCIDRs) of a member
// with an IPv6 value, nil for one without, which the singular field says all
// of.
func addrsList(v4, v6 netip.Addr) []string {
	if !v6.IsValid() {
		return nil
	}
	return []string{addrString(v4), v6.String()}
}

func prefixList(v4, v6 netip.Prefix) []string {
	if !v6.IsValid() {
		return nil
	}
	return []string{prefixString(v4), v6.String()}
}
