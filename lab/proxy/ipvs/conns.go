package ipvs

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/svclab/svclab/lab/namespaces"
)

// Conn is one entry of a node's IPVS connection table, as `ipvsadm -Lnc` prints
// it: a client's connection (Source) to a virtual server (Virtual) that IPVS
// gave to a real server (Destination).
type Conn struct {
	Protocol, Expire, State      string
	Source, Virtual, Destination netip.AddrPort
}

// String is the entry as ipvsadm prints it, on one line.
func (c Conn) String() string {
	return strings.Join([]string{c.Protocol, c.Expire, c.State, c.Source.String(), c.Virtual.String(), c.Destination.String()}, " ")
}

// ParseConns reads `ipvsadm -Lnc`: "pro expire state source virtual
// destination" after two header lines. Persistence templates (source port 0)
// hold an affinity, not a connection, and are left out.
func ParseConns(out string) []Conn {
	var conns []Conn
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		src, err1 := netip.ParseAddrPort(f[3])
		virt, err2 := netip.ParseAddrPort(f[4])
		dst, err3 := netip.ParseAddrPort(f[5])
		if err1 != nil || err2 != nil || err3 != nil || src.Port() == 0 {
			continue
		}
		conns = append(conns, Conn{Protocol: f[0], Expire: f[1], State: f[2], Source: src, Virtual: virt, Destination: dst})
	}
	return conns
}

// Conns is the IPVS connection table of the namespace ns.
func Conns(ns *namespaces.NS) ([]Conn, error) {
	out, err := ns.Output("ipvsadm", "-Lnc")
	if err != nil {
		return nil, fmt.Errorf("netns %s: ipvsadm -Lnc: %w", ns, err)
	}
	return ParseConns(string(out)), nil
}

// An IPVS node matches a real server's reply to its connection table by the
// client's address and port and the real server's only (ip_vs_conn_out_get),
// and keeps a finished connection there for minutes (UDP 300 s, TCP TIME_WAIT
// 120 s). A later flow that reaches the same real server from the same client
// address and port without going through that virtual server has its replies
// taken: IPVS rewrites their source to the old virtual server's, and the client,
// which sent to another address, never sees an answer.
//
// ReplyTaker is the connection of conns that takes the replies of a flow of
// protocol sent to target and translated to endpoint, whose replies go to
// client (the reply tuple's destination): same protocol, client and real
// server, another virtual server.
func ReplyTaker(conns []Conn, protocol string, target, endpoint, client netip.AddrPort) (Conn, bool) {
	for _, c := range conns {
		if strings.EqualFold(c.Protocol, protocol) && c.Source == client && c.Destination == endpoint && c.Virtual != target {
			return c, true
		}
	}
	return Conn{}, false
}
