package traffic

import (
	"bufio"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestFamily(t *testing.T) {
	for _, tc := range []struct {
		addr netip.Addr
		want string
	}{
		{netip.MustParseAddr("10.244.2.10"), "4"},
		{netip.MustParseAddr("::ffff:10.244.2.10"), "4"},
		{netip.MustParseAddr("fd00:10:244:2::10"), "6"},
		{netip.MustParseAddr("fe80::1%eth0"), "6"},
		{netip.MustParseAddr("::"), "6"},
		{netip.Addr{}, "4"},
	} {
		if got := family(tc.addr); got != tc.want {
			t.Errorf("family(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		ap   netip.AddrPort
		want string
	}{
		{netip.MustParseAddrPort("10.244.2.10:8080"), "10.244.2.10:8080"},
		{netip.MustParseAddrPort("[fd00:10:244:2::10]:8080"), "[fd00:10:244:2::10]:8080"},
		{netip.MustParseAddrPort("[::ffff:10.96.0.10]:53"), "10.96.0.10:53"},
		{netip.MustParseAddrPort("[fe80::1%eth0]:80"), "[fe80::1%eth0]:80"},
		{netip.AddrPort{}, netip.AddrPort{}.String()},
	} {
		got := hostPort(tc.ap)
		if got != tc.want {
			t.Errorf("hostPort(%v) = %q, want %q", tc.ap, got, tc.want)
		}
		if tc.ap.IsValid() {
			a := tc.ap.Addr().Unmap()
			if jhp := net.JoinHostPort(a.String(), strconv.Itoa(int(tc.ap.Port()))); got != jhp {
				t.Errorf("hostPort(%v) = %q, net.JoinHostPort writes %q", tc.ap, got, jhp)
			}
		}
	}
}

func TestDialNetwork(t *testing.T) {
	v4, v6 := netip.MustParseAddrPort("10.96.0.10:53"), netip.MustParseAddrPort("[fd00:10:96::a]:53")
	mapped := netip.MustParseAddrPort("[::ffff:10.96.0.10]:53")
	for _, tc := range []struct {
		proto string
		to    netip.AddrPort
		want  string
	}{
		{"TCP", v4, "tcp4"},
		{"", v4, "tcp4"},
		{"udp", v4, "udp4"},
		{"UDP", mapped, "udp4"},
		{"TCP", v6, "tcp6"},
		{"tcp", v6, "tcp6"},
		{"UDP", v6, "udp6"},
	} {
		got, err := Dial{Protocol: tc.proto, To: tc.to}.network()
		if err != nil || got != tc.want {
			t.Errorf("Dial{Protocol: %q, To: %v}.network() = %q, %v; want %q", tc.proto, tc.to, got, err, tc.want)
		}
	}
	if _, err := (Dial{Protocol: "SCTP", To: v6}).network(); err == nil {
		t.Errorf("SCTP: no error")
	}
}

func TestListens(t *testing.T) {
	v4 := Identity{Pod: "web-a", IP: netip.MustParseAddr("10.244.1.10")}
	dual := Identity{Pod: "web-b", IP: netip.MustParseAddr("10.244.2.10"), IP6: netip.MustParseAddr("fd00:10:244:2::10")}
	for _, tc := range []struct {
		id   Identity
		port corev1.ContainerPort
		want []listen
	}{
		// An IPv4-only pod: the one socket it always had.
		{v4, corev1.ContainerPort{ContainerPort: 8080}, []listen{{"tcp", "tcp4", ":8080"}}},
		{v4, corev1.ContainerPort{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, []listen{{"tcp", "tcp4", ":8080"}}},
		{v4, corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, []listen{{"udp", "udp4", ":53"}}},
		// A dual-stack pod: the same, and an IPv6-only socket beside it.
		{dual, corev1.ContainerPort{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, []listen{{"tcp", "tcp4", ":8080"}, {"tcp", "tcp6", "[::]:8080"}}},
		{dual, corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, []listen{{"udp", "udp4", ":53"}, {"udp", "udp6", "[::]:53"}}},
	} {
		got, err := tc.id.listens(tc.port)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %d/%s: listens = %v, %v; want %v", tc.id.Pod, tc.port.ContainerPort, tc.port.Protocol, got, err, tc.want)
		}
	}
	if _, err := dual.listens(corev1.ContainerPort{ContainerPort: 9, Protocol: corev1.ProtocolSCTP}); err == nil {
		t.Errorf("SCTP: no error")
	}
}

func TestReply(t *testing.T) {
	id := Identity{Pod: "web-b", Namespace: "default", Node: "node-2",
		IP: netip.MustParseAddr("10.244.2.10"), IP6: netip.MustParseAddr("fd00:10:244:2::10")}
	v4only := id
	v4only.IP6 = netip.Addr{}
	const (
		v4Line = `{"pod":"web-b","namespace":"default","node":"node-2","addr":"10.244.2.10:8080","protocol":"TCP","client":"10.244.1.10:40000"}` + "\n"
		v6Line = `{"pod":"web-b","namespace":"default","node":"node-2","addr":"[fd00:10:244:2::10]:8080","protocol":"TCP","client":"[fd00:10:244:1::10]:40000"}` + "\n"
	)
	for _, tc := range []struct {
		name          string
		id            Identity
		proto         string
		local, remote string
		want          string
	}{
		// IPv4 replies are what they were before IPv6, with or without it.
		{"IPv4", id, "TCP", "10.244.2.10:8080", "10.244.1.10:40000", v4Line},
		{"IPv4, IPv4-only pod", v4only, "TCP", "10.244.2.10:8080", "10.244.1.10:40000", v4Line},
		{"IPv4, reached on another address", id, "TCP", "10.244.2.1:8080", "10.244.1.10:40000", v4Line},
		{"IPv4-mapped client", id, "TCP", "10.244.2.10:8080", "[::ffff:10.244.1.10]:40000", v4Line},
		{"IPv6", id, "TCP", "[fd00:10:244:2::10]:8080", "[fd00:10:244:1::10]:40000", v6Line},
		{"UDP on the IPv4 wildcard", id, "UDP", "0.0.0.0:53", "10.244.1.10:40000",
			`{"pod":"web-b","namespace":"default","node":"node-2","addr":"10.244.2.10:53","protocol":"UDP","client":"10.244.1.10:40000"}` + "\n"},
		{"UDP on the IPv6 wildcard", id, "UDP", "[::]:53", "[fd00:10:244:1::10]:40000",
			`{"pod":"web-b","namespace":"default","node":"node-2","addr":"[fd00:10:244:2::10]:53","protocol":"UDP","client":"[fd00:10:244:1::10]:40000"}` + "\n"},
	} {
		got := string(tc.id.reply(tc.proto, netip.MustParseAddrPort(tc.local), netip.MustParseAddrPort(tc.remote)))
		if got != tc.want {
			t.Errorf("%s:\n got %s want %s", tc.name, got, tc.want)
		}
		r, err := parseReply([]byte(got))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if r.Backend() != net.JoinHostPort(r.Addr.Addr().String(), strconv.Itoa(int(r.Addr.Port()))) {
			t.Errorf("%s: Backend() = %q, not net.JoinHostPort's form", tc.name, r.Backend())
		}
	}
}

// TestServeBothFamilies serves one identity on loopback sockets of each
// family (in this process's namespace: Serve's own namespace switch needs a
// lab) and reads what a client of each family is told.
func TestServeBothFamilies(t *testing.T) {
	id := Identity{Pod: "web-b", Namespace: "default", Node: "node-2",
		IP: netip.MustParseAddr("10.244.2.10"), IP6: netip.MustParseAddr("fd00:10:244:2::10")}
	s := &Server{id: id, conns: map[net.Conn]struct{}{}}
	for _, l := range []listen{{"tcp", "tcp4", "127.0.0.1:0"}, {"tcp", "tcp6", "[::1]:0"}, {"udp", "udp4", "127.0.0.1:0"}, {"udp", "udp6", "[::1]:0"}} {
		if l.proto == "udp" {
			pc, err := net.ListenPacket(l.network, l.addr)
			if err != nil {
				s.Close()
				t.Skipf("listen %s %s: %v", l.network, l.addr, err)
			}
			s.packets = append(s.packets, pc)
			continue
		}
		ln, err := net.Listen(l.network, l.addr)
		if err != nil {
			s.Close()
			t.Skipf("listen %s %s: %v", l.network, l.addr, err)
		}
		s.listeners = append(s.listeners, ln)
	}
	s.start()
	defer s.Close()
	ask := func(network string, to net.Addr) {
		t.Helper()
		c, err := net.DialTimeout(network, to.String(), 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s %s: %v", network, to, err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte(onceLine + "\n")); err != nil {
			t.Fatalf("%s %s: write: %v", network, to, err)
		}
		line, err := bufio.NewReader(c).ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s %s: read: %v", network, to, err)
		}
		r, err := parseReply(line)
		if err != nil {
			t.Fatal(err)
		}
		self, local := id.IP, addrPort(c.LocalAddr())
		if network[len(network)-1] == '6' {
			self = id.IP6
		}
		want := Reply{Pod: "web-b", Namespace: "default", Node: "node-2",
			Addr: netip.AddrPortFrom(self, addrPort(to).Port()), Protocol: map[string]string{"tcp": "TCP", "udp": "UDP"}[network[:3]],
			Client: netip.AddrPortFrom(local.Addr().Unmap(), local.Port())}
		if r != want {
			t.Errorf("%s to %s: %+v, want %+v", network, to, r, want)
		}
	}
	ask("tcp4", s.listeners[0].Addr())
	ask("tcp6", s.listeners[1].Addr())
	ask("udp4", s.packets[0].LocalAddr())
	ask("udp6", s.packets[1].LocalAddr())
}
