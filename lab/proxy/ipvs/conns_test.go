package ipvs

import (
	"net/netip"
	"testing"
)

// The IPVS connection table of node-2 as ipvsadm -Lnc printed it in the VM when
// a node-3 ClusterIP attempt of policies-local.yaml timed out: node-3 had dialled
// node-2's NodePort from port 35342, and a second later masqueraded a ClusterIP
// flow to the same endpoint to that port.
const node2Conns = `IPVS connection entries
pro expire state       source             virtual            destination
IP  00:58  NONE        192.168.5.13:0     192.168.5.12:30002 10.244.2.2:5353
UDP 04:59  UDP         192.168.5.13:35342 192.168.5.12:30002 10.244.2.2:5353
TCP 01:58  TIME_WAIT   10.244.3.2:40112   10.96.0.4:80       10.244.1.2:8080
`

func TestReplyTaker(t *testing.T) {
	conns := ParseConns(node2Conns)
	if len(conns) != 2 {
		t.Fatalf("parsed %d connections, want 2 (the persistence template is no connection): %+v", len(conns), conns)
	}
	if got, want := conns[0].String(), "UDP 04:59 UDP 192.168.5.13:35342 192.168.5.12:30002 10.244.2.2:5353"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	ap := netip.MustParseAddrPort
	type flow struct{ target, endpoint, client netip.AddrPort }
	lost := flow{ap("10.96.0.4:53"), ap("10.244.2.2:5353"), ap("192.168.5.13:35342")}
	c, ok := ReplyTaker(conns, "UDP", lost.target, lost.endpoint, lost.client)
	if !ok || c.Virtual != ap("192.168.5.12:30002") {
		t.Errorf("the masqueraded ClusterIP attempt: taken by %+v, %t; want the NodePort connection", c, ok)
	}
	for _, p := range []struct {
		name     string
		f        flow
		protocol string
	}{
		{"the NodePort flow itself", flow{ap("192.168.5.12:30002"), ap("10.244.2.2:5353"), ap("192.168.5.13:35342")}, "UDP"},
		{"another client port", flow{ap("10.96.0.4:53"), ap("10.244.2.2:5353"), ap("192.168.5.13:35343")}, "UDP"},
		{"another endpoint", flow{ap("10.96.0.4:53"), ap("10.244.1.2:5353"), ap("192.168.5.13:35342")}, "UDP"},
		{"another protocol", lost, "TCP"},
	} {
		if c, ok := ReplyTaker(conns, p.protocol, p.f.target, p.f.endpoint, p.f.client); ok {
			t.Errorf("%s: taken by %+v, want by none", p.name, c)
		}
	}
}
