package trace

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/ipvs"
)

// conntrackOf is the entry of the flow from source port port in the namespace
// ns: one whose original source port, or reply destination port, is it (SNAT
// keeps the port when it can). Where several are (an older flow from the same
// port), the one to dst, the packet's destination as it entered ns, else the
// one to the trace's own destination to.
func conntrackOf(ns *namespaces.NS, protocol string, port int, dst, to netip.AddrPort) (*Conntrack, error) {
	flows, err := proxy.ListConntrack(ns.Netlink)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", ns, err)
	}
	proto := uint8(unix.IPPROTO_TCP)
	if strings.EqualFold(protocol, "UDP") {
		proto = unix.IPPROTO_UDP
	}
	var found []*Conntrack
	for _, f := range flows {
		if f.Forward.Protocol != proto || (int(f.Forward.SrcPort) != port && int(f.Reverse.DstPort) != port) {
			continue
		}
		ap := func(ip []byte, port uint16) netip.AddrPort { a, _ := proxy.TupleAddr(ip, port); return a }
		c := &Conntrack{
			Original: Tuple{Src: ap(f.Forward.SrcIP, f.Forward.SrcPort), Dst: ap(f.Forward.DstIP, f.Forward.DstPort)},
			Reply:    Tuple{Src: ap(f.Reverse.SrcIP, f.Reverse.SrcPort), Dst: ap(f.Reverse.DstIP, f.Reverse.DstPort)},
		}
		// The reply comes from where the original went, to where it came
		// from; any difference is a translation.
		if c.Reply.Src != c.Original.Dst {
			c.DNAT = fmt.Sprintf("%s -> %s", c.Original.Dst, c.Reply.Src)
		}
		if c.Reply.Dst != c.Original.Src {
			c.SNAT = fmt.Sprintf("%s -> %s", c.Original.Src, c.Reply.Dst)
		}
		if tcp, ok := f.ProtoInfo.(*netlink.ProtoInfoTCP); ok {
			c.State = tcpStates[tcp.State]
		}
		found = append(found, c)
	}
	for _, want := range []netip.AddrPort{dst, to} {
		for _, c := range found {
			if want.IsValid() && c.Original.Dst == want {
				return c, nil
			}
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return nil, nil
}

// tcpStates are conntrack's TCP states by number (enum tcp_conntrack).
var tcpStates = []string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

// routeOf is the route the namespace takes for a packet from src to dst that
// came in by iif (empty: sent by the namespace itself), as `ip route get`
// prints it.
func routeOf(ns *namespaces.NS, src, dst netip.Addr, iif string) (string, error) {
	opts := &netlink.RouteGetOptions{Iif: iif}
	if iif != "" {
		opts.SrcAddr = src.AsSlice()
	}
	routes, err := ns.Netlink.RouteGetWithOptions(dst.AsSlice(), opts)
	if err != nil {
		return "", fmt.Errorf("netns %s: route get %s: %w", ns, dst, err)
	}
	if len(routes) == 0 {
		return "", nil
	}
	r := routes[0]
	var b strings.Builder
	if r.Type == unix.RTN_LOCAL {
		b.WriteString("local ")
	}
	b.WriteString(dst.String())
	if iif != "" {
		fmt.Fprintf(&b, " from %s", src)
	}
	if r.Gw != nil {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	if l, err := ns.Netlink.LinkByIndex(r.LinkIndex); err == nil {
		fmt.Fprintf(&b, " dev %s", l.Attrs().Name)
	}
	if r.Src != nil && iif == "" {
		fmt.Fprintf(&b, " src %s", r.Src)
	}
	if iif != "" {
		fmt.Fprintf(&b, " iif %s", iif)
	}
	return b.String(), nil
}

// ipvsConns is the IPVS connection table of every node of l, by node.
func ipvsConns(l Lab, nss map[string]*namespaces.NS) (map[string][]ipvs.Conn, error) {
	conns := map[string][]ipvs.Conn{}
	for _, m := range l.Members {
		if m.Kind != member.KindNode {
			continue
		}
		c, err := ipvs.Conns(nss[m.Name])
		if err != nil {
			return nil, err
		}
		conns[m.Name] = c
	}
	return conns, nil
}

// fromPort are the connections of conns from source port port.
func fromPort(conns []ipvs.Conn, port int) []string {
	var lines []string
	for _, c := range conns {
		if int(c.Source.Port()) == port {
			lines = append(lines, c.String())
		}
	}
	return lines
}

// replyTaken is the node whose older IPVS connection takes the replies of the
// traced flow, and how, when one does (ipvs.ReplyTaker): the flow's conntrack
// entry where it was translated (its original destination is the trace's)
// names the endpoint and the client address and port that endpoint answers.
func replyTaken(t *Trace, conns map[string][]ipvs.Conn) (node, how string) {
	for _, h := range t.Hops {
		c := h.Conntrack
		if c == nil || c.Original.Dst != t.To {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(conns)) {
			if old, ok := ipvs.ReplyTaker(conns[name], t.Protocol, t.To, c.Reply.Src, c.Reply.Dst); ok {
				return name, fmt.Sprintf("IPVS: the reply of %s to %s was given to an older IPVS connection, %s -> %s -> %s (IPVS matches a real server's replies by client address and port and real server only)",
					c.Reply.Src, c.Reply.Dst, old.Source, old.Virtual, old.Destination)
			}
		}
	}
	return "", ""
}

// ipvsEmptyService is the virtual service for dst (protocol TCP or UDP) in ns
// when it has no real server, as `ipvsadm -Ln` prints it; "" when ns has none
// for dst or it has real servers.
func ipvsEmptyService(ns *namespaces.NS, protocol string, dst netip.AddrPort) (string, error) {
	flag := "-t"
	if protocol == "UDP" {
		flag = "-u"
	}
	out, err := ns.Output("ipvsadm", "-Ln", flag, dst.String())
	if err != nil {
		// ipvsadm fails when there is no such virtual service.
		return "", nil
	}
	var service string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && (f[0] == "TCP" || f[0] == "UDP"):
			service = strings.Join(f, " ")
		case len(f) >= 2 && f[0] == "->" && f[1] != "RemoteAddress:Port":
			return "", nil
		}
	}
	return service, nil
}
