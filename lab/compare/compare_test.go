package compare

import (
	"os"
	"strings"
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
)

// render is what svclab's iptables proxier would install on node, kube-proxy
// release v.
func render(t *testing.T, topo *topology.Topology, node, v string) string {
	return renderMode(t, topo, node, "iptables", v)
}

// renderMode is what svclab's proxier of mode would install on node.
func renderMode(t *testing.T, topo *topology.Topology, node, mode, v string) string {
	t.Helper()
	m, err := proxy.Lookup(mode)
	if err != nil {
		t.Fatal(err)
	}
	ver, err := version.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := topo.Node(node)
	if !ok {
		t.Fatalf("no node %s", node)
	}
	c := proxy.Config{Version: ver, ServiceCIDR: topo.ServiceCIDR}
	c.KubeProxy.Mode = kubeproxyconfig.ProxyMode(mode)
	c.KubeProxy.ClusterCIDR = topo.ClusterCIDR.String()
	text, err := m.Render(proxy.Target{Node: proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR}, Config: c},
		proxy.NewState(topo.Services, topo.EndpointSlices(), nil))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func web(t *testing.T) *topology.Topology {
	topo, err := topology.Embedded("web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestCompareOwnRules: a node's own rules, as iptables-save prints them, are
// equal to what kube-proxy would write, in every release's layout.
func TestCompareOwnRules(t *testing.T) {
	topo := web(t)
	for _, v := range []string{"1.18", "1.26", "1.37"} {
		for _, n := range topo.Nodes {
			want := render(t, topo, n.Name, v)
			r, err := IPTables(want, AsSaved(want))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Equal() {
				t.Errorf("kube-proxy %s node %s: own rules differ:\n%s", v, n.Name, r)
			}
		}
	}
}

// own is node-1's iptables-save, taken from a lab of web.yaml in iptables mode
// (iptables-nft, svclab's proxier, kube-proxy 1.37) by `svclab rules --lab`.
func own(t *testing.T) string {
	data, err := os.ReadFile("testdata/web-node-1.iptables-save")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCompareKernelDump: what a kernel printed for a node (iptables-save's
// option order, marks, probabilities and quoting) is what kube-proxy 1.37
// would write for web.yaml; kube-proxy 1.18 (the other chain names and
// comments) would not have written it.
func TestCompareKernelDump(t *testing.T) {
	topo := web(t)
	r, err := IPTables(render(t, topo, "node-1", "1.37"), own(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal() {
		t.Errorf("node-1's own iptables-save differs from its rendering:\n%s", r)
	}
	r, err = IPTables(render(t, topo, "node-1", "1.18"), own(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal() {
		t.Error("kube-proxy 1.18's rules compare equal to 1.37's")
	}
}

// TestCompareHandEdited: one endpoint's rules taken out and one stale Service
// put in are reported as exactly those two differences, by name.
func TestCompareHandEdited(t *testing.T) {
	var lines []string
	for _, l := range strings.Split(own(t), "\n") {
		if strings.Contains(l, "KUBE-SEP-IQIBSY2R4USWK4F3") { // endpoint 10.244.2.10:8080
			continue
		}
		lines = append(lines, l)
		if l == ":KUBE-SERVICES - [0:0]" && strings.Contains(strings.Join(lines, "\n"), "*filter") && !strings.Contains(strings.Join(lines, "\n"), "*nat") {
			lines = append(lines, `-A KUBE-SERVICES -d 10.96.0.77/32 -p tcp -m comment --comment "default/old:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable`)
		}
	}
	r, err := IPTables(render(t, web(t), "node-1", "1.37"), strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Subjects) != 2 {
		t.Fatalf("%d differences, want 2:\n%s", len(r.Subjects), r)
	}
	old, ep := r.Subjects[0], r.Subjects[1]
	if ep.Name != "endpoint 10.244.2.10:8080 of Service default/web:http" || len(ep.Extra) != 0 || len(ep.Missing) != 4 || !strings.HasPrefix(ep.Verdict(), "missing") {
		t.Errorf("first difference: %s: %s %v %v", ep.Name, ep.Verdict(), ep.Missing, ep.Extra)
	}
	if old.Name != "Service default/old:http" || len(old.Missing) != 0 || len(old.Extra) != 1 || !strings.HasPrefix(old.Verdict(), "stale") {
		t.Errorf("second difference: %s: %s %v %v", old.Name, old.Verdict(), old.Missing, old.Extra)
	}
	t.Logf("report:\n%s", r)
}

// ipvsDump is what a node svclab renders for in IPVS mode would print: its
// `ipvsadm -Ln`, `ipset save` and iptables-save.
func ipvsDump(rendered string) string {
	p := splitIPVS(rendered)
	return p.ipvsadm + "\n" + p.ipset + "\n" + AsSaved(p.iptables)
}

// TestCompareIPVS: a node's own IPVS state is equal; without one endpoint (its
// real servers and its hairpin member) the report names that endpoint only.
func TestCompareIPVS(t *testing.T) {
	want := renderMode(t, web(t), "node-2", "ipvs", "1.37")
	names := Frontends{"TCP 10.96.123.45:80": "default/web:http", "TCP *:30080": "default/web:http"}
	r, err := IPVS(want, ipvsDump(want), names)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal() {
		t.Errorf("node-2's own IPVS state differs:\n%s", r)
	}
	var kept []string
	for _, l := range strings.Split(ipvsDump(want), "\n") {
		if strings.Contains(l, "-> 10.244.2.10:8080") || strings.HasPrefix(l, "add KUBE-LOOP-BACK 10.244.2.10,") {
			continue
		}
		kept = append(kept, l)
	}
	r, err = IPVS(want, strings.Join(kept, "\n"), names)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Subjects) != 1 || r.Subjects[0].Name != "endpoint 10.244.2.10:8080 of Service default/web:http" || len(r.Subjects[0].Missing) < 4 {
		t.Errorf("one endpoint left out:\n%s", r)
	}
	t.Logf("report:\n%s", r)
}
