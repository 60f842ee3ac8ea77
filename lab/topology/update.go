package topology

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// prepareUpdate does to a replacing Service what the API server does before it
// validates an update: it releases what the new type no longer uses, when the
// user left it as it was, and keeps what was allocated and is left out.
func prepareUpdate(svc, old *corev1.Service) {
	if needsClusterIP(old) && !needsClusterIP(svc) {
		if svc.Spec.ClusterIP == old.Spec.ClusterIP && slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		}
		if slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if ptr.Deref(svc.Spec.IPFamilyPolicy, "") == ptr.Deref(old.Spec.IPFamilyPolicy, "") {
			svc.Spec.IPFamilyPolicy = nil
		}
	}
	if needsNodePorts(old) && !needsNodePorts(svc) && nodePortsWithin(svc, old) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheck(old) && !needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer &&
		svc.Spec.AllocateLoadBalancerNodePorts != nil && old.Spec.AllocateLoadBalancerNodePorts != nil &&
		*svc.Spec.AllocateLoadBalancerNodePorts == *old.Spec.AllocateLoadBalancerNodePorts {
		svc.Spec.AllocateLoadBalancerNodePorts = nil
	}
	if needsNodePorts(old) && !needsNodePorts(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}

	if needsClusterIP(old) && needsClusterIP(svc) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 {
			svc.Spec.ClusterIPs = slices.Clone(old.Spec.ClusterIPs)
		}
	}
	if needsNodePorts(old) && needsNodePorts(svc) {
		// A node port is kept for the port of the same name, unless the new
		// object gives it to another port.
		used := map[int32]bool{}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 && slices.ContainsFunc(old.Spec.Ports, func(o corev1.ServicePort) bool { return o.NodePort == p.NodePort }) {
				used[p.NodePort] = true
			}
		}
		byName := map[string]int32{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if np := byName[p.Name]; p.NodePort == 0 && !used[np] {
				p.NodePort = np
			}
		}
	}
	if needsHealthCheck(old) && needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
	// The load balancer, not the API server, owns the status: it keeps the
	// ingress IP of a Service that stays a LoadBalancer of the same class, and
	// takes it back from one that does not.
	if len(svc.Status.LoadBalancer.Ingress) == 0 && sameLoadBalancer(old, svc) {
		svc.Status.LoadBalancer = *old.Status.LoadBalancer.DeepCopy()
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

// sameLoadBalancer tells whether one load balancer serves both Services, so
// that the ingress IP it gave the one stays with the other.
func sameLoadBalancer(old, svc *corev1.Service) bool {
	return old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		ptr.Deref(old.Spec.LoadBalancerClass, "") == ptr.Deref(svc.Spec.LoadBalancerClass, "") &&
		(svc.Spec.LoadBalancerIP == "" || svc.Spec.LoadBalancerIP == old.Spec.LoadBalancerIP)
}

// nodePortsWithin tells whether svc asks for no node port old did not have.
func nodePortsWithin(svc, old *corev1.Service) bool {
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !slices.ContainsFunc(old.Spec.Ports, func(o corev1.ServicePort) bool { return o.NodePort == p.NodePort }) {
			return false
		}
	}
	return true
}

// immutable reports the changes the API server refuses on update.
func immutable(source, path string, svc, old *corev1.Service) ErrorList {
	var errs ErrorList
	if needsClusterIP(old) && needsClusterIP(svc) && svc.Spec.ClusterIP != old.Spec.ClusterIP {
		errs = append(errs, Error{Source: source, Path: child(path, "spec.clusterIP"),
			Msg: "field is immutable (" + old.Spec.ClusterIP + "); remove the Service and add it again"})
	}
	if needsHealthCheck(old) && needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != old.Spec.HealthCheckNodePort {
		errs = append(errs, Error{Source: source, Path: child(path, "spec.healthCheckNodePort"), Msg: "field is immutable"})
	}
	return errs
}
