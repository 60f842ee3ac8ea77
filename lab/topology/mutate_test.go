package topology

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const mutable = `
name: mut
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
pods:
  - {name: web-a, node: node-1, ip: 10.244.1.2, labels: {app: web}, ports: [{name: http, containerPort: 8080}]}
  - {name: web-b, node: node-2, labels: {app: web}, ports: [{name: http, containerPort: 8080}]}
services:
  - metadata: {name: web}
    spec:
      type: NodePort
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: http}]
  - metadata: {name: db}
    spec:
      ports: [{port: 5432}]
endpointSlices:
  - metadata:
      name: db-1
      labels: {kubernetes.io/service-name: db}
    addressType: IPv4
    endpoints: [{addresses: [10.244.1.2]}]
    ports: [{port: 5432}]
`

// failsUnchanged runs a mutation that must fail and checks that it left the
// topology exactly as it was.
func failsUnchanged(t *testing.T, top *Topology, wantErr string, mutate func() error) {
	t.Helper()
	before := top.Clone()
	err := mutate()
	if err == nil {
		t.Fatalf("mutation succeeded, want an error containing %q", wantErr)
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Errorf("error:\n%v\nwant it to contain %q", err, wantErr)
	}
	if !reflect.DeepEqual(top, before) {
		t.Errorf("a failed mutation changed the topology")
	}
}

func TestAddPod(t *testing.T) {
	top := mustParse(t, mutable)
	p, err := top.AddPod(PodSpec{Name: "web-c", Node: "node-1", Labels: map[string]string{"app": "web"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9090}}})
	if err != nil {
		t.Fatal(err)
	}
	// 10.244.1.2 is web-a's: the next free address of node-1's podCIDR.
	if p.IP.String() != "10.244.1.3" || p.Namespace != "default" || !p.Ready || p.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("added pod %+v", p)
	}
	if got, ok := top.Pod("default/web-c"); !ok || !reflect.DeepEqual(got, p) {
		t.Errorf("Pod(default/web-c) = %+v, %v", got, ok)
	}
	// The Service picks the new pod up, on its own port number.
	if got := endpointAddrs(top); !reflect.DeepEqual(got, []string{"10.244.1.2:5432", "10.244.1.2:8080", "10.244.2.2:8080", "10.244.1.3:9090"}) {
		t.Errorf("endpoints %v", got)
	}
	if top.Source != "TestAddPod.yaml" {
		t.Errorf("Source became %q", top.Source)
	}

	failsUnchanged(t, top, "add pod default/x): pods[3].node: unknown node \"node-9\"", func() error {
		_, err := top.AddPod(PodSpec{Name: "x", Node: "node-9"})
		return err
	})
	failsUnchanged(t, top, "pods[3].ip: 10.244.3.5 is outside node node-1's podCIDR 10.244.1.0/24", func() error {
		_, err := top.AddPod(PodSpec{Name: "x", Node: "node-1", IP: "10.244.3.5"})
		return err
	})
	failsUnchanged(t, top, "pods[3].name: \"web-a\" is already the name of pods[0]", func() error {
		_, err := top.AddPod(PodSpec{Name: "web-a", Namespace: "other", Node: "node-1"})
		return err
	})
	failsUnchanged(t, top, "is already the address of pod default/web-a", func() error {
		_, err := top.AddPod(PodSpec{Name: "x", Node: "node-1", IP: "10.244.1.2"})
		return err
	})
}

func TestMutationErrorsAreErrorLists(t *testing.T) {
	top := mustParse(t, mutable)
	_, err := top.AddPod(PodSpec{Name: "Bad", Node: "node-1"})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("err = %#v, want an ErrorList of one", err)
	}
	if e := list[0]; e.Source != "TestMutationErrorsAreErrorLists.yaml (add pod default/Bad)" || e.Line != 0 || e.Path != "pods[2].name" {
		t.Errorf("error %+v", e)
	}
}

func TestRemovePod(t *testing.T) {
	top := mustParse(t, mutable)
	p, err := top.RemovePod("default/web-b")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "web-b" || p.IP.String() != "10.244.2.2" {
		t.Errorf("removed %+v", p)
	}
	if _, ok := top.Pod("default/web-b"); ok || len(top.Pods) != 1 {
		t.Errorf("web-b still there")
	}
	if got := endpointAddrs(top); !reflect.DeepEqual(got, []string{"10.244.1.2:5432", "10.244.1.2:8080"}) {
		t.Errorf("endpoints %v", got)
	}
	failsUnchanged(t, top, "remove pod default/nosuch: no such pod", func() error {
		_, err := top.RemovePod("default/nosuch")
		return err
	})
	// web-a is also the address of the user's db slice: removing it would
	// leave the slice pointing outside the lab.
	failsUnchanged(t, top, "endpointSlices[0].endpoints[0].addresses[0]: 10.244.1.2 is no pod, node or client of the lab", func() error {
		_, err := top.RemovePod("default/web-a")
		return err
	})
}

func TestUpdatePod(t *testing.T) {
	top := mustParse(t, mutable)
	err := top.UpdatePod("default/web-a", func(p *Pod) {
		p.Ready = false
		p.Labels["version"] = "v2"
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Pod("default/web-a")
	if p.Ready || p.Labels["version"] != "v2" {
		t.Errorf("pod %+v", p)
	}
	for _, s := range slicesOf(top, "web") {
		for _, e := range s.Endpoints {
			if e.Addresses[0] == "10.244.1.2" && *e.Conditions.Ready {
				t.Errorf("unready pod's endpoint is ready")
			}
		}
	}
	if err := top.UpdatePod("default/web-a", func(p *Pod) { p.Labels = nil; p.Terminating = true }); err != nil {
		t.Fatal(err)
	}
	if got := endpointAddrs(top); !reflect.DeepEqual(got, []string{"10.244.1.2:5432", "10.244.2.2:8080"}) {
		t.Errorf("after relabelling, endpoints %v", got)
	}
	failsUnchanged(t, top, "only labels, ready and terminating can change", func() error {
		return top.UpdatePod("default/web-b", func(p *Pod) { p.IP = p.IP.Next() })
	})
	failsUnchanged(t, top, "only labels, ready and terminating can change", func() error {
		return top.UpdatePod("default/web-b", func(p *Pod) { p.Ports[0].ContainerPort = 1 })
	})
	failsUnchanged(t, top, "pods[1].labels[bad key]", func() error {
		return top.UpdatePod("default/web-b", func(p *Pod) { p.Labels["bad key"] = "x" })
	})
	failsUnchanged(t, top, "no such pod", func() error {
		return top.UpdatePod("default/nosuch", func(p *Pod) {})
	})
}

// A change that breaks a rule elsewhere in the lab is refused too: here the
// only pod that names the Service's targetPort would lose it.
func TestMutationChecksTheWholeLab(t *testing.T) {
	top := mustParse(t, mutable)
	if _, err := top.AddPod(PodSpec{Name: "plain", Node: "node-2", Labels: map[string]string{"app": "web"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := top.RemovePod("default/web-b"); err != nil {
		t.Fatal(err)
	}
	if err := top.UpdatePod("default/web-a", func(p *Pod) { p.Labels = map[string]string{"app": "old"} }); err == nil ||
		!strings.Contains(err.Error(), `services[0].spec.ports[0].targetPort: no pod the Service selects (default/plain) has a TCP container port named "http"`) {
		t.Errorf("err = %v", err)
	}
}

func TestApplyService(t *testing.T) {
	top := mustParse(t, mutable)
	web := mustService(t, top, "web")

	// A new Service is allocated what it lacks.
	err := top.ApplyService(corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromString("http")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	api := mustService(t, top, "api")
	if api.Spec.ClusterIP != "10.96.0.4" || api.Spec.Ports[0].NodePort != 30001 || api.Namespace != "default" {
		t.Errorf("api: clusterIP %s nodePort %d", api.Spec.ClusterIP, api.Spec.Ports[0].NodePort)
	}

	// A replacement that leaves out the ClusterIP and node port keeps them, as
	// an update through the API server does.
	err = top.ApplyService(corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports:           []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := mustService(t, top, "web")
	if got.Spec.ClusterIP != web.Spec.ClusterIP || got.Spec.Ports[0].NodePort != web.Spec.Ports[0].NodePort ||
		*got.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 {
		t.Errorf("replaced web: clusterIP %s (was %s), nodePort %d (was %d)", got.Spec.ClusterIP, web.Spec.ClusterIP,
			got.Spec.Ports[0].NodePort, web.Spec.Ports[0].NodePort)
	}
	if top.Services[0].Name != "web" {
		t.Errorf("a replaced Service moved: services[0] is %s", top.Services[0].Name)
	}

	// Back to ClusterIP: the node port the user left as it was is released.
	got.Spec.Type = corev1.ServiceTypeClusterIP
	if err := top.ApplyService(got); err != nil {
		t.Fatal(err)
	}
	got = mustService(t, top, "web")
	if got.Spec.Ports[0].NodePort != 0 || got.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("ClusterIP web kept nodePort %d, externalTrafficPolicy %q", got.Spec.Ports[0].NodePort, got.Spec.ExternalTrafficPolicy)
	}

	// A LoadBalancer with Local policy gets its health check node port.
	got.Spec.Type = corev1.ServiceTypeLoadBalancer
	got.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if err := top.ApplyService(got); err != nil {
		t.Fatal(err)
	}
	if lb := mustService(t, top, "web"); lb.Spec.HealthCheckNodePort == 0 || lb.Spec.Ports[0].NodePort == 0 {
		t.Errorf("LoadBalancer web: nodePort %d, healthCheckNodePort %d", lb.Spec.Ports[0].NodePort, lb.Spec.HealthCheckNodePort)
	}

	moved := mustService(t, top, "web")
	moved.Spec.ClusterIP, moved.Spec.ClusterIPs = "10.96.0.99", nil
	failsUnchanged(t, top, "services[0].spec.clusterIP: field is immutable", func() error { return top.ApplyService(moved) })

	sctp := mustService(t, top, "api")
	sctp.Spec.Ports[0].Protocol = corev1.ProtocolSCTP
	failsUnchanged(t, top, "(apply Service default/api): services[2].spec.ports[0].protocol: SCTP is not supported", func() error {
		return top.ApplyService(sctp)
	})
	failsUnchanged(t, top, "is already the node port of Service default/api", func() error {
		return top.ApplyService(corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "clash"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
				Ports: []corev1.ServicePort{{Port: 80, NodePort: api.Spec.Ports[0].NodePort}}},
		})
	})
}

func TestRemoveService(t *testing.T) {
	top := mustParse(t, mutable)
	if err := top.RemoveService("default", "db"); err != nil {
		t.Fatal(err)
	}
	if _, ok := top.Service("default", "db"); ok || len(top.UserEndpointSlices) != 0 {
		t.Errorf("db or its slice is still there: %d user slices", len(top.UserEndpointSlices))
	}
	failsUnchanged(t, top, "remove Service default/db: no such Service", func() error { return top.RemoveService("", "db") })
	// Its ClusterIP is free again for the next Service.
	if err := top.ApplyService(corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "next"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}); err != nil {
		t.Fatal(err)
	}
	if ip := mustService(t, top, "next").Spec.ClusterIP; ip != "10.96.0.3" {
		t.Errorf("next: clusterIP %s, want db's 10.96.0.3", ip)
	}
}

func TestClone(t *testing.T) {
	top := mustParse(t, mutable)
	c := top.Clone()
	if !reflect.DeepEqual(c, top) {
		t.Fatal("clone differs")
	}
	c.Pods[0].Labels["app"] = "changed"
	c.Pods[0].Ports[0].ContainerPort = 1
	c.Nodes[0].Name = "changed"
	c.Services[0].Spec.Selector["app"] = "changed"
	c.Services[0].Spec.Ports[0].Port = 1
	c.UserEndpointSlices[0].Endpoints[0].Addresses[0] = "changed"
	orig := mustParse(t, mutable)
	if !reflect.DeepEqual(top, orig) {
		t.Error("changing the clone changed the original")
	}
	if p, _ := top.Pod("default/web-a"); p.Labels["app"] != "web" {
		t.Error("original's labels changed")
	}
	p, _ := top.Pod("default/web-a")
	p.Labels["app"] = "x"
	if q, _ := top.Pod("default/web-a"); q.Labels["app"] != "web" {
		t.Error("Pod() returns shared labels")
	}
	if _, ok := top.Node("node-1"); !ok {
		t.Error("Node(node-1) not found")
	}
	if _, ok := top.Node("nosuch"); ok {
		t.Error("Node(nosuch) found")
	}
}
