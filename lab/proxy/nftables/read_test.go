package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/internal/proxytest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

const fixture = "testdata/node-1.nft"

// fixtureState is the state testdata/node-1.nft programs on node-1 (see the
// file's header).
func fixtureState() *proxy.State {
	ep, port := proxytest.Endpoint, proxytest.Port
	dns := port("kube-system", "kube-dns", "dns", corev1.ProtocolUDP, "10.96.0.10", 53, ep("10.244.2.2", 53, "node-2"))
	edge := port("default", "edge", "http", corev1.ProtocolTCP, "10.96.0.80", 80, ep("10.244.2.20", 8080, "node-2"))
	edge.NodePort, edge.ExternalLocal = 30081, true
	empty := port("default", "empty", "http", corev1.ProtocolTCP, "10.96.0.100", 80)
	empty.NodePort = 30100
	sticky := port("default", "sticky", "", corev1.ProtocolTCP, "10.96.0.120", 80,
		ep("10.244.1.50", 80, "node-1"), ep("10.244.2.50", 80, "node-2"))
	sticky.AffinitySeconds = 60
	cache := port("default", "cache", "", corev1.ProtocolTCP, "10.96.0.90", 6379,
		ep("10.244.1.30", 6379, "node-1"), ep("10.244.2.30", 6379, "node-2"))
	cache.InternalLocal = true
	cacheRemote := port("default", "cache-remote", "", corev1.ProtocolTCP, "10.96.0.91", 6379, ep("10.244.2.31", 6379, "node-2"))
	cacheRemote.InternalLocal = true
	edgeLocal := port("default", "edge-local", "http", corev1.ProtocolTCP, "10.96.0.81", 80,
		ep("10.244.1.21", 8080, "node-1"), ep("10.244.2.21", 8080, "node-2"))
	edgeLocal.NodePort, edgeLocal.ExternalLocal = 30082, true
	lbLocal := port("default", "lb-local", "http", corev1.ProtocolTCP, "10.96.0.140", 80,
		ep("10.244.1.140", 8080, "node-1"), ep("10.244.2.140", 8080, "node-2"))
	lbLocal.NodePort, lbLocal.ExternalLocal = 30140, true
	lbLocal.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.168.1.240")}
	lbLocal.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/25")}
	ext := port("default", "ext", "http", corev1.ProtocolTCP, "10.96.0.141", 80, ep("10.244.2.141", 8080, "node-2"))
	ext.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.141")}
	return proxy.StateOf([]proxy.ServicePort{proxytest.Web(), dns, edge, empty, sticky, cache, cacheRemote, edgeLocal, lbLocal, ext})
}

// loadFixture loads testdata/node-1.nft into a throwaway namespace with nft -f.
func loadFixture(t *testing.T) *namespaces.NS {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	ns := nstest.New(t, "loads nftables rules")
	nft(t, ns, "-f", fixture)
	return ns
}

func nft(t *testing.T, ns *namespaces.NS, args ...string) {
	t.Helper()
	if _, err := ns.Output(append([]string{"nft"}, args...)...); err != nil {
		t.Fatal(err)
	}
}

// TestReadFixture reads a ruleset in kube-proxy 1.37's exact layout, written by
// hand from its source (the real kube-proxy is not run here), and checks that
// Read gives the ServiceMap kube-proxy must program for the state behind it:
// every frontend, backend, drop, reject, the affinity timeout and a load
// balancer IP's source ranges. Three changes made behind kube-proxy's back must
// show as exactly those differences: a DNAT pointed elsewhere, a Local
// NodePort's drop removed (its traffic is then left untranslated), and a
// firewall that lets another range in.
func TestReadFixture(t *testing.T) {
	ns := loadFixture(t)
	want := proxy.ExpectedServiceMap(fixtureState(), proxytest.Node1, proxy.ModelNFTables)
	got, err := Read(ns, proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if d := proxy.DiffServiceMaps(want, got); d != nil {
		t.Fatalf("Read differs from the expected ServiceMap:\n%s\nread:\n%s", strings.Join(d, "\n"), got)
	}
	kinds := map[proxy.Verdict]bool{}
	affinity, ranges := false, false
	for _, f := range want {
		kinds[f.Verdict] = true
		affinity = affinity || f.AffinitySeconds > 0
		ranges = ranges || len(f.SourceRanges) > 0
	}
	if !kinds[proxy.Forward] || !kinds[proxy.Reject] || !kinds[proxy.Drop] || !affinity || !ranges {
		t.Fatalf("the fixture's state does not cover forward, reject, drop, affinity and source ranges:\n%s", want)
	}

	dnsChain := "service-FY5PMXPG-kube-system/kube-dns/udp/dns"
	nft(t, ns, "flush", "chain", "ip", Table, dnsChain)
	nft(t, ns, "add", "rule", "ip", Table, dnsChain, "meta", "l4proto", "udp", "dnat", "to", "10.244.2.99:53")
	nft(t, ns, "delete", "element", "ip", Table, mapNoEndpointNodePorts, "{", "tcp", ".", "30081", "}")
	fwChain := "firewall-KFCEHOL4-default/lb-local/tcp/http"
	nft(t, ns, "flush", "chain", "ip", Table, fwChain)
	nft(t, ns, "add", "rule", "ip", Table, fwChain, "ip", "saddr", "!=", "{", "192.168.2.0/24", "}", "drop")
	got, err = Read(ns, proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	wantDiff := []string{
		"TCP 192.168.1.240:80: want forward to 10.244.1.140:8080 from 192.168.1.0/25 192.168.1.240/32 only, got forward to 10.244.1.140:8080 from 192.168.2.0/24 only",
		"TCP nodePort 30081: want drop, got untranslated",
		"UDP 10.96.0.10:53: want forward to 10.244.2.2:53, got forward to 10.244.2.99:53 (missing 10.244.2.2:53; extra 10.244.2.99:53)",
	}
	if d := proxy.DiffServiceMaps(want, got); !slices.Equal(d, wantDiff) {
		t.Errorf("after the changes, the difference is\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(wantDiff, "\n"))
	}
}

// TestReadNoTable: a node kube-proxy has not programmed yet holds no Services.
func TestReadNoTable(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	ns := nstest.New(t, "reads nftables rules")
	got, err := Read(ns, proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("Read of a namespace without kube-proxy's table: %v", got)
	}
}

// TestFixtureNames checks that the fixture's per-Service chains and sets carry
// the names kube-proxy 1.37 gives them (servicePortChainNameBase,
// servicePortEndpointChainNameBase: the first 8 characters of the base32 SHA-256
// of "namespace/name/protocol/port" and "...__ip/port", a dash, then that text),
// so the fixture is kube-proxy's layout and not one of its own.
func TestFixtureNames(t *testing.T) {
	text, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`(?:service|local|external|firewall|endpoint|affinity)-([A-Z2-7]{8})-([a-z0-9./_-]+)`)
	seen := 0
	for _, m := range named.FindAllStringSubmatch(string(text), -1) {
		seen++
		sum := sha256.Sum256([]byte(m[2]))
		if h := base32.StdEncoding.EncodeToString(sum[:])[:8]; h != m[1] {
			t.Errorf("%s: kube-proxy's hash of %q is %s", m[0], m[2], h)
		}
	}
	if seen == 0 {
		t.Fatal("no per-Service chain names in the fixture")
	}
	// Every Service of the state that has a usable endpoint has its chains.
	for _, sp := range fixtureState().Ports {
		base := fmt.Sprintf("%s/%s/%s/%s", sp.Name.Namespace, sp.Name.Name, strings.ToLower(string(sp.Protocol)), sp.Name.Port)
		cat := proxy.Categorize(&sp, "node-1")
		if len(cat.Cluster)+len(cat.Local) > 0 && !strings.Contains(string(text), "-"+base+" ") && !strings.Contains(string(text), "-"+base+"\n") {
			t.Errorf("no chain for %s in the fixture", base)
		}
	}
}

// TestReadJSON reads listings that exercise what a kernel listing of the fixture
// does not: a jump that returns, a rule for another protocol, a set of
// protocols, protocols and ports as nft prints them when asked to number or name
// them; and refuses listings it cannot read.
func TestReadJSON(t *testing.T) {
	listing := `{"nftables": [
	 {"metainfo": {"json_schema_version": 1}},
	 {"table": {"family": "ip", "name": "kube-proxy"}},
	 {"chain": {"family": "ip", "table": "kube-proxy", "name": "mark"}},
	 {"chain": {"family": "ip", "table": "kube-proxy", "name": "service-a"}},
	 {"map": {"family": "ip", "name": "service-ips", "table": "kube-proxy", "map": "verdict",
	   "elem": [[{"concat": ["10.96.0.1", 6, "443"]}, {"goto": {"target": "service-a"}}]]}},
	 {"rule": {"chain": "mark", "handle": 1, "expr": [{"mangle": {"key": {"meta": {"key": "mark"}}, "value": 16384}}]}},
	 {"rule": {"chain": "mark", "handle": 2, "expr": [{"return": null}]}},
	 {"rule": {"chain": "service-a", "handle": 3, "expr": [{"jump": {"target": "mark"}}]}},
	 {"rule": {"chain": "service-a", "handle": 4, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "udp"}}, {"drop": null}]}},
	 {"rule": {"chain": "service-a", "handle": 5, "expr": [{"match": {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "10.244.0.0", "len": 16}}}}, {"counter": null}]}},
	 {"rule": {"chain": "service-a", "handle": 6, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": {"set": ["udp", "tcp"]}}}, {"dnat": {"addr": "10.244.1.1", "port": 6443}}]}}
	]}`
	got, err := readJSON([]byte(listing))
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.ServiceMap{
		proxy.ClusterIPFrontend(corev1.ProtocolTCP, netip.MustParseAddr("10.96.0.1"), 443): proxy.Forwarded([]netip.AddrPort{netip.MustParseAddrPort("10.244.1.1:6443")}, 0),
	}
	if d := proxy.DiffServiceMaps(want, got); d != nil {
		t.Errorf("%s", strings.Join(d, "\n"))
	}

	for _, bad := range []string{
		`not json`,
		`{"nftables": [{"map": {"name": "service-ips", "map": "verdict", "elem": [[{"concat": ["10.96.0.1", "tcp", 443]}, {"goto": {"target": "missing"}}]]}}]}`,
		`{"nftables": [{"map": {"name": "service-ips", "map": "verdict", "elem": [[{"concat": ["nowhere", "tcp", 443]}, {"drop": null}]]}}]}`,
		`{"nftables": [{"chain": {"name": "c"}}, {"rule": {"chain": "c", "handle": 9, "expr": [{"queue": {"num": 1}}]}},
		  {"map": {"name": "service-ips", "map": "verdict", "elem": [[{"concat": ["10.96.0.1", "tcp", 443]}, {"goto": {"target": "c"}}]]}}]}`,
	} {
		if m, err := readJSON([]byte(bad)); err == nil {
			t.Errorf("readJSON(%s) = %v, want an error", bad, m)
		}
	}
}
