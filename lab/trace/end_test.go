package trace

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxy/ipvs"
	"github.com/svclab/svclab/lab/traffic"
)

// A refusal no rule names is IPVS's own when a node met a virtual service
// without real servers there (a node's connection meets IPVS before filter
// OUTPUT), else the destination's: no listener.
func TestEndOfRefusal(t *testing.T) {
	refused := errors.New("connect: connection refused")
	ipvs := &Trace{Hops: []Hop{{Member: "node-1", Kind: "node", IPVSEmpty: "TCP 1.2.3.6:80 rr"}}}
	e := endOf(ipvs, traffic.Refused, traffic.Reply{}, refused, nil)
	if e.Outcome != Refused || e.Member != "node-1" || !strings.HasPrefix(e.By, "IPVS: virtual service TCP 1.2.3.6:80 rr has no real server") {
		t.Errorf("IPVS refusal: got %+v", e)
	}
	plain := &Trace{Hops: []Hop{{Member: "node-1", Kind: "node"}, {Member: "web-a", Kind: "pod"}}}
	e = endOf(plain, traffic.Refused, traffic.Reply{}, refused, nil)
	if e.Outcome != Refused || e.Member != "web-a" || !strings.HasPrefix(e.By, "no listener") {
		t.Errorf("refusal by the destination: got %+v", e)
	}
}

// A datagram sent straight to an endpoint from the port of an earlier NodePort
// flow to it, as the IPVS spec sends one: node-1's IPVS gives its reply to the
// older connection, and the trace says so; the NodePort flow's own connection
// is not taken for another's.
func TestEndOfReplyTaken(t *testing.T) {
	ap := netip.MustParseAddrPort
	conns := map[string][]ipvs.Conn{
		"node-1": {{Protocol: "UDP", Expire: "04:58", State: "UDP", Source: ap("10.244.2.107:41001"), Virtual: ap("192.168.1.10:30053"), Destination: ap("10.244.1.11:5353")}},
		"node-2": nil,
	}
	entry := &Conntrack{
		Original: Tuple{Src: ap("10.244.2.107:41001"), Dst: ap("10.244.1.11:5353")},
		Reply:    Tuple{Src: ap("10.244.1.11:5353"), Dst: ap("10.244.2.107:41001")},
	}
	direct := &Trace{Protocol: "UDP", To: ap("10.244.1.11:5353"), Hops: []Hop{{Member: "c-7", Kind: "pod"}, {Member: "node-1", Kind: "node", Conntrack: entry}}}
	e := endOf(direct, traffic.Timeout, traffic.Reply{}, errors.New("i/o timeout"), conns)
	if e.Outcome != Dropped || e.Member != "node-1" || !strings.Contains(e.By, "older IPVS connection, 10.244.2.107:41001 -> 192.168.1.10:30053 -> 10.244.1.11:5353") {
		t.Errorf("reply taken: got %+v", e)
	}
	nodePort := &Trace{Protocol: "UDP", To: ap("192.168.1.10:30053"), Hops: []Hop{{Member: "node-1", Kind: "node", Conntrack: &Conntrack{
		Original: Tuple{Src: ap("10.244.2.107:41001"), Dst: ap("192.168.1.10:30053")},
		Reply:    Tuple{Src: ap("10.244.1.11:5353"), Dst: ap("10.244.2.107:41001")},
	}}}}
	if e := endOf(nodePort, traffic.Timeout, traffic.Reply{}, errors.New("i/o timeout"), conns); strings.Contains(e.By, "older IPVS connection") {
		t.Errorf("the NodePort flow's own connection: got %+v", e)
	}
}
