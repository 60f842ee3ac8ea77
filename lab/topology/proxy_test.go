package topology_test

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	corev1 "k8s.io/api/core/v1"
)

// TestShippedFilesToProxy checks that what the topology computes is what the
// proxier's view is built from: Services plus controller-made slices give the
// ServicePorts of the seed articles.
func TestShippedFilesToProxy(t *testing.T) {
	ep := func(ip string, port int, node, pod string) proxy.Endpoint {
		return proxy.Endpoint{IP: netip.MustParseAddr(ip), Port: port, NodeName: node, Ready: true, Serving: true, Pod: pod}
	}
	tests := []struct {
		file string
		want []proxy.ServicePort
	}{{
		file: "web.yaml",
		want: []proxy.ServicePort{{
			Name:      proxy.ServicePortName{Namespace: "default", Name: "web", Port: "http"},
			Protocol:  corev1.ProtocolTCP,
			ClusterIP: netip.MustParseAddr("10.96.123.45"),
			Port:      80,
			NodePort:  30080,
			Endpoints: []proxy.Endpoint{
				ep("10.244.1.10", 8080, "node-1", "default/web-a"),
				ep("10.244.2.10", 8080, "node-2", "default/web-b"),
			},
		}},
	}, {
		file: "httpd.yaml",
		want: []proxy.ServicePort{{
			Name:      proxy.ServicePortName{Namespace: "default", Name: "service-httpd"},
			Protocol:  corev1.ProtocolTCP,
			ClusterIP: netip.MustParseAddr("10.101.20.80"),
			Port:      8080,
			NodePort:  32000,
			Endpoints: []proxy.Endpoint{
				ep("10.244.1.27", 80, "node1", "default/httpservice-deployment-1"),
				ep("10.244.1.28", 80, "node1", "default/httpservice-deployment-2"),
				ep("10.244.2.21", 80, "node2", "default/httpservice-deployment-3"),
			},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			top, err := topology.Embedded(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got := proxy.FromObjects(top.Services, top.EndpointSlices())
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromObjects =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestPortMappingsToProxy follows pods with different container ports behind
// one named targetPort, and a selectorless Service with the user's slice, all the
// way to the proxier's view.
func TestPortMappingsToProxy(t *testing.T) {
	top, err := topology.Parse("ports.yaml", []byte(`
name: ports
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
pods:
  - {name: a, node: node-1, labels: {app: web}, ports: [{name: http, containerPort: 8080}]}
  - {name: b, node: node-2, labels: {app: web}, ports: [{name: http, containerPort: 9090}], ready: false}
  - {name: c, node: node-2, labels: {app: web}}
clients:
  - {name: legacy, ip: 192.168.1.50}
services:
  - metadata: {name: web}
    spec:
      clusterIP: 10.96.0.10
      selector: {app: web}
      ports:
        - {name: http, port: 80, targetPort: http}
        - {name: dns, port: 53, protocol: UDP}
  - metadata: {name: legacy}
    spec:
      clusterIP: 10.96.0.11
      ports: [{port: 8080}]
endpointSlices:
  - metadata:
      name: legacy-1
      labels: {kubernetes.io/service-name: legacy}
    addressType: IPv4
    endpoints: [{addresses: [192.168.1.50]}]
    ports: [{port: 80}]
`))
	if err != nil {
		t.Fatal(err)
	}
	got := proxy.FromObjects(top.Services, top.EndpointSlices())
	ep := func(ip string, port int, node, pod string, ready bool) proxy.Endpoint {
		return proxy.Endpoint{IP: netip.MustParseAddr(ip), Port: port, NodeName: node, Ready: ready, Serving: ready, Pod: pod}
	}
	want := []proxy.ServicePort{
		{
			Name: proxy.ServicePortName{Namespace: "default", Name: "web", Port: "http"}, Protocol: corev1.ProtocolTCP,
			ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 80,
			Endpoints: []proxy.Endpoint{
				ep("10.244.1.2", 8080, "node-1", "default/a", true),
				ep("10.244.2.2", 9090, "node-2", "default/b", false),
			},
		},
		{
			Name: proxy.ServicePortName{Namespace: "default", Name: "web", Port: "dns"}, Protocol: corev1.ProtocolUDP,
			ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 53,
			Endpoints: []proxy.Endpoint{
				ep("10.244.1.2", 53, "node-1", "default/a", true),
				ep("10.244.2.2", 53, "node-2", "default/b", false),
				ep("10.244.2.3", 53, "node-2", "default/c", true),
			},
		},
		{
			Name: proxy.ServicePortName{Namespace: "default", Name: "legacy"}, Protocol: corev1.ProtocolTCP,
			ClusterIP: netip.MustParseAddr("10.96.0.11"), Port: 8080,
			Endpoints: []proxy.Endpoint{{IP: netip.MustParseAddr("192.168.1.50"), Port: 80, Ready: true, Serving: true}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromObjects =\n%+v\nwant\n%+v", got, want)
	}
}
