package verify

import (
	"context"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

func mustLoad(t *testing.T, path string) *topology.Topology {
	t.Helper()
	top, err := topology.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// expectFor is model m's expectation of one flow in topology top, as Derive plans
// it: from a member to a Service port (as the report names it,
// "namespace/name:port"), at its ClusterIP or, with node set, at that node's
// NodePort.
func expectFor(t *testing.T, m proxy.Model, top *topology.Topology, from, svc, node string) Expectation {
	t.Helper()
	return expectWith(t, m, top, proxy.Config{KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: top.ClusterCIDR.String()}, ServiceCIDR: top.ServiceCIDR, Version: version.Default}, from, svc, node)
}

func expectWith(t *testing.T, m proxy.Model, top *topology.Topology, c proxy.Config, from, svc, node string) Expectation {
	t.Helper()
	for _, f := range Derive(top, m, c).Flows {
		if f.Source.Name == from && f.Service == svc && f.Target.Node == node {
			return f.Expected
		}
	}
	t.Fatalf("%v plans no flow from %s to %s (node %q)", m, from, svc, node)
	return Expectation{}
}

// TestExpectWeb: on seed 000's cluster both modes expect the same, the
// KUBE-LOOP-BACK / KUBE-SEP- hairpin masquerade included.
func TestExpectWeb(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	for _, mode := range []proxy.Model{proxy.ModelIPTables, proxy.ModelIPVS} {
		for _, tc := range []struct {
			from, node string
			want       string
		}{
			{"client", "", "10.244.1.10:8080 (src 10.244.1.5), 10.244.2.10:8080 (src 10.244.1.5)"},
			// The hairpin is masqueraded; the other backend sees the pod.
			{"web-a", "", "10.244.1.10:8080 (src 10.244.1.1), 10.244.2.10:8080 (src 10.244.1.10)"},
			// A node's connection to a ClusterIP leaves from outside the cluster
			// CIDR: marked, masqueraded to cni0 or eth0.
			{"node-1", "", "10.244.1.10:8080 (src 10.244.1.1), 10.244.2.10:8080 (src 192.168.1.10)"},
			{"outside", "", "unreachable"},
			{"outside", "node-2", "10.244.1.10:8080 (src 192.168.1.11), 10.244.2.10:8080 (src 10.244.2.1)"},
			{"client", "node-2", "10.244.1.10:8080 (src 192.168.1.11), 10.244.2.10:8080 (src 10.244.2.1)"},
		} {
			if got := expectFor(t, mode, web, tc.from, "default/web:http", tc.node).String(); got != tc.want {
				t.Errorf("%v: %s -> web (node %q): %s, want %s", mode, tc.from, tc.node, got, tc.want)
			}
		}
	}
}

// policyCase is one flow of specs/testdata/policies.yaml and what a mode's
// model must expect of it.
type policyCase struct {
	from, svc, node string
	outcome         traffic.Outcome
	want            string
}

func checkPolicies(t *testing.T, mode proxy.Model, cases []policyCase) {
	t.Helper()
	top := mustLoad(t, "../../specs/testdata/policies.yaml")
	for _, tc := range cases {
		e := expectFor(t, mode, top, tc.from, tc.svc, tc.node)
		if e.Outcome != tc.outcome || (tc.want != "" && e.String() != tc.want) {
			t.Errorf("%s -> %s (node %q): %s %q, want %s %q", tc.from, tc.svc, tc.node, e.Outcome, e.String(), tc.outcome, tc.want)
		}
		if e.Why == "" {
			t.Errorf("%s -> %s: no reason given", tc.from, tc.svc)
		}
	}
}

func TestExpectIPTablesPolicies(t *testing.T) {
	checkPolicies(t, proxy.ModelIPTables, []policyCase{
		// internalTrafficPolicy Local: only the client's node's endpoints.
		{"probe-1", "default/node-local:http", "", traffic.Answered, "10.244.1.2:8080 (src 10.244.1.3)"},
		{"probe-3", "default/node-local:http", "", traffic.Timeout, ""},
		// externalTrafficPolicy Local from outside: local endpoints, client address kept;
		// none on node-3.
		{"remote", "default/edge:http", "node-1", traffic.Answered, "10.244.1.2:8080 (src 192.168.7.100)"},
		{"remote", "default/edge:http", "node-3", traffic.Timeout, ""},
		// A pod on node-3 to node-1's Local NodePort: short-circuited to every
		// endpoint unmasqueraded; api-2's replies bypass node-1.
		{"probe-3", "default/edge:http", "node-1", traffic.Answered, "10.244.1.2:8080 (src 10.244.3.3); others time out"},
		// Terminating but serving: kube-proxy falls back to it.
		{"remote", "default/draining", "node-1", traffic.Answered, "10.244.3.2:8080 (src 192.168.7.11)"},
		// Affinity: one of the backends.
		{"probe-1", "default/sticky", "", traffic.Answered, "one of 10.244.1.2:8080 (src 10.244.1.3), 10.244.2.2:8080 (src 10.244.1.3)"},
	})
}

func TestNoEndpointsRefused(t *testing.T) {
	top := mustLoad(t, "../../topologies/web.yaml")
	for i := range top.Pods {
		if top.Pods[i].Labels["app"] == "web" {
			top.Pods[i].Ready = false
		}
	}
	if e := expectFor(t, proxy.ModelIPTables, top, "client", "default/web:http", ""); e.Outcome != traffic.Refused || !strings.Contains(e.Why, "reject") {
		t.Errorf("no ready endpoints: %s (%s), want refused", e.Outcome, e.Why)
	}
}

// The attempt bound: the chance that k uniformly picked endpoints of n are not all
// seen must stay under missRate.
func TestAttemptsFor(t *testing.T) {
	for _, tc := range []struct{ k, n int }{{1, 1}, {2, 2}, {3, 3}, {5, 5}, {1, 2}, {10, 10}} {
		a := attemptsFor(tc.k, tc.n)
		miss := float64(tc.k) * math.Pow(1-1/float64(tc.n), float64(a))
		if tc.n > 1 && miss > missRate {
			t.Errorf("attemptsFor(%d, %d) = %d: miss chance %g > %g", tc.k, tc.n, a, miss, missRate)
		}
	}
	if attemptsFor(2, 2) != 25 {
		t.Errorf("attemptsFor(2, 2) = %d, want 25", attemptsFor(2, 2))
	}
}

func TestICMPBudgetPaces(t *testing.T) {
	b := newICMPBudget()
	client := netip.MustParseAddr("10.244.1.5")
	for i := 0; i < icmpBurst; i++ {
		b.spend(context.Background(), client)
	}
	// The burst is spent: the next error must wait for the budget to refill.
	start := time.Now()
	b.spend(context.Background(), client)
	if waited, least := time.Since(start), time.Duration(0.9/icmpRate*float64(time.Second)); waited < least {
		t.Errorf("after a burst of %d the next refusal went after %v, want at least %v", icmpBurst, waited, least)
	}
}

// TestExpectLocalDetectors: verify's expectations follow kube-proxy's
// detectLocalMode. Without a detector (no clusterCIDR) nothing masquerades
// traffic to a ClusterIP, so a node's own connection keeps its address, and a
// pod on another node reaching a Local NodePort is not short-circuited: it meets
// the policy, as a client would. With NodeCIDR only the node's own pods are
// local: a pod on node-3 dialling node-1's Local NodePort gets node-1's local
// endpoint with its address kept; a node is masqueraded as with ClusterCIDR.
// BridgeInterface cni0 takes the node's own pods (they enter by the bridge) for
// local, and InterfaceNamePrefix veth takes nothing in a lab (pods' packets
// enter the node by the bridge, not their veths).
func TestExpectLocalDetectors(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	policies := mustLoad(t, "../../specs/testdata/policies.yaml")
	config := func(top *topology.Topology, k kubeproxyconfig.KubeProxyConfiguration) proxy.Config {
		return proxy.Config{KubeProxy: k, ServiceCIDR: top.ServiceCIDR, Version: version.Default}
	}
	clusterCIDR := func(top *topology.Topology) string { return top.ClusterCIDR.String() }
	for _, tc := range []struct {
		name      string
		top       *topology.Topology
		k         kubeproxyconfig.KubeProxyConfiguration
		from, svc string
		node      string
		want      string
	}{
		{"no detector, node to ClusterIP", web, kubeproxyconfig.KubeProxyConfiguration{}, "node-1", "default/web:http", "",
			"10.244.1.10:8080 (src 192.168.1.10), 10.244.2.10:8080 (src 192.168.1.10)"},
		{"no detector, pod to ClusterIP", web, kubeproxyconfig.KubeProxyConfiguration{}, "client", "default/web:http", "",
			"10.244.1.10:8080 (src 10.244.1.5), 10.244.2.10:8080 (src 10.244.1.5)"},
		{"no detector, remote pod to Local NodePort", policies, kubeproxyconfig.KubeProxyConfiguration{}, "probe-3", "default/edge:http", "node-1",
			"10.244.1.2:8080 (src 10.244.3.3)"},
		{"NodeCIDR, remote pod to Local NodePort", policies, kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: "NodeCIDR", ClusterCIDR: clusterCIDR(policies)}, "probe-3", "default/edge:http", "node-1",
			"10.244.1.2:8080 (src 10.244.3.3)"},
		{"NodeCIDR, node to ClusterIP", web, kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: "NodeCIDR"}, "node-1", "default/web:http", "",
			"10.244.1.10:8080 (src 10.244.1.1), 10.244.2.10:8080 (src 192.168.1.10)"},
		{"NodeCIDR, pod to ClusterIP", web, kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: "NodeCIDR"}, "client", "default/web:http", "",
			"10.244.1.10:8080 (src 10.244.1.5), 10.244.2.10:8080 (src 10.244.1.5)"},
		{"BridgeInterface, pod to ClusterIP", web, kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: "BridgeInterface",
			DetectLocal: kubeproxyconfig.DetectLocalConfiguration{BridgeInterface: "cni0"}}, "client", "default/web:http", "",
			"10.244.1.10:8080 (src 10.244.1.5), 10.244.2.10:8080 (src 10.244.1.5)"},
		{"InterfaceNamePrefix veth, pod to ClusterIP", web, kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: "InterfaceNamePrefix",
			DetectLocal: kubeproxyconfig.DetectLocalConfiguration{InterfaceNamePrefix: "veth"}}, "client", "default/web:http", "",
			"10.244.1.10:8080 (src 10.244.1.1), 10.244.2.10:8080 (src 192.168.1.10)"},
	} {
		if got := expectWith(t, proxy.ModelIPTables, tc.top, config(tc.top, tc.k), tc.from, tc.svc, tc.node).String(); got != tc.want {
			t.Errorf("%s: %s -> %s (node %q): %s, want %s", tc.name, tc.from, tc.svc, tc.node, got, tc.want)
		}
	}
}

// TestExpectNodePortAddresses: with nodePortAddresses, a node address outside
// them takes no NodePort traffic (refused: nothing listens there), one inside
// or the "primary" node IP does.
func TestExpectNodePortAddresses(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	for _, tc := range []struct {
		addrs []string
		want  traffic.Outcome
	}{
		{nil, traffic.Answered},
		{[]string{"primary"}, traffic.Answered},
		{[]string{"192.168.1.0/24"}, traffic.Answered},
		{[]string{"10.0.0.0/8"}, traffic.Refused},
	} {
		c := proxy.Config{KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: web.ClusterCIDR.String(), NodePortAddresses: tc.addrs},
			ServiceCIDR: web.ServiceCIDR, Version: version.Default}
		if got := expectWith(t, proxy.ModelIPTables, web, c, "outside", "default/web:http", "node-2"); got.Outcome != tc.want {
			t.Errorf("nodePortAddresses %v: %s (%s), want %s", tc.addrs, got.Outcome, got.Why, tc.want)
		}
	}
}
