package ipvs

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	libipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/internal/proxytest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// TestReadFollowsSync programs a throwaway node namespace (with a lab node's two
// addresses, so that NodePorts get a virtual server on each) with svclab's IPVS
// proxier through proxytest.Sequence, and after every sync reads IPVS back: Read
// must give exactly the ServiceMap kube-proxy's IPVS mode must program for that
// state. Then two changes behind the proxier's back must show as exactly those
// differences: a real server set to weight 0, and a NodePort's real server
// deleted on one node address only. It needs a kernel with IPVS; on one without,
// it runs itself in svclab's VM (ranInVM).
func TestReadFollowsSync(t *testing.T) {
	if ranInVM(t) {
		return
	}
	ns := nstest.New(t, "programs IPVS")
	addAddress(t, ns, "eth0", "192.168.1.10/24")
	addAddress(t, ns, "cni0", "10.244.1.1/24")
	tg := target(node1)
	tg.NetNS, tg.RunDir = ns.Path, t.TempDir()
	p, err := New(tg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	seen := map[string]bool{}
	var last []proxy.ServicePort
	for _, step := range proxytest.Sequence() {
		if err := p.Sync(context.Background(), proxy.StateOf(step.Ports)); err != nil {
			t.Fatalf("%s: %v", step.Name, err)
		}
		got, err := Read(ns, tg.Config)
		if err != nil {
			t.Fatalf("%s: %v", step.Name, err)
		}
		want := proxy.ExpectedServiceMap(proxy.StateOf(step.Ports), node1, proxy.ModelIPVS)
		if d := proxy.DiffServiceMaps(want, got); d != nil {
			t.Errorf("%s: Read differs from the expected ServiceMap:\n%s\nread:\n%s", step.Name, strings.Join(d, "\n"), got)
		}
		for _, f := range want {
			k := f.Verdict.String()
			if f.AffinitySeconds > 0 {
				k += " with affinity"
			}
			if len(f.SourceRanges) > 0 {
				k += " from source ranges"
			}
			seen[k] = true
		}
		last = step.Ports
	}
	for _, k := range []string{"forward", "forward with affinity", "forward from source ranges", "reject"} {
		if !seen[k] {
			t.Errorf("the sequence never expected a frontend that does %s", k)
		}
	}

	h, err := libipvs.New(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	svc := func(addr string, port uint16) *libipvs.Service {
		return &libipvs.Service{Address: net.ParseIP(addr), Protocol: unix.IPPROTO_TCP, Port: port, AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
	}
	dst := func(addr string, port uint16, weight int) *libipvs.Destination {
		return &libipvs.Destination{Address: net.ParseIP(addr), Port: port, Weight: weight,
			ConnectionFlags: libipvs.ConnectionFlagMasq, AddressFamily: unix.AF_INET}
	}
	if err := h.UpdateDestination(svc("10.96.0.130", 80), dst("10.244.2.70", 80, 0)); err != nil {
		t.Fatal(err)
	}
	if err := h.DelDestination(svc("192.168.1.10", 30083), dst("10.244.1.23", 8080, 1)); err != nil {
		t.Fatal(err)
	}
	got, err := Read(ns, tg.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.ExpectedServiceMap(proxy.StateOf(last), node1, proxy.ModelIPVS)
	wantDiff := []string{
		"TCP 10.96.0.130:80: want forward to 10.244.2.70:80, got reject",
		"TCP nodePort 30083: want forward to 10.244.1.23:8080, got inconsistent (10.244.1.1: forward to 10.244.1.23:8080; 192.168.1.10: reject)",
	}
	if d := proxy.DiffServiceMaps(want, got); !slices.Equal(d, wantDiff) {
		t.Errorf("after the changes, the difference is\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(wantDiff, "\n"))
	}
}

// addAddress gives ns a dummy link called name holding cidr, as a lab node's
// eth0 and cni0 hold its addresses.
func addAddress(t *testing.T, ns *namespaces.NS, name, cidr string) {
	t.Helper()
	l := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := ns.Netlink.LinkAdd(l); err != nil {
		t.Fatalf("add %s: %v", name, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Netlink.AddrAdd(l, a); err != nil {
		t.Fatalf("address %s on %s: %v", cidr, name, err)
	}
	if err := ns.Netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}
