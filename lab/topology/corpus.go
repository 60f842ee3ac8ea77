package topology

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Corpus builds a lab of n Services of random shapes, the same for the same seed:
// ClusterIP, NodePort and LoadBalancer types; one to three ports, TCP and UDP,
// named and unnamed, numeric and named targetPorts; external and internal traffic
// policies Local and Cluster; ClientIP affinity with and without a timeout; and
// zero to four endpoints each on three nodes, ready, not ready, terminating while
// serving and terminating. Every ClusterIP and node port is given, so that labs
// built from it agree on them whoever allocates. For comparing proxiers over many
// shapes (lab/differential).
func Corpus(seed uint64, n int) (*Topology, error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("corpus %d: want 1-200 Services, got %d", seed, n)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ec1ab))
	f := &File{Name: fmt.Sprintf("corpus-%d", seed), ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"}
	for i := 1; i <= 3; i++ {
		f.Nodes = append(f.Nodes, NodeSpec{Name: fmt.Sprintf("node-%d", i), IP: fmt.Sprintf("192.168.1.%d", 9+i), PodCIDR: fmt.Sprintf("10.244.%d.0/24", i)})
	}
	f.Clients = []ClientSpec{{Name: "outside", IP: "192.168.1.100"}}
	for i := 0; i < n; i++ {
		svc, pods := corpusService(rng, i)
		f.Services = append(f.Services, svc)
		f.Pods = append(f.Pods, pods...)
	}
	t, errs := resolve(fmt.Sprintf("<corpus seed %d, %d Services>", seed, n), f, nil)
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// corpusService is the i-th Service of a corpus and its pods.
func corpusService(rng *rand.Rand, i int) (corev1.Service, []PodSpec) {
	name := fmt.Sprintf("svc-%d", i)
	spec := corev1.ServiceSpec{
		Selector:  map[string]string{"app": name},
		ClusterIP: fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250),
	}
	switch r := rng.IntN(10); {
	case r < 4:
		spec.Type = corev1.ServiceTypeClusterIP
	case r < 8:
		spec.Type = corev1.ServiceTypeNodePort
	default:
		spec.Type = corev1.ServiceTypeLoadBalancer
	}
	external := spec.Type != corev1.ServiceTypeClusterIP
	if external && rng.IntN(10) < 4 {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if spec.Type == corev1.ServiceTypeLoadBalancer {
			spec.HealthCheckNodePort = int32(32000 + i)
		}
	}
	if rng.IntN(5) == 0 {
		spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}
	if rng.IntN(10) < 3 {
		spec.SessionAffinity = corev1.ServiceAffinityClientIP
		if rng.IntN(2) == 0 {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(60 + rng.IntN(600)))}}
		}
	}
	nports := 1 + rng.IntN(3)
	var containerPorts []corev1.ContainerPort
	for j := 0; j < nports; j++ {
		proto := corev1.ProtocolTCP
		if rng.IntN(4) == 0 {
			proto = corev1.ProtocolUDP
		}
		cp := corev1.ContainerPort{Name: fmt.Sprintf("p%d", j), ContainerPort: int32(8080 + j), Protocol: proto}
		containerPorts = append(containerPorts, cp)
		sp := corev1.ServicePort{Port: int32(80 + j), Protocol: proto, TargetPort: intstr.FromInt32(cp.ContainerPort)}
		if nports > 1 || rng.IntN(2) == 0 {
			sp.Name = fmt.Sprintf("port-%d", j)
		}
		if rng.IntN(2) == 0 {
			sp.TargetPort = intstr.FromString(cp.Name)
		}
		if external {
			sp.NodePort = int32(30000 + 3*i + j)
		}
		spec.Ports = append(spec.Ports, sp)
	}
	var pods []PodSpec
	for k, n := 0, rng.IntN(5); k < n; k++ {
		p := PodSpec{
			Name: fmt.Sprintf("%s-%d", name, k), Node: fmt.Sprintf("node-%d", 1+rng.IntN(3)),
			Labels: map[string]string{"app": name}, Ports: containerPorts,
		}
		switch r := rng.IntN(20); {
		case r < 14: // ready
		case r < 17:
			p.Ready = ptr.To(false)
		case r < 19:
			p.Terminating = true // terminating, still serving
		default:
			p.Ready, p.Terminating = ptr.To(false), true
		}
		pods = append(pods, p)
	}
	return corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       spec,
	}, pods
}
