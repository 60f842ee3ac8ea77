package verify

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// An IPVS node answers a real server's reply from the IPVS connection table by
// the client's address and port and the real server's only (ip_vs_conn_out_get),
// and keeps a finished connection there for minutes (UDP 300 s, TCP TIME_WAIT
// 120 s). A later flow that reaches the same real server from the same address
// and port without going through that virtual server has its replies taken: IPVS
// rewrites their source to the old virtual server's and the client never sees an
// answer. In a lab this happens when a node masquerades one flow (MASQUERADE
// --random-fully picks a port among 64,512) to the port it used itself a moment
// before as the client of another node's NodePort with the same endpoint, or a
// pod's ClusterIP flow leaves from the port its NodePort flow did: seen in 5 of
// 18 verify runs of policies-local.yaml in ipvs in the VM here, and once in CI
// (its ClientIP affinity Services make 1,472 attempts a run). It is the kernel's doing,
// not the rules', so an attempt lost that way is made again, and the check says so.
//
// maxHijacked bounds the attempts made again within one check.
const maxHijacked = 3

// ipvsConn is one line of the IPVS connection table (ipvsadm -Lnc).
type ipvsConn struct {
	Protocol                     string
	Source, Virtual, Destination netip.AddrPort
}

// parseIPVSConns reads ipvsadm -Lnc: "pro expire state source virtual
// destination" after two header lines. Persistence templates (source port 0)
// translate nothing and are left out.
func parseIPVSConns(out string) []ipvsConn {
	var conns []ipvsConn
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
		conns = append(conns, ipvsConn{Protocol: f[0], Source: src, Virtual: virt, Destination: dst})
	}
	return conns
}

// pairing is what a conntrack entry says of one attempt: the target it was
// sent to (its original destination) and, in its reply tuple, the endpoint
// that got it and the client address and port that endpoint answers.
type pairing struct {
	Target, Endpoint, Client netip.AddrPort
}

// takenBy is the connection of conns whose replies the attempt p would be
// given to instead: same client and endpoint, another virtual server.
func takenBy(p pairing, protocol string, conns []ipvsConn) (ipvsConn, bool) {
	for _, c := range conns {
		if strings.EqualFold(c.Protocol, protocol) && c.Source == p.Client && c.Destination == p.Endpoint && c.Virtual != p.Target {
			return c, true
		}
	}
	return ipvsConn{}, false
}

// hijackFinder looks, in every node of a lab, for the evidence that a timed-out
// attempt's replies were taken by an older IPVS connection.
type hijackFinder struct {
	// nodes maps each node's name to its network namespace.
	nodes map[string]string
}

func newHijackFinder(l Lab) (*hijackFinder, error) {
	h := &hijackFinder{nodes: map[string]string{}}
	for _, n := range l.Topology().Nodes {
		member, err := l.Member(n.Name)
		if err != nil {
			return nil, fmt.Errorf("verify: node %s: %w", n.Name, err)
		}
		h.nodes[n.Name] = member.NetNS
	}
	return h, nil
}

// ReplyTaken says which older IPVS connection of which node of lab l takes the
// replies of flow f (its target, protocol and expected backends), as verify
// looks for it after an attempt that timed out; "" when none does.
func ReplyTaken(l Lab, f Flow) (string, error) {
	h, err := newHijackFinder(l)
	if err != nil {
		return "", err
	}
	return h.find(f), nil
}

// find returns the evidence for flow f: where the attempt was translated, and
// which IPVS connection of which node takes its replies; "" when there is none.
func (h *hijackFinder) find(f Flow) string {
	conns := map[string][]ipvsConn{}
	for name, netns := range h.nodes {
		out, err := namespaces.Output(netns, "ipvsadm", "-Lnc")
		if err != nil {
			return ""
		}
		conns[name] = parseIPVSConns(string(out))
	}
	for _, netns := range h.nodes {
		for _, p := range h.pairings(netns, f) {
			for name, cs := range conns {
				if c, ok := takenBy(p, f.Protocol, cs); ok {
					return fmt.Sprintf("a reply of %s to %s was taken by %s's older IPVS connection %s -> %s -> %s",
						p.Endpoint, p.Client, name, c.Source, c.Virtual, c.Destination)
				}
			}
		}
	}
	return ""
}

// pairings are the conntrack entries of namespace netns for flows to f's
// target that one of its expected backends got.
func (h *hijackFinder) pairings(netns string, f Flow) []pairing {
	ns, err := namespaces.Open(netns)
	if err != nil {
		return nil
	}
	defer ns.Close()
	flows, err := proxy.ListConntrack(ns.Netlink)
	if err != nil {
		return nil
	}
	proto := uint8(unix.IPPROTO_TCP)
	if strings.EqualFold(f.Protocol, "UDP") {
		proto = unix.IPPROTO_UDP
	}
	var ps []pairing
	for _, fl := range flows {
		if fl.Forward.Protocol != proto {
			continue
		}
		target, _ := proxy.TupleAddr(fl.Forward.DstIP, fl.Forward.DstPort)
		endpoint, _ := proxy.TupleAddr(fl.Reverse.SrcIP, fl.Reverse.SrcPort)
		if target != f.Target.Addr {
			continue
		}
		if _, ok := f.Expected.Backends[endpoint.String()]; !ok {
			continue
		}
		client, _ := proxy.TupleAddr(fl.Reverse.DstIP, fl.Reverse.DstPort)
		ps = append(ps, pairing{Target: target, Endpoint: endpoint, Client: client})
	}
	return ps
}
