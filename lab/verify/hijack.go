package verify

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/ipvs"
)

// An attempt of an answered flow that times out in IPVS mode may have had its
// replies taken by an older IPVS connection (ipvs.ReplyTaker says how). In a lab
// this happens when a node masquerades one flow (MASQUERADE --random-fully picks
// a port among 64,512) to the port it used itself a moment before as the client
// of another node's NodePort with the same endpoint, or a pod's ClusterIP flow
// leaves from the port its NodePort flow did: seen in 5 of 18 verify runs of
// policies-local.yaml in ipvs in the VM here, and once in CI (its ClientIP
// affinity Services make 1,472 attempts a run). It is the kernel's doing, not
// the rules', so an attempt lost that way is made again, and the check says so.
//
// maxHijacked bounds the attempts made again within one check.
const maxHijacked = 3

// pairing is what a conntrack entry says of one attempt: the target it was
// sent to (its original destination) and, in its reply tuple, the endpoint
// that got it and the client address and port that endpoint answers.
type pairing struct {
	Target, Endpoint, Client netip.AddrPort
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
	return h.find(f)
}

// find returns the evidence for flow f: where the attempt was translated, and
// which IPVS connection of which node takes its replies; "" when there is none.
// An error is a node whose tables could not be read: the evidence may be there.
func (h *hijackFinder) find(f Flow) (string, error) {
	conns := map[string][]ipvs.Conn{}
	nss := map[string]*namespaces.NS{}
	defer func() {
		for _, ns := range nss {
			ns.Close()
		}
	}()
	for name, netns := range h.nodes {
		ns, err := namespaces.Open(netns)
		if err != nil {
			return "", fmt.Errorf("node %s: %w", name, err)
		}
		nss[name] = ns
		if conns[name], err = ipvs.Conns(ns); err != nil {
			return "", fmt.Errorf("node %s: %w", name, err)
		}
	}
	for node, ns := range nss {
		ps, err := pairings(ns, f)
		if err != nil {
			return "", fmt.Errorf("node %s: %w", node, err)
		}
		for _, p := range ps {
			for name, cs := range conns {
				if c, ok := ipvs.ReplyTaker(cs, f.Protocol, p.Target, p.Endpoint, p.Client); ok {
					return fmt.Sprintf("a reply of %s to %s was taken by %s's older IPVS connection %s -> %s -> %s",
						p.Endpoint, p.Client, name, c.Source, c.Virtual, c.Destination), nil
				}
			}
		}
	}
	return "", nil
}

// pairings are the conntrack entries of namespace ns for flows to f's target
// that one of its expected backends got.
func pairings(ns *namespaces.NS, f Flow) ([]pairing, error) {
	flows, err := proxy.ListConntrack(ns.Netlink)
	if err != nil {
		return nil, err
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
	return ps, nil
}
