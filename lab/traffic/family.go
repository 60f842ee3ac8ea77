package traffic

import (
	"net"
	"net/netip"
	"strconv"
)

// family is the suffix of Go's network names ("tcp4", "udp6") for a's
// family: "6" for an IPv6 address, "4" for any other. An IPv4 address
// written IPv4-mapped is IPv4, and so is no address at all, which fails to
// dial as it did before clients spoke IPv6.
func family(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		return "6"
	}
	return "4"
}

// hostPort is ap as net.Dial takes it, net.JoinHostPort's form:
// "10.96.0.10:53", "[fd00:10:96::a]:53". An IPv4-mapped address is written
// as the IPv4 address it is, since it is dialled over IPv4.
func hostPort(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return ap.String()
	}
	return net.JoinHostPort(ap.Addr().Unmap().String(), strconv.Itoa(int(ap.Port())))
}
