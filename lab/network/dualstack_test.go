package network

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

const dualNodes = `
name: net6
clusterCIDR: 10.7.0.0/16,fd00:7::/56
serviceCIDR: 10.70.0.0/16,fd00:70::/108
nodeCIDR: 192.168.7.0/24,fd00:1:7::/64
nodes:
  - {name: node-1, ips: [192.168.7.10, "fd00:1:7::10"], podCIDRs: [10.7.1.0/24, "fd00:7:0:1::/64"]}
  - {name: node-2, ips: [192.168.7.11, "fd00:1:7::11"], podCIDRs: [10.7.2.0/24, "fd00:7:0:2::/64"]}
pods:
  - {name: a, node: node-1}
clients:
  - {name: v4-only, ip: 192.168.7.100}
  - {name: both, ips: [192.168.7.101, "fd00:1:7::101"]}
`

// TestBuildDualStack builds a dual-stack network and reads back what the
// kernel holds: IPv6 addresses where the topology gives them, none tentative,
// host-gw routes of both families, IPv6 forwarding on nodes only, and an
// IPv4-only client left without IPv6. Traffic over it is the specs' ("A
// dual-stack lab network").
func TestBuildDualStack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test builds network namespaces and must run as root")
	}
	topo, err := topology.Parse("dual-nodes.yaml", []byte(dualNodes))
	if err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("%04x", rand.Uint32()&0xffff)
	ms := members{}
	add := func(name, kind string) {
		ms[name] = &member.Member{Name: name, Kind: kind, NetNS: record.NamespacePrefix + "t-" + run + "-" + name}
	}
	add(Fabric, member.KindFabric)
	for _, n := range topo.Nodes {
		add(n.Name, member.KindNode)
	}
	for _, p := range topo.Pods {
		add(p.Name, member.KindPod)
	}
	for _, c := range topo.Clients {
		add(c.Name, member.KindClient)
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
	if err := n.Build(context.Background(), topo); err != nil {
		t.Fatal(err)
	}

	global := func(netns, link string) []string {
		var out []string
		for _, a := range ipv6Addrs(t, netns, link) {
			if a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
				t.Errorf("%s %s: %s is tentative or failed DAD", netns, link, a.IPNet)
			}
			if a.Scope == unix.RT_SCOPE_UNIVERSE {
				out = append(out, a.IPNet.String())
			}
		}
		return out
	}
	want := map[[2]string]string{
		{"node-1", Eth0}:      "fd00:1:7::10/64",
		{"node-1", podBridge}: "fd00:7:0:1::1/64",
		{"a", Eth0}:           "fd00:7:0:1::2/64",
		{"both", Eth0}:        "fd00:1:7::101/64",
	}
	for k, w := range want {
		if got := global(ms[k[0]].NetNS, k[1]); len(got) != 1 || got[0] != w {
			t.Errorf("%s %s: IPv6 addresses %v, want [%s]", k[0], k[1], got, w)
		}
	}
	if got := ipv6Addrs(t, ms["v4-only"].NetNS, Eth0); len(got) > 0 {
		t.Errorf("a client without an IPv6 address has %v", got)
	}

	// node-1 routes node-2's podCIDRs of both families via node-2's addresses.
	ns, err := namespaces.Open(ms["node-1"].NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	for _, r := range []struct{ dst, via string }{{"10.7.2.0/24", "192.168.7.11"}, {"fd00:7:0:2::/64", "fd00:1:7::11"}} {
		dst := netip.MustParsePrefix(r.dst)
		routes, err := ns.Netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Dst: ipNet(dst)}, netlink.RT_FILTER_DST)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes) != 1 || routes[0].Gw.String() != r.via {
			t.Errorf("node-1's routes to %s: %v, want one via %s", r.dst, routes, r.via)
		}
	}
	pod, _ := namespaces.Open(ms["a"].NetNS)
	defer pod.Close()
	defs, err := pod.Netlink.RouteList(nil, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	var gw string
	for _, r := range defs {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			gw = r.Gw.String()
		}
	}
	if gw != "fd00:7:0:1::1" {
		t.Errorf("pod a's IPv6 default route via %q, want fd00:7:0:1::1 (%v)", gw, defs)
	}
	for name, want := range map[string]string{"node-1": "1", "both": "0"} {
		if v, err := namespaces.ReadSysctl(ms[name].NetNS, "net.ipv6.conf.all.forwarding"); err != nil || v != want {
			t.Errorf("%s: IPv6 forwarding %q (%v), want %s", name, v, err, want)
		}
	}
}
