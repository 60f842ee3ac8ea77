package lab

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables" // registers the mode the lab runs
	"github.com/svclab/svclab/lab/topology"
)

// TestControlPlaneChanges runs web.yaml with a control plane and svclab's own
// iptables proxiers, and changes it every way a lab changes: through svclab (a pod
// made not ready, deleted, added; a Service applied without a ClusterIP, then
// removed) and behind its back (a Service changed in the API server, as kubectl
// would). After each, the API server, the topology and the programmed ports must
// agree: the EndpointSlice controller's slices are what svclab's model computes,
// the allocations are the API server's.
func TestControlPlaneChanges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test builds a lab and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	web, err := topology.Default()
	if err != nil {
		t.Fatal(err)
	}
	l, err := Up(ctx, web, Options{Mode: proxy.DefaultMode(), ControlPlane: true, NoServers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Down(); err != nil {
			t.Error(err)
		}
	}()
	c := l.ControlPlane().Client()

	endpoints := func(svc string) map[string]proxy.Endpoint {
		t.Helper()
		eps := map[string]proxy.Endpoint{}
		for _, sp := range l.Proxies().ServicePorts() {
			if sp.Name.NamespacedName() == svc {
				for _, e := range sp.Endpoints {
					eps[e.String()] = e
				}
			}
		}
		return eps
	}
	if got := endpoints("default/web"); len(got) != 2 {
		t.Fatalf("web's endpoints after up: %v", got)
	}
	if got := endpoints("default/kubernetes"); len(got) != 1 {
		t.Errorf("the kubernetes Service's endpoints: %v, want the API server", got)
	}

	if err := l.UpdatePod(ctx, "default/web-b", func(p *topology.Pod) { p.Ready = false }); err != nil {
		t.Fatal(err)
	}
	if e := endpoints("default/web")["10.244.2.10:8080"]; e.Ready {
		t.Errorf("web-b made not ready: its endpoint %+v", e)
	}

	if err := l.DeletePod(ctx, "default/web-a", false); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := c.Get(ctx, cluster.Pods, "default", "web-a", &pod); err == nil {
		t.Error("web-a is still in the API server after its deletion")
	}
	if _, ok := endpoints("default/web")["10.244.1.10:8080"]; ok {
		t.Error("web-a deleted: its endpoint stays")
	}

	added, err := l.AddPod(ctx, topology.PodSpec{Name: "web-c", Node: "node-1", Labels: map[string]string{"app": "web"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := endpoints("default/web")[netip.AddrPortFrom(added.IP, 8080).String()]; !ok || !e.Ready {
		t.Errorf("web-c added: endpoint %+v, present %v", e, ok)
	}

	extra := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 81, TargetPort: intstr.FromString("http")}}},
	}
	if err := l.ApplyService(ctx, extra); err != nil {
		t.Fatal(err)
	}
	var inAPI corev1.Service
	if err := c.Get(ctx, cluster.Services, "default", "extra", &inAPI); err != nil {
		t.Fatal(err)
	}
	var inTopology string
	for _, s := range l.Topology().Services {
		if s.Name == "extra" {
			inTopology = s.Spec.ClusterIP
		}
	}
	if inAPI.Spec.ClusterIP == "" || inTopology != inAPI.Spec.ClusterIP {
		t.Errorf("extra's ClusterIP: API server %q, topology %q", inAPI.Spec.ClusterIP, inTopology)
	}
	if err := l.RemoveService(ctx, "default", "extra"); err != nil {
		t.Fatal(err)
	}
	if got := endpoints("default/extra"); len(got) != 0 {
		t.Errorf("extra removed: still programmed with %v", got)
	}

	// Behind svclab's back, as `kubectl edit` would: the lab follows.
	var w corev1.Service
	if err := c.Get(ctx, cluster.Services, "default", "web", &w); err != nil {
		t.Fatal(err)
	}
	w.Spec.Ports[0].NodePort = 30081
	if err := c.Update(ctx, cluster.Services, &w); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var np int
		for _, sp := range l.Proxies().ServicePorts() {
			if sp.Name.NamespacedName() == "default/web" {
				np = sp.NodePort
			}
		}
		if np == 30081 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web's node port changed in the API server to 30081: the lab programs %d a minute later", np)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
