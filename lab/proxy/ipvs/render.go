package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// ipvsadmText prints virtual servers as `ipvsadm -Ln --sort` does for a table
// without connections (trailing blanks trimmed).
func ipvsadmText(vs []VirtualServer) string {
	vs = sortedLikeIpvsadm(vs)
	var b strings.Builder
	b.WriteString("IP Virtual Server version 1.2.1 (size=4096)\n")
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, v := range vs {
		line := fmt.Sprintf("%s  %s %s", v.Protocol, netip.AddrPortFrom(v.Addr, v.Port), v.Scheduler)
		if f := schedFlags(v.Scheduler, v.Flags); f != "" {
			line += " (" + f + ")"
		}
		if v.Flags&FlagPersistent != 0 {
			line += fmt.Sprintf(" persistent %d", v.Timeout)
		}
		b.WriteString(line + "\n")
		for _, rs := range v.RealServers {
			line := fmt.Sprintf("  -> %-28s %-7s %-6d %-10d %-10d", rs.String(), "Masq", rs.Weight, 0, 0)
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	return b.String()
}

// sortedLikeIpvsadm orders virtual servers, and the real servers of each, as
// `ipvsadm --sort` does: by protocol, address, then port, where ipvsadm compares
// addresses by the sign of the 32-bit difference of their values, so that two
// addresses 2^31 or more apart compare the other way round (192.168.1.10 sorts
// before 10.96.0.10).
func sortedLikeIpvsadm(in []VirtualServer) []VirtualServer {
	out := make([]VirtualServer, len(in))
	copy(out, in)
	for i := range out {
		rs := append([]RealServer(nil), out[i].RealServers...)
		sort.SliceStable(rs, func(a, b int) bool {
			if c := ipvsadmCompare(rs[a].Addr, rs[b].Addr); c != 0 {
				return c < 0
			}
			return rs[a].Port < rs[b].Port
		})
		out[i].RealServers = rs
	}
	sort.SliceStable(out, func(a, b int) bool {
		x, y := &out[a], &out[b]
		if px, py := protocolNumber(x.Protocol), protocolNumber(y.Protocol); px != py {
			return px < py
		}
		if c := ipvsadmCompare(x.Addr, y.Addr); c != 0 {
			return c < 0
		}
		return x.Port < y.Port
	})
	return out
}

// ipvsadmCompare is ipvsadm's address comparison: ntohl(a) - ntohl(b) as an int.
func ipvsadmCompare(a, b netip.Addr) int {
	ua, ub := a.As4(), b.As4()
	return int(int32(binary.BigEndian.Uint32(ua[:]) - binary.BigEndian.Uint32(ub[:])))
}

// schedFlags names the scheduler flags ipvsadm prints in parentheses
// (IP_VS_SVC_F_SCHED1, SCHED2 and SCHED3, whose meaning depends on the
// scheduler). kube-proxy only ever sets SCHED2 for mh ("mh-port").
func schedFlags(sched string, flags uint32) string {
	names := map[string][3]string{
		"sh": {"sh-fallback", "sh-port", "flag-3"},
		"mh": {"mh-fallback", "mh-port", "flag-3"},
	}
	n, ok := names[sched]
	if !ok {
		n = [3]string{"flag-1", "flag-2", "flag-3"}
	}
	var out []string
	for i, bit := range []uint32{0x8, 0x10, 0x20} {
		if flags&bit != 0 {
			out = append(out, n[i])
		}
	}
	return strings.Join(out, ",")
}

// ipsetSave prints the sets as `ipset save` does (without the bucketsize and
// initval ipset 7 adds to hash sets): every set, then its entries.
func ipsetSave(sets map[string][]string) string {
	var b strings.Builder
	for _, s := range ipsets {
		b.WriteString(s.createLine() + "\n")
		for _, e := range sets[s.name] {
			fmt.Fprintf(&b, "add %s %s\n", s.name, e)
		}
	}
	return b.String()
}
