package iptables

import (
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/proxytest"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

// The lab of topologies/web.yaml and its Service (see proxytest).
var (
	node1, node2, node3 = proxytest.Node1, proxytest.Node2, proxytest.Node3
	target              = proxytest.Target
	ep                  = proxytest.Endpoint
	terminating         = proxytest.Terminating
	port                = proxytest.Port
	web                 = proxytest.Web
)

// httpd is seed 002's Service: unnamed port 8080 -> 80, three backends, NodePort
// 30271 (its section 6).
func httpd() proxy.ServicePort {
	sp := port("default", "service-httpd", "", corev1.ProtocolTCP, "10.101.20.80", 8080,
		ep("10.244.1.27", 80, "node-1"), ep("10.244.1.28", 80, "node-1"), ep("10.244.2.21", 80, "node-2"))
	sp.NodePort = 30271
	return sp
}

// local is a LoadBalancer-style port with externalTrafficPolicy Local and a health
// check node port; its only backend is on node-1.
func local() proxy.ServicePort {
	sp := port("default", "edge", "http", corev1.ProtocolTCP, "10.96.0.80", 80, ep("10.244.1.20", 8080, "node-1"))
	sp.NodePort, sp.ExternalLocal, sp.HealthCheckNodePort = 30081, true, 32000
	return sp
}

// loadBalancerPorts are Services reached from outside by addresses of their
// own: a Local LoadBalancer with a local endpoint whose source ranges hold the
// node's address, a Cluster one whose range does not, a Service whose external
// IP has policy Local and no endpoint on node-1, and a LoadBalancer without
// endpoints.
func loadBalancerPorts() (lbLocal, lbCluster, externalLocal, lbEmpty proxy.ServicePort) {
	lbLocal = local()
	lbLocal.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.168.1.240")}
	lbLocal.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.0.0.0/8")}
	lbCluster = web()
	lbCluster.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.168.1.241")}
	lbCluster.SourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	externalLocal = port("default", "ext", "http", corev1.ProtocolTCP, "10.96.0.60", 80, ep("10.244.2.60", 8080, "node-2"))
	externalLocal.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.10")}
	externalLocal.ExternalLocal = true
	lbEmpty = port("default", "lb-empty", "", corev1.ProtocolTCP, "10.96.0.70", 80)
	lbEmpty.NodePort = 30070
	lbEmpty.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.168.1.242")}
	lbEmpty.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	return lbLocal, lbCluster, externalLocal, lbEmpty
}

// TestLoadBalancersNeedCurrentLayout: the old layout's rules for external and
// load balancer IPs are not reproduced, and saying so beats leaving them out.
func TestLoadBalancersNeedCurrentLayout(t *testing.T) {
	lbLocal, _, externalLocal, _ := loadBalancerPorts()
	for _, sp := range []proxy.ServicePort{lbLocal, externalLocal} {
		if _, err := Generate(ConfigFor(target(node1, v118)), []proxy.ServicePort{sp}); err == nil || !strings.Contains(err.Error(), "1.24 and later") {
			t.Errorf("%s at 1.18: err = %v, want a refusal", sp.Name.Name, err)
		}
	}
}

func withAffinity(sp proxy.ServicePort, seconds int) proxy.ServicePort {
	sp.AffinitySeconds = seconds
	return sp
}

var (
	v118 = version.Version{Major: 1, Minor: 18}
	v137 = version.Version{Major: 1, Minor: 37}
)

type goldenCase struct {
	name  string
	t     proxy.Target
	ports []proxy.ServicePort
}

func goldenCases() []goldenCase {
	internalLocal := port("default", "cache", "", corev1.ProtocolTCP, "10.96.0.90", 6379,
		ep("10.244.1.30", 6379, "node-1"), ep("10.244.2.30", 6379, "node-2"))
	internalLocal.InternalLocal = true
	noEndpoints := port("default", "empty", "http", corev1.ProtocolTCP, "10.96.0.100", 80)
	noEndpoints.NodePort = 30100
	clusterTerminating := port("default", "draining", "", corev1.ProtocolTCP, "10.96.0.110", 80,
		terminating("10.244.1.40", 8080, "node-1"), terminating("10.244.2.40", 8080, "node-2"),
		proxy.Endpoint{IP: netip.MustParseAddr("10.244.2.41"), Port: 8080, NodeName: "node-2", Terminating: true})
	localTerminating := local()
	localTerminating.Name.Name = "edge-draining"
	localTerminating.ClusterIP = netip.MustParseAddr("10.96.0.81")
	localTerminating.NodePort, localTerminating.HealthCheckNodePort = 30082, 32001
	localTerminating.Endpoints = []proxy.Endpoint{terminating("10.244.1.21", 8080, "node-1"), ep("10.244.2.21", 8080, "node-2")}
	dns := port("kube-system", "kube-dns", "dns", corev1.ProtocolUDP, "10.96.0.10", 53,
		ep("10.244.1.2", 53, "node-1"), ep("10.244.2.2", 53, "node-2"))
	dnsTCP := port("kube-system", "kube-dns", "dns-tcp", corev1.ProtocolTCP, "10.96.0.10", 53,
		ep("10.244.1.2", 53, "node-1"), ep("10.244.2.2", 53, "node-2"))
	https := web()
	https.Name.Port, https.Port, https.NodePort = "https", 443, 30443
	for i := range https.Endpoints {
		https.Endpoints[i].Port = 8443
	}
	three := port("default", "three", "", corev1.ProtocolTCP, "10.96.0.3", 80,
		ep("10.244.1.3", 80, "node-1"), ep("10.244.2.3", 80, "node-2"), ep("10.244.2.4", 80, "node-2"))
	five := port("default", "five", "", corev1.ProtocolTCP, "10.96.0.5", 80,
		ep("10.244.1.5", 80, "node-1"), ep("10.244.1.6", 80, "node-1"), ep("10.244.2.5", 80, "node-2"),
		ep("10.244.2.6", 80, "node-2"), ep("10.244.2.7", 80, "node-2"))
	masqAll := target(node1, v137)
	masqAll.Config.KubeProxy.IPTables.MasqueradeAll = true
	lbLocal, lbCluster, externalLocal, lbEmpty := loadBalancerPorts()
	// The local-traffic detectors, each on a Cluster port (its masquerade rule
	// reads IfNotLocal) and a Local one (its pod rule reads IfLocal).
	detector := func(mode, bridge, prefix string) proxy.Target {
		t := target(node1, v137)
		k := &t.Config.KubeProxy
		k.DetectLocalMode = kubeproxyconfig.LocalMode(mode)
		k.DetectLocal.BridgeInterface, k.DetectLocal.InterfaceNamePrefix = bridge, prefix
		return t
	}
	noDetector := target(node1, v137)
	noDetector.Config.KubeProxy.ClusterCIDR = ""
	noLocalhost := target(node1, v137)
	noLocalhost.Config.KubeProxy.IPTables.LocalhostNodePorts = new(bool)

	return []goldenCase{
		{"web-node-1", target(node1, v137), []proxy.ServicePort{web()}},
		{"web-node-2", target(node2, v137), []proxy.ServicePort{web()}},
		{"httpd-1.18", target(node1, v118), []proxy.ServicePort{httpd()}},
		{"httpd-1.37", target(node1, v137), []proxy.ServicePort{httpd()}},
		{"probability-3-and-5", target(node1, v137), []proxy.ServicePort{three, five}},
		{"affinity", target(node1, v137), []proxy.ServicePort{withAffinity(web(), 10800)}},
		{"affinity-1.18", target(node1, v118), []proxy.ServicePort{withAffinity(web(), 10800)}},
		{"external-local-with-endpoint", target(node1, v137), []proxy.ServicePort{local()}},
		{"external-local-without-endpoint", target(node2, v137), []proxy.ServicePort{local()}},
		{"external-local-with-endpoint-1.18", target(node1, v118), []proxy.ServicePort{local()}},
		{"external-local-without-endpoint-1.18", target(node2, v118), []proxy.ServicePort{local()}},
		{"internal-local-with-endpoint", target(node1, v137), []proxy.ServicePort{internalLocal}},
		{"internal-local-without-endpoint", target(node3, v137), []proxy.ServicePort{internalLocal}},
		{"no-endpoints", target(node1, v137), []proxy.ServicePort{noEndpoints}},
		{"no-endpoints-1.18", target(node1, v118), []proxy.ServicePort{noEndpoints}},
		{"terminating", target(node1, v137), []proxy.ServicePort{clusterTerminating, localTerminating}},
		{"udp-dns", target(node1, v137), []proxy.ServicePort{dns, dnsTCP}},
		{"multi-port", target(node1, v137), []proxy.ServicePort{web(), https}},
		{"masquerade-all", masqAll, []proxy.ServicePort{web()}},
		{"load-balancers", target(node1, v137), []proxy.ServicePort{lbLocal, lbCluster, externalLocal, lbEmpty}},
		{"detect-node-cidr", detector(proxy.LocalModeNodeCIDR, "", ""), []proxy.ServicePort{web(), local()}},
		{"detect-bridge-interface", detector(proxy.LocalModeBridgeInterface, "cni0", ""), []proxy.ServicePort{web(), local()}},
		{"detect-interface-prefix", detector(proxy.LocalModeInterfaceNamePrefix, "", "veth"), []proxy.ServicePort{web(), local()}},
		{"no-detector", noDetector, []proxy.ServicePort{web(), local()}},
		{"localhost-nodeports-off", noLocalhost, []proxy.ServicePort{web(), local()}},
	}
}

// TestGolden compares Render with the files in testdata/, which were checked by
// hand against kube-proxy's source (and, for 1.37, once against kube-proxy
// 1.37.2's own syncProxyRules on random states; see the package's doc comment).
func TestGolden(t *testing.T) {
	for _, c := range append(goldenCases(), goldenCases6()...) {
		t.Run(c.name, func(t *testing.T) {
			got, err := Render(c.t, proxy.StateOf(c.ports))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", c.name+".rules")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Render differs from %s:\n%s", path, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff lists the lines only one side has, enough to see what changed.
func lineDiff(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if g[l] < w[l] {
			fmt.Fprintf(&b, "- %s\n", l)
			w[l]--
		}
	}
	w = count(want)
	for _, l := range strings.Split(got, "\n") {
		if w[l] < g[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
			g[l]--
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order)"
	}
	return b.String()
}

func generate(t *testing.T, tg proxy.Target, ports ...proxy.ServicePort) *Ruleset {
	t.Helper()
	rs, err := Generate(ConfigFor(tg), ports)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func rulesOf(t *testing.T, rs *Ruleset, table, chain string) []string {
	t.Helper()
	tb := rs.Table(table)
	c := tb.Chain(chain)
	if c == nil {
		t.Fatalf("no %s chain %s", table, chain)
	}
	var out []string
	for _, r := range c.Rules {
		out = append(out, r.String())
	}
	return out
}

// TestSeed002Names checks the chain names and comments of seed 002 (kube-proxy
// before 1.19, unnamed port): KUBE-SVC-5FEAUJNCXGRSJFN5 with its three KUBE-SEP-
// chains. The article prints two of them as KUBE-SEP-JPXQHLXQSDHS2NX and
// KUBE-SEP-5H6K0BYUZ646ISHJ: the first has 15 characters, the second a "0", which
// base32 has not; they are KUBE-SEP-JPXOQHLXQSDHS2NX and KUBE-SEP-5H6KOBYUZ646ISHJ.
func TestSeed002Names(t *testing.T) {
	rs := generate(t, target(node1, v118), httpd())
	svc := rulesOf(t, rs, "nat", "KUBE-SVC-5FEAUJNCXGRSJFN5")
	want := []string{
		`-m comment --comment default/service-httpd: -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-KIILMGZB3LCHX6UB`,
		`-m comment --comment default/service-httpd: -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-JPXOQHLXQSDHS2NX`,
		`-m comment --comment default/service-httpd: -j KUBE-SEP-5H6KOBYUZ646ISHJ`,
	}
	if strings.Join(svc, "\n") != strings.Join(want, "\n") {
		t.Errorf("KUBE-SVC-5FEAUJNCXGRSJFN5:\n%s\nwant\n%s", strings.Join(svc, "\n"), strings.Join(want, "\n"))
	}
	services := strings.Join(rulesOf(t, rs, "nat", "KUBE-SERVICES"), "\n")
	for _, w := range []string{
		`-m comment --comment "default/service-httpd: cluster IP" -m tcp -p tcp -d 10.101.20.80/32 --dport 8080 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ`,
		`-m comment --comment "default/service-httpd: cluster IP" -m tcp -p tcp -d 10.101.20.80/32 --dport 8080 -j KUBE-SVC-5FEAUJNCXGRSJFN5`,
	} {
		if !strings.Contains(services, w) {
			t.Errorf("KUBE-SERVICES lacks %s:\n%s", w, services)
		}
	}
	nodePorts := rulesOf(t, rs, "nat", "KUBE-NODEPORTS")
	wantNP := []string{
		`-m comment --comment default/service-httpd: -m tcp -p tcp --dport 30271 -j KUBE-MARK-MASQ`,
		`-m comment --comment default/service-httpd: -m tcp -p tcp --dport 30271 -j KUBE-SVC-5FEAUJNCXGRSJFN5`,
	}
	if strings.Join(nodePorts, "\n") != strings.Join(wantNP, "\n") {
		t.Errorf("KUBE-NODEPORTS:\n%s\nwant\n%s", strings.Join(nodePorts, "\n"), strings.Join(wantNP, "\n"))
	}
	sep := rulesOf(t, rs, "nat", "KUBE-SEP-KIILMGZB3LCHX6UB")
	if sep[0] != `-m comment --comment default/service-httpd: -s 10.244.1.27/32 -j KUBE-MARK-MASQ` ||
		sep[1] != `-m comment --comment default/service-httpd: -m tcp -p tcp -j DNAT --to-destination 10.244.1.27:80` {
		t.Errorf("KUBE-SEP-KIILMGZB3LCHX6UB: %q", sep)
	}

	// Since 1.19 the unnamed port loses its colon, and so the chains their names.
	rs = generate(t, target(node1, v137), httpd())
	if rs.Table("nat").Chain("KUBE-SVC-5FEAUJNCXGRSJFN5") != nil {
		t.Error("1.37 still uses the pre-1.19 chain name")
	}
	svc = rulesOf(t, rs, "nat", "KUBE-SVC-WQK2JJ3QVGSZ26NM")
	if !strings.HasPrefix(svc[0], `-m comment --comment "default/service-httpd cluster IP" `) ||
		!strings.HasPrefix(svc[1], `-m comment --comment "default/service-httpd -> 10.244.1.27:80" `) {
		t.Errorf("1.37 KUBE-SVC-WQK2JJ3QVGSZ26NM: %q", svc)
	}
}

var probabilityRE = regexp.MustCompile(`--probability (\S+)`)

// TestProbabilities checks the random choice: rule i of n carries 1/(n-i) with ten
// decimals and the last rule none, so each endpoint is chosen with 1/n.
func TestProbabilities(t *testing.T) {
	cases := map[int][]string{
		1: {""},
		2: {"0.5000000000", ""},
		3: {"0.3333333333", "0.5000000000", ""},
		5: {"0.2000000000", "0.2500000000", "0.3333333333", "0.5000000000", ""},
	}
	for n, want := range cases {
		var eps []proxy.Endpoint
		for i := range n {
			eps = append(eps, ep(fmt.Sprintf("10.244.1.%d", 10+i), 80, "node-1"))
		}
		sp := port("default", "p", "", corev1.ProtocolTCP, "10.96.0.1", 80, eps...)
		rs := generate(t, target(node1, v137), sp)
		rules := rulesOf(t, rs, "nat", namesOf(&sp, v137).svc)[1:] // after the masquerade rule
		var got []string
		for _, r := range rules {
			m := probabilityRE.FindStringSubmatch(r)
			if m == nil {
				got = append(got, "")
			} else {
				got = append(got, m[1])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%d endpoints: probabilities %q, want %q", n, got, want)
		}
	}
	if p := probability(version.Version{Major: 1, Minor: 16}, 3); p != "0.33333" {
		t.Errorf("1.16 prints 1/3 as %s, want 0.33333", p)
	}
}

// TestLargeCluster checks kube-proxy's large cluster mode: above 1000 endpoints
// the per-endpoint comments go, the ClusterIP ones stay.
func TestLargeCluster(t *testing.T) {
	for _, n := range []int{500, 501} {
		var ports []proxy.ServicePort
		for i := range n {
			ports = append(ports, port("default", fmt.Sprintf("s%d", i), "", corev1.ProtocolTCP,
				fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250), 80,
				ep(fmt.Sprintf("10.244.1.%d", 1+i%250), 80, "node-1"), ep(fmt.Sprintf("10.244.2.%d", 1+i%250), 80, "node-2")))
		}
		rs := generate(t, target(node1, v137), ports...)
		names := namesOf(&ports[0], v137)
		sep := rulesOf(t, rs, "nat", names.sep(ports[0].Endpoints[0]))
		svc := rulesOf(t, rs, "nat", names.svc)
		commented := strings.Contains(sep[0], "--comment")
		if large := 2*n > largeClusterEndpoints; rs.LargeCluster != large || commented == large {
			t.Errorf("%d endpoints: large=%v, endpoint chain %q", 2*n, rs.LargeCluster, sep)
		}
		if !strings.Contains(svc[0], `"default/s0 cluster IP"`) {
			t.Errorf("%d endpoints: cluster IP comment lost: %q", 2*n, svc[0])
		}
	}
}

// TestOldReleases checks what the approximate old releases do differently.
func TestOldReleases(t *testing.T) {
	v := func(minor int) proxy.Target { return target(node1, version.Version{Major: 1, Minor: minor}) }
	// 1.12 to 1.17 lost the per-endpoint comments; 1.11 and 1.18 have them.
	for minor, want := range map[int]bool{11: true, 12: false, 17: false, 18: true} {
		rs := generate(t, v(minor), httpd())
		sp := httpd()
		rule := rulesOf(t, rs, "nat", namesOf(&sp, version.Version{Major: 1, Minor: minor}).svc)[0]
		if got := strings.Contains(rule, "--comment"); got != want {
			t.Errorf("1.%d: comment in %q: %v, want %v", minor, rule, got, want)
		}
	}
	masq := strings.Join(rulesOf(t, generate(t, v(15), httpd()), "nat", "KUBE-POSTROUTING"), "\n")
	if strings.Contains(masq, "--random-fully") {
		t.Errorf("1.15 used --random-fully: %s", masq)
	}
	canary := func(minor int) bool {
		for _, s := range generate(t, v(minor), httpd()).Setup {
			if s.Chain == "KUBE-PROXY-CANARY" {
				return true
			}
		}
		return false
	}
	if canary(16) || !canary(17) {
		t.Errorf("canary chains: 1.16 %v, 1.17 %v; want false, true", canary(16), canary(17))
	}
}

func TestRuleQuoting(t *testing.T) {
	r := Rule{"-m", "comment", "--comment", "ns/svc:p cluster IP", "-j", "KUBE-SVC-X"}
	if got := r.String(); got != `-m comment --comment "ns/svc:p cluster IP" -j KUBE-SVC-X` {
		t.Errorf("got %s", got)
	}
}

// ipvsMethod is another mode's method, which this mode must not take.
const ipvsMethod = "netlink"

func TestRejectsUnknownOptions(t *testing.T) {
	tg := target(node1, v137)
	with := func(backend, method, detect string) proxy.Target {
		t := tg
		t.Config.Backend, t.Config.Method, t.Config.KubeProxy.DetectLocalMode = backend, method, kubeproxyconfig.LocalMode(detect)
		return t
	}
	for _, bad := range []proxy.Target{with("iptables", "", ""), with("", "fast", ""), with("", ipvsMethod, ""), with("", "", "Guess")} {
		if _, err := Render(bad, proxy.StateOf(nil)); err == nil {
			t.Errorf("config %+v accepted", bad.Config)
		}
	}
	for _, good := range []proxy.Target{tg, with("legacy", ApplyPerRule, ""), with("nft", ApplyChanged, "")} {
		if _, err := Render(good, proxy.StateOf(nil)); err != nil {
			t.Errorf("config %+v: %v", good.Config, err)
		}
	}
}
