package network

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

const twoNodes = `
name: net
clusterCIDR: 10.7.0.0/16
serviceCIDR: 10.70.0.0/16
nodeCIDR: 192.168.7.0/24
nodes:
  - {name: node-1, ip: 192.168.7.10, podCIDR: 10.7.1.0/24}
  - {name: node-2, ip: 192.168.7.11, podCIDR: 10.7.2.0/24}
pods:
  - name: a
    node: node-1
    ip: 10.7.1.10
  - name: b
    node: node-2
    ip: 10.7.2.10
    ports:
      - {name: http, containerPort: 8080, protocol: TCP}
clients:
  - name: outside
    ip: 192.168.7.100
`

// members are a test's members, named the way `svclab clean` finds them.
type members map[string]*member.Member

func (ms members) Member(name string) (*member.Member, error) {
	m, ok := ms[name]
	if !ok {
		return nil, fmt.Errorf("no member %q", name)
	}
	return m, nil
}

func (ms members) Members() []record.Member {
	var out []record.Member
	for _, m := range ms {
		out = append(out, record.Member{Name: m.Name, Kind: m.Kind, NetNS: m.NetNS})
	}
	return out
}

// TestBuild builds a two-node network in the kernel and connects through it:
// a pod on one node to a pod's server on the other (through both nodes'
// bridges and the fabric); then a client's multipath route is installed and
// taken back, and a pod unplugged is unreachable.
func TestBuild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test builds network namespaces and must run as root")
	}
	topo, err := topology.Parse("two-nodes.yaml", []byte(twoNodes))
	if err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("%04x", rand.Uint32()&0xffff)
	ms := members{}
	add := func(name, kind string, ip netip.Addr) {
		ms[name] = &member.Member{Name: name, Kind: kind, NetNS: record.NamespacePrefix + "t-" + run + "-" + name, IP: ip}
	}
	add(Fabric, member.KindFabric, netip.Addr{})
	for _, n := range topo.Nodes {
		add(n.Name, member.KindNode, n.IP)
	}
	for _, p := range topo.Pods {
		add(p.Name, member.KindPod, p.IP)
	}
	for _, c := range topo.Clients {
		add(c.Name, member.KindClient, c.IP)
	}
	n := New(ms, run, 4)
	t.Cleanup(func() {
		var names []string
		for _, m := range ms {
			if namespaces.Exists(m.NetNS) {
				names = append(names, m.NetNS)
			}
		}
		if err := n.Delete(names); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	if err := n.Build(ctx, topo); err != nil {
		t.Fatal(err)
	}

	b, _ := topo.Pod("default/b")
	srv, err := traffic.Serve(ms["b"].NetNS, traffic.Identity{Pod: b.Name, Namespace: b.Namespace, Node: b.Node, IP: b.IP}, b.Ports)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dial := func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := traffic.Dialer(ms["a"].NetNS)(ctx, "tcp", netip.AddrPortFrom(b.IP, 8080).String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("pod a to pod b's server across the nodes: %v", err)
	}
	// A pod keeps IPv6 on but silent: no address on eth0, not even a
	// link-local one, once the link is up (silenceIPv6).
	if got := ipv6Addrs(t, ms["a"].NetNS, Eth0); len(got) > 0 {
		t.Fatalf("pod a's %s has IPv6 addresses %v, want none", Eth0, got)
	}

	out := ms["outside"]
	dst := netip.MustParseAddr("203.0.113.7")
	want := []Route{{Dst: dst, Via: []netip.Addr{topo.Nodes[0].IP, topo.Nodes[1].IP}}}
	have, err := n.ReplaceRoutes(out, nil, want)
	if err != nil {
		t.Fatal(err)
	}
	if got := nexthops(t, out.NetNS, dst); got != 2 {
		t.Fatalf("client's route to %s: %d next hops, want 2", dst, got)
	}
	if _, err := n.ReplaceRoutes(out, have, nil); err != nil {
		t.Fatal(err)
	}
	if got := nexthops(t, out.NetNS, dst); got != -1 {
		t.Fatalf("client's route to %s is still there after its removal (%d next hops)", dst, got)
	}

	if err := n.UnplugPod(b); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err == nil {
		t.Fatal("pod a still reaches pod b after b was unplugged")
	}
}

// ipv6Addrs are the IPv6 addresses of link in netns.
func ipv6Addrs(t *testing.T, netns, link string) []netlink.Addr {
	t.Helper()
	ns, err := namespaces.Open(netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	l, err := ns.Netlink.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := ns.Netlink.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// nexthops is the number of next hops of netns's route to exactly dst; -1
// when there is none.
func nexthops(t *testing.T, netns string, dst netip.Addr) int {
	t.Helper()
	ns, err := namespaces.Open(netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	routes, err := ns.Netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: hostNet(dst)}, netlink.RT_FILTER_DST)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) == 0 {
		return -1
	}
	if len(routes[0].MultiPath) == 0 {
		return 1
	}
	return len(routes[0].MultiPath)
}
