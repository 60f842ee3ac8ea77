package iptables

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

// states is a sequence of Service states that exercises every kind of chain: it
// adds and removes endpoints and Services, and a Service gains its first endpoint.
func states() [][]proxy.ServicePort {
	internalLocal := port("default", "cache", "", corev1.ProtocolTCP, "10.96.0.90", 6379,
		ep("10.244.1.30", 6379, "node-1"), ep("10.244.2.30", 6379, "node-2"))
	internalLocal.InternalLocal = true
	empty := port("default", "empty", "http", corev1.ProtocolTCP, "10.96.0.100", 80)
	empty.NodePort = 30100
	dns := port("kube-system", "kube-dns", "dns", corev1.ProtocolUDP, "10.96.0.10", 53,
		ep("10.244.1.2", 53, "node-1"), ep("10.244.2.2", 53, "node-2"))
	sticky := withAffinity(port("default", "sticky", "", corev1.ProtocolTCP, "10.96.0.120", 80,
		ep("10.244.1.50", 80, "node-1"), ep("10.244.2.50", 80, "node-2")), 60)
	s0 := []proxy.ServicePort{web(), httpd(), dns, local(), empty, sticky, internalLocal}

	web1 := web()
	web1.Endpoints = append(web1.Endpoints, ep("10.244.2.11", 8080, "node-2"))
	dns1 := dns
	dns1.Endpoints = dns.Endpoints[:1]
	s1 := []proxy.ServicePort{web1, httpd(), dns1, local(), empty, sticky, internalLocal}

	empty2 := empty
	empty2.Endpoints = []proxy.Endpoint{ep("10.244.1.60", 80, "node-1")}
	fresh := port("default", "fresh", "", corev1.ProtocolTCP, "10.96.0.130", 80, ep("10.244.2.70", 80, "node-2"))
	s2 := []proxy.ServicePort{web1, dns1, local(), empty2, sticky, internalLocal, fresh}
	return [][]proxy.ServicePort{s0, s1, s2}
}

// newProxier makes a proxier for node1 in path, with o's backend, method and
// conntrack cleanup.
func newProxier(t testing.TB, path string, v version.Version, o proxy.Config) *Proxier {
	t.Helper()
	tg := target(node1, v)
	tg.NetNS, tg.RunDir = path, t.TempDir()
	tg.Config.Backend, tg.Config.Method, tg.Config.NoConntrackCleanup = o.Backend, o.Method, o.NoConntrackCleanup
	tg.Config.KubeProxy.IPTables.LocalhostNodePorts, tg.Config.KubeProxy.Conntrack = o.KubeProxy.IPTables.LocalhostNodePorts, o.KubeProxy.Conntrack
	p, err := New(tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestApplyMethodsAgree programs the same sequence of states with every apply
// method, backend and layout, each in a namespace of its own, and compares the
// tables iptables-save shows after each step: every method must leave the same
// ruleset, and that ruleset must be the generated one (every chain, with its number
// of rules), with stale chains gone.
func TestApplyMethodsAgree(t *testing.T) {
	seq := states()
	for _, backend := range []string{"nft", "legacy"} {
		for _, v := range []version.Version{v137, v118} {
			t.Run(backend+"-"+v.String(), func(t *testing.T) {
				results := map[string][]string{}
				for _, apply := range []string{ApplyPartial, ApplyFull, ApplyChanged, ApplyPerRule} {
					path := newNodeNS(t)
					p := newProxier(t, path, v, proxy.Config{Backend: backend, Method: apply})
					for i, ports := range seq {
						if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
							t.Fatalf("%s: state %d: %v", apply, i, err)
						}
						got := saved(t, backend, path)
						checkInstalled(t, p.Ruleset(), got, fmt.Sprintf("%s, state %d", apply, i))
						results[apply] = append(results[apply], got)
					}
				}
				for _, apply := range []string{ApplyFull, ApplyChanged, ApplyPerRule} {
					for i := range seq {
						if results[apply][i] != results[ApplyPartial][i] {
							t.Errorf("state %d: %s and %s leave different rules:\n%s", i, apply, ApplyPartial,
								lineDiff(results[ApplyPartial][i], results[apply][i]))
						}
					}
				}
				// httpd went away in the last state: none of its chains may be left.
				sp := httpd()
				n := namesOf(&sp, v)
				last := results[ApplyPartial][len(seq)-1]
				for _, chain := range []string{n.svc, n.sep(sp.Endpoints[0])} {
					if strings.Contains(last, chain) {
						t.Errorf("stale chain %s is still there", chain)
					}
				}
			})
		}
	}
}

// checkInstalled compares the generated ruleset with the normalised iptables-save:
// every chain is there with as many rules, jumps lead into kube-proxy's chains, and
// no per-Service chain is there that the ruleset lacks.
func checkInstalled(t *testing.T, rs *Ruleset, save, what string) {
	t.Helper()
	tables := strings.Split(save, "*nat\n")
	byTable := map[string]string{"filter": tables[0], "nat": tables[1]}
	for _, tb := range rs.Tables {
		for _, c := range tb.Chains {
			// The declaration too: a chain with no rules has nothing else to show.
			if !strings.Contains(byTable[tb.Name], "\n:"+c.Name+"\n") {
				t.Errorf("%s: %s chain %s is not in the kernel", what, tb.Name, c.Name)
			}
			n := strings.Count(byTable[tb.Name], "-A "+c.Name+" ")
			if n != len(c.Rules) {
				t.Errorf("%s: %s chain %s has %d rules in the kernel, %d generated", what, tb.Name, c.Name, n, len(c.Rules))
			}
		}
		for _, l := range strings.Split(byTable[tb.Name], "\n") {
			if strings.HasPrefix(l, ":") && isServiceChain(l[1:]) && tb.Chain(l[1:]) == nil {
				t.Errorf("%s: stale %s chain %s", what, tb.Name, l[1:])
			}
		}
	}
	for _, jump := range []string{"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
		"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING"} {
		if !strings.Contains(byTable["nat"], jump) {
			t.Errorf("%s: nat lacks %s", what, jump)
		}
	}
}

// TestPartialSync checks what kube-proxy's partial sync writes: after an endpoint
// change, the chains rewritten on every sync and those of the changed Service only;
// after no change, no per-Service chain. The changed method writes only chains
// whose rules changed, and nothing at all when nothing did.
func TestPartialSync(t *testing.T) {
	seq := states()
	s0 := seq[0]
	s1 := slices.Clone(s0)
	s1[0] = seq[1][0] // web gains an endpoint on node-2

	t.Run("partial", func(t *testing.T) {
		p := newProxier(t, newNodeNS(t), v137, proxy.Config{})
		syncOK(t, p, s0)
		if st := p.LastSync(); !st.Full || st.ChainsWritten != st.Chains {
			t.Fatalf("first sync: full=%v, wrote %d of %d chains", st.Full, st.ChainsWritten, st.Chains)
		}
		syncOK(t, p, s1)
		st := p.LastSync()
		want := everySyncChains(p.Ruleset())
		for _, tb := range p.Ruleset().Tables {
			for _, c := range tb.Chains {
				if c.Service == "default/web" {
					want = append(want, tb.Name+"/"+c.Name)
				}
			}
		}
		checkWritten(t, "web's endpoint change", st, want)
		if st.Full {
			t.Error("endpoint change made a full sync")
		}
		syncOK(t, p, s1)
		checkWritten(t, "unchanged state", p.LastSync(), everySyncChains(p.Ruleset()))
	})

	t.Run("changed", func(t *testing.T) {
		p := newProxier(t, newNodeNS(t), v137, proxy.Config{Method: ApplyChanged})
		syncOK(t, p, s0)
		syncOK(t, p, s1)
		w := web()
		n := namesOf(&w, v137)
		added := ep("10.244.2.11", 8080, "node-2")
		checkWritten(t, "web's endpoint change", p.LastSync(), []string{"nat/" + n.sep(added), "nat/" + n.svc})
		syncOK(t, p, s1)
		st := p.LastSync()
		checkWritten(t, "unchanged state", st, nil)
		if st.RestoreBytes != 0 || st.Commands != 0 {
			t.Errorf("unchanged state: %d bytes of restore input, %d iptables programs; want none", st.RestoreBytes, st.Commands)
		}
	})
}

func syncOK(t *testing.T, p *Proxier, ports []proxy.ServicePort) {
	t.Helper()
	if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
		t.Fatal(err)
	}
}

// everySyncChains are the chains kube-proxy rewrites on every sync.
func everySyncChains(rs *Ruleset) []string {
	var out []string
	for _, tb := range rs.Tables {
		for _, c := range tb.Chains {
			if c.Service == "" {
				out = append(out, tb.Name+"/"+c.Name)
			}
		}
	}
	return out
}

func checkWritten(t *testing.T, what string, st SyncStats, want []string) {
	t.Helper()
	got := slices.Clone(st.Written)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: wrote %q\nwant %q", what, got, want)
	}
}

// TestSysctls checks that the proxier sets route_localnet in the node's namespace
// and leaves the test process's own namespace alone.
func TestSysctls(t *testing.T) {
	const key = "/proc/sys/net/ipv4/conf/all/route_localnet"
	before, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	path := newNodeNS(t)
	p := newProxier(t, path, v137, proxy.Config{})
	syncOK(t, p, states()[0])
	got, err := namespaces.ReadSysctl(nsName(path), "net.ipv4.conf.all.route_localnet")
	if err != nil || got != "1" {
		t.Errorf("node route_localnet = %q (%v), want 1", got, err)
	}
	after, err := os.ReadFile(key)
	if err != nil || string(after) != string(before) {
		t.Errorf("the test process's own route_localnet changed from %q to %q", before, after)
	}

	// Without localhost NodePorts route_localnet stays as it was; the
	// conntrack section's sysctls are set in the node, as kube-proxy sets them.
	path = newNodeNS(t)
	var c proxy.Config
	c.KubeProxy.IPTables.LocalhostNodePorts = new(bool)
	c.KubeProxy.Conntrack.TCPBeLiberal = true
	c.KubeProxy.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: 90 * time.Second}
	p = newProxier(t, path, v137, c)
	syncOK(t, p, states()[0])
	for key, want := range map[string]string{
		"net.ipv4.conf.all.route_localnet":                   "0",
		"net.netfilter.nf_conntrack_tcp_be_liberal":          "1",
		"net.netfilter.nf_conntrack_tcp_timeout_close_wait":  "90",
		"net.netfilter.nf_conntrack_tcp_timeout_established": "86400",
	} {
		if got, err := namespaces.ReadSysctl(nsName(path), key); err != nil || got != want {
			t.Errorf("node %s = %q (%v), want %s", key, got, err, want)
		}
	}
}

// TestUDPConntrackCleanup sends a UDP datagram through the proxier's DNAT to an
// endpoint, takes the endpoint away and checks that the sync deleted the conntrack
// entry that would keep sending the client's datagrams to it, and that with
// NoConntrackCleanup the entry stays and does keep doing so.
func TestUDPConntrackCleanup(t *testing.T) {
	for _, cleanup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
			nsh := nstest.New(t, "programs iptables and conntrack")
			name, h := nsh.Name, nsh.Netlink
			path := namespaces.Path(name)
			// Everything lives on the node's lo: the client address, the two
			// endpoints, and a route to the service range so the client's datagram
			// leaves and meets KUBE-SERVICES in nat OUTPUT.
			lo, err := h.LinkByName("lo")
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []string{"10.244.1.100/32", "10.244.1.2/32", "10.244.1.3/32"} {
				addr, _ := netlink.ParseAddr(a)
				if err := h.AddrAdd(lo, addr); err != nil {
					t.Fatal(err)
				}
			}
			_, serviceRange, _ := net.ParseCIDR("10.96.0.0/12")
			if err := h.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: serviceRange, Scope: netlink.SCOPE_LINK}); err != nil {
				t.Fatal(err)
			}
			udpEcho(t, nsh, "10.244.1.2:5353")
			udpEcho(t, nsh, "10.244.1.3:5353")

			dns := func(ip string) []proxy.ServicePort {
				return []proxy.ServicePort{port("kube-system", "kube-dns", "dns", corev1.ProtocolUDP, "10.96.0.10", 53, ep(ip, 5353, "node-1"))}
			}
			p := newProxier(t, path, v137, proxy.Config{NoConntrackCleanup: !cleanup})
			syncOK(t, p, dns("10.244.1.2"))

			client := udpClient(t, nsh, "10.244.1.100:40000", "10.96.0.10:53")
			if got := ask(t, client); got != "10.244.1.2:5353" {
				t.Fatalf("first datagram answered by %s, want 10.244.1.2:5353", got)
			}
			if n := flowsTo(t, h, "10.244.1.2"); n != 1 {
				t.Fatalf("%d conntrack entries to 10.244.1.2 after the first datagram, want 1", n)
			}

			syncOK(t, p, dns("10.244.1.3"))
			n := flowsTo(t, h, "10.244.1.2")
			got := ask(t, client)
			switch {
			case cleanup && (n != 0 || got != "10.244.1.3:5353" || p.LastSync().ConntrackDeleted != 1):
				t.Errorf("with cleanup: %d entries left to the old endpoint, %d deleted, next datagram answered by %s; want 0, 1, 10.244.1.3:5353",
					n, p.LastSync().ConntrackDeleted, got)
			case !cleanup && (n != 1 || got != "10.244.1.2:5353"):
				t.Errorf("without cleanup: %d entries to the old endpoint, next datagram answered by %s; want 1 and the old endpoint 10.244.1.2:5353", n, got)
			}
		})
	}
}

// udpEcho answers every datagram with the address it was received on.
func udpEcho(t *testing.T, ns *namespaces.NS, addr string) {
	t.Helper()
	var c *net.UDPConn
	err := ns.Do(func() error {
		a, err := net.ResolveUDPAddr("udp4", addr)
		if err == nil {
			c, err = net.ListenUDP("udp4", a)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			c.WriteToUDP([]byte(addr), from) //nolint:errcheck // the client checks what arrives
		}
	}()
}

// udpClient is a UDP socket in the namespace with a fixed source address and port,
// connected to dst, so all its datagrams belong to one conntrack entry.
func udpClient(t *testing.T, ns *namespaces.NS, src, dst string) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := ns.Do(func() error {
		la, _ := net.ResolveUDPAddr("udp4", src)
		ra, _ := net.ResolveUDPAddr("udp4", dst)
		var err error
		c, err = net.DialUDP("udp4", la, ra)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ask sends one datagram and returns the answer: the endpoint that got it.
func ask(t *testing.T, c *net.UDPConn) string {
	t.Helper()
	if _, err := c.Write([]byte("who")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second)) //nolint:errcheck // a closed socket fails the read
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return string(buf[:n])
}

// flowsTo counts the UDP conntrack entries whose reply comes from ip.
func flowsTo(t *testing.T, h *netlink.Handle, ip string) int {
	t.Helper()
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	want := netip.MustParseAddr(ip)
	n := 0
	for _, f := range flows {
		if a, ok := netip.AddrFromSlice(f.Reverse.SrcIP); ok && a.Unmap() == want && f.Forward.Protocol == 17 {
			n++
		}
	}
	return n
}
