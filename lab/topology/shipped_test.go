package topology

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestShippedFiles checks the labs of the seed articles come out as the articles
// describe them.
func TestShippedFiles(t *testing.T) {
	type pod struct{ key, node, ip string }
	tests := []struct {
		file      string
		nodeCIDR  string
		pods      []pod
		service   string // namespace/name
		clusterIP string
		port      int32
		target    intstr.IntOrString
		nodePort  int32
		endpoints []string
	}{{
		file:     "web.yaml",
		nodeCIDR: "192.168.1.0/24",
		pods: []pod{
			{"default/web-a", "node-1", "10.244.1.10"},
			{"default/web-b", "node-2", "10.244.2.10"},
			{"default/client", "node-1", "10.244.1.5"},
		},
		service: "default/web", clusterIP: "10.96.123.45", port: 80, target: intstr.FromInt32(8080), nodePort: 30080,
		endpoints: []string{"10.244.1.10:8080", "10.244.2.10:8080"},
	}, {
		file:     "httpd.yaml",
		nodeCIDR: "172.16.213.0/24",
		pods: []pod{
			{"default/httpservice-deployment-1", "node1", "10.244.1.27"},
			{"default/httpservice-deployment-2", "node1", "10.244.1.28"},
			{"default/httpservice-deployment-3", "node2", "10.244.2.21"},
			// busybox has no address in the file: the first free one after
			// node2's gateway.
			{"default/busybox", "node2", "10.244.2.2"},
		},
		service: "default/service-httpd", clusterIP: "10.101.20.80", port: 8080, target: intstr.FromInt32(80), nodePort: 32000,
		endpoints: []string{"10.244.1.27:80", "10.244.1.28:80", "10.244.2.21:80"},
	}}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			top, err := Embedded(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if want := "<embedded>/" + tt.file; top.Source != want {
				t.Errorf("Source = %q, want %q", top.Source, want)
			}
			if got := top.NodeCIDR.String(); got != tt.nodeCIDR {
				t.Errorf("NodeCIDR = %s, want %s", got, tt.nodeCIDR)
			}
			if len(top.Pods) != len(tt.pods) {
				t.Fatalf("%d pods, want %d", len(top.Pods), len(tt.pods))
			}
			for i, want := range tt.pods {
				p := top.Pods[i]
				if p.Key() != want.key || p.Node != want.node || p.IP.String() != want.ip || !p.Ready || p.Terminating {
					t.Errorf("pod %d = %s on %s at %s (ready %v, terminating %v), want %s on %s at %s, ready",
						i, p.Key(), p.Node, p.IP, p.Ready, p.Terminating, want.key, want.node, want.ip)
				}
			}
			ns, name, _ := strings.Cut(tt.service, "/")
			svc, ok := top.Service(ns, name)
			if !ok {
				t.Fatalf("no Service %s", tt.service)
			}
			if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.ClusterIP != tt.clusterIP || len(svc.Spec.Ports) != 1 {
				t.Fatalf("Service %s: type %s, clusterIP %s, %d ports", tt.service, svc.Spec.Type, svc.Spec.ClusterIP, len(svc.Spec.Ports))
			}
			sp := svc.Spec.Ports[0]
			if sp.Port != tt.port || sp.TargetPort != tt.target || sp.NodePort != tt.nodePort || sp.Protocol != corev1.ProtocolTCP {
				t.Errorf("port = %d -> %s, nodePort %d, %s; want %d -> %s, nodePort %d, TCP",
					sp.Port, sp.TargetPort.String(), sp.NodePort, sp.Protocol, tt.port, tt.target.String(), tt.nodePort)
			}
			if got := endpointAddrs(top); !reflect.DeepEqual(got, tt.endpoints) {
				t.Errorf("endpoints = %v, want %v", got, tt.endpoints)
			}
		})
	}
}

func TestDefaultIsWeb(t *testing.T) {
	top, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if top.Name != "web" || top.Source != "<embedded>/web.yaml" {
		t.Errorf("Default() = lab %q from %q, want web from <embedded>/web.yaml", top.Name, top.Source)
	}
	loaded, err := Load("../../topologies/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Source != "../../topologies/web.yaml" {
		t.Errorf("Load: Source = %q", loaded.Source)
	}
	loaded.Source = top.Source
	if !reflect.DeepEqual(loaded, top) {
		t.Errorf("Load of topologies/web.yaml differs from Default()")
	}
	if _, err := Embedded("web"); err != nil {
		t.Errorf("Embedded without .yaml: %v", err)
	}
	if _, err := Embedded("nosuch.yaml"); err == nil || !strings.Contains(err.Error(), "httpd.yaml, lb.yaml, web.yaml") {
		t.Errorf("Embedded(nosuch.yaml) = %v, want an error listing the shipped files", err)
	}
	if _, err := Load("testdata/nosuch.yaml"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// endpointAddrs lists ip:port of every endpoint of every slice, in order.
func endpointAddrs(top *Topology) []string {
	var out []string
	for _, s := range top.EndpointSlices() {
		for _, p := range s.Ports {
			for _, e := range s.Endpoints {
				out = append(out, netip.AddrPortFrom(netip.MustParseAddr(e.Addresses[0]), uint16(*p.Port)).String())
			}
		}
	}
	return out
}
