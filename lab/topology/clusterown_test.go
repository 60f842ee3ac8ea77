package topology

import (
	"strings"
	"testing"
)

// clusterOwn is what `svclab import` writes of a cluster's own Services: the
// kubernetes Service at the range's first host, its endpoint the API server on
// node-1, and the cluster DNS's Service with its endpoint, both marked.
const clusterOwn = `name: own
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
clusterDNS: 10.96.0.10
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
pods:
  - {name: coredns-a, namespace: kube-system, node: node-1, ip: 10.244.1.2, labels: {k8s-app: kube-dns}}
services:
  - metadata: {name: kubernetes, namespace: default, annotations: {svclab.io/cluster-own: "true"}}
    spec: {clusterIP: 10.96.0.1, ports: [{name: https, port: 443, targetPort: 6443}]}
  - metadata: {name: kube-dns, namespace: kube-system, annotations: {svclab.io/cluster-own: "true"}}
    spec: {clusterIP: 10.96.0.10, ports: [{name: dns, port: 53, protocol: UDP}]}
endpointSlices:
  - metadata: {name: kubernetes, namespace: default, labels: {kubernetes.io/service-name: kubernetes}}
    addressType: IPv4
    ports: [{name: https, port: 6443, protocol: TCP}]
    endpoints: [{addresses: [192.168.1.10], nodeName: node-1}]
  - metadata: {name: kube-dns-x, namespace: kube-system, labels: {kubernetes.io/service-name: kube-dns}}
    addressType: IPv4
    ports: [{name: dns, port: 53, protocol: UDP}]
    endpoints: [{addresses: [10.244.1.2], nodeName: node-1}]
`

// TestClusterOwnServices: without a control plane the cluster's own Services
// are the lab's, as the cluster had them; with one they are left out, with
// their slices, for the API server's and the cluster DNS's own, and nothing is
// refused. Unmarked, the cluster DNS's name is still refused with a control
// plane, and the first host still for any other Service.
func TestClusterOwnServices(t *testing.T) {
	topo, err := Parse("own.yaml", []byte(clusterOwn))
	if err != nil {
		t.Fatal(err)
	}
	k, ok := topo.Service("default", "kubernetes")
	if _, dns := topo.Service("kube-system", "kube-dns"); !ok || !dns || k.Spec.ClusterIP != "10.96.0.1" || len(topo.UserEndpointSlices) != 2 {
		t.Fatalf("without a control plane: kubernetes %v, slices %d", ok, len(topo.UserEndpointSlices))
	}
	if err := topo.EnableControlPlane(); err != nil {
		t.Fatalf("with a control plane: %v", err)
	}
	if _, ok := topo.Service("default", "kubernetes"); ok {
		t.Error("with a control plane the file's kubernetes Service stays")
	}
	dns, ok := topo.Service("kube-system", "kube-dns")
	if !ok || dns.Annotations[ClusterOwnAnnotation] != "" || len(topo.UserEndpointSlices) != 0 {
		t.Errorf("with a control plane: kube-dns %+v, user slices %d", dns.ObjectMeta, len(topo.UserEndpointSlices))
	}

	unmarked := strings.ReplaceAll(clusterOwn, `, annotations: {svclab.io/cluster-own: "true"}`, "")
	if _, err := Parse("unmarked.yaml", []byte(strings.Replace(unmarked, "clusterDNS: 10.96.0.10\n", "clusterDNS: 10.96.0.10\ncontrolPlane: true\n", 1))); err == nil || !strings.Contains(err.Error(), "is the cluster DNS's Service") {
		t.Errorf("an unmarked kube-dns with a control plane: %v", err)
	}
	first := strings.Replace(clusterOwn, "name: kubernetes, namespace: default", "name: other, namespace: default", 1)
	if _, err := Parse("first.yaml", []byte(first)); err == nil || !strings.Contains(err.Error(), "is the kubernetes Service's address") {
		t.Errorf("another Service at the first host: %v", err)
	}
}
