package topology

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// controllerName is the manager the EndpointSlice controller writes into the
// slices it owns (endpointslice.kubernetes.io/managed-by).
const controllerName = "endpointslice-controller.k8s.io"

// endpointSlices checks the slices the user wrote for selectorless Services.
func (r *resolver) endpointSlices(in []discoveryv1.EndpointSlice, declared []corev1.Service) {
	services := map[string]*corev1.Service{}
	for i := range r.t.Services {
		svc := &r.t.Services[i]
		services[svc.Namespace+"/"+svc.Name] = svc
	}
	seen := map[string]string{}
	for i := range in {
		if r.replacedSlice(&in[i], declared) {
			continue
		}
		s := in[i].DeepCopy()
		path := index("endpointSlices", i)
		if s.APIVersion == "" {
			s.APIVersion = discoveryv1.SchemeGroupVersion.String()
		} else if s.APIVersion != discoveryv1.SchemeGroupVersion.String() {
			r.errorf(child(path, "apiVersion"), "%q: an EndpointSlice is apiVersion %s", s.APIVersion, discoveryv1.SchemeGroupVersion)
		}
		switch s.Kind {
		case "":
			s.Kind = "EndpointSlice"
		case "EndpointSlice":
		case "Service":
			r.errorf(child(path, "kind"), "Services go under services, not endpointSlices")
		default:
			r.errorf(child(path, "kind"), "%q: endpointSlices holds kind EndpointSlice only", s.Kind)
		}
		meta := child(path, "metadata")
		r.objectMeta(meta, &s.ObjectMeta, validation.IsDNS1123Subdomain)
		id := s.Namespace + "/" + s.Name
		if s.Name != "" {
			if first, dup := seen[id]; dup {
				r.errorf(child(meta, "name"), "EndpointSlice %s is already defined by %s", id, first)
			}
			seen[id] = path
		}
		svc := r.sliceService(meta, s, services)
		r.sliceAddressType(child(path, "addressType"), s.AddressType)
		r.slicePorts(child(path, "ports"), s, svc)
		r.sliceEndpoints(child(path, "endpoints"), s)
		r.t.UserEndpointSlices = append(r.t.UserEndpointSlices, *s)
	}
}

// sliceService finds the Service a slice belongs to by its service-name label,
// and checks the labels kube-proxy selects slices by.
func (r *resolver) sliceService(meta string, s *discoveryv1.EndpointSlice, services map[string]*corev1.Service) *corev1.Service {
	labels := child(meta, "labels")
	if s.Labels[discoveryv1.LabelManagedBy] == controllerName {
		r.errorf(key(labels, discoveryv1.LabelManagedBy), "%q is the EndpointSlice controller's: svclab derives those slices from selectors; name your own manager", controllerName)
	}
	if _, ok := s.Labels[corev1.IsHeadlessService]; ok {
		r.errorf(key(labels, corev1.IsHeadlessService), "not supported: kube-proxy ignores slices with this label")
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		r.errorf(labels, "required: label %s naming the Service the slice belongs to", discoveryv1.LabelServiceName)
		return nil
	}
	p := key(labels, discoveryv1.LabelServiceName)
	svc, ok := services[s.Namespace+"/"+name]
	switch {
	case !ok:
		r.errorf(p, "no Service %s/%s in the lab (a slice belongs to a Service in its own namespace)", s.Namespace, name)
		return nil
	case svc.Spec.Selector != nil:
		r.errorf(p, "Service %s/%s has a selector, so the EndpointSlice controller owns its slices: remove the selector or this slice", s.Namespace, name)
		return nil
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		r.errorf(p, "Service %s/%s is ExternalName, which has no endpoints (kube-proxy ignores it)", s.Namespace, name)
		return nil
	}
	return svc
}

func (r *resolver) sliceAddressType(path string, t discoveryv1.AddressType) {
	switch t {
	case discoveryv1.AddressTypeIPv4:
	case "":
		r.errorf(path, "required: IPv4")
	case discoveryv1.AddressTypeIPv6:
		r.errorf(path, "IPv6 endpoints: %s", notBuilt6)
	case discoveryv1.AddressTypeFQDN:
		r.errorf(path, "FQDN is not supported: kube-proxy ignores FQDN slices")
	default:
		r.errorf(path, "%q: must be IPv4", t)
	}
}

func (r *resolver) slicePorts(path string, s *discoveryv1.EndpointSlice, svc *corev1.Service) {
	names := map[string]int{}
	for i := range s.Ports {
		port := &s.Ports[i]
		p := index(path, i)
		if port.Protocol == nil {
			port.Protocol = ptr.To(corev1.ProtocolTCP)
		}
		r.protocol(child(p, "protocol"), *port.Protocol)
		name := ""
		if port.Name != nil {
			name = *port.Name
		} else {
			port.Name = ptr.To("")
		}
		if name != "" {
			r.errorsf(child(p, "name"), quoted(name, validation.IsDNS1123Label(name)))
		}
		if first, dup := names[name]; dup {
			r.errorf(child(p, "name"), "%q is already the name of ports[%d]", name, first)
		} else {
			names[name] = i
		}
		if port.Port == nil {
			r.errorf(child(p, "port"), "required: the endpoints' port (a slice for all ports is not supported)")
		} else {
			r.errorsf(child(p, "port"), validation.IsValidPortNum(int(*port.Port)))
		}
		if port.AppProtocol != nil {
			r.errorsf(child(p, "appProtocol"), quoted(*port.AppProtocol, validation.IsQualifiedName(*port.AppProtocol)))
		}
		if svc != nil && !isHeadless(svc) && !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
			return sp.Name == name && sp.Protocol == *port.Protocol
		}) {
			r.errorf(child(p, "name"), "Service %s/%s has no %s port named %q, so no one would use this port (slice ports match Service ports by name and protocol)",
				svc.Namespace, svc.Name, *port.Protocol, name)
		}
	}
}

func (r *resolver) sliceEndpoints(path string, s *discoveryv1.EndpointSlice) {
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		p := index(path, i)
		switch n := len(e.Addresses); {
		case n == 0:
			r.errorf(child(p, "addresses"), "required: the endpoint's address")
		case n > 1:
			r.errorf(index(child(p, "addresses"), 1), "one address per endpoint: kube-proxy uses only the first; give each address its own endpoint")
		}
		for j, a := range e.Addresses {
			ap := index(child(p, "addresses"), j)
			ip, ok := r.address(ap, a)
			if !ok {
				continue
			}
			switch owner, found := r.addrs[ip]; {
			case !found:
				r.errorf(ap, "%s is no pod, node or client of the lab; svclab sends traffic only inside its lab", ip)
			case strings.HasPrefix(owner, "Service "):
				r.errorf(ap, "%s is the ClusterIP of %s, not a backend", ip, owner)
			}
		}
		if e.NodeName != nil && *e.NodeName != "" {
			if !slices.ContainsFunc(r.t.Nodes, func(n Node) bool { return n.Name == *e.NodeName }) {
				r.errorf(child(p, "nodeName"), "unknown node %q%s", *e.NodeName, r.knownNodes())
			}
		}
		if e.Hostname != nil {
			r.errorsf(child(p, "hostname"), quoted(*e.Hostname, validation.IsDNS1123Label(*e.Hostname)))
		}
		if e.Zone != nil {
			r.errorf(child(p, "zone"), "not supported: svclab nodes have no zones")
		}
		if e.Hints != nil {
			r.errorf(child(p, "hints"), "topology-aware hints are not supported (svclab nodes have no zones)")
		}
		if len(e.DeprecatedTopology) > 0 {
			r.errorf(child(p, "deprecatedTopology"), "not supported: svclab nodes have no topology")
		}
		if ref := e.TargetRef; ref != nil {
			r.targetRef(child(p, "targetRef"), s.Namespace, ref)
		}
	}
}

// podKeys is the set of the lab's pods by key, made on first use.
func (r *resolver) podKeys() map[string]bool {
	if r.pods == nil {
		r.pods = map[string]bool{}
		for _, p := range r.t.Pods {
			r.pods[p.Key()] = true
		}
	}
	return r.pods
}

func (r *resolver) targetRef(path, namespace string, ref *corev1.ObjectReference) {
	if ref.Kind != "Pod" {
		r.errorf(child(path, "kind"), "%q: svclab backends are pods (kind Pod)", ref.Kind)
		return
	}
	ns := ref.Namespace
	if ns == "" {
		ns = namespace
	}
	if _, ok := r.podKeys()[ns+"/"+ref.Name]; !ok {
		r.errorf(child(path, "name"), "no pod %s/%s in the lab", ns, ref.Name)
	}
}

// namedTargetPorts checks that a named targetPort means something: when a
// Service selects pods, at least one of them must name the port. (The
// EndpointSlice controller leaves a pod that lacks the name out of that port, so
// pods can differ; but if none has it, the port has no endpoints at all, which is
// a mistake, not a lab.)
func (r *resolver) namedTargetPorts() {
	var sel *podSelector
	for i := range r.t.Services {
		svc := &r.t.Services[i]
		if !needsClusterIP(svc) || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
			return sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != ""
		}) {
			continue
		}
		if sel == nil {
			sel = newPodSelector(r.t.Pods)
		}
		selected := sel.selected(svc)
		if len(selected) == 0 {
			continue
		}
		for j, sp := range svc.Spec.Ports {
			if sp.TargetPort.Type != intstr.String || sp.TargetPort.StrVal == "" {
				continue
			}
			if slices.ContainsFunc(selected, func(p *Pod) bool {
				_, ok := containerPort(p, sp.TargetPort.StrVal, sp.Protocol)
				return ok
			}) {
				continue
			}
			keys := make([]string, len(selected))
			for k, p := range selected {
				keys[k] = p.Key()
			}
			r.errorf(child(index(child(index("services", i), "spec.ports"), j), "targetPort"),
				"no pod the Service selects (%s) has a %s container port named %q", strings.Join(keys, ", "), sp.Protocol, sp.TargetPort.StrVal)
		}
	}
}

// containerPort finds the pod's port of that name and protocol, as the
// EndpointSlice controller's FindPort does.
func containerPort(p *Pod, name string, proto corev1.Protocol) (int32, bool) {
	for _, cp := range p.Ports {
		if cp.Name == name && cp.Protocol == proto {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}
