package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
)

func udpPort(name, clusterIP string, nodePort int, eps ...Endpoint) ServicePort {
	return ServicePort{
		Name:      ServicePortName{Namespace: "kube-system", Name: name, Port: "dns"},
		Protocol:  corev1.ProtocolUDP,
		ClusterIP: netip.MustParseAddr(clusterIP),
		Port:      53,
		NodePort:  nodePort,
		Endpoints: eps,
	}
}

func serving(ip string) Endpoint {
	return Endpoint{IP: netip.MustParseAddr(ip), Port: 5353, NodeName: "node-1", Ready: true, Serving: true}
}

func flow(proto uint8, src, dst, replySrc string) *netlink.ConntrackFlow {
	s, d, r := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), netip.MustParseAddrPort(replySrc)
	return &netlink.ConntrackFlow{
		FamilyType: unix.AF_INET,
		Forward:    netlink.IPTuple{Protocol: proto, SrcIP: s.Addr().AsSlice(), SrcPort: s.Port(), DstIP: d.Addr().AsSlice(), DstPort: d.Port()},
		Reverse:    netlink.IPTuple{Protocol: proto, SrcIP: r.Addr().AsSlice(), SrcPort: r.Port(), DstIP: s.Addr().AsSlice(), DstPort: s.Port()},
	}
}

// TestStaleUDPFlows checks the choice of entries on made-up flows (the kernel
// version of the same is TestCleanStaleUDPConntrack).
func TestStaleUDPFlows(t *testing.T) {
	notServing := serving("10.244.1.4")
	notServing.Ready, notServing.Serving = false, false
	draining := serving("10.244.1.5")
	draining.Ready, draining.Terminating = false, true
	cur := []ServicePort{
		udpPort("dns", "10.96.0.10", 30053, serving("10.244.1.3"), notServing, draining),
		udpPort("empty", "10.96.0.12", 30054),
	}
	cases := []struct {
		name   string
		flow   *netlink.ConntrackFlow
		delete bool
	}{
		{"to a serving endpoint", flow(unix.IPPROTO_UDP, "10.244.1.100:1", "10.96.0.10:53", "10.244.1.3:5353"), false},
		{"to a terminating endpoint that still serves", flow(unix.IPPROTO_UDP, "10.244.1.100:2", "10.96.0.10:53", "10.244.1.5:5353"), false},
		{"to an endpoint that went away", flow(unix.IPPROTO_UDP, "10.244.1.100:3", "10.96.0.10:53", "10.244.1.2:5353"), true},
		{"to an endpoint that does not serve", flow(unix.IPPROTO_UDP, "10.244.1.100:4", "10.96.0.10:53", "10.244.1.4:5353"), true},
		{"to the ClusterIP itself, before there was an endpoint", flow(unix.IPPROTO_UDP, "10.244.1.100:5", "10.96.0.10:53", "10.96.0.10:53"), true},
		{"to another port of the ClusterIP", flow(unix.IPPROTO_UDP, "10.244.1.100:6", "10.96.0.10:54", "10.96.0.10:54"), false},
		{"TCP", flow(unix.IPPROTO_TCP, "10.244.1.100:7", "10.96.0.10:53", "10.244.1.2:5353"), false},
		{"through the NodePort to an endpoint that went away", flow(unix.IPPROTO_UDP, "192.168.1.100:8", "192.168.1.10:30053", "10.244.1.2:5353"), true},
		{"through the NodePort to a serving endpoint", flow(unix.IPPROTO_UDP, "192.168.1.100:9", "192.168.1.10:30053", "10.244.1.3:5353"), false},
		{"to a Service without endpoints", flow(unix.IPPROTO_UDP, "10.244.1.100:10", "10.96.0.12:53", "10.96.0.12:53"), true},
		{"to the NodePort of a Service without endpoints", flow(unix.IPPROTO_UDP, "192.168.1.100:11", "192.168.1.10:30054", "192.168.1.10:30054"), false},
	}
	var flows []*netlink.ConntrackFlow
	for _, c := range cases {
		flows = append(flows, c.flow)
	}
	stale := StaleUDPFlows(cur, flows)
	for _, c := range cases {
		if got := slices.Contains(stale, c.flow); got != c.delete {
			t.Errorf("%s: deleted %v, want %v", c.name, got, c.delete)
		}
	}
}

func TestConntrackCleanupNeeded(t *testing.T) {
	dns := udpPort("dns", "10.96.0.10", 0, serving("10.244.1.2"))
	web := dns
	web.Name.Name, web.Protocol = "web", corev1.ProtocolTCP
	moved := dns
	moved.Endpoints = []Endpoint{serving("10.244.1.3")}
	webMoved := web
	webMoved.Endpoints = []Endpoint{serving("10.244.1.3")}
	renumbered := dns
	renumbered.Port = 54
	cases := []struct {
		name      string
		prev, cur []ServicePort
		want      bool
	}{
		{"nothing changed", []ServicePort{dns, web}, []ServicePort{dns, web}, false},
		{"a UDP Service's endpoint moved", []ServicePort{dns, web}, []ServicePort{moved, web}, true},
		{"only a TCP Service's endpoint moved", []ServicePort{dns, web}, []ServicePort{dns, webMoved}, false},
		{"a UDP Service appeared", []ServicePort{web}, []ServicePort{dns, web}, true},
		{"a UDP Service went away", []ServicePort{dns, web}, []ServicePort{web}, true},
		{"a UDP Service changed its port, not its endpoints", []ServicePort{dns}, []ServicePort{renumbered}, false},
	}
	for _, c := range cases {
		if got := Diff(c.prev, c.cur).ConntrackCleanupNeeded(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCleanStaleUDPConntrack makes real conntrack entries in a throwaway namespace
// (datagrams through DNAT rules, as kube-proxy's would send them) and checks that
// the cleanup deletes exactly the stale ones.
func TestCleanStaleUDPConntrack(t *testing.T) {
	nsh := nstest.New(t, "programs conntrack")
	ns, h := nsh.Name, nsh.Netlink
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	// Client, endpoints and node address all live on lo; the service range is
	// routed there so datagrams to ClusterIPs leave and pass nat OUTPUT.
	for _, a := range []string{"10.244.1.100/32", "10.244.1.2/32", "10.244.1.3/32", "192.168.1.10/32"} {
		addr, _ := netlink.ParseAddr(a)
		if err := h.AddrAdd(lo, addr); err != nil {
			t.Fatal(err)
		}
	}
	_, serviceRange, _ := net.ParseCIDR("10.96.0.0/12")
	if err := h.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: serviceRange, Scope: netlink.SCOPE_LINK}); err != nil {
		t.Fatal(err)
	}
	for _, rule := range [][]string{
		{"-p", "udp", "-d", "10.96.0.10", "--dport", "53", "--sport", "40001", "-j", "DNAT", "--to-destination", "10.244.1.2:5353"},
		{"-p", "udp", "-d", "10.96.0.10", "--dport", "53", "--sport", "40002", "-j", "DNAT", "--to-destination", "10.244.1.3:5353"},
		{"-p", "udp", "-d", "192.168.1.10", "--dport", "30053", "-j", "DNAT", "--to-destination", "10.244.1.2:5353"},
		{"-p", "tcp", "-d", "10.96.0.10", "--dport", "53", "-j", "DNAT", "--to-destination", "10.244.1.2:5353"},
	} {
		if _, err := namespaces.Output(ns, append([]string{"iptables-nft", "-w", "5", "-t", "nat", "-A", "OUTPUT"}, rule...)...); err != nil {
			t.Fatal(err)
		}
	}
	// A TCP connection needs someone to accept it.
	var listener net.Listener
	if err := namespaces.Do(ns, func() error {
		var err error
		listener, err = net.Listen("tcp4", "10.244.1.2:5353")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer listener.Close()

	flows := map[string]struct {
		network, src, dst string
		stale             bool
	}{
		"A endpoint went away":          {"udp4", "10.244.1.100:40001", "10.96.0.10:53", true},
		"B endpoint stays":              {"udp4", "10.244.1.100:40002", "10.96.0.10:53", false},
		"C before the first endpoint":   {"udp4", "10.244.1.100:40003", "10.96.0.11:53", true},
		"D NodePort, endpoint went":     {"udp4", "10.244.1.100:40004", "192.168.1.10:30053", true},
		"E TCP to the endpoint gone":    {"tcp4", "10.244.1.100:40005", "10.96.0.10:53", false},
		"F UDP not to a Service at all": {"udp4", "10.244.1.100:40006", "10.244.1.3:7777", false},
	}
	err = namespaces.Do(ns, func() error {
		for name, f := range flows {
			d := net.Dialer{LocalAddr: addrOf(f.network, f.src)}
			c, err := d.Dial(f.network, f.dst)
			if err != nil {
				return fmt.Errorf("flow %s: %w", name, err)
			}
			if f.network == "udp4" {
				if _, err := c.Write([]byte("x")); err != nil {
					return fmt.Errorf("flow %s: %w", name, err)
				}
			}
			t.Cleanup(func() { c.Close() })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	present := func() map[uint16]bool {
		list, err := h.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		m := map[uint16]bool{}
		for _, f := range list {
			if a, _ := netip.AddrFromSlice(f.Forward.SrcIP); a == netip.MustParseAddr("10.244.1.100") {
				m[f.Forward.SrcPort] = true
			}
		}
		return m
	}
	srcPort := func(src string) uint16 { return netip.MustParseAddrPort(src).Port() }
	before := present()
	for name, f := range flows {
		if !before[srcPort(f.src)] {
			t.Fatalf("flow %s made no conntrack entry", name)
		}
	}

	prev := []ServicePort{
		udpPort("dns", "10.96.0.10", 30053, serving("10.244.1.2"), serving("10.244.1.3")),
		udpPort("late", "10.96.0.11", 0),
	}
	cur := []ServicePort{
		udpPort("dns", "10.96.0.10", 30053, serving("10.244.1.3")),
		udpPort("late", "10.96.0.11", 0, serving("10.244.1.3")),
	}
	// No endpoint changed: kube-proxy does not look, even though the entry of C
	// points at a Service without endpoints.
	if n, err := CleanStaleUDPConntrack(h, Diff(prev, prev), prev); err != nil || n != 0 {
		t.Fatalf("cleanup without a change deleted %d (%v)", n, err)
	}
	n, err := CleanStaleUDPConntrack(h, Diff(prev, cur), cur)
	if err != nil {
		t.Fatal(err)
	}
	after := present()
	want := 0
	for name, f := range flows {
		if f.stale {
			want++
		}
		if after[srcPort(f.src)] == f.stale {
			t.Errorf("flow %s: entry present %v after the cleanup, want %v", name, after[srcPort(f.src)], !f.stale)
		}
	}
	if n != want {
		t.Errorf("cleanup reports %d deleted, want %d", n, want)
	}
}

func addrOf(network, s string) net.Addr {
	ap := netip.MustParseAddrPort(s)
	if network == "tcp4" {
		return net.TCPAddrFromAddrPort(ap)
	}
	return net.UDPAddrFromAddrPort(ap)
}
