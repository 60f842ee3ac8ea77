package topology

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Scale describes a generated lab, for benchmarks and for specs that need many
// members.
type Scale struct {
	Name        string
	Nodes       int
	PodsPerNode int
	// Services each select every Services-th pod, round robin, so endpoints spread
	// over all nodes. Each is a NodePort Service, port 80 -> 8080.
	Services int
	Clients  int
	// NoDNS turns the cluster DNS off (dns: false), which a lab with a control
	// plane otherwise runs (CoreDNS pods and the kube-dns Service).
	NoDNS bool
}

// Generate builds the topology s describes, through the same checks a file gets.
// Nodes sit on 172.18.0.0/16 with a /24 of 10.244.0.0/16 each, so up to 250 nodes of
// up to 250 pods.
func Generate(s Scale) (*Topology, error) {
	if s.Nodes < 1 || s.Nodes > 250 || s.PodsPerNode < 0 || s.PodsPerNode > 250 || s.Clients > 250 {
		return nil, fmt.Errorf("generate %s: want 1-250 nodes and 0-250 pods per node and clients, got %d, %d, %d", s.Name, s.Nodes, s.PodsPerNode, s.Clients)
	}
	f := &File{Name: s.Name, ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", NodeCIDR: "172.18.0.0/16"}
	if s.NoDNS {
		off := false
		f.DNS = &off
	}
	pod := 0
	for n := 0; n < s.Nodes; n++ {
		node := fmt.Sprintf("node-%d", n+1)
		f.Nodes = append(f.Nodes, NodeSpec{Name: node, IP: fmt.Sprintf("172.18.0.%d", n+2), PodCIDR: fmt.Sprintf("10.244.%d.0/24", n)})
		for p := 0; p < s.PodsPerNode; p++ {
			spec := PodSpec{
				Name: fmt.Sprintf("pod-%d-%d", n+1, p+1), Node: node,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}
			if s.Services > 0 {
				spec.Labels = map[string]string{"app": fmt.Sprintf("svc-%d", pod%s.Services+1)}
			}
			f.Pods = append(f.Pods, spec)
			pod++
		}
	}
	for c := 0; c < s.Clients; c++ {
		f.Clients = append(f.Clients, ClientSpec{Name: fmt.Sprintf("client-%d", c+1), IP: fmt.Sprintf("172.18.1.%d", c+2)})
	}
	for i := 0; i < s.Services; i++ {
		name := fmt.Sprintf("svc-%d", i+1)
		f.Services = append(f.Services, corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeNodePort,
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		})
	}
	t, errs := resolve(fmt.Sprintf("<generated %s>", s.Name), f, nil)
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}
