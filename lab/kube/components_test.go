package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/traffic"
)

const nodeManifest = `apiVersion: v1
kind: Node
metadata:
  name: node-1
spec:
  podCIDR: 10.244.1.0/24
  podCIDRs: [10.244.1.0/24]
status:
  addresses:
  - {type: InternalIP, address: 192.168.1.10}
  - {type: Hostname, address: node-1}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: svclab plays kubelet}
`

const podManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web-a
  labels: {app: web}
spec:
  nodeName: node-1
  containers:
  - name: web
    image: svclab/none
    ports: [{name: http, containerPort: 8080}]
`

const podStatus = `{"status":{"phase":"Running","podIP":"10.244.1.10","podIPs":[{"ip":"10.244.1.10"}],"hostIP":"192.168.1.10","conditions":[{"type":"Ready","status":"True"}]}}`

const serviceManifest = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`

// TestComponents runs every component of the binary in throwaway namespaces: the
// API server and the controller manager in one, kube-proxy in a node namespace
// in nftables mode and in iptables mode with each backend, and CoreDNS in a third
// namespace. Objects are made with the binary's kubectl; each component must
// run inside its namespace and listen on nothing in the root namespace.
func TestComponents(t *testing.T) {
	// Everything a component writes goes to the run directory: kubectl's caches
	// too, which it would otherwise keep in ~/.kube.
	home, _ := os.UserHomeDir()
	if _, err := os.Stat(filepath.Join(home, ".kube")); errors.Is(err, os.ErrNotExist) {
		t.Cleanup(func() {
			if _, err := os.Stat(filepath.Join(home, ".kube")); err == nil {
				t.Errorf("%s/.kube appeared during the test", home)
			}
		})
	}
	c := newCluster(t)
	clusterIP := c.addWeb()
	// The API server's own Service, as `kubectl get svc` shows it in a cluster.
	if got := c.kubectl("get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP} {.spec.ports[0].port}"); got != "10.96.0.1 443" {
		t.Errorf("kubernetes Service: %q, want 10.96.0.1 443", got)
	}
	if err := sliceHas(c, "kubernetes", apiAddr.String(), DefaultAPIServerPort); err != nil {
		t.Error(err)
	}

	// A kube-proxy of the user's is run without the subcommand word: a link named
	// kube-proxy to the component binary stands in for one (and shows the
	// binary dispatching on its name).
	userProxy := filepath.Join(c.dir, "bin", "kube-proxy")
	if err := os.MkdirAll(filepath.Dir(userProxy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c.bin, userProxy); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ mode, backend, user string }{
		{"nftables", "", ""}, {"iptables", "nft", ""}, {"iptables", "legacy", ""}, {"nftables", "", userProxy},
	} {
		name := v.mode
		if v.backend != "" {
			name += "-" + v.backend
		}
		if v.user != "" {
			name += "-user-binary"
		}
		t.Run(name, func(t *testing.T) {
			other := otherBackend(t, c.node, v.backend)
			p, ready := startProxyBinary(t, c, v.mode, v.backend, 0, v.user)
			t.Logf("kube-proxy %s: first sync %s after exec, %s", name, ready.Round(time.Millisecond), memory(p))
			var rules string
			if _, err := eventually(30*time.Second, func() error {
				rules = proxyRules(t, c.node, v.mode, v.backend)
				return ruleCheck(rules, v.mode, "web", clusterIP)
			}); err != nil {
				t.Fatalf("web's rules: %v; they are:\n%s", err, rules)
			}
			// Control: the same check fails for a Service the node does not have.
			if ruleCheck(rules, v.mode, "nosuch", clusterIP) == nil {
				t.Errorf("ruleCheck finds rules for a Service that does not exist")
			}
			// The backend was forced: the other one's tables are as they were.
			if got := otherBackend(t, c.node, v.backend); got != other {
				t.Errorf("kube-proxy with the %s backend changed the other backend's tables:\nbefore:\n%s\nafter:\n%s", v.backend, other, got)
			}
			// Its healthz and metrics servers.
			checkConfined(t, p, c.node, 2)
		})
	}

	t.Run("coredns", func(t *testing.T) {
		member := nstest.New(t, "runs CoreDNS")
		dnsNS, dnsH := member.Name, member.Netlink
		veth(t, c.apiH, "eth1", netip.MustParsePrefix("192.168.2.1/24"), dnsH, dnsNS, "eth0", netip.MustParsePrefix("192.168.2.53/24"))
		eth, err := dnsH.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		// CoreDNS reaches the API server's address through the API server's
		// namespace, which delivers it locally.
		toAPI := &netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("192.168.1.0/24")), Gw: net.ParseIP("192.168.2.1")}
		if err := dnsH.RouteAdd(toAPI); err != nil {
			t.Fatal(err)
		}
		p := c.start(StartCoreDNS(c.bin, CoreDNSConfig{
			Netns: dnsNS, Corefile: filepath.Join(c.dir, "Corefile"), LogFile: filepath.Join(c.dir, "coredns.log"),
			CorefileConfig: CorefileConfig{Kubeconfig: c.kubeconfig},
		}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ready, err := WaitCoreDNS(ctx, p, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("coredns: ready %s after exec, %s", ready.Round(time.Millisecond), memory(p))
		server := netip.MustParseAddrPort("192.168.2.53:53")
		for name, want := range map[string]string{
			"kubernetes.default.svc.cluster.local.": "10.96.0.1",
			"web.default.svc.cluster.local.":        clusterIP,
		} {
			resp, err := traffic.Exchange(ctx, dnsNS, "UDP", server, name, dns.TypeA)
			if err != nil || len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != want {
				t.Errorf("%s: %v (%v), want %s", name, resp, err, want)
			}
		}
		// Negative control: a Service that does not exist is NXDOMAIN.
		resp, err := traffic.Exchange(ctx, dnsNS, "UDP", server, "nosuch.default.svc.cluster.local.", dns.TypeA)
		if err != nil || resp.Rcode != dns.RcodeNameError {
			t.Errorf("nosuch.default.svc.cluster.local: %v (%v), want NXDOMAIN", resp, err)
		}
		// No forward plugin: a name outside the cluster is not resolved.
		if resp, err := traffic.Exchange(ctx, dnsNS, "UDP", server, "example.com.", dns.TypeA); err == nil && len(resp.Answer) > 0 {
			t.Errorf("example.com resolved to %v with no upstream", resp.Answer)
		} else {
			t.Logf("example.com: %v (%v)", resp, err)
		}
		// DNS over UDP and TCP, ready, health, metrics.
		checkConfined(t, p, dnsNS, 5)
	})

	// The API server's port; the controller manager's.
	checkConfined(t, c.procs[0], c.api, 1)
	checkConfined(t, c.procs[1], c.api, 1)
	for _, p := range c.procs[:2] {
		t.Logf("%s: %s", p.Name, memory(p))
	}
}

// startProxy writes a node's configuration and starts kube-proxy, stopped when
// the (sub)test ends; it returns once the first sync is done.
func startProxy(tb testing.TB, c *cluster, mode, backend string, minSync time.Duration) (*Process, time.Duration) {
	return startProxyBinary(tb, c, mode, backend, minSync, "")
}

// startProxyBinary is startProxy with a kube-proxy of the user's (empty: the
// component binary's).
func startProxyBinary(tb testing.TB, c *cluster, mode, backend string, minSync time.Duration, user string) (*Process, time.Duration) {
	tb.Helper()
	tag := strings.TrimSuffix(mode+"-"+backend, "-")
	if user != "" {
		tag += "-user"
	}
	cfg := filepath.Join(c.dir, "kube-proxy-"+tag+".yaml")
	if err := WriteProxyConfig(cfg, ProxyConfig{
		Mode: mode, ClusterCIDR: clusterCIDR, NodeName: "node-1", NodeIP: nodeAddr,
		Kubeconfig: c.kubeconfig, MinSyncPeriod: minSync,
	}); err != nil {
		tb.Fatal(err)
	}
	p, err := StartProxy(c.bin, ProxyProcessConfig{
		Name: "kube-proxy " + tag, Netns: c.node, ConfigFile: cfg, IPTablesBackend: backend, Binary: user,
		RunDir: c.dir, LogFile: filepath.Join(c.dir, "kube-proxy-"+tag+".log"),
	})
	if err != nil {
		tb.Fatal(err)
	}
	stopAtEnd(tb, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ready, err := WaitProxy(ctx, p, nodeAddr)
	if err != nil {
		tb.Fatal(err)
	}
	return p, ready
}

// proxyRules is what kube-proxy wrote in the node: the nftables table, or
// iptables-save of the backend's nat and filter tables.
func proxyRules(tb testing.TB, node, mode, backend string) string {
	tb.Helper()
	var out []byte
	var err error
	if mode == "nftables" {
		out, err = namespaces.Output(node, "nft", "list", "table", "ip", "kube-proxy")
	} else {
		out, err = namespaces.Output(node, xtables.Backends[backend].Save)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return string(out)
}

// ruleCheck says whether the rules send Service name's ClusterIP (port http, 80)
// to its endpoint, the test pod.
func ruleCheck(rules, mode, name, clusterIP string) error {
	var dispatch, dnat string
	switch mode {
	case "nftables":
		// service-ips holds "IP . tcp . 80 : goto service-HASH-default/NAME/tcp/http";
		// with one endpoint that chain DNATs itself (more endpoints: numgen over
		// endpoint chains).
		chain := "-default/" + name + "/tcp/http"
		dispatch = fmt.Sprintf("%s . tcp . 80 : goto service-", clusterIP)
		if !strings.Contains(rules, dispatch+strings.Split(nftChainHash(rules, chain), " ")[0]) {
			return fmt.Errorf("no %q to chain service-*%s", dispatch, chain)
		}
		dnat = fmt.Sprintf("dnat to %s:8080", podIP)
		if body := nftChain(rules, chain); !strings.Contains(body, dnat) {
			return fmt.Errorf("chain service-*%s has no %q: %q", chain, dnat, body)
		}
		return nil
	default:
		dispatch = fmt.Sprintf(`-d %s/32 -p tcp -m comment --comment "default/%s:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-`, clusterIP, name)
		dnat = fmt.Sprintf(`--comment "default/%s:http" -m tcp -j DNAT --to-destination %s:8080`, name, podIP)
	}
	for _, want := range []string{dispatch, dnat} {
		if !strings.Contains(rules, want) {
			return fmt.Errorf("no %q", want)
		}
	}
	return nil
}

// nftChainHash returns "HASH-default/NAME/..." of the service chain whose name
// ends in suffix, or "".
func nftChainHash(rules, suffix string) string {
	for _, line := range strings.Split(rules, "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "chain service-"); ok && strings.HasSuffix(name, suffix+" {") {
			return strings.TrimSuffix(name, " {")
		}
	}
	return ""
}

// nftChain returns the body of the service chain whose name ends in suffix.
func nftChain(rules, suffix string) string {
	h := nftChainHash(rules, suffix)
	if h == "" {
		return ""
	}
	_, body, _ := strings.Cut(rules, "chain service-"+h+" {")
	body, _, _ = strings.Cut(body, "}")
	return strings.TrimSpace(body)
}

// mentions says whether the rules name ip as a whole address.
func mentions(rules, ip string) bool {
	return regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(ip) + `([^0-9]|$)`).MatchString(rules)
}

// otherBackend is iptables-save of the backend other than backend (none for
// nftables mode) in ns.
func otherBackend(tb testing.TB, ns, backend string) string {
	tb.Helper()
	other := map[string]string{"nft": "legacy", "legacy": "nft"}[backend]
	if other == "" {
		return ""
	}
	out, err := namespaces.Output(ns, xtables.Backends[other].Save)
	if err != nil {
		tb.Fatal(err)
	}
	// Drop iptables-save's comment lines, which carry the time.
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// sliceHas checks that an EndpointSlice of the Service holds ip:port, ready.
func sliceHas(c *cluster, service, ip string, port int) error {
	var slices discoveryv1.EndpointSliceList
	if err := c.request("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io/service-name%3D"+service, nil, &slices); err != nil {
		return err
	}
	for _, s := range slices.Items {
		hasPort := false
		for _, p := range s.Ports {
			hasPort = hasPort || (p.Port != nil && int(*p.Port) == port)
		}
		for _, e := range s.Endpoints {
			if hasPort && len(e.Addresses) > 0 && e.Addresses[0] == ip && e.Conditions.Ready != nil && *e.Conditions.Ready {
				return nil
			}
		}
	}
	return fmt.Errorf("no ready endpoint %s:%d in %d slices of %s", ip, port, len(slices.Items), service)
}

// checkConfined checks that p runs in ns and listens on nothing in the root
// namespace; as a control of the check itself, wantHere of its listeners must be
// found in ns.
func checkConfined(tb testing.TB, p *Process, ns string, wantHere int) {
	tb.Helper()
	inNamespace(tb, p, ns)
	if l := listeners(tb, "", p); len(l) > 0 {
		tb.Errorf("%s listens in the root network namespace:\n%s", p.Name, strings.Join(l, "\n"))
	}
	if l := listeners(tb, ns, p); len(l) < wantHere {
		tb.Errorf("%s: %d listeners found in %s, want at least %d: %s", p.Name, len(l), ns, wantHere, l)
	}
}

// addWeb makes node-1 and its pod web-a (ready, app=web) with kubectl, and the
// Service web selecting it; it returns web's ClusterIP once the EndpointSlice
// controller has put the pod in web's slice.
func (c *cluster) addWeb() string {
	c.tb.Helper()
	c.apply("node", nodeManifest)
	c.apply("pod", podManifest)
	// Status is a subresource: a created Pod's status is reset, as the kubelet's
	// is only written through it.
	c.kubectl("patch", "pod", "web-a", "--subresource=status", "--type=merge", "-p", podStatus)
	c.apply("service", serviceManifest)

	var svc corev1.Service
	if err := c.request("GET", "/api/v1/namespaces/default/services/web", nil, &svc); err != nil {
		c.tb.Fatal(err)
	}
	if !serviceCIDR.Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) {
		c.tb.Fatalf("Service web got ClusterIP %s, outside %s", svc.Spec.ClusterIP, serviceCIDR)
	}
	took, err := eventually(time.Minute, func() error { return sliceHas(c, "web", podIP, 8080) })
	if err != nil {
		c.tb.Fatalf("EndpointSlice of web with the ready pod: %v", err)
	}
	c.tb.Logf("EndpointSlice controller: web's slice with %s ready %s after the Service was read back", podIP, took.Round(time.Millisecond))
	return svc.Spec.ClusterIP
}

// newService creates a ClusterIP Service selecting the test pod and returns its
// ClusterIP.
func newService(tb testing.TB, c *cluster, name string) string {
	tb.Helper()
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if err := c.request("POST", "/api/v1/namespaces/default/services", svc, &svc); err != nil {
		tb.Fatal(err)
	}
	return svc.Spec.ClusterIP
}
