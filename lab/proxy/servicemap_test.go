package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func endpoint(addr, node string, ready, terminating bool) Endpoint {
	ap := netip.MustParseAddrPort(addr)
	return Endpoint{IP: ap.Addr(), Port: int(ap.Port()), NodeName: node, Ready: ready, Serving: ready || terminating, Terminating: terminating}
}

func backends(addrs ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range addrs {
		out = append(out, netip.MustParseAddrPort(a))
	}
	return out
}

// TestExpectedServiceMap checks the frontends kube-proxy programs on node-1 for
// each policy, in the iptables/nftables models and in IPVS, where a Local policy
// without a local endpoint falls back to every endpoint and nothing drops.
func TestExpectedServiceMap(t *testing.T) {
	ready1 := endpoint("10.244.1.10:8080", "node-1", true, false)
	ready2 := endpoint("10.244.2.10:8080", "node-2", true, false)
	term1 := endpoint("10.244.1.11:8080", "node-1", false, true)
	port := func(ip string, nodePort int, eps ...Endpoint) ServicePort {
		return ServicePort{Name: ServicePortName{Namespace: "default", Name: "s"}, Protocol: corev1.ProtocolTCP,
			ClusterIP: netip.MustParseAddr(ip), Port: 80, NodePort: nodePort, Endpoints: eps}
	}
	cluster := port("10.96.0.1", 30001, ready1, ready2)
	cluster.AffinitySeconds = 60
	none := port("10.96.0.2", 30002)
	extLocalRemote := port("10.96.0.3", 30003, ready2)
	extLocalRemote.ExternalLocal = true
	intLocalRemote := port("10.96.0.4", 0, ready2)
	intLocalRemote.InternalLocal = true
	fallback := port("10.96.0.5", 30005, term1, ready2)
	fallback.ExternalLocal = true
	s := StateOf([]ServicePort{cluster, none, extLocalRemote, intLocalRemote, fallback})

	c := func(ip string) Frontend { return ClusterIPFrontend(corev1.ProtocolTCP, netip.MustParseAddr(ip), 80) }
	np := func(p int) Frontend { return NodePortFrontend(corev1.ProtocolTCP, p) }
	both := Forwarded(backends("10.244.1.10:8080", "10.244.2.10:8080"), 60)
	remote := Forwarded(backends("10.244.2.10:8080"), 0)
	reject, drop := Forwarding{Verdict: Reject}, Forwarding{Verdict: Drop}
	iptables := ServiceMap{
		c("10.96.0.1"): both, np(30001): both,
		c("10.96.0.2"): reject, np(30002): reject,
		c("10.96.0.3"): remote, np(30003): drop,
		c("10.96.0.4"): drop,
		c("10.96.0.5"): remote, np(30005): Forwarded(backends("10.244.1.11:8080"), 0),
	}
	ipvs := ServiceMap{
		c("10.96.0.1"): both, np(30001): both,
		c("10.96.0.2"): reject, np(30002): reject,
		c("10.96.0.3"): remote, np(30003): remote,
		// A ClusterIP-only Service with internalTrafficPolicy Local has no
		// cluster endpoints to fall back to.
		c("10.96.0.4"): reject,
		c("10.96.0.5"): remote, np(30005): Forwarded(backends("10.244.1.11:8080"), 0),
	}
	for _, tc := range []struct {
		m    Model
		want ServiceMap
	}{{ModelIPTables, iptables}, {ModelNFTables, iptables}, {ModelIPVS, ipvs}} {
		got := ExpectedServiceMap(s, Node{Name: "node-1"}, tc.m)
		if d := DiffServiceMaps(tc.want, got); d != nil {
			t.Errorf("%s:\n%s", tc.m, strings.Join(d, "\n"))
		}
	}
}

func TestDiffServiceMaps(t *testing.T) {
	a := ClusterIPFrontend(corev1.ProtocolUDP, netip.MustParseAddr("10.96.0.10"), 53)
	b := NodePortFrontend(corev1.ProtocolTCP, 30080)
	c := ClusterIPFrontend(corev1.ProtocolTCP, netip.MustParseAddr("10.96.0.1"), 443)
	want := ServiceMap{
		a: Forwarded(backends("10.244.1.2:53", "10.244.2.2:53"), 0),
		b: {Verdict: Drop},
	}
	got := ServiceMap{
		a: Forwarded(backends("10.244.2.2:53", "10.244.3.2:53"), 0),
		c: Forwarded(backends("192.168.1.10:6443"), 10800),
	}
	if d := DiffServiceMaps(want, want); d != nil {
		t.Errorf("a map differs from itself: %v", d)
	}
	wantDiff := []string{
		"TCP 10.96.0.1:443: not expected (got forward to 192.168.1.10:6443 (affinity 10800s))",
		"TCP nodePort 30080: missing (want drop)",
		"UDP 10.96.0.10:53: want forward to 10.244.1.2:53 10.244.2.2:53, got forward to 10.244.2.2:53 10.244.3.2:53 (missing 10.244.1.2:53; extra 10.244.3.2:53)",
	}
	if d := DiffServiceMaps(want, got); !slices.Equal(d, wantDiff) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(wantDiff, "\n"))
	}
	if f := Forwarded(nil, 60); f.Verdict != Reject || f.AffinitySeconds != 0 {
		t.Errorf("Forwarded without backends = %v, want reject", f)
	}
}
