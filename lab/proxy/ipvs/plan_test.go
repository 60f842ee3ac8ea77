package ipvs

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/proxytest"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

var (
	node1, node3 = proxytest.Node1, proxytest.Node3
	// nodeAddrs are the addresses a lab node's NodePorts listen on: eth0 and cni0.
	node1Addrs = []netip.Addr{node1.IP, netip.MustParseAddr("10.244.1.1")}
	node3Addrs = []netip.Addr{node3.IP, netip.MustParseAddr("10.244.3.1")}
	ep         = proxytest.Endpoint
	web        = proxytest.Web
)

func target(n proxy.Node) proxy.Target { return proxytest.Target(n, version.Default) }

// port is a ClusterIP Service port of namespace default with an unnamed port.
func port(name string, proto corev1.Protocol, clusterIP string, p int, eps ...proxy.Endpoint) proxy.ServicePort {
	return proxytest.Port("default", name, "", proto, clusterIP, p, eps...)
}

// withScheduler is node n's target with the IPVS scheduler set.
func withScheduler(n proxy.Node, scheduler string) proxy.Target {
	tg := target(n)
	tg.Config.KubeProxy.IPVS.Scheduler = scheduler
	return tg
}

func plan(t *testing.T, tg proxy.Target, addrs []netip.Addr, ports ...proxy.ServicePort) *Plan {
	t.Helper()
	if _, err := validate(tg); err != nil {
		t.Fatal(err)
	}
	return NewPlan(ConfigFor(tg), ports, addrs)
}

func find(p *Plan, key string) *VirtualServer {
	for i := range p.VirtualServers {
		if p.VirtualServers[i].Key() == key {
			return &p.VirtualServers[i]
		}
	}
	return nil
}

func realServerList(v *VirtualServer) string {
	if v == nil {
		return "<no virtual server>"
	}
	var s []string
	for _, r := range v.RealServers {
		s = append(s, r.String())
	}
	return strings.Join(s, " ")
}

func TestTrafficPolicies(t *testing.T) {
	local := web()
	local.Name.Name, local.ClusterIP, local.NodePort, local.ExternalLocal = "local", netip.MustParseAddr("10.96.0.40"), 30040, true
	internal := port("internal", corev1.ProtocolUDP, "10.96.0.53", 53, ep("10.244.1.2", 5353, "node-1"), ep("10.244.2.2", 5353, "node-2"))
	internal.InternalLocal = true
	both := local
	both.Name.Name, both.ClusterIP, both.NodePort, both.InternalLocal = "both", netip.MustParseAddr("10.96.0.41"), 30041, true
	term := port("term", corev1.ProtocolTCP, "10.96.0.60", 80, ep("10.244.1.60", 80, "node-1"), ep("10.244.2.60", 80, "node-2"))
	term.Endpoints[0].Ready, term.Endpoints[0].Terminating = false, true
	term.Endpoints[1].Ready, term.Endpoints[1].Terminating, term.Endpoints[1].Serving = false, true, false
	ports := []proxy.ServicePort{web(), local, internal, both, term, port("empty", corev1.ProtocolTCP, "10.96.0.70", 80)}

	for _, tc := range []struct {
		node  proxy.Node
		addrs []netip.Addr
		vs    string
		want  string
	}{
		{node1, node1Addrs, "10.96.123.45:80/TCP", "10.244.1.10:8080 10.244.2.10:8080"},
		{node1, node1Addrs, "192.168.1.10:30080/TCP", "10.244.1.10:8080 10.244.2.10:8080"},
		{node1, node1Addrs, "10.244.1.1:30080/TCP", "10.244.1.10:8080 10.244.2.10:8080"},
		// externalTrafficPolicy Local: the local endpoint on its NodePorts...
		{node1, node1Addrs, "192.168.1.10:30040/TCP", "10.244.1.10:8080"},
		{node1, node1Addrs, "10.96.0.40:80/TCP", "10.244.1.10:8080 10.244.2.10:8080"},
		// ...and every endpoint on a node without one (kubernetes#97081).
		{node3, node3Addrs, "192.168.1.12:30040/TCP", "10.244.1.10:8080 10.244.2.10:8080"},
		// internalTrafficPolicy Local on a ClusterIP-only Service: no fallback.
		{node1, node1Addrs, "10.96.0.53:53/UDP", "10.244.1.2:5353"},
		{node3, node3Addrs, "10.96.0.53:53/UDP", ""},
		// Both Local on a NodePort: cluster endpoints exist (the port is
		// externally accessible), so node-3's ClusterIP falls back to them.
		{node3, node3Addrs, "10.96.0.41:80/TCP", "10.244.1.10:8080 10.244.2.10:8080"},
		{node1, node1Addrs, "10.96.0.41:80/TCP", "10.244.1.10:8080"},
		// No ready endpoint: the serving terminating one, not the other.
		{node3, node3Addrs, "10.96.0.60:80/TCP", "10.244.1.60:80"},
		// No endpoint: a virtual server without real servers.
		{node1, node1Addrs, "10.96.0.70:80/TCP", ""},
	} {
		p := plan(t, target(tc.node), tc.addrs, ports...)
		if got := realServerList(find(p, tc.vs)); got != tc.want {
			t.Errorf("%s on %s: real servers %q, want %q", tc.vs, tc.node.Name, got, tc.want)
		}
	}
}

func TestSetsAndBinds(t *testing.T) {
	dns := port("dns", corev1.ProtocolUDP, "10.96.0.10", 53, ep("10.244.1.2", 53, "node-1"))
	dns.NodePort, dns.ExternalLocal, dns.HealthCheckNodePort = 30053, true, 32000
	notReady := ep("10.244.1.3", 53, "node-1")
	notReady.Ready, notReady.Serving = false, false
	dns.Endpoints = append(dns.Endpoints, notReady)
	p := plan(t, target(node1), node1Addrs, web(), dns)
	want := map[string]string{
		setLoopBack:            "10.244.1.10,tcp:8080,10.244.1.10 10.244.1.2,udp:53,10.244.1.2 10.244.1.3,udp:53,10.244.1.3",
		setClusterIP:           "10.96.0.10,udp:53 10.96.123.45,tcp:80",
		setNodePortTCP:         "30080",
		setNodePortUDP:         "30053",
		setNodePortLocalUDP:    "30053",
		setNodePortLocalTCP:    "",
		setHealthCheckNodePort: "32000",
		setIPVSIPs:             "10.96.0.10 10.96.123.45",
		setLoadBalancer:        "",
	}
	for set, w := range want {
		if got := strings.Join(p.Sets[set], " "); got != w {
			t.Errorf("%s: %q, want %q", set, got, w)
		}
	}
	if len(p.Sets) != len(ipsets) {
		t.Errorf("%d sets, want every one of kube-proxy's %d", len(p.Sets), len(ipsets))
	}
	var bound []string
	for _, a := range p.Bind {
		bound = append(bound, a.String())
	}
	if got := strings.Join(bound, " "); got != "10.96.0.10 10.96.123.45" {
		t.Errorf("kube-ipvs0: %s", got)
	}
	for _, v := range p.VirtualServers {
		if v.Bind != (v.Addr.String() == "10.96.0.10" || v.Addr.String() == "10.96.123.45") {
			t.Errorf("%s: Bind %v", v.Key(), v.Bind)
		}
	}
}

func TestSchedulerAndAffinity(t *testing.T) {
	sticky := web()
	sticky.AffinitySeconds = 600
	p := plan(t, withScheduler(node1, "mh"), node1Addrs, sticky)
	for _, v := range p.VirtualServers {
		if v.Scheduler != "mh" || v.Flags != FlagPersistent|FlagSourceHash || v.Timeout != 600 {
			t.Errorf("%s: %s flags %#x timeout %d", v.Key(), v.Scheduler, v.Flags, v.Timeout)
		}
	}
	p = plan(t, target(node1), node1Addrs, web())
	if v := p.VirtualServers[0]; v.Scheduler != "rr" || v.Flags != 0 {
		t.Errorf("default: %s flags %#x", v.Scheduler, v.Flags)
	}
	fullMethod, bpf := target(node1), target(node1)
	fullMethod.Config.Method, bpf.Config.Backend = "full", "bpf"
	for _, tg := range []proxy.Target{withScheduler(node1, "lblc"), withScheduler(node1, "random"), fullMethod, bpf} {
		if _, err := validate(tg); err == nil {
			t.Errorf("%+v accepted", tg.Config)
		}
	}
	old := target(node1)
	old.Config.Version = version.Version{Major: 1, Minor: 18}
	if _, err := validate(old); err == nil {
		t.Error("kube-proxy 1.18 accepted; only 1.37's IPVS mode is reproduced")
	}
}

func TestRestoreRules(t *testing.T) {
	c := ConfigFor(target(node1))
	local := web()
	local.ExternalLocal = true
	p := NewPlan(c, []proxy.ServicePort{local}, node1Addrs)
	rules := Restore(c, p)
	for _, want := range []string{
		`-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN` + "\n" +
			`-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ`,
		`-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ`,
		`-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN`,
		`-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT`,
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("missing:\n%s\nin:\n%s", want, rules)
		}
	}
	if strings.Contains(rules, "KUBE-NODE-PORT-UDP") {
		t.Error("a rule for an empty set")
	}
	c.MasqueradeAll = true
	if !strings.Contains(Restore(c, p), "--match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ") {
		t.Error("masquerade-all: ClusterIP traffic is not marked unconditionally")
	}
	c.MasqueradeAll, c.ClusterCIDR = false, netip.Prefix{}
	if !strings.Contains(Restore(c, p), "--match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ") {
		t.Error("no cluster CIDR: traffic from a VIP is not marked")
	}
}

// TestRenderGolden compares `svclab rules --mode ipvs` output for node-1 with
// files in testdata/ (go test -update rewrites them): web.yaml's, and the load
// balancer Services of proxytest.LoadBalancers. The ipvsadm part was checked
// against `ipvsadm -Ln --sort` in the VM by the IPVS specs, which compare the
// two for every lab they build.
func TestRenderGolden(t *testing.T) {
	lbLocal, lbCluster, lbRemote, lbEmpty, extLocal := proxytest.LoadBalancers()
	for file, ports := range map[string][]proxy.ServicePort{
		"web-node-1.txt":            {web()},
		"load-balancers-node-1.txt": {lbLocal, lbCluster, lbRemote, lbEmpty, extLocal},
	} {
		got, err := Render(target(node1), proxy.StateOf(ports))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", file)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("render differs from %s:\n%s", path, got)
		}
	}
}

// TestLoadBalancerPlan: external and load balancer IPs are bound virtual servers
// with the real servers of the external policy (falling back to every endpoint
// on a node without a local one); their sets and source ranges are filled as
// kube-proxy fills them, and a node outside the ranges is kept from the IP.
func TestLoadBalancerPlan(t *testing.T) {
	lbLocal, lbCluster, lbRemote, lbEmpty, extLocal := proxytest.LoadBalancers()
	p := plan(t, target(node1), node1Addrs, lbLocal, lbCluster, lbRemote, lbEmpty, extLocal)
	for vs, want := range map[string]string{
		"192.168.1.240:80/TCP": "10.244.1.140:8080",
		"192.168.1.241:80/TCP": "10.244.2.141:8080",
		"203.0.113.141:80/TCP": "10.244.2.141:8080",
		"192.168.1.242:80/TCP": "10.244.2.142:8080",
		"192.168.1.243:80/TCP": "",
		"203.0.113.144:80/TCP": "10.244.1.144:8080",
	} {
		if got := realServerList(find(p, vs)); got != want {
			t.Errorf("%s: real servers %q, want %q", vs, got, want)
		}
		if v := find(p, vs); v != nil && !v.Bind {
			t.Errorf("%s is not bound to kube-ipvs0", vs)
		}
	}
	for set, w := range map[string]string{
		setLoadBalancer:        "192.168.1.240,tcp:80 192.168.1.241,tcp:80 192.168.1.242,tcp:80 192.168.1.243,tcp:80",
		setLoadBalancerLocal:   "192.168.1.240,tcp:80 192.168.1.242,tcp:80",
		setLoadBalancerFW:      "192.168.1.240,tcp:80 192.168.1.241,tcp:80 192.168.1.242,tcp:80 192.168.1.243,tcp:80",
		setLoadBalancerSrcCIDR: "192.168.1.240,tcp:80,192.168.1.0/24 192.168.1.241,tcp:80,10.0.0.0/8 192.168.1.241,tcp:80,203.0.113.0/24 192.168.1.242,tcp:80,192.168.1.0/24 192.168.1.243,tcp:80,10.0.0.0/8",
		setLoadBalancerSrcIP:   "192.168.1.240,tcp:80,192.168.1.240 192.168.1.242,tcp:80,192.168.1.242",
		setExternalIP:          "203.0.113.141,tcp:80",
		setExternalIPLocal:     "203.0.113.144,tcp:80",
	} {
		if got := strings.Join(p.Sets[set], " "); got != w {
			t.Errorf("%s: %q, want %q", set, got, w)
		}
	}
	wantNoAccess := []Portal{
		{Addr: netip.MustParseAddr("192.168.1.241"), Protocol: corev1.ProtocolTCP, Port: 80},
		{Addr: netip.MustParseAddr("192.168.1.243"), Protocol: corev1.ProtocolTCP, Port: 80},
	}
	if !slices.Equal(p.NoNodeAccess, wantNoAccess) {
		t.Errorf("no node access %+v, want %+v", p.NoNodeAccess, wantNoAccess)
	}
	rules := Restore(ConfigFor(target(node1)), p)
	for _, want := range []string{
		`-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port for masquerade and filter purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ`,
		`-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port for masquerade and filter purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT`,
		`-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -m addrtype --dst-type LOCAL -j ACCEPT`,
		`-A KUBE-IPVS-OUT-FILTER -s 192.168.1.241 -m ipvs --vaddr 192.168.1.241 --vproto tcp --vport 80 -j DROP`,
		`-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL`,
		`-A KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN`,
		`-A KUBE-SERVICES -m set --match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT`,
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("missing:\n%s\nin:\n%s", want, rules)
		}
	}
}

func TestIpvsadmOrder(t *testing.T) {
	vs := []VirtualServer{
		{Protocol: corev1.ProtocolUDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53},
		{Protocol: corev1.ProtocolTCP, Addr: netip.MustParseAddr("10.244.1.1"), Port: 30080},
		{Protocol: corev1.ProtocolTCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80},
		{Protocol: corev1.ProtocolTCP, Addr: netip.MustParseAddr("192.168.1.10"), Port: 30080},
	}
	var got []string
	for _, v := range sortedLikeIpvsadm(vs) {
		got = append(got, v.Key())
	}
	// ipvsadm compares addresses by a wrapping 32-bit difference: 192.168.x
	// comes before 10.x.
	want := "192.168.1.10:30080/TCP 10.96.0.10:80/TCP 10.244.1.1:30080/TCP 10.96.0.10:53/UDP"
	if strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, tc := range []struct{ typ, entry string }{
		{bitmapPort, "30080"},
		{hashIP, "10.96.0.10"},
		{hashIPPort, "10.96.0.10,udp:53"},
		{hashIPPortIP, "10.244.1.2,tcp:8080,10.244.1.2"},
		{hashIPPortNet, "192.168.1.240,tcp:80,192.168.1.96/28"},
	} {
		e, err := parseEntry(tc.typ, tc.entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := entryString(tc.typ, e); got != tc.entry {
			t.Errorf("%s %s: back as %s", tc.typ, tc.entry, got)
		}
	}
	for _, bad := range []string{"10.96.0.10,tcp", "10.96.0.10,icmp:1", "x,tcp:80"} {
		if _, err := parseEntry(hashIPPort, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
