package topology

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

const lbLab = `
name: lb
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodeCIDR: 192.168.1.0/24
loadBalancerCIDR: 192.168.1.240/28
loadBalancers:
  - {name: edge, class: example.com/edge, probeInterval: 250ms}
  - {name: lb}
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
clients:
  - {name: outside, ip: 192.168.1.100}
externalIPRoutes:
  - {ip: 203.0.113.20, nodes: [node-2, node-1]}
services:
  - metadata: {name: allocated}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      ports: [{port: 80}]
  - metadata: {name: given}
    spec:
      type: LoadBalancer
      ports: [{port: 80}]
    status:
      loadBalancer:
        ingress: [{ip: 192.168.1.241}]
  - metadata: {name: asked}
    spec:
      type: LoadBalancer
      loadBalancerIP: 192.168.1.242
      allocateLoadBalancerNodePorts: false
      externalTrafficPolicy: Local
      ports: [{port: 80}]
  - metadata: {name: classy}
    spec:
      type: LoadBalancer
      loadBalancerClass: example.com/edge
      loadBalancerSourceRanges: [192.168.1.100/32]
      ports: [{port: 80}]
  - metadata: {name: ext}
    spec:
      externalIPs: [203.0.113.10, 203.0.113.20]
      externalTrafficPolicy: Local
      ports: [{port: 80}]
`

func ingressIPs(svc corev1.Service) []string {
	var out []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IPMode == nil || *ing.IPMode != corev1.LoadBalancerIPModeVIP {
			out = append(out, ing.IP+" (ipMode not VIP)")
			continue
		}
		out = append(out, ing.IP)
	}
	return out
}

// TestLoadBalancers: the file's ingress IPs are kept (ipMode defaulted to VIP),
// loadBalancerIP is honoured, the rest is allocated from loadBalancerCIDR around
// them, whatever the order; each Service goes to the load balancer of its class;
// the load balancers get the first free addresses of the node network.
func TestLoadBalancers(t *testing.T) {
	top := mustParse(t, lbLab)
	for name, want := range map[string][]string{
		"allocated": {"192.168.1.243"},
		"given":     {"192.168.1.241"},
		"asked":     {"192.168.1.242"},
		"classy":    {"192.168.1.244"},
		"ext":       nil,
	} {
		if got := ingressIPs(mustService(t, top, name)); !slices.Equal(got, want) {
			t.Errorf("Service %s: ingress %v, want %v", name, got, want)
		}
	}
	wantLBs := []LoadBalancer{
		{Name: "edge", IP: netip.MustParseAddr("192.168.1.1"), Class: "example.com/edge", ProbeInterval: 250 * time.Millisecond},
		{Name: "lb", IP: netip.MustParseAddr("192.168.1.2"), ProbeInterval: time.Second},
	}
	if !reflect.DeepEqual(top.LoadBalancers, wantLBs) {
		t.Errorf("load balancers %+v, want %+v", top.LoadBalancers, wantLBs)
	}
	if got, want := top.LoadBalancerCIDR, netip.MustParsePrefix("192.168.1.240/28"); got != want {
		t.Errorf("pool %s, want %s", got, want)
	}
	ing := func(ip, svc string, local bool, hc int) Ingress {
		return Ingress{IP: netip.MustParseAddr(ip), Service: "default/" + svc, Local: local, HealthCheckNodePort: hc}
	}
	allocated, asked := mustService(t, top, "allocated"), mustService(t, top, "asked")
	wantIngress := []Ingress{
		ing("192.168.1.243", "allocated", true, int(allocated.Spec.HealthCheckNodePort)),
		ing("192.168.1.241", "given", false, 0),
		ing("192.168.1.242", "asked", true, int(asked.Spec.HealthCheckNodePort)),
	}
	if got := top.Ingresses("lb"); !reflect.DeepEqual(got, wantIngress) {
		t.Errorf("lb's ingresses %+v, want %+v", got, wantIngress)
	}
	if got := top.Ingresses("edge"); !reflect.DeepEqual(got, []Ingress{ing("192.168.1.244", "classy", false, 0)}) {
		t.Errorf("edge's ingresses %+v", got)
	}
	// allocateLoadBalancerNodePorts: false leaves the ports without node ports;
	// the health check node port is not one of them.
	if asked.Spec.Ports[0].NodePort != 0 || asked.Spec.HealthCheckNodePort == 0 {
		t.Errorf("asked: nodePort %d, healthCheckNodePort %d", asked.Spec.Ports[0].NodePort, asked.Spec.HealthCheckNodePort)
	}
	// A ClusterIP Service with external IPs takes traffic from outside: its
	// policy defaults and counts.
	ext := mustService(t, top, "ext")
	if ext.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || ext.Spec.HealthCheckNodePort != 0 {
		t.Errorf("ext: policy %q, healthCheckNodePort %d", ext.Spec.ExternalTrafficPolicy, ext.Spec.HealthCheckNodePort)
	}
	wantRoutes := []ExternalIPRoute{
		{IP: netip.MustParseAddr("203.0.113.10"), Nodes: []string{"node-1"}},
		{IP: netip.MustParseAddr("203.0.113.20"), Nodes: []string{"node-2", "node-1"}},
	}
	if !reflect.DeepEqual(top.ExternalIPRoutes, wantRoutes) {
		t.Errorf("external IP routes %+v, want %+v", top.ExternalIPRoutes, wantRoutes)
	}

	// Allocation is a function of the file alone.
	again := mustParse(t, lbLab)
	if !reflect.DeepEqual(top, again) {
		t.Error("two parses of one file differ")
	}
}

// TestDefaultLoadBalancer: a lab that gives no load balancer gets one called lb
// for its LoadBalancer Services, and the pool is the node network.
func TestDefaultLoadBalancer(t *testing.T) {
	top := mustParse(t, oneNode+`
clients:
  - {name: outside, ip: 192.168.1.1}
services:
  - metadata: {name: web}
    spec:
      type: LoadBalancer
      ports: [{port: 80}]
`)
	want := []LoadBalancer{{Name: DefaultLoadBalancer, IP: netip.MustParseAddr("192.168.1.2"), ProbeInterval: DefaultProbeInterval}}
	if !reflect.DeepEqual(top.LoadBalancers, want) {
		t.Errorf("load balancers %+v, want %+v", top.LoadBalancers, want)
	}
	if top.LoadBalancerCIDR != top.NodeCIDR {
		t.Errorf("pool %s, want the node network %s", top.LoadBalancerCIDR, top.NodeCIDR)
	}
	if got := ingressIPs(mustService(t, top, "web")); !slices.Equal(got, []string{"192.168.1.3"}) {
		t.Errorf("ingress %v", got)
	}
	// No LoadBalancer Service, no load balancer.
	if plain := mustParse(t, oneNode); len(plain.LoadBalancers) != 0 {
		t.Errorf("a lab without LoadBalancer Services has load balancers %+v", plain.LoadBalancers)
	}
}

// TestLoadBalancerUpdates: a Service keeps its ingress IP while it stays a
// LoadBalancer of the same class, as its load balancer keeps it, gives it back
// when it stops being one, and a new one is allocated the next free address;
// the lab keeps its load balancers when their last Service goes.
func TestLoadBalancerUpdates(t *testing.T) {
	top := mustParse(t, lbLab)
	svc := mustService(t, top, "allocated")
	svc.Status = corev1.ServiceStatus{}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	svc.Spec.HealthCheckNodePort = 0
	if err := top.ApplyService(svc); err != nil {
		t.Fatal(err)
	}
	if got := ingressIPs(mustService(t, top, "allocated")); !slices.Equal(got, []string{"192.168.1.243"}) {
		t.Errorf("after an update without status: ingress %v", got)
	}

	svc = mustService(t, top, "allocated")
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.AllocateLoadBalancerNodePorts = nil
	if err := top.ApplyService(svc); err != nil {
		t.Fatal(err)
	}
	if got := ingressIPs(mustService(t, top, "allocated")); len(got) != 0 {
		t.Errorf("a NodePort Service kept ingress %v", got)
	}

	fresh := corev1.Service{}
	fresh.Name = "fresh"
	fresh.Spec.Type = corev1.ServiceTypeLoadBalancer
	fresh.Spec.Ports = []corev1.ServicePort{{Port: 8080}}
	if err := top.ApplyService(fresh); err != nil {
		t.Fatal(err)
	}
	if got := ingressIPs(mustService(t, top, "fresh")); !slices.Equal(got, []string{"192.168.1.243"}) {
		t.Errorf("a new LoadBalancer Service got ingress %v, want the address given back", got)
	}

	for _, name := range []string{"given", "asked", "classy", "fresh"} {
		if err := top.RemoveService("default", name); err != nil {
			t.Fatal(err)
		}
	}
	if len(top.LoadBalancers) != 2 {
		t.Errorf("load balancers after their Services went: %+v", top.LoadBalancers)
	}
	classy := mustService(t, mustParse(t, lbLab), "classy")
	classy.Spec.LoadBalancerClass = ptr.To("example.com/other")
	classy.Status = corev1.ServiceStatus{}
	if err := top.ApplyService(classy); err == nil {
		t.Error("a Service of a class no load balancer has was applied")
	}
}

// TestShippedLoadBalancers: topologies/lb.yaml's Services get the first
// addresses of its pool, its load balancer the first of the node network, and
// the external IP goes to node-2.
func TestShippedLoadBalancers(t *testing.T) {
	top, err := Embedded("lb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"web-local": {"192.168.1.241"}, "web-cluster": {"192.168.1.242"}, "web-ranged": {"192.168.1.243"}, "web-external": nil,
	} {
		if got := ingressIPs(mustService(t, top, name)); !slices.Equal(got, want) {
			t.Errorf("%s: ingress %v, want %v", name, got, want)
		}
	}
	if ranged := mustService(t, top, "web-ranged"); ranged.Spec.Ports[0].NodePort != 0 || ranged.Spec.HealthCheckNodePort == 0 {
		t.Errorf("web-ranged: nodePort %d, healthCheckNodePort %d", ranged.Spec.Ports[0].NodePort, ranged.Spec.HealthCheckNodePort)
	}
	want := []LoadBalancer{{Name: "lb", IP: netip.MustParseAddr("192.168.1.1"), ProbeInterval: time.Second}}
	if !reflect.DeepEqual(top.LoadBalancers, want) {
		t.Errorf("load balancers %+v, want %+v", top.LoadBalancers, want)
	}
	if r, ok := top.ExternalIPRoute(netip.MustParseAddr("203.0.113.10")); !ok || !slices.Equal(r.Nodes, []string{"node-2"}) {
		t.Errorf("203.0.113.10 routed to %+v", r)
	}
}
