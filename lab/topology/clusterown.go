package topology

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterOwnAnnotation marks a cluster's own Service, default/kubernetes or
// the cluster DNS's, as `svclab import` keeps it from a dump: a lab without a
// control plane holds it as the cluster had it (its nodes' rules then match a
// real node's), and a lab whose control plane (or cluster DNS) makes its own
// leaves it out, with its EndpointSlices, instead of refusing the name.
const ClusterOwnAnnotation = "svclab.io/cluster-own"

// IsKubernetesService tells whether namespace/name is the API server's own
// Service.
func IsKubernetesService(namespace, name string) bool {
	return namespace == metav1.NamespaceDefault && name == "kubernetes"
}

// replaced tells whether svc is a cluster's own Service, kept from a dump, that
// this lab makes itself: default/kubernetes with a control plane, the DNS
// Service with a cluster DNS.
func (r *resolver) replaced(svc *corev1.Service) bool {
	if svc.Annotations[ClusterOwnAnnotation] != "true" {
		return false
	}
	ns := svc.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	return IsKubernetesService(ns, svc.Name) && r.t.ControlPlane != nil || IsDNSService(ns, svc.Name) && r.t.DNS != nil
}

// replacedSlice tells whether s belongs to a Service the lab makes itself.
func (r *resolver) replacedSlice(s *discoveryv1.EndpointSlice, services []corev1.Service) bool {
	name := s.Labels[discoveryv1.LabelServiceName]
	for i := range services {
		svc := &services[i]
		ns := svc.Namespace
		if ns == "" {
			ns = defaultNamespace
		}
		sns := s.Namespace
		if sns == "" {
			sns = defaultNamespace
		}
		if svc.Name == name && ns == sns && r.replaced(svc) {
			return true
		}
	}
	return false
}
