package topology

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// service checks one Service and fills in the API server's defaults, except for
// the values allocated from shared pools.
func (r *resolver) service(path string, svc *corev1.Service) {
	if svc.APIVersion == "" {
		svc.APIVersion = "v1"
	} else if svc.APIVersion != "v1" {
		r.errorf(child(path, "apiVersion"), "%q: a Service is apiVersion v1", svc.APIVersion)
	}
	switch svc.Kind {
	case "":
		svc.Kind = "Service"
	case "Service":
	case "EndpointSlice":
		r.errorf(child(path, "kind"), "EndpointSlices go under endpointSlices, not services")
	default:
		r.errorf(child(path, "kind"), "%q: services holds kind Service only", svc.Kind)
	}
	r.objectMeta(child(path, "metadata"), &svc.ObjectMeta, validation.IsDNS1123Label)
	meta := child(path, "metadata")
	if _, ok := svc.Labels[labelServiceProxyName]; ok {
		r.errorf(key(child(meta, "labels"), labelServiceProxyName), "not supported: kube-proxy leaves Services that name another proxy to that proxy")
	}
	if _, ok := svc.Labels[corev1.IsHeadlessService]; ok {
		r.errorf(key(child(meta, "labels"), corev1.IsHeadlessService), "not supported: kube-proxy ignores Services with this label; make the Service headless with clusterIP: None")
	}
	for _, a := range []string{corev1.AnnotationTopologyMode, corev1.DeprecatedAnnotationTopologyAwareHints} {
		if _, ok := svc.Annotations[a]; ok {
			r.errorf(key(child(meta, "annotations"), a), "topology-aware routing is not supported (svclab nodes have no zones)")
		}
	}

	spec := &svc.Spec
	sp := child(path, "spec")
	switch spec.Type {
	case "":
		spec.Type = corev1.ServiceTypeClusterIP
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName:
	default:
		r.errorf(child(sp, "type"), "%q: must be ClusterIP, NodePort, LoadBalancer or ExternalName", spec.Type)
	}
	if len(spec.Selector) == 0 {
		// An empty selector is no selector: stored through protobuf it comes back
		// nil, and the EndpointSlice controller leaves such a Service alone.
		spec.Selector = nil
	}
	r.labels(child(sp, "selector"), spec.Selector)
	r.clusterIPs(sp, svc)
	r.servicePorts(child(sp, "ports"), svc)
	r.affinity(sp, spec)
	r.trafficPolicies(sp, svc)
	r.loadBalancer(path, svc)
	r.externalIPs(sp, svc)
	if spec.TrafficDistribution != nil {
		r.errorf(child(sp, "trafficDistribution"), "not supported: svclab nodes have no zones, so traffic distribution would change nothing")
	}
}

// objectMeta checks the metadata every object carries and defaults its namespace.
func (r *resolver) objectMeta(path string, m *metav1.ObjectMeta, validName func(string) []string) {
	switch {
	case m.Name == "" && m.GenerateName != "":
		r.errorf(child(path, "generateName"), "not supported: give metadata.name")
	case m.Name == "":
		r.errorf(child(path, "name"), "required")
	default:
		r.errorsf(child(path, "name"), quoted(m.Name, validName(m.Name)))
	}
	if m.Namespace == "" {
		m.Namespace = defaultNamespace
	} else {
		r.namespace(child(path, "namespace"), m.Namespace)
	}
	r.labels(child(path, "labels"), m.Labels)
	for k := range m.Annotations {
		r.errorsf(key(child(path, "annotations"), k), quoted(k, validation.IsQualifiedName(strings.ToLower(k))))
	}
}

func (r *resolver) clusterIPs(sp string, svc *corev1.Service) {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		if spec.ClusterIP != "" || len(spec.ClusterIPs) > 0 {
			r.errorf(child(sp, "clusterIP"), "may not be set for ExternalName Services")
		}
		if len(spec.IPFamilies) > 0 {
			r.errorf(child(sp, "ipFamilies"), "may not be set for ExternalName Services")
		}
		if spec.IPFamilyPolicy != nil {
			r.errorf(child(sp, "ipFamilyPolicy"), "may not be set for ExternalName Services")
		}
		name := strings.TrimSuffix(spec.ExternalName, ".")
		if name == "" {
			r.errorf(child(sp, "externalName"), "required for ExternalName Services: the DNS name the Service aliases")
		} else {
			r.errorsf(child(sp, "externalName"), quoted(spec.ExternalName, validation.IsDNS1123Subdomain(name)))
		}
		return
	}
	if spec.ExternalName != "" {
		r.errorf(child(sp, "externalName"), "may only be set when type is ExternalName")
	}
	if !r.serviceFamilies(sp, spec) {
		return
	}

	switch spec.ClusterIP {
	case "":
		return // allocated later
	case corev1.ClusterIPNone:
		spec.ClusterIPs = []string{corev1.ClusterIPNone}
		if spec.Type != corev1.ServiceTypeClusterIP {
			r.errorf(child(sp, "clusterIP"), "may be None (headless) only when type is ClusterIP")
		}
		return
	}
	path := child(sp, "clusterIP")
	ip, ok := r.address(path, spec.ClusterIP)
	if !ok || !r.t.ServiceCIDR.IsValid() {
		return
	}
	switch {
	case !r.t.ServiceCIDR.Contains(ip):
		r.errorf(path, "%s is outside serviceCIDR %s", ip, r.t.ServiceCIDR)
	case ip == r.t.ServiceCIDR.Addr().Next() && !IsKubernetesService(svc.Namespace, svc.Name):
		r.errorf(path, "%s is the kubernetes Service's address (the first host of serviceCIDR %s)", ip, r.t.ServiceCIDR)
	case reservedIn(ip, r.t.ServiceCIDR) != "":
		r.errorf(path, "%s is %s of serviceCIDR %s", ip, reservedIn(ip, r.t.ServiceCIDR), r.t.ServiceCIDR)
	default:
		if r.claim(path, ip, "Service "+svc.Namespace+"/"+svc.Name) {
			spec.ClusterIP = ip.String()
			spec.ClusterIPs = []string{ip.String()}
		}
	}
}

func (r *resolver) servicePorts(path string, svc *corev1.Service) {
	spec := &svc.Spec
	if len(spec.Ports) == 0 && !isHeadless(svc) && spec.Type != corev1.ServiceTypeExternalName {
		r.errorf(path, "required: at least one port")
	}
	names := map[string]int{}
	numbers := map[corev1.ServicePort]int{}
	nodePorts := map[corev1.ServicePort]int{}
	for i := range spec.Ports {
		port := &spec.Ports[i]
		p := index(path, i)
		if port.Protocol == "" {
			port.Protocol = corev1.ProtocolTCP
		}
		r.protocol(child(p, "protocol"), port.Protocol)
		switch {
		case port.Name == "" && len(spec.Ports) > 1:
			r.errorf(child(p, "name"), "required: a Service with more than one port names every port")
		case port.Name != "":
			r.errorsf(child(p, "name"), quoted(port.Name, validation.IsDNS1123Label(port.Name)))
			if first, dup := names[port.Name]; dup {
				r.errorf(child(p, "name"), "%q is already the name of ports[%d]", port.Name, first)
			} else {
				names[port.Name] = i
			}
		}
		if port.Port == 0 {
			r.errorf(child(p, "port"), "required: the port the Service listens on")
		} else {
			r.errorsf(child(p, "port"), validation.IsValidPortNum(int(port.Port)))
			k := corev1.ServicePort{Port: port.Port, Protocol: port.Protocol}
			if first, dup := numbers[k]; dup {
				r.errorf(child(p, "port"), "%d/%s is already ports[%d]", port.Port, port.Protocol, first)
			} else {
				numbers[k] = i
			}
		}
		switch tp := port.TargetPort; {
		case tp.Type == intstr.Int && tp.IntVal == 0:
			port.TargetPort = intstr.FromInt32(port.Port)
		case tp.Type == intstr.Int:
			r.errorsf(child(p, "targetPort"), validation.IsValidPortNum(int(tp.IntVal)))
		default:
			r.errorsf(child(p, "targetPort"), quoted(tp.StrVal, validation.IsValidPortName(tp.StrVal)))
		}
		if port.AppProtocol != nil {
			r.errorsf(child(p, "appProtocol"), quoted(*port.AppProtocol, validation.IsQualifiedName(*port.AppProtocol)))
		}
		if port.NodePort == 0 {
			continue
		}
		npPath := child(p, "nodePort")
		switch {
		case !needsNodePorts(svc):
			r.errorf(npPath, "may not be used when type is %s (only NodePort and LoadBalancer Services have node ports)", spec.Type)
		case !r.t.NodePortRange.Contains(port.NodePort):
			r.errorf(npPath, "%d is outside the NodePort range %s%s", port.NodePort, r.t.NodePortRange, nodePortRangeHint)
			port.NodePort = 0
		default:
			k := corev1.ServicePort{NodePort: port.NodePort, Protocol: port.Protocol}
			if first, dup := nodePorts[k]; dup {
				r.errorf(npPath, "%d/%s is already the node port of ports[%d]", port.NodePort, port.Protocol, first)
			} else {
				nodePorts[k] = i
			}
		}
	}
}

func (r *resolver) affinity(sp string, spec *corev1.ServiceSpec) {
	switch spec.SessionAffinity {
	case "":
		spec.SessionAffinity = corev1.ServiceAffinityNone
	case corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		r.errorf(child(sp, "sessionAffinity"), "%q: must be None or ClientIP", spec.SessionAffinity)
		return
	}
	cfg := child(sp, "sessionAffinityConfig")
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		if spec.SessionAffinityConfig != nil {
			r.errorf(cfg, "must not be set when sessionAffinity is None")
		}
		return
	}
	if spec.SessionAffinityConfig == nil {
		spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
	}
	if spec.SessionAffinityConfig.ClientIP == nil {
		spec.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
	}
	c := spec.SessionAffinityConfig.ClientIP
	if c.TimeoutSeconds == nil {
		c.TimeoutSeconds = ptr.To[int32](defaultAffinitySeconds)
	} else if s := *c.TimeoutSeconds; s <= 0 || s > maxAffinitySeconds {
		r.errorf(child(cfg, "clientIP.timeoutSeconds"), "%d: must be between 1 and %d", s, maxAffinitySeconds)
	}
}

func (r *resolver) trafficPolicies(sp string, svc *corev1.Service) {
	spec := &svc.Spec
	etp := child(sp, "externalTrafficPolicy")
	switch {
	case !externallyAccessible(svc):
		if spec.ExternalTrafficPolicy != "" {
			r.errorf(etp, "may only be set for NodePort and LoadBalancer Services, and ClusterIP Services with externalIPs")
		}
	case spec.ExternalTrafficPolicy == "":
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	case spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster && spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal:
		r.errorf(etp, "%q: must be Cluster or Local", spec.ExternalTrafficPolicy)
	}
	if spec.InternalTrafficPolicy == nil {
		if needsClusterIP(svc) {
			spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}
	} else if p := *spec.InternalTrafficPolicy; p != corev1.ServiceInternalTrafficPolicyCluster && p != corev1.ServiceInternalTrafficPolicyLocal {
		r.errorf(child(sp, "internalTrafficPolicy"), "%q: must be Cluster or Local", p)
	}
	hc := child(sp, "healthCheckNodePort")
	switch np := spec.HealthCheckNodePort; {
	case np == 0:
	case !needsHealthCheck(svc):
		r.errorf(hc, "may only be set when type is LoadBalancer and externalTrafficPolicy is Local")
	case !r.t.NodePortRange.Contains(np):
		r.errorf(hc, "%d is outside the NodePort range %s%s", np, r.t.NodePortRange, nodePortRangeHint)
		spec.HealthCheckNodePort = 0
	}
}
