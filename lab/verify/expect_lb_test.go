package verify

import (
	"math"
	"strings"
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// expectTo is model m's expectation of the flow from a member to an ingress or
// external IP:port of topology top.
func expectTo(t *testing.T, m proxy.Model, top *topology.Topology, from, to string) Expectation {
	t.Helper()
	c := proxy.Config{KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: top.ClusterCIDR.String()}, ServiceCIDR: top.ServiceCIDR, Version: version.Default}
	for _, f := range Derive(top, m, c).Flows {
		if f.Source.Name == from && f.Target.External != "" && f.Target.Addr.String() == to {
			return f.Expected
		}
	}
	t.Fatalf("%v plans no flow from %s to %s", m, from, to)
	return Expectation{}
}

// TestExpectLoadBalancers holds both models to what the kernel showed on
// topologies/lb.yaml (svclab verify -f lb, every mode): source ranges, the
// client's address through the load balancer, the nodes it picks, and a node's
// own connections, which IPVS makes from the ingress IP itself.
func TestExpectLoadBalancers(t *testing.T) {
	lb := mustLoad(t, "../../topologies/lb.yaml")
	both := []proxy.Model{proxy.ModelIPTables, proxy.ModelIPVS}
	for _, tc := range []struct {
		models   []proxy.Model
		from, to string
		want     string
		why      string
	}{
		// Source ranges: the client inside is answered with its address, the
		// one outside dropped; so are pods and nodes outside them.
		{both, "office", "192.168.1.243:80", "10.244.1.10:8080 (src 192.168.1.100), 10.244.2.10:8080 (src 192.168.1.100)", "node-1, node-2"},
		{both, "outside", "192.168.1.243:80", "no answer (times out)", "outside loadBalancerSourceRanges"},
		{both, "client", "192.168.1.243:80", "no answer (times out)", "outside loadBalancerSourceRanges"},
		{both, "node-1", "192.168.1.243:80", "no answer (times out)", "outside loadBalancerSourceRanges"},
		// Policy Local through the load balancer: the nodes with a local
		// endpoint, the client's address kept.
		{both, "outside", "192.168.1.241:80", "10.244.1.10:8080 (src 192.168.1.200), 10.244.2.10:8080 (src 192.168.1.200)", "(health check 200)"},
		// Policy Cluster: any node, masqueraded to whichever it was.
		{both, "outside", "192.168.1.242:80", "10.244.1.10:8080 (src 10.244.1.1|192.168.1.11|192.168.1.12), 10.244.2.10:8080 (src 10.244.2.1|192.168.1.10|192.168.1.12)", "any node"},
		// The external IP, routed to node-2, policy Local.
		{both, "outside", "203.0.113.10:80", "10.244.2.10:8080 (src 192.168.1.200)", "routed to node-2"},
		// A node's own connection to a Local ingress IP: iptables masquerades
		// it to any endpoint; IPVS makes it from the ingress IP, and only a
		// local endpoint's reply comes back (node-3 has none).
		{[]proxy.Model{proxy.ModelIPTables}, "node-3", "192.168.1.241:80", "10.244.1.10:8080 (src 192.168.1.12), 10.244.2.10:8080 (src 192.168.1.12)", "from the node itself"},
		{[]proxy.Model{proxy.ModelIPVS}, "node-1", "192.168.1.241:80", "10.244.1.10:8080 (src 192.168.1.241)", "KUBE-LOAD-BALANCER-LOCAL"},
		{[]proxy.Model{proxy.ModelIPVS}, "node-3", "192.168.1.241:80", "no answer (times out)", "kubernetes#97081"},
		// A pod: iptables short-circuits it to every endpoint; IPVS keeps its
		// node's local endpoint.
		{[]proxy.Model{proxy.ModelIPTables}, "web-1", "192.168.1.241:80", "10.244.1.10:8080 (src 10.244.1.1), 10.244.2.10:8080 (src 10.244.1.10)", "short-circuited"},
		{[]proxy.Model{proxy.ModelIPVS}, "web-1", "192.168.1.241:80", "10.244.1.10:8080 (src 10.244.1.1)", "local endpoints only"},
	} {
		for _, m := range tc.models {
			e := expectTo(t, m, lb, tc.from, tc.to)
			if e.String() != tc.want || !strings.Contains(e.Why, tc.why) {
				t.Errorf("%v: %s -> %s: %s (%s), want %s (%q)", m, tc.from, tc.to, e, e.Why, tc.want, tc.why)
			}
		}
	}
}

// TestExpectFirewallWithoutEndpoints: fw-empty (specs/testdata/firewall.yaml)
// has source ranges that hold neither the nodes nor the pods and no endpoint.
// nftables drops every source outside the ranges; IPVS drops a pod in INPUT but
// refuses a node's own connection in LOCAL_OUT, before KUBE-IPVS-OUT-FILTER
// (svclab verify --mode ipvs in the VM: ECONNREFUSED from node-1 and node-2);
// iptables writes no firewall without endpoints and refuses every source but
// the node itself, whose packet passes no REJECT.
func TestExpectFirewallWithoutEndpoints(t *testing.T) {
	fw := mustLoad(t, "../../specs/testdata/firewall.yaml")
	for _, tc := range []struct {
		m    proxy.Model
		from string
		want string
		why  string
	}{
		{proxy.ModelIPVS, "node-1", "refused", "no real server"},
		{proxy.ModelIPVS, "node-2", "refused", "no real server"},
		{proxy.ModelIPVS, "probe-1", "no answer (times out)", "KUBE-SOURCE-RANGES-FIREWALL"},
		{proxy.ModelIPVS, "outside", "no answer (times out)", "KUBE-SOURCE-RANGES-FIREWALL"},
		{proxy.ModelNFTables, "node-1", "no answer (times out)", "firewall chain drops it"},
		{proxy.ModelIPTables, "node-1", "no answer (times out)", "KUBE-EXTERNAL-SERVICES is not in OUTPUT"},
		{proxy.ModelIPTables, "outside", "refused", ""},
	} {
		e := expectTo(t, tc.m, fw, tc.from, "1.2.3.6:80")
		if e.String() != tc.want || !strings.Contains(e.Why, tc.why) {
			t.Errorf("%v: %s -> 1.2.3.6:80: %s (%s), want %s (%q)", tc.m, tc.from, e, e.Why, tc.want, tc.why)
		}
	}
}

// uneven is a Local LoadBalancer Service whose backends are spread unevenly:
// one on node-1, three on node-2, none on node-3; with ClientIP affinity in a
// second Service; and one whose endpoints are none ready.
const uneven = `
name: uneven
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
  - {name: node-3, ip: 192.168.1.12, podCIDR: 10.244.3.0/24}
pods:
  - {name: a, node: node-1, labels: {app: a}, ports: [{containerPort: 80}]}
  - {name: b, node: node-2, labels: {app: a}, ports: [{containerPort: 80}]}
  - {name: c, node: node-2, labels: {app: a}, ports: [{containerPort: 80}]}
  - {name: d, node: node-2, labels: {app: a}, ports: [{containerPort: 80}]}
  - {name: e, node: node-1, labels: {app: e}, ready: false, ports: [{containerPort: 80}]}
clients:
  - {name: outside, ip: 192.168.1.100}
services:
  - metadata: {name: local}
    spec: {type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: a}, ports: [{port: 80}]}
  - metadata: {name: sticky}
    spec: {type: LoadBalancer, sessionAffinity: ClientIP, selector: {app: a}, ports: [{port: 80}]}
  - metadata: {name: unready}
    spec: {type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: e}, ports: [{port: 80}]}
  - metadata: {name: unready-cluster}
    spec: {type: LoadBalancer, selector: {app: e}, ports: [{port: 80}]}
`

// TestExpectLoadBalancerShares: through the load balancer a backend's chance is
// its node's share times its share there, and the attempts follow the least of
// them; ClientIP affinity holds per node only; no ready endpoint leaves the
// load balancer nothing to send a Local Service's traffic to.
func TestExpectLoadBalancerShares(t *testing.T) {
	top, err := topology.Parse("uneven.yaml", []byte(uneven))
	if err != nil {
		t.Fatal(err)
	}
	ingress := func(name string) string {
		svc, _ := top.Service("default", name)
		return svc.Status.LoadBalancer.Ingress[0].IP + ":80"
	}
	for _, m := range []proxy.Model{proxy.ModelIPTables, proxy.ModelIPVS} {
		e := expectTo(t, m, top, "outside", ingress("local"))
		if e.Outcome != traffic.Answered || len(e.Backends) != 4 || math.Abs(e.MinShare-1.0/6) > 1e-9 {
			t.Errorf("%v: local: %s, least share %v, want 4 backends and 1/6 (node-2's three share its half)", m, e, e.MinShare)
		}
		if got, want := attemptsForShare(4, e.MinShare), attemptsFor(4, 6); got != want {
			t.Errorf("attempts for a share of 1/6: %d, want those for 6 uniform candidates, %d", got, want)
		}
		e = expectTo(t, m, top, "outside", ingress("sticky"))
		if !e.SomeOf || e.Sticky || !strings.Contains(e.Why, "per node") || !strings.HasPrefix(e.String(), "some of ") {
			t.Errorf("%v: sticky through three nodes: %s (%s)", m, e, e.Why)
		}
		e = expectTo(t, m, top, "outside", ingress("unready"))
		if e.Outcome != traffic.Timeout || !strings.Contains(e.Why, "503") {
			t.Errorf("%v: no ready endpoint, policy Local: %s (%s), want dropped by the load balancer", m, e, e.Why)
		}
	}
	// Policy Cluster without a usable endpoint: every node refuses, whichever
	// the load balancer picks; a node's own connection passes no REJECT in
	// iptables mode, while IPVS refuses it.
	if e := expectTo(t, proxy.ModelIPTables, top, "outside", ingress("unready-cluster")); e.Outcome != traffic.Refused {
		t.Errorf("iptables: no endpoint, from outside: %s (%s)", e, e.Why)
	}
	if e := expectTo(t, proxy.ModelIPTables, top, "node-1", ingress("unready-cluster")); e.Outcome != traffic.Timeout {
		t.Errorf("iptables: no endpoint, from a node: %s (%s)", e, e.Why)
	}
	if e := expectTo(t, proxy.ModelIPVS, top, "node-1", ingress("unready-cluster")); e.Outcome != traffic.Refused {
		t.Errorf("IPVS: no endpoint, from a node: %s (%s)", e, e.Why)
	}
}
