package compare

import (
	"errors"
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

// TestCompareNotADump: input that holds nothing the tools print (empty, YAML,
// an nft ruleset, binary) is refused as ErrNotADump naming what it starts
// with, in both modes; an iptables-save dump is not.
func TestCompareNotADump(t *testing.T) {
	want := render(t, web(t), "node-1", "1.37")
	for _, in := range []string{"", "apiVersion: v1\nkind: List\nitems: []\n", "table ip kube-proxy {\n\tchain services {\n\t}\n}\n", "\x1f\x8b\x08\x00\x00\x00"} {
		if _, err := IPTables(want, in); !errors.Is(err, ErrNotADump) {
			t.Errorf("IPTables of %q = %v, want ErrNotADump", in, err)
		}
		if _, err := IPVS(want, in, Frontends{}); !errors.Is(err, ErrNotADump) {
			t.Errorf("IPVS of %q = %v, want ErrNotADump", in, err)
		}
	}
	if _, err := IPTables(want, own(t)); err != nil {
		t.Errorf("a real iptables-save: %v", err)
	}
}

// TestCompareIPVSReadsEveryForm: the node's own IPVS state as newer ipset
// prints it (bucketsize and initval on each hash set) and as `ipvsadm -Sn`
// prints virtual servers is equal; -Sn without one real server names it.
func TestCompareIPVSReadsEveryForm(t *testing.T) {
	want := renderMode(t, web(t), "node-2", "ipvs", "1.37")
	names := Frontends{"TCP 10.96.123.45:80": "default/web:http", "TCP *:30080": "default/web:http"}
	p := splitIPVS(want)
	var sets []string
	for _, l := range strings.Split(p.ipset, "\n") {
		if strings.HasPrefix(l, "create ") && strings.Contains(l, " hash:") {
			l += " bucketsize 12 initval 0x5a1b2c3d"
		}
		sets = append(sets, l)
	}
	// `ipvsadm -Sn` of the same virtual servers: -A and -a lines.
	var saved []string
	vs := ""
	for _, l := range strings.Split(p.ipvsadm, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && (f[0] == "TCP" || f[0] == "UDP"):
			vs = map[string]string{"TCP": "-t", "UDP": "-u"}[f[0]] + " " + f[1]
			saved = append(saved, "-A "+vs+" -s "+f[2])
		case len(f) >= 4 && f[0] == "->" && f[1] != "RemoteAddress:Port":
			saved = append(saved, "-a "+vs+" -r "+f[1]+" -m -w "+f[3])
		}
	}
	if len(saved) < 2 {
		t.Fatalf("no virtual server in the rendering:\n%s", p.ipvsadm)
	}
	dump := strings.Join(saved, "\n") + "\n" + strings.Join(sets, "\n") + "\n" + AsSaved(p.iptables)
	r, err := IPVS(want, dump, names)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal() {
		t.Errorf("node-2's own state in ipvsadm -Sn and ipset 7.10's form differs:\n%s\ndump:\n%s", r, dump)
	}
	var fewer []string
	for _, l := range strings.Split(dump, "\n") {
		if !strings.Contains(l, "-r 10.244.2.10:8080") {
			fewer = append(fewer, l)
		}
	}
	r, err = IPVS(want, strings.Join(fewer, "\n"), names)
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal() || !strings.Contains(r.String(), "endpoint 10.244.2.10:8080 of Service default/web:http") {
		t.Errorf("a real server left out of -Sn is not named:\n%s", r)
	}
}

// edited is node-1's own dump with each line passed through edit (which may
// drop it, returning nothing, or give several).
func edited(t *testing.T, edit func(string) []string) string {
	var out []string
	for _, l := range strings.Split(own(t), "\n") {
		out = append(out, edit(l)...)
	}
	return strings.Join(out, "\n")
}

// TestCompareReportsSayExactly: the report's verdicts and filing for four
// edits of a node's real dump, each against what kube-proxy 1.37 would write
// for web.yaml: one of an endpoint's rules gone (counted, not "none"); a DNAT
// rewritten to another address (filed under the chain's own endpoint); the
// endpoint chain's two rules swapped (named as an order difference); and the
// Service chain's jump to one endpoint turned to the other endpoint's chain
// (filed under the Service's own endpoint, not the jump's target).
func TestCompareReportsSayExactly(t *testing.T) {
	want := render(t, web(t), "node-1", "1.37")
	const (
		sep    = "KUBE-SEP-IQIBSY2R4USWK4F3" // 10.244.2.10:8080
		other  = "KUBE-SEP-GWQABTP5GBYXHJY5" // 10.244.1.10:8080
		masq   = "-A " + sep + " -s 10.244.2.10/32"
		dnat   = "-A " + sep + " -p tcp"
		epName = "endpoint 10.244.2.10:8080 of Service default/web:http"
	)
	var held string
	for _, c := range []struct {
		name    string
		edit    func(string) []string
		verdict string
	}{
		{"one rule gone", func(l string) []string {
			if strings.HasPrefix(l, masq) {
				return nil
			}
			return []string{l}
		}, "missing: the node lacks 1 of the "},
		{"DNAT rewritten", func(l string) []string {
			if strings.HasPrefix(l, dnat) {
				return []string{strings.Replace(l, "10.244.2.10:8080", "10.244.9.9:8080", 1)}
			}
			return []string{l}
		}, "differs"},
		{"rules swapped", func(l string) []string {
			switch {
			case strings.HasPrefix(l, masq):
				held = l
				return nil
			case strings.HasPrefix(l, dnat):
				return []string{l, held}
			}
			return []string{l}
		}, "order:"},
		{"jump to another endpoint", func(l string) []string {
			if strings.HasPrefix(l, "-A KUBE-SVC-") && strings.HasSuffix(l, "-j "+sep) {
				return []string{strings.Replace(l, "-j "+sep, "-j "+other, 1)}
			}
			return []string{l}
		}, "differs"},
	} {
		r, err := IPTables(want, edited(t, c.edit))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Subjects) != 1 || r.Subjects[0].Name != epName || !strings.HasPrefix(r.Subjects[0].Verdict(), c.verdict) {
			t.Errorf("%s: want one difference, %s: %s...; got:\n%s", c.name, epName, c.verdict, r)
		}
	}
}
