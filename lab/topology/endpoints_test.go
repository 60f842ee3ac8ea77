package topology

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// slicesOf picks the slices of one Service out of EndpointSlices().
func slicesOf(top *Topology, name string) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, s := range top.EndpointSlices() {
		if s.Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, s)
		}
	}
	return out
}

// portMap renders a slice as "name=port/..." -> addresses, to compare groupings.
func portMap(s discoveryv1.EndpointSlice) string {
	var ports, addrs []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s=%d/%s", *p.Name, *p.Port, *p.Protocol))
	}
	for _, e := range s.Endpoints {
		addrs = append(addrs, e.Addresses[0])
	}
	return "[" + strings.Join(ports, " ") + "] " + strings.Join(addrs, " ")
}

func TestNamedPortsAcrossPods(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - {name: a, node: node-1, ip: 10.244.1.10, labels: {app: web}, ports: [{name: http, containerPort: 8080}]}
  - {name: b, node: node-1, ip: 10.244.1.11, labels: {app: web}, ports: [{name: http, containerPort: 9090}]}
  - {name: c, node: node-1, ip: 10.244.1.12, labels: {app: web}, ports: [{name: http, containerPort: 8080}]}
  - {name: d, node: node-1, ip: 10.244.1.13, labels: {app: web}, ports: [{name: http, containerPort: 8080, protocol: UDP}]}
  - {name: e, node: node-1, ip: 10.244.1.14, labels: {app: web}}
  - {name: f, node: node-1, ip: 10.244.1.15, labels: {app: api}, ports: [{name: http, containerPort: 8080}]}
services:
  - metadata: {name: web}
    spec:
      selector: {app: web}
      ports:
        - {name: http, port: 80, targetPort: http}
        - {name: metrics, port: 9100}
`)
	// The controller groups pods by the ports they resolve to. d names http for
	// UDP only and e not at all: both are left out of the http port but stay in
	// the numeric one. f is not selected.
	var got []string
	for _, s := range slicesOf(top, "web") {
		got = append(got, portMap(s))
	}
	slices.Sort(got)
	want := []string{
		"[http=8080/TCP metrics=9100/TCP] 10.244.1.10 10.244.1.12",
		"[http=9090/TCP metrics=9100/TCP] 10.244.1.11",
		"[metrics=9100/TCP] 10.244.1.13 10.244.1.14",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slices:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEndpointConditions(t *testing.T) {
	src := oneNode + `
pods:
  - {name: ready, node: node-1, ip: 10.244.1.10, labels: {app: web}}
  - {name: unready, node: node-1, ip: 10.244.1.11, labels: {app: web}, ready: false}
  - {name: draining, node: node-1, ip: 10.244.1.12, labels: {app: web}, terminating: true}
  - {name: dying, node: node-1, ip: 10.244.1.13, labels: {app: web}, ready: false, terminating: true}
services:
  - metadata: {name: web}
    spec:
      selector: {app: web}
      publishNotReadyAddresses: PUBLISH
      ports: [{port: 80}]
`
	type cond struct{ ready, serving, terminating bool }
	for _, publish := range []bool{false, true} {
		top := mustParse(t, strings.Replace(src, "PUBLISH", fmt.Sprint(publish), 1))
		want := map[string]cond{
			"10.244.1.10": {true, true, false},
			"10.244.1.11": {publish, false, false},
			// A terminating pod is never ready unless the Service publishes
			// not-ready addresses; serving follows the pod's readiness.
			"10.244.1.12": {publish, true, true},
			"10.244.1.13": {publish, false, true},
		}
		sl := slicesOf(top, "web")
		if len(sl) != 1 || len(sl[0].Endpoints) != 4 {
			t.Fatalf("publish %v: want one slice of 4 endpoints, got %v", publish, sl)
		}
		for _, e := range sl[0].Endpoints {
			c := e.Conditions
			got := cond{*c.Ready, *c.Serving, *c.Terminating}
			if got != want[e.Addresses[0]] {
				t.Errorf("publishNotReadyAddresses %v: %s: %+v, want %+v", publish, e.Addresses[0], got, want[e.Addresses[0]])
			}
			if *e.NodeName != "node-1" || e.TargetRef == nil || e.TargetRef.Kind != "Pod" || e.TargetRef.Namespace != "default" {
				t.Errorf("%s: nodeName %v, targetRef %+v", e.Addresses[0], e.NodeName, e.TargetRef)
			}
		}
	}
}

func TestControllerSliceShape(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - {name: a, node: node-1, ip: 10.244.1.10, labels: {app: web}}
  - {name: other-ns, namespace: prod, node: node-1, ip: 10.244.1.11, labels: {app: web}}
services:
  - metadata:
      name: web
      labels: {team: blue, kubernetes.io/service-name: spoof}
    spec:
      selector: {app: web}
      ports: [{port: 80, appProtocol: http}]
  - metadata: {name: nothing}
    spec:
      selector: {app: none}
      ports: [{port: 80}]
  - metadata: {name: headless}
    spec:
      clusterIP: None
      selector: {app: web}
  - metadata: {name: alias}
    spec:
      type: ExternalName
      externalName: example.com
      selector: {app: web}
`)
	web := slicesOf(top, "web")
	if len(web) != 1 {
		t.Fatalf("web: %d slices, want 1", len(web))
	}
	s := web[0]
	wantLabels := map[string]string{
		"team":                       "blue",
		discoveryv1.LabelServiceName: "web",
		discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
	}
	if !reflect.DeepEqual(s.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", s.Labels, wantLabels)
	}
	if s.Namespace != "default" || s.AddressType != discoveryv1.AddressTypeIPv4 || !strings.HasPrefix(s.Name, "web-") || len(s.Name) != len("web-")+5 {
		t.Errorf("slice %s/%s addressType %s", s.Namespace, s.Name, s.AddressType)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || s.OwnerReferences[0].Name != "web" {
		t.Errorf("ownerReferences %+v", s.OwnerReferences)
	}
	// The pod in namespace prod has the labels but not the Service's namespace.
	if portMap(s) != "[=80/TCP] 10.244.1.10" || *s.Ports[0].AppProtocol != "http" {
		t.Errorf("slice %s", portMap(s))
	}

	// A selector that matches nothing gets the controller's placeholder: no
	// ports, no endpoints.
	nothing := slicesOf(top, "nothing")
	if len(nothing) != 1 || len(nothing[0].Ports) != 0 || len(nothing[0].Endpoints) != 0 {
		t.Errorf("nothing: %v, want one empty placeholder slice", nothing)
	}

	headless := slicesOf(top, "headless")
	if len(headless) != 1 || portMap(headless[0]) != "[] 10.244.1.10" {
		t.Fatalf("headless: %v", headless)
	}
	if v, ok := headless[0].Labels[corev1.IsHeadlessService]; !ok || v != "" {
		t.Errorf("headless slice labels %v lack %s", headless[0].Labels, corev1.IsHeadlessService)
	}
	if alias := slicesOf(top, "alias"); len(alias) != 0 {
		t.Errorf("ExternalName Service got slices: %v", alias)
	}
}

func TestManyEndpointsSplit(t *testing.T) {
	var b strings.Builder
	b.WriteString(oneNode + "pods:\n")
	for i := range 150 {
		fmt.Fprintf(&b, "  - {name: p%d, node: node-1, labels: {app: web}}\n", i)
	}
	b.WriteString("services:\n  - metadata: {name: web}\n    spec: {selector: {app: web}, ports: [{port: 80}]}\n")
	top := mustParse(t, b.String())
	sl := slicesOf(top, "web")
	if len(sl) != 2 || len(sl[0].Endpoints) != 100 || len(sl[1].Endpoints) != 50 {
		t.Fatalf("want slices of 100 and 50 endpoints, got %d slices", len(sl))
	}
	if sl[0].Name == sl[1].Name {
		t.Errorf("two slices named %s", sl[0].Name)
	}
	// Endpoints are in address order, so the split is deterministic.
	if sl[0].Endpoints[0].Addresses[0] != "10.244.1.2" || sl[1].Endpoints[49].Addresses[0] != "10.244.1.151" {
		t.Errorf("first %s, last %s", sl[0].Endpoints[0].Addresses[0], sl[1].Endpoints[49].Addresses[0])
	}
}

func TestUserSlicesForSelectorlessService(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - {name: db, node: node-1, ip: 10.244.1.10}
clients:
  - {name: legacy, ip: 192.168.1.50}
services:
  - metadata: {name: db}
    spec:
      ports: [{name: pg, port: 5432}]
endpointSlices:
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata:
      name: db-manual
      labels: {kubernetes.io/service-name: db, endpointslice.kubernetes.io/managed-by: staff}
    addressType: IPv4
    endpoints:
      - addresses: [10.244.1.10]
        nodeName: node-1
        targetRef: {kind: Pod, name: db}
      - addresses: [192.168.1.50]
        conditions: {ready: false}
    ports:
      - {name: pg, port: 6432}
`)
	all := top.EndpointSlices()
	if len(all) != 1 {
		t.Fatalf("%d slices, want only the user's", len(all))
	}
	s := all[0]
	if s.Name != "db-manual" || s.Namespace != "default" || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("user slice %s/%s ports %v", s.Namespace, s.Name, portMap(s))
	}
	if !reflect.DeepEqual(s, top.UserEndpointSlices[0]) {
		t.Errorf("EndpointSlices() changed the user's slice")
	}
	all[0].Endpoints[0].Addresses[0] = "changed"
	if top.UserEndpointSlices[0].Endpoints[0].Addresses[0] != "10.244.1.10" {
		t.Errorf("EndpointSlices() shares memory with the topology")
	}
}
