package importer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/svclab/svclab/lab/topology"
)

// TestImportSeed002: the seed's cluster (kubectl of a 1.18 cluster, v1beta1
// slices) becomes a lab svclab's own validation takes, with the seed's
// Service, its three endpoints on their nodes, kube-proxy's version and
// cluster CIDR, and the kubernetes Service kept as the cluster has it.
func TestImportSeed002(t *testing.T) {
	data, res, err := Import([]string{"testdata/seed002/cluster.yaml", "testdata/seed002/kube-proxy.yaml"}, Options{Name: "seed002"})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Parse("imported", data)
	if err != nil {
		t.Fatalf("import wrote a file svclab refuses: %v\n%s", err, data)
	}
	if len(topo.Nodes) != 3 || topo.KubeProxyVersion != "1.18" || topo.ClusterCIDR.String() != "10.244.0.0/16" || topo.ServiceCIDR.String() != "10.96.0.0/12" {
		t.Errorf("nodes %d, version %q, clusterCIDR %s, serviceCIDR %s", len(topo.Nodes), topo.KubeProxyVersion, topo.ClusterCIDR, topo.ServiceCIDR)
	}
	svc, ok := topo.Service("default", "service-httpd")
	if !ok || svc.Spec.ClusterIP != "10.101.20.80" || svc.Spec.Ports[0].NodePort != 30271 {
		t.Fatalf("service-httpd: %+v", svc.Spec)
	}
	var eps []string
	for _, s := range topo.EndpointSlices() {
		for _, e := range s.Endpoints {
			eps = append(eps, e.Addresses[0]+"@"+*e.NodeName)
		}
	}
	// The API server's endpoint, on master (host network), then the seed's three.
	if got := strings.Join(eps, " "); got != "172.16.213.221@master 10.244.1.27@node1 10.244.1.28@node1 10.244.2.21@node2" {
		t.Errorf("endpoints %s", got)
	}
	if len(topo.Clients) != 1 {
		t.Errorf("clients %v", topo.Clients)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "Service default/kubernetes: kept as the cluster has it") || !strings.Contains(string(data), "#   - Service default/kubernetes: kept") {
		t.Errorf("the kubernetes Service is not noted as kept:\n%s", data)
	}
	// Kept, at the range's first host, with its API server on master.
	k, ok := topo.Service("default", "kubernetes")
	if !ok || k.Spec.ClusterIP != "10.96.0.1" || k.Annotations[topology.ClusterOwnAnnotation] != "true" {
		t.Errorf("default/kubernetes: %+v", k)
	}
}

const conditions = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: a.example.com}
  spec: {podCIDR: 10.244.0.0/24, podCIDRs: [10.244.0.0/24, "fd00:10:244::/64"]}
  status: {addresses: [{type: InternalIP, address: "fd00::10"}, {type: InternalIP, address: 192.168.5.10}]}
- apiVersion: v1
  kind: Node
  metadata: {name: b}
  spec: {podCIDRs: [10.244.1.0/24]}
  status: {addresses: [{type: InternalIP, address: 192.168.5.11}]}
- apiVersion: v1
  kind: Node
  metadata: {name: c}
  spec: {podCIDRs: [10.244.2.0/24]}
  status: {addresses: [{type: InternalIP, address: 192.168.5.12}]}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop, labels: {tier: front}}
  spec:
    type: LoadBalancer
    clusterIP: 10.96.5.5
    clusterIPs: [10.96.5.5, "fd00:96::5"]
    ipFamilies: [IPv4, IPv6]
    ipFamilyPolicy: RequireDualStack
    externalTrafficPolicy: Local
    healthCheckNodePort: 31999
    sessionAffinity: ClientIP
    sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}
    loadBalancerSourceRanges: [192.168.5.0/24]
    externalIPs: [198.51.100.4]
    selector: {app: web}
    ports: [{name: http, port: 80, targetPort: http, nodePort: 31000, protocol: TCP}]
  status: {loadBalancer: {ingress: [{ip: 203.0.113.7}, {hostname: lb.example.com}]}}
- apiVersion: v1
  kind: Service
  metadata: {name: other, namespace: tools}
  spec: {clusterIP: 10.96.5.6, selector: {app: other}, ports: [{port: 53, protocol: UDP}]}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
  addressType: IPv4
  ports: [{name: http, port: 8080, protocol: TCP}]
  endpoints:
  - {addresses: [10.244.0.5], nodeName: a.example.com, zone: z1, conditions: {ready: true, serving: true, terminating: false}, targetRef: {kind: Pod, name: web-a, namespace: shop}}
  - {addresses: [10.244.1.5], nodeName: b, conditions: {ready: false, serving: true, terminating: true}, targetRef: {kind: Pod, name: web-b, namespace: shop}}
  - {addresses: [10.244.1.6], nodeName: b, conditions: {ready: false, serving: false, terminating: false}}
  - {addresses: [10.244.2.5], nodeName: c, conditions: {ready: true}}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata: {name: web-2, namespace: shop, labels: {kubernetes.io/service-name: web}}
  addressType: IPv6
  ports: [{name: http, port: 8080, protocol: TCP}]
  endpoints: [{addresses: ["fd00::5"], nodeName: b}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: ignored}
`

// TestImportKeepsConditionsAndCuts: each endpoint keeps its conditions (ready,
// serving and terminating, as the pods made for them), the Service its policies,
// affinity, ranges and ingress; what a lab cannot hold is listed; the cuts keep
// what they say.
func TestImportKeepsConditionsAndCuts(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(in, []byte(conditions), 0o644); err != nil {
		t.Fatal(err)
	}
	data, res, err := Import([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Parse("imported", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	web, _ := topo.Service("shop", "web")
	if web.Spec.ExternalTrafficPolicy != "Local" || web.Spec.HealthCheckNodePort != 31999 || *web.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 ||
		web.Spec.LoadBalancerSourceRanges[0] != "192.168.5.0/24" || web.Spec.ExternalIPs[0] != "198.51.100.4" ||
		web.Status.LoadBalancer.Ingress[0].IP != "203.0.113.7" || len(web.Spec.ClusterIPs) != 1 {
		t.Errorf("web: %+v %+v", web.Spec, web.Status)
	}
	want := map[string]string{"10.244.0.5": "true true false", "10.244.1.5": "false true true", "10.244.1.6": "false false false", "10.244.2.5": "true <nil> <nil>"}
	n := 0
	for _, s := range topo.EndpointSlices() {
		for _, e := range s.Endpoints {
			c := e.Conditions
			got := strings.Join([]string{fmtBool(c.Ready), fmtBool(c.Serving), fmtBool(c.Terminating)}, " ")
			if w := want[e.Addresses[0]]; got != w {
				t.Errorf("endpoint %s: ready serving terminating %s, want %s", e.Addresses[0], got, w)
			}
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d endpoints, want 4", n)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, w := range []string{"node a.example.com: named a-example-com",
		"node a.example.com: dual-stack: kept its IPv4 half only, left out its InternalIP fd00::10, podCIDR fd00:10:244::/64", "dual-stack: kept its IPv4 ClusterIP 10.96.5.5", "load balancer ingress lb.example.com left out",
		"addressType IPv6 left out", "zone and hints left out", "1 Deployment"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}

	// Cut: one namespace, one node. Node b holds two endpoints of web, so it
	// stays; the endpoints on the others are listed as left out.
	data, res, err = Import([]string{in}, Options{Namespaces: []string{"shop"}, Selector: labels.SelectorFromSet(labels.Set{"tier": "front"}), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	topo, err = topology.Parse("imported", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(topo.Nodes) != 1 || topo.Nodes[0].Name != "b" || len(topo.Services) != 1 {
		t.Errorf("cut kept nodes %v, %d Services", topo.Nodes, len(topo.Services))
	}
	text := string(data)
	for _, w := range []string{"--namespace shop: left out 1 Services", "-l tier=front", "--nodes 1: kept b", "endpoint 10.244.2.5 of shop/web: on node c, which the lab does not have: left out"} {
		if !strings.Contains(text, w) {
			t.Errorf("the file does not say %q:\n%s", w, text)
		}
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "<nil>"
	}
	if *b {
		return "true"
	}
	return "false"
}

// TestImportBadInput: bad input names the file and the place in it.
func TestImportBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ text, want string }{
		"field":   {"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: x}\n  spec: {ports: 80}\n", "bad.yaml:items[0]: Service: "},
		"nokind":  {"apiVersion: v1\nmetadata: {name: x}\n", "bad.yaml: kind: required"},
		"version": {"apiVersion: discovery.k8s.io/v2\nkind: EndpointSlice\n", `bad.yaml: apiVersion: "discovery.k8s.io/v2"`},
		"yaml":    {"items: [\n", "bad.yaml: not YAML or JSON"},
		"nonodes": {"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: x}\naddressType: IPv4\nendpoints: []\n", "no Node"},
		"noports": {"apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", "bad.yaml (Service default/x): spec.ports: required"},
		"podcidr": {"apiVersion: v1\nkind: Node\nmetadata: {name: nx}\nspec: {podCIDRs: [nope]}\nstatus: {addresses: [{type: InternalIP, address: 10.0.0.1}]}\n", `bad.yaml (Node nx): spec.podCIDRs: "nope" is no CIDR`},
	} {
		p := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Import([]string{p}, Options{})
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an InputError containing %q", name, err, tc.want)
		}
	}
}

// TestImportServiceCIDR: the service range starts just before the kubernetes
// Service's address (k3s's 10.43.0.0/16 here) and holds every ClusterIP.
func TestImportServiceCIDR(t *testing.T) {
	dump := `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: k1}, spec: {podCIDR: 10.42.0.0/24}, status: {addresses: [{type: InternalIP, address: 10.0.0.5}]}}
- {apiVersion: v1, kind: Service, metadata: {name: kubernetes, namespace: default}, spec: {clusterIP: 10.43.0.1, ports: [{name: https, port: 443}]}}
- {apiVersion: v1, kind: Service, metadata: {name: app}, spec: {clusterIP: 10.43.200.5, ports: [{port: 80}]}}
`
	p := filepath.Join(t.TempDir(), "k3s.yaml")
	if err := os.WriteFile(p, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _, err := Import([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Parse("k3s", data)
	if err != nil {
		t.Fatal(err)
	}
	if topo.ServiceCIDR.String() != "10.43.0.0/16" || topo.ClusterCIDR.String() != "10.42.0.0/16" {
		t.Errorf("serviceCIDR %s, clusterCIDR %s, want 10.43.0.0/16 and 10.42.0.0/16", topo.ServiceCIDR, topo.ClusterCIDR)
	}
}
