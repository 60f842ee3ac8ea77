package topology

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func mustParse(t *testing.T, src string) *Topology {
	t.Helper()
	top, err := Parse(t.Name()+".yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return top
}

func mustService(t *testing.T, top *Topology, name string) corev1.Service {
	t.Helper()
	svc, ok := top.Service("default", name)
	if !ok {
		t.Fatalf("no Service default/%s", name)
	}
	return svc
}

const oneNode = `
name: alloc
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/30}
`

func TestPodAddresses(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - {name: a, node: node-1, ip: 10.244.1.2}
  - {name: b, node: node-1}
  - {name: c, node: node-1}
  - {name: d, node: node-1, ip: 10.244.1.4}
  - {name: e, node: node-2}
`)
	// The network address (.0) and the gateway (.1) are never handed out, and
	// addresses the file gives are claimed before any is allocated, whatever
	// the order of the pods.
	want := map[string]string{"a": "10.244.1.2", "b": "10.244.1.3", "c": "10.244.1.5", "d": "10.244.1.4", "e": "10.244.2.2"}
	for _, p := range top.Pods {
		if got := p.IP.String(); got != want[p.Name] {
			t.Errorf("pod %s: IP %s, want %s", p.Name, got, want[p.Name])
		}
	}
	n, _ := top.Node("node-2")
	if g := n.Gateway().String(); g != "10.244.2.1" {
		t.Errorf("node-2 gateway %s, want 10.244.2.1", g)
	}
}

func TestClusterIPs(t *testing.T) {
	top := mustParse(t, oneNode+`
services:
  - metadata: {name: a}
    spec: {ports: [{port: 80}]}
  - metadata: {name: b}
    spec: {ports: [{port: 80}]}
  - metadata: {name: c}
    spec: {clusterIP: 10.96.0.3, ports: [{port: 80}]}
  - metadata: {name: headless}
    spec: {clusterIP: None, ports: [{port: 80}]}
  - metadata: {name: alias}
    spec: {type: ExternalName, externalName: example.com}
`)
	// 10.96.0.0 is the network and 10.96.0.1 the kubernetes Service's.
	want := map[string]string{"a": "10.96.0.2", "b": "10.96.0.4", "c": "10.96.0.3", "headless": "None", "alias": ""}
	for _, svc := range top.Services {
		if svc.Spec.ClusterIP != want[svc.Name] {
			t.Errorf("Service %s: clusterIP %q, want %q", svc.Name, svc.Spec.ClusterIP, want[svc.Name])
		}
		if w := want[svc.Name]; w != "" && !reflect.DeepEqual(svc.Spec.ClusterIPs, []string{w}) {
			t.Errorf("Service %s: clusterIPs %v, want [%s]", svc.Name, svc.Spec.ClusterIPs, w)
		}
	}
}

func TestServiceCIDRExhausted(t *testing.T) {
	src := strings.Replace(oneNode, "10.96.0.0/12", "10.96.0.0/30", 1) + `
services:
  - metadata: {name: a}
    spec: {ports: [{port: 80}]}
  - metadata: {name: b}
    spec: {ports: [{port: 80}]}
`
	// A /30 has .0 (network), .1 (kubernetes), .2 and .3 (broadcast): one Service.
	_, err := Parse("small.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "services[1].spec.clusterIP: serviceCIDR 10.96.0.0/30 has no free address left") {
		t.Fatalf("err = %v, want serviceCIDR exhausted for services[1]", err)
	}
}

func TestNodePorts(t *testing.T) {
	top := mustParse(t, oneNode+`
services:
  - metadata: {name: a}
    spec:
      type: NodePort
      ports: [{port: 80, nodePort: 30000}]
  - metadata: {name: b}
    spec:
      type: NodePort
      ports: [{port: 80}]
  - metadata: {name: lb}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      ports: [{port: 80}]
  - metadata: {name: dns}
    spec:
      type: NodePort
      ports:
        - {name: udp, port: 53, protocol: UDP}
        - {name: tcp, port: 53, protocol: TCP}
  - metadata: {name: late}
    spec:
      type: NodePort
      ports: [{port: 80, nodePort: 30002}]
  - metadata: {name: lb-cluster}
    spec:
      type: LoadBalancer
      ports: [{port: 80}]
`)
	type want struct {
		nodePorts []int32
		hc        int32
	}
	wants := map[string]want{
		"a": {[]int32{30000}, 0},
		"b": {[]int32{30001}, 0},
		// 30002 is taken by a later Service that asked for it.
		"lb": {[]int32{30003}, 30004},
		// Ports sharing a number share a node port, as the API server does.
		"dns":        {[]int32{30005, 30005}, 0},
		"late":       {[]int32{30002}, 0},
		"lb-cluster": {[]int32{30006}, 0},
	}
	for _, svc := range top.Services {
		var got []int32
		for _, p := range svc.Spec.Ports {
			got = append(got, p.NodePort)
		}
		w := wants[svc.Name]
		if !reflect.DeepEqual(got, w.nodePorts) || svc.Spec.HealthCheckNodePort != w.hc {
			t.Errorf("Service %s: node ports %v, health check %d; want %v, %d", svc.Name, got, svc.Spec.HealthCheckNodePort, w.nodePorts, w.hc)
		}
	}
}

func TestNodeNetwork(t *testing.T) {
	tests := []struct {
		nodes, clients []string
		given, want    string
	}{
		{nodes: []string{"192.168.1.10"}, want: "192.168.1.0/24"},
		{nodes: []string{"192.168.1.10", "192.168.1.11"}, clients: []string{"192.168.1.100"}, want: "192.168.1.0/24"},
		{nodes: []string{"192.168.1.10", "192.168.2.10"}, want: "192.168.0.0/22"},
		{nodes: []string{"192.168.1.10"}, clients: []string{"192.168.129.1"}, want: "192.168.0.0/16"},
		{nodes: []string{"192.168.1.10"}, given: "192.168.0.0/16", want: "192.168.0.0/16"},
	}
	for _, tt := range tests {
		var b strings.Builder
		b.WriteString("name: net\nclusterCIDR: 10.244.0.0/16\nserviceCIDR: 10.96.0.0/12\n")
		if tt.given != "" {
			b.WriteString("nodeCIDR: " + tt.given + "\n")
		}
		b.WriteString("nodes:\n")
		for i, ip := range tt.nodes {
			b.WriteString("  - {name: node-" + string(rune('a'+i)) + ", ip: " + ip + ", podCIDR: 10.244." + string(rune('1'+i)) + ".0/24}\n")
		}
		if len(tt.clients) > 0 {
			b.WriteString("clients:\n")
			for i, ip := range tt.clients {
				b.WriteString("  - {name: client-" + string(rune('a'+i)) + ", ip: " + ip + "}\n")
			}
		}
		top, err := Parse("net.yaml", []byte(b.String()))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if got := top.NodeCIDR.String(); got != tt.want {
			t.Errorf("nodes %v clients %v nodeCIDR %q: node network %s, want %s", tt.nodes, tt.clients, tt.given, got, tt.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	top := mustParse(t, oneNode+`
pods:
  - name: a
    node: node-1
    ports: [{name: http, containerPort: 8080}]
services:
  - metadata: {name: plain}
    spec: {ports: [{port: 80}]}
  - metadata: {name: np}
    spec:
      type: NodePort
      sessionAffinity: ClientIP
      ports: [{port: 80, targetPort: http}]
  - metadata: {name: lb}
    spec:
      type: LoadBalancer
      sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}
      sessionAffinity: ClientIP
      ports: [{port: 80}]
`)
	p := top.Pods[0]
	if p.Namespace != "default" || !p.Ready || p.Terminating || p.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("pod defaults: %+v", p)
	}
	plain := mustService(t, top, "plain")
	s := plain.Spec
	if plain.APIVersion != "v1" || plain.Kind != "Service" || plain.Namespace != "default" ||
		s.Type != corev1.ServiceTypeClusterIP || s.SessionAffinity != corev1.ServiceAffinityNone ||
		s.SessionAffinityConfig != nil || s.ExternalTrafficPolicy != "" ||
		s.InternalTrafficPolicy == nil || *s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster ||
		s.Ports[0].Protocol != corev1.ProtocolTCP || s.Ports[0].TargetPort != intstr.FromInt32(80) ||
		!reflect.DeepEqual(s.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) ||
		s.IPFamilyPolicy == nil || *s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		t.Errorf("ClusterIP Service defaults: %+v", s)
	}
	np := mustService(t, top, "np").Spec
	if np.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster ||
		np.SessionAffinityConfig == nil || *np.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 ||
		np.Ports[0].TargetPort != intstr.FromString("http") || np.AllocateLoadBalancerNodePorts != nil {
		t.Errorf("NodePort Service defaults: %+v", np)
	}
	lb := mustService(t, top, "lb").Spec
	if lb.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || lb.HealthCheckNodePort != 0 ||
		*lb.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 ||
		lb.AllocateLoadBalancerNodePorts == nil || !*lb.AllocateLoadBalancerNodePorts {
		t.Errorf("LoadBalancer Service defaults: %+v", lb)
	}
}

// TestDeterministic parses the same file twice: a lab must come out the same
// every time, slice names included.
func TestDeterministic(t *testing.T) {
	src := oneNode + `
pods:
  - {name: a, node: node-1, labels: {app: web}, ports: [{name: http, containerPort: 8080}]}
  - {name: b, node: node-1, labels: {app: web}, ports: [{name: http, containerPort: 9090}]}
  - {name: c, node: node-2, labels: {app: web}}
services:
  - metadata: {name: web}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: http}, {name: raw, port: 81}]
  - metadata: {name: other}
    spec: {type: NodePort, ports: [{port: 80}]}
`
	a, b := mustParse(t, src), mustParse(t, src)
	if !reflect.DeepEqual(a, b) {
		t.Error("two parses of one file differ")
	}
	if !reflect.DeepEqual(a.EndpointSlices(), b.EndpointSlices()) {
		t.Error("EndpointSlices differ between two parses of one file")
	}
	if !reflect.DeepEqual(a.EndpointSlices(), a.EndpointSlices()) {
		t.Error("EndpointSlices differ between two calls")
	}
}
