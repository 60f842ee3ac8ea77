package verify

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

func TestTakenBy(t *testing.T) {
	conns := parseIPVSConns(node2Conns)
	if len(conns) != 2 {
		t.Fatalf("parsed %d connections, want 2 (the persistence template is no connection): %+v", len(conns), conns)
	}
	ap := netip.MustParseAddrPort
	lost := pairing{Target: ap("10.96.0.4:53"), Endpoint: ap("10.244.2.2:5353"), Client: ap("192.168.5.13:35342")}
	c, ok := takenBy(lost, "UDP", conns)
	if !ok || c.Virtual != ap("192.168.5.12:30002") {
		t.Errorf("the masqueraded ClusterIP attempt: taken by %+v, %t; want the NodePort connection", c, ok)
	}
	for _, p := range []struct {
		name     string
		p        pairing
		protocol string
	}{
		{"the NodePort flow itself", pairing{Target: ap("192.168.5.12:30002"), Endpoint: ap("10.244.2.2:5353"), Client: ap("192.168.5.13:35342")}, "UDP"},
		{"another client port", pairing{Target: ap("10.96.0.4:53"), Endpoint: ap("10.244.2.2:5353"), Client: ap("192.168.5.13:35343")}, "UDP"},
		{"another endpoint", pairing{Target: ap("10.96.0.4:53"), Endpoint: ap("10.244.1.2:5353"), Client: ap("192.168.5.13:35342")}, "UDP"},
		{"another protocol", lost, "TCP"},
	} {
		if c, ok := takenBy(p.p, p.protocol, conns); ok {
			t.Errorf("%s: taken by %+v, want by none", p.name, c)
		}
	}
}
