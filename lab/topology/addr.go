package topology

import (
	"fmt"
	"net/netip"
)

// parseIPv4 reads one address; the message says what is wrong with s.
func parseIPv4(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Sprintf("%q is not an IPv4 address", s)
	}
	if a.Is6() {
		return netip.Addr{}, fmt.Sprintf("%s is IPv6; svclab labs are IPv4-only (IPv6 is not supported)", s)
	}
	if msg := special(a); msg != "" {
		return netip.Addr{}, fmt.Sprintf("%s is %s", s, msg)
	}
	return a, ""
}

// parsePrefixV4 reads one CIDR, which must be written as its network address.
func parsePrefixV4(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Sprintf("%q is not a CIDR (want address/length, such as 10.244.0.0/16)", s)
	}
	if p.Addr().Is6() {
		return netip.Prefix{}, fmt.Sprintf("%s is IPv6; svclab labs are IPv4-only (IPv6 is not supported)", s)
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
	if p.Bits() > 30 {
		return netip.Prefix{}, fmt.Sprintf("%s is too small: a /%d leaves no host address besides the reserved ones (at most /30)", s, p.Bits())
	}
	return p, ""
}

// special tells why an address cannot be given to an interface of a lab.
func special(a netip.Addr) string {
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

// LastAddr is the broadcast address of an IPv4 prefix.
func LastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	bits := p.Bits()
	for i := range 4 {
		hostBits := min(max(32-bits-8*(3-i), 0), 8)
		a[i] |= byte(1<<hostBits - 1)
	}
	return netip.AddrFrom4(a)
}

// overlaps tells whether two prefixes share an address.
func overlaps(a, b netip.Prefix) bool { return a.IsValid() && b.IsValid() && a.Overlaps(b) }

// reservedIn tells why a can be given to no one in p: it is p's network or
// broadcast address.
func reservedIn(a netip.Addr, p netip.Prefix) string {
	switch a {
	case p.Masked().Addr():
		return "the network address"
	case LastAddr(p):
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
