package topology

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// PortRange is a range of node ports, first to last: the API server's
// --service-node-port-range.
type PortRange struct{ First, Last int32 }

func (p PortRange) String() string { return fmt.Sprintf("%d-%d", p.First, p.Last) }

// Contains tells whether port is in the range.
func (p PortRange) Contains(port int32) bool { return port >= p.First && port <= p.Last }

// DefaultNodePortRange is the API server's default --service-node-port-range.
var DefaultNodePortRange = PortRange{30000, 32767}

// The API server's defaults and limits for Services.
const (
	// defaultAffinitySeconds is sessionAffinityConfig.clientIP.timeoutSeconds when
	// not given (3 hours); maxAffinitySeconds is the most it may be (a day).
	defaultAffinitySeconds = 10800
	maxAffinitySeconds     = 86400
)

// labelServiceProxyName hands a Service to another proxy: kube-proxy's informers
// leave out Services that carry it (k8s.io/kubernetes/pkg/proxy/apis).
const labelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// nodePortUse says who holds a node port: one Service port number, or one
// Service's health check (port -1). The API server lets the ports of one Service
// that share a port number (TCP and UDP 53, say) share a node port too.
type nodePortUse struct {
	service int
	port    int32
	owner   string
}

func (r *resolver) services(in []corev1.Service) {
	seen := map[string]string{}
	nodePorts := map[int32]nodePortUse{}
	claimNodePort := func(path string, np int32, use nodePortUse) {
		if first, taken := nodePorts[np]; taken && (first.service != use.service || first.port != use.port) {
			r.errorf(path, "%d is already the node port of %s", np, first.owner)
			return
		}
		nodePorts[np] = use
	}
	for i := range in {
		if r.replaced(&in[i]) {
			continue
		}
		svc := in[i].DeepCopy()
		path := index("services", i)
		r.service(path, svc)
		id := svc.Namespace + "/" + svc.Name
		if svc.Name != "" {
			if first, dup := seen[id]; dup {
				r.errorf(child(path, "metadata.name"), "Service %s is already defined by %s", id, first)
			}
			seen[id] = path
		}
		inService := map[corev1.ServicePort]bool{}
		for j, sp := range svc.Spec.Ports {
			// A node port given twice for one protocol in one Service is
			// reported by service(); once is enough.
			k := corev1.ServicePort{NodePort: sp.NodePort, Protocol: sp.Protocol}
			if sp.NodePort != 0 && needsNodePorts(svc) && !inService[k] {
				inService[k] = true
				claimNodePort(child(index(child(path, "spec.ports"), j), "nodePort"), sp.NodePort,
					nodePortUse{i, sp.Port, fmt.Sprintf("Service %s port %d", id, sp.Port)})
			}
		}
		if hc := svc.Spec.HealthCheckNodePort; hc != 0 && needsHealthCheck(svc) {
			claimNodePort(child(path, "spec.healthCheckNodePort"), hc,
				nodePortUse{i, -1, fmt.Sprintf("Service %s (its health check)", id)})
		}
		r.t.Services = append(r.t.Services, *svc)
	}
	// Allocation comes after every explicit choice is claimed, so that the
	// result does not depend on the order of the Services.
	cursor := r.t.NodePortRange.First
	nextNodePort := func() int32 {
		for ; cursor <= r.t.NodePortRange.Last; cursor++ {
			if _, taken := nodePorts[cursor]; !taken {
				return cursor
			}
		}
		return 0
	}
	for i := range r.t.Services {
		svc := &r.t.Services[i]
		path := index("services", i)
		id := svc.Namespace + "/" + svc.Name
		if needsClusterIP(svc) && svc.Spec.ClusterIP == "" && r.t.ServiceCIDR.IsValid() {
			// The first host is the kubernetes Service's in a real cluster.
			first := r.t.ServiceCIDR.Addr().Next()
			ip, ok := r.nextFree(r.t.ServiceCIDR, first.Next())
			if !ok {
				r.errorf(child(path, "spec.clusterIP"), "serviceCIDR %s has no free address left", r.t.ServiceCIDR)
			} else {
				r.claim(child(path, "spec.clusterIP"), ip, "Service "+id)
				svc.Spec.ClusterIP = ip.String()
				svc.Spec.ClusterIPs = []string{ip.String()}
			}
		}
		if needsNodePorts(svc) && allocatesNodePorts(svc) {
			byPort := map[int32]int32{}
			for _, sp := range svc.Spec.Ports {
				if sp.NodePort != 0 {
					byPort[sp.Port] = sp.NodePort
				}
			}
			for j := range svc.Spec.Ports {
				sp := &svc.Spec.Ports[j]
				if sp.NodePort != 0 {
					continue
				}
				np, shared := byPort[sp.Port]
				if !shared {
					if np = nextNodePort(); np == 0 {
						r.errorf(child(index(child(path, "spec.ports"), j), "nodePort"), "no free node port left in %s", r.t.NodePortRange)
						continue
					}
					nodePorts[np] = nodePortUse{i, sp.Port, fmt.Sprintf("Service %s port %d", id, sp.Port)}
					byPort[sp.Port] = np
				}
				sp.NodePort = np
			}
		}
		if needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == 0 {
			np := nextNodePort()
			if np == 0 {
				r.errorf(child(path, "spec.healthCheckNodePort"), "no free node port left in %s", r.t.NodePortRange)
				continue
			}
			nodePorts[np] = nodePortUse{i, -1, fmt.Sprintf("Service %s (its health check)", id)}
			svc.Spec.HealthCheckNodePort = np
		}
	}
}

func needsClusterIP(svc *corev1.Service) bool { return svc.Spec.Type != corev1.ServiceTypeExternalName }

func needsNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// allocatesNodePorts tells whether the API server gives the Service's ports node
// ports it does not name: a LoadBalancer Service may ask for none
// (allocateLoadBalancerNodePorts: false), when its load balancer sends traffic
// to the ingress IP itself, as svclab's do.
func allocatesNodePorts(svc *corev1.Service) bool {
	a := svc.Spec.AllocateLoadBalancerNodePorts
	return svc.Spec.Type != corev1.ServiceTypeLoadBalancer || a == nil || *a
}

// externallyAccessible is the API server's ExternallyAccessible: traffic from
// outside the cluster reaches the Service on a node port, a load balancer IP or
// an external IP, so externalTrafficPolicy applies.
func externallyAccessible(svc *corev1.Service) bool {
	return needsNodePorts(svc) || svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0
}

func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func isHeadless(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone }
