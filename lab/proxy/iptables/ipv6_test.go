package iptables

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// The IPv6 half of a dual-stack web lab, with the addresses svclab's dual-stack
// topologies default to: nodes in fd00:1::/64, clusterCIDR fd00:10:244::/56
// (a /64 per node), serviceCIDR fd00:10:96::/108. Each node is the node as the
// IPv6 proxier sees it: its IPv6 address and IPv6 podCIDR, as kube-proxy's
// NewDualStackProxier hands nodeIPs[IPv6] to its IPv6 proxier.
var (
	node1v6 = proxy.Node{Name: "node-1", IP: netip.MustParseAddr("fd00:1::10"), PodCIDR: netip.MustParsePrefix("fd00:10:244:1::/64")}
	node2v6 = proxy.Node{Name: "node-2", IP: netip.MustParseAddr("fd00:1::11"), PodCIDR: netip.MustParsePrefix("fd00:10:244:2::/64")}
)

// target6 is node n's IPv6 proxier in a dual-stack cluster: clusterCIDR names
// both families, IPv4 first, as a dual-stack kube-proxy configuration does.
func target6(n proxy.Node, v version.Version) proxy.Target {
	t := target(n, v)
	t.Config.KubeProxy.ClusterCIDR = "10.244.0.0/16,fd00:10:244::/56"
	t.Config.ServiceCIDR = netip.MustParsePrefix("fd00:10:96::/108")
	t.Config.Family = corev1.IPv6Protocol
	return t
}

// web6 is web's IPv6 ClusterIP: NodePort 30080, one backend per node.
func web6() proxy.ServicePort {
	sp := port("default", "web", "http", corev1.ProtocolTCP, "fd00:10:96::7b2d", 80,
		ep("fd00:10:244:1::a", 8080, "node-1"), ep("fd00:10:244:2::a", 8080, "node-2"))
	sp.NodePort = 30080
	return sp
}

// local6 is local's IPv6 twin: externalTrafficPolicy Local, a health check
// node port, its only backend on node-1.
func local6() proxy.ServicePort {
	sp := port("default", "edge", "http", corev1.ProtocolTCP, "fd00:10:96::50", 80, ep("fd00:10:244:1::14", 8080, "node-1"))
	sp.NodePort, sp.ExternalLocal, sp.HealthCheckNodePort = 30081, true, 32000
	return sp
}

// dualStackObjects are a dual-stack Service as the API server stores it
// (ipFamilies IPv4 then IPv6, clusterIPs in that order, externalIPs, load
// balancer ingress and source ranges of both families), its two
// EndpointSlices (one per address type, as the EndpointSlice controller
// writes them), and an IPv4-only Service that the IPv6 proxier never sees.
func dualStackObjects() ([]corev1.Service, []discoveryv1.EndpointSlice) {
	policy := corev1.IPFamilyPolicyRequireDualStack
	tcp := corev1.ProtocolTCP
	name := "http"
	portNum := int32(8080)
	dual := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-dual"},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeLoadBalancer,
			ClusterIP:                "10.96.0.40",
			ClusterIPs:               []string{"10.96.0.40", "fd00:10:96::28"},
			IPFamilies:               []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy:           &policy,
			Ports:                    []corev1.ServicePort{{Name: name, Protocol: tcp, Port: 80, NodePort: 30040}},
			ExternalIPs:              []string{"203.0.113.40", "2001:db8::40"},
			LoadBalancerSourceRanges: []string{"203.0.113.0/24", " 2001:db8:1::/48"},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "192.168.1.240"}, {IP: "fd00:1::f0"},
		}}},
	}
	only4 := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-v4"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.41", ClusterIPs: []string{"10.96.0.41"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: name, Protocol: tcp, Port: 80}},
		},
	}
	slice := func(svc, sliceName string, t discoveryv1.AddressType, addrs ...string) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: sliceName, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: t,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &tcp, Port: &portNum}},
		}
		for i, a := range addrs {
			node := []string{"node-1", "node-2"}[i%2]
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: &node})
		}
		return s
	}
	return []corev1.Service{dual, only4}, []discoveryv1.EndpointSlice{
		slice("web-dual", "web-dual-v4", discoveryv1.AddressTypeIPv4, "10.244.1.40", "10.244.2.40"),
		slice("web-dual", "web-dual-v6", discoveryv1.AddressTypeIPv6, "fd00:10:244:1::28", "fd00:10:244:2::28"),
		slice("web-v4", "web-v4-v4", discoveryv1.AddressTypeIPv4, "10.244.1.41"),
	}
}

// goldenCases6 are what kube-proxy 1.37's IPv6 iptables proxier (NewProxier
// with ipFamily IPv6, pkg/proxy/iptables/proxier.go) writes on a node of a
// dual-stack cluster. The files were written by hand from that source for
// the IPv4 cases' twins, and differ from the IPv4 ones only where
// syncProxyRules does for IPv6 (see generateCurrent's doc comment):
//
//   - IPv6 addresses wherever IPv4 ones were: ClusterIP "-d fd00:10:96::7b2d",
//     endpoint "-s fd00:10:244:1::a" (epInfo.IP(), no prefix length), the
//     local-traffic detector "! -s fd00:10:244::/56" (the IPv6 clusterCIDR,
//     getLocalDetectors in cmd/kube-proxy/app/server_linux.go), source ranges
//     masked "fd00:1::/64";
//   - DNAT "--to-destination [fd00:10:244:1::a]:8080" and comments
//     "default/web:http -> [fd00:10:244:1::a]:8080": BaseEndpointInfo.String()
//     is net.JoinHostPort (pkg/proxy/endpoint.go), and KUBE-SEP- names hash
//     that same bracketed text (servicePortEndpointChainName;
//     TestIPv6EndpointChainNames);
//   - no KUBE-FIREWALL localnet rule in filter (written only "if !isIPv6 &&
//     proxier.localhostNodePorts"), and no nfacct-counted "-d 127.0.0.0/8"
//     NodePort rule (only for ipFamily IPv4): the IPv6 proxier has no
//     localhost NodePorts (NewProxier: the family's nodePortAddresses hold no
//     IPv4 loopback) and sets no route_localnet;
//   - the last KUBE-SERVICES rule is "-m addrtype --dst-type LOCAL ! -d
//     ::1/128 -j KUBE-NODEPORTS" ("For IPv6 they never work");
//   - a Service without endpoints is refused with the same "-j REJECT" as in
//     IPv4 (kube-proxy writes no --reject-with in either family): ip6tables'
//     REJECT target defaults to icmp6-port-unreachable, which is what
//     ip6tables-save prints back (TestIPv6Apply), where iptables' defaults to
//     icmp-port-unreachable.
//
// Everything else (chain names of the Service, masquerade rules and mark,
// jumps, KUBE-FORWARD's INVALID drop with its nfacct counter, probabilities,
// affinity, the Local policy's chains) is the IPv4 text.
func goldenCases6() []goldenCase {
	noEndpoints := port("default", "empty", "http", corev1.ProtocolTCP, "fd00:10:96::64", 80)
	noEndpoints.NodePort = 30100
	lbLocal := local6()
	lbLocal.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("fd00:1::f0")}
	lbLocal.SourceRanges = []netip.Prefix{netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("2001:db8::/32")}
	services, slices := dualStackObjects()
	return []goldenCase{
		{"ipv6-web-node-1", target6(node1v6, v137), []proxy.ServicePort{web6()}},
		{"ipv6-web-node-2", target6(node2v6, v137), []proxy.ServicePort{web6()}},
		{"ipv6-no-endpoints", target6(node1v6, v137), []proxy.ServicePort{noEndpoints}},
		{"ipv6-affinity", target6(node1v6, v137), []proxy.ServicePort{withAffinity(web6(), 10800)}},
		{"ipv6-external-local-with-endpoint", target6(node1v6, v137), []proxy.ServicePort{local6()}},
		{"ipv6-external-local-without-endpoint", target6(node2v6, v137), []proxy.ServicePort{local6()}},
		{"ipv6-load-balancer-source-ranges", target6(node1v6, v137), []proxy.ServicePort{lbLocal}},
		{"ipv6-dual-stack-objects", target6(node1v6, v137), proxy.FromObjectsFor(corev1.IPv6Protocol, services, slices)},
	}
}

// TestIPv6FromObjects: the IPv6 proxier takes a dual-stack Service's second
// ClusterIP, the IPv6 halves of its address lists and the IPv6 slice only, and
// leaves out the IPv4-only Service; the IPv4 proxier the other half.
func TestIPv6FromObjects(t *testing.T) {
	services, slices := dualStackObjects()
	for _, tc := range []struct {
		family                     corev1.IPFamily
		clusterIP, external, lb, r string
		endpoints                  []string
		ports                      int
	}{
		{corev1.IPv6Protocol, "fd00:10:96::28", "2001:db8::40", "fd00:1::f0", "2001:db8:1::/48", []string{"[fd00:10:244:1::28]:8080", "[fd00:10:244:2::28]:8080"}, 1},
		{corev1.IPv4Protocol, "10.96.0.40", "203.0.113.40", "192.168.1.240", "203.0.113.0/24", []string{"10.244.1.40:8080", "10.244.2.40:8080"}, 2},
	} {
		ports := proxy.FromObjectsFor(tc.family, services, slices)
		if len(ports) != tc.ports {
			t.Fatalf("%s: %d ports, want %d: %+v", tc.family, len(ports), tc.ports, ports)
		}
		sp := ports[0]
		var eps []string
		for _, e := range sp.Endpoints {
			eps = append(eps, e.String())
		}
		got := []string{sp.ClusterIP.String(), addrs(sp.ExternalIPs), addrs(sp.LoadBalancerIPs), prefixes(sp.SourceRanges), strings.Join(eps, " ")}
		want := []string{tc.clusterIP, tc.external, tc.lb, tc.r, strings.Join(tc.endpoints, " ")}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: got %q, want %q", tc.family, got, want)
		}
	}
}

func addrs(as []netip.Addr) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, " ")
}

func prefixes(ps []netip.Prefix) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, " ")
}

// TestIPv6EndpointChainNames computes KUBE-SEP- and KUBE-SVC- names the way
// kube-proxy's servicePortEndpointChainName and portProtoHash do (the whole
// SHA-256 sum in base32, cut to 16 characters) from the texts kube-proxy
// hashes: "namespace/name:port" + "tcp" for the Service's chains (no family
// in it: both families' proxiers name a port's chains alike, each in its own
// tables), and + "[ip]:port" for an endpoint's, the bracketed
// net.JoinHostPort form of an IPv6 endpoint.
func TestIPv6EndpointChainNames(t *testing.T) {
	upstream := func(text string) string {
		sum := sha256.Sum256([]byte(text))
		return base32.StdEncoding.EncodeToString(sum[:])[:16]
	}
	rs := generate(t, target6(node1v6, v137), web6())
	svc := "KUBE-SVC-" + upstream("default/web:http"+"tcp")
	if got := rulesOf(t, rs, "nat", svc); len(got) == 0 {
		t.Fatalf("no chain %s", svc)
	}
	if v4 := namesOf(ptr(web()), v137).svc; v4 != svc {
		t.Errorf("IPv4 KUBE-SVC- %s, IPv6 %s: the name hashes no address", v4, svc)
	}
	for _, e := range []string{"[fd00:10:244:1::a]:8080", "[fd00:10:244:2::a]:8080"} {
		sep := "KUBE-SEP-" + upstream("default/web:http"+"tcp"+e)
		rules := rulesOf(t, rs, "nat", sep)
		if len(rules) != 2 || !strings.HasSuffix(rules[1], "-j DNAT --to-destination "+e) {
			t.Errorf("%s (%s): %q", sep, e, rules)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestIPv6Refusals: one proxier writes one family's rules, and the IPv6 rules
// are reproduced for the releases whose layout they were read from.
func TestIPv6Refusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    proxy.Target
		sp   proxy.ServicePort
		want string
	}{
		{"IPv4 port, IPv6 proxier", target6(node1v6, v137), web(), "cluster IP 10.96.123.45: not IPv6"},
		{"IPv6 port, IPv4 proxier", target(node1, v137), web6(), "svclab's iptables mode is IPv4 only"},
		{"IPv6 proxier, 1.18", target6(node1v6, v118), web6(), "IPv6 rules for 1.27 and later"},
		{"IPv4 endpoint, IPv6 proxier", target6(node1v6, v137), func() proxy.ServicePort {
			sp := web6()
			sp.Endpoints = append(sp.Endpoints, ep("10.244.1.10", 8080, "node-1"))
			return sp
		}(), "endpoint 10.244.1.10: not IPv6"},
	} {
		_, err := Render(tc.t, proxy.StateOf([]proxy.ServicePort{tc.sp}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	bad := target6(node1v6, v137)
	bad.Config.Family = "IPv5"
	if _, err := Render(bad, proxy.StateOf(nil)); err == nil || !strings.Contains(err.Error(), "IPv5") {
		t.Errorf("family IPv5: err = %v", err)
	}
}

// TestIPv6Apply writes the IPv6 rules with each backend's ip6tables-restore
// (and once with one ip6tables call per rule) into a throwaway namespace (the kernel must take every rule), checks that
// what ip6tables-save shows back is the generated ruleset, with REJECT
// answering icmp6-port-unreachable and no route_localnet set, that the
// reader (Read, with ip6tables-save) finds the ServiceMap kube-proxy
// programs, and that a change rewrites it (stale chains deleted).
func TestIPv6Apply(t *testing.T) {
	services, slices := dualStackObjects()
	noEndpoints := port("default", "empty", "http", corev1.ProtocolTCP, "fd00:10:96::64", 80)
	noEndpoints.NodePort = 30100
	s0 := append([]proxy.ServicePort{web6(), local6(), withAffinity(port("default", "sticky", "", corev1.ProtocolUDP, "fd00:10:96::78", 53,
		ep("fd00:10:244:1::32", 53, "node-1"), ep("fd00:10:244:2::32", 53, "node-2")), 60), noEndpoints},
		proxy.FromObjectsFor(corev1.IPv6Protocol, services, slices)...)
	s1 := []proxy.ServicePort{web6(), local6()}
	s1[0].Endpoints = s1[0].Endpoints[:1]
	for _, run := range [][2]string{{"nft", ApplyPartial}, {"legacy", ApplyPartial}, {"nft", ApplyPerRule}} {
		backend, method := run[0], run[1]
		t.Run(backend+"-"+method, func(t *testing.T) {
			ns := nstest.New(t, "programs ip6tables")
			path := ns.Path
			tg := target6(node1v6, v137)
			tg.NetNS, tg.RunDir = path, t.TempDir()
			tg.Config.Backend, tg.Config.Method = backend, method
			p, err := New(tg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			save := xtables.Backends6[backend].Save
			for i, ports := range [][]proxy.ServicePort{s0, s1} {
				if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
					t.Fatalf("state %d: %v", i, err)
				}
				got := savedWith(t, save, path)
				checkInstalled(t, p.Ruleset(), got, fmt.Sprintf("state %d", i))
				// What the reader makes of ip6tables-save is what kube-proxy programs.
				read, err := Read(ns, tg.Config)
				if err != nil {
					t.Fatalf("state %d: %v", i, err)
				}
				if d := proxy.DiffServiceMaps(proxy.ExpectedServiceMap(proxy.StateOf(ports), node1v6, proxy.ModelIPTables), read); d != nil {
					t.Errorf("state %d: Read differs from the expected ServiceMap:\n%s\nread:\n%s", i, strings.Join(d, "\n"), read)
				}
				if i == 0 {
					for _, want := range []string{
						`-A KUBE-SERVICES -d fd00:10:96::64/128 -p tcp -m comment --comment "default/empty:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp6-port-unreachable`,
						`-A KUBE-SERVICES ! -d ::1/128 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
						"-j DNAT --to-destination [fd00:10:244:1::a]:8080",
					} {
						if !strings.Contains(got, want) {
							t.Errorf("ip6tables-save lacks %s\n%s", want, got)
						}
					}
				}
			}
			if strings.Contains(savedWith(t, save, path), "KUBE-SVC-"+hash16("default/sticky"+"udp")) {
				t.Error("sticky's chain is still there after it went away")
			}
			// The IPv4 tables are the IPv4 proxier's: the IPv6 one leaves them alone.
			if v4 := savedWith(t, xtables.Backends[backend].Save, path); strings.Contains(v4, "KUBE-") {
				t.Errorf("the IPv6 proxier wrote IPv4 rules:\n%s", v4)
			}
			out, err := nsOutput(path, "sysctl", "-n", "net.ipv4.conf.all.route_localnet")
			if err != nil || strings.TrimSpace(out) != "0" {
				t.Errorf("route_localnet = %q (%v), want 0: the IPv6 proxier has no localhost NodePorts", out, err)
			}
		})
	}
}

// nsOutput runs a program in the namespace at path.
func nsOutput(path, program string, args ...string) (string, error) {
	b, err := namespaces.Output(nsName(path), append([]string{program}, args...)...)
	return string(b), err
}

// TestIPv6GoldenTwins derives each IPv6 golden file from its IPv4 twin (checked
// against kube-proxy; see TestGolden) by the differences syncProxyRules of
// 1.37 makes for IPv6 and nothing else (goldenCases6 lists them): the
// addresses of the family, endpoint texts in brackets and the KUBE-SEP-
// names hashed from them (computed here as upstream computes them), no
// KUBE-FIREWALL chain or nfacct localhost NodePort rule, and "! -d ::1/128" on
// the last KUBE-SERVICES rule. A difference the list does not explain fails.
func TestIPv6GoldenTwins(t *testing.T) {
	upstream := func(text string) string {
		sum := sha256.Sum256([]byte(text))
		return "KUBE-SEP-" + base32.StdEncoding.EncodeToString(sum[:])[:16]
	}
	// IPv4 text -> IPv6 text, longest first where one holds another.
	addrs := [][2]string{
		{"192.168.1.10", "fd00:1::10"}, {"192.168.1.11", "fd00:1::11"},
		{"10.96.123.45", "fd00:10:96::7b2d"}, {"10.96.0.100", "fd00:10:96::64"}, {"10.96.0.80", "fd00:10:96::50"},
		{"10.244.0.0/16", "fd00:10:244::/56"},
		{"10.244.1.10", "fd00:10:244:1::a"}, {"10.244.2.10", "fd00:10:244:2::a"}, {"10.244.1.20", "fd00:10:244:1::14"},
	}
	endpoints := map[string][]string{
		"default/web:http":  {"10.244.1.10", "10.244.2.10"},
		"default/edge:http": {"10.244.1.20"},
	}
	sixOf := func(a string) string {
		for _, p := range addrs {
			if p[0] == a {
				return p[1]
			}
		}
		t.Fatalf("no IPv6 twin for %s", a)
		return ""
	}
	var repl []string
	for name, ips := range endpoints {
		for _, ip := range ips {
			v4, v6 := ip+":8080", "["+sixOf(ip)+"]:8080"
			repl = append(repl, upstream(name+"tcp"+v4), upstream(name+"tcp"+v6), v4, v6)
		}
	}
	for _, p := range addrs {
		repl = append(repl, p[0], p[1])
	}
	r := strings.NewReplacer(repl...)
	for _, twin := range [][2]string{
		{"web-node-1", "ipv6-web-node-1"}, {"web-node-2", "ipv6-web-node-2"}, {"no-endpoints", "ipv6-no-endpoints"},
		{"affinity", "ipv6-affinity"}, {"external-local-with-endpoint", "ipv6-external-local-with-endpoint"},
		{"external-local-without-endpoint", "ipv6-external-local-without-endpoint"},
	} {
		v4, err := os.ReadFile(filepath.Join("testdata", twin[0]+".rules"))
		if err != nil {
			t.Fatal(err)
		}
		v6, err := os.ReadFile(filepath.Join("testdata", twin[1]+".rules"))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, l := range strings.Split(string(v4), "\n") {
			switch {
			case strings.HasPrefix(l, "# kube-proxy "):
				l = strings.Replace(l, "iptables mode,", "iptables mode (IPv6 proxier),", 1)
			case strings.HasPrefix(l, "# "):
				l = strings.NewReplacer("iptables", "ip6tables").Replace(l)
			case l == ":KUBE-FIREWALL - [0:0]", strings.HasPrefix(l, "-A KUBE-FIREWALL "),
				strings.Contains(l, "-d 127.0.0.0/8") && strings.Contains(l, "--nfacct-name "+nfacctLocalhostNodePort):
				continue
			case strings.HasSuffix(l, "--dst-type LOCAL -j KUBE-NODEPORTS"):
				l = strings.TrimSuffix(l, "-j KUBE-NODEPORTS") + "! -d ::1/128 -j KUBE-NODEPORTS"
			}
			want = append(want, r.Replace(l))
		}
		if got, w := normalRules(string(v6)), normalRules(strings.Join(want, "\n")); got != w {
			t.Errorf("%s is not %s with IPv6's differences:\n%s", twin[1], twin[0], lineDiff(w, got))
		}
	}
}

// normalRules orders a rules file so that chains renamed by a hash may sort
// elsewhere: comments and table lines stay, chain lines are sorted, and each
// chain's rules keep their order but chains are listed by name.
func normalRules(s string) string {
	var out []string
	var decl []string
	rules := map[string][]string{}
	flush := func() {
		sort.Strings(decl)
		out = append(out, decl...)
		var names []string
		for n := range rules {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, rules[n]...)
		}
		decl, rules = nil, map[string][]string{}
	}
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			decl = append(decl, l)
		case strings.HasPrefix(l, "-A "):
			c := strings.Fields(l)[1]
			rules[c] = append(rules[c], l)
		case l == "COMMIT":
			flush()
			out = append(out, l)
		default:
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
