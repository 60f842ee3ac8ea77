package topology

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// maxEndpointsPerSlice is the EndpointSlice controller's default
// --max-endpoints-per-slice.
const maxEndpointsPerSlice = 100

// EndpointSlices are the user's slices (for selectorless Services) followed by
// the slices the EndpointSlice controller derives from every Service with a
// selector, in Service order. The result is fresh: callers may change it.
func (t *Topology) EndpointSlices() []discoveryv1.EndpointSlice {
	out := make([]discoveryv1.EndpointSlice, 0, len(t.UserEndpointSlices)+len(t.Services))
	for i := range t.UserEndpointSlices {
		out = append(out, *t.UserEndpointSlices[i].DeepCopy())
	}
	sel := newPodSelector(t.Pods)
	for i := range t.Services {
		out = append(out, controllerSlices(&t.Services[i], sel)...)
	}
	return out
}

// controllerSlices is what the EndpointSlice controller keeps for one Service
// once it has settled: pods grouped by the ports they resolve to, at most
// maxEndpointsPerSlice a slice, and one empty placeholder slice when no pod
// matches. Where the controller is random (slice names, endpoint order), this is
// deterministic.
func controllerSlices(svc *corev1.Service, sel *podSelector) []discoveryv1.EndpointSlice {
	// The controller gives ExternalName Services nothing, and leaves Services
	// without a selector to whoever writes their slices.
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	type group struct {
		ports     []discoveryv1.EndpointPort
		endpoints []discoveryv1.Endpoint
	}
	pods := sel.selected(svc)
	slices.SortFunc(pods, func(a, b *Pod) int { return a.IP.Compare(b.IP) })
	groups := map[string]*group{}
	for _, p := range pods {
		ports := endpointPorts(svc, p)
		k := portMapKey(ports)
		g, ok := groups[k]
		if !ok {
			g = &group{ports: ports}
			groups[k] = g
		}
		g.endpoints = append(g.endpoints, podEndpoint(svc, p))
	}
	if len(groups) == 0 {
		return []discoveryv1.EndpointSlice{newSlice(svc, "placeholder", []discoveryv1.EndpointPort{}, []discoveryv1.Endpoint{})}
	}
	var out []discoveryv1.EndpointSlice
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		g := groups[k]
		for n, chunk := range slices.Collect(slices.Chunk(g.endpoints, maxEndpointsPerSlice)) {
			out = append(out, newSlice(svc, fmt.Sprintf("%s#%d", k, n), g.ports, chunk))
		}
	}
	return out
}

// endpointPorts resolves every Service port against one pod, as the controller's
// getEndpointPorts does: a named targetPort is looked up among the pod's
// container ports of that name and protocol, and a pod without it is left out of
// that port.
func endpointPorts(svc *corev1.Service, p *Pod) []discoveryv1.EndpointPort {
	ports := []discoveryv1.EndpointPort{}
	for _, sp := range svc.Spec.Ports {
		var num int32
		switch sp.TargetPort.Type {
		case intstr.Int:
			num = sp.TargetPort.IntVal
		case intstr.String:
			n, ok := containerPort(p, sp.TargetPort.StrVal, sp.Protocol)
			if !ok {
				continue
			}
			num = n
		}
		ports = append(ports, discoveryv1.EndpointPort{
			Name:        ptr.To(sp.Name),
			Port:        ptr.To(num),
			Protocol:    ptr.To(sp.Protocol),
			AppProtocol: sp.AppProtocol,
		})
	}
	return ports
}

// portMapKey tells port mappings apart, as the controller's PortMapKey does.
func portMapKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = fmt.Sprintf("%s/%s/%d/%s", *p.Name, *p.Protocol, *p.Port, ptr.Deref(p.AppProtocol, ""))
	}
	return strings.Join(parts, ",")
}

// podEndpoint is the controller's podToEndpoint: a terminating pod is never
// ready, unless the Service publishes not-ready addresses; serving is the pod's
// readiness alone.
func podEndpoint(svc *corev1.Service, p *Pod) discoveryv1.Endpoint {
	ready := svc.Spec.PublishNotReadyAddresses || (p.Ready && !p.Terminating)
	return discoveryv1.Endpoint{
		Addresses: []string{p.IP.String()},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       ptr.To(ready),
			Serving:     ptr.To(p.Ready),
			Terminating: ptr.To(p.Terminating),
		},
		NodeName:  ptr.To(p.Node),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name},
	}
}

func newSlice(svc *corev1.Service, seed string, ports []discoveryv1.EndpointPort, eps []discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	labels := map[string]string{}
	for k, v := range svc.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != corev1.IsHeadlessService {
			labels[k] = v
		}
	}
	if isHeadless(svc) {
		labels[corev1.IsHeadlessService] = ""
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = controllerName
	return discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      svc.Name + "-" + nameSuffix(svc.Namespace+"/"+svc.Name+"/"+seed),
			Namespace: svc.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       clonePorts(ports),
		Endpoints:   eps,
	}
}

// nameSuffix stands in for the API server's generateName suffix: five characters
// of the same alphabet, from a hash instead of a random source, so that the
// same lab always shows the same names.
func nameSuffix(seed string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	sum := sha256.Sum256([]byte(seed))
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(b)
}

func clonePorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i := range ports {
		out[i] = *ports[i].DeepCopy()
	}
	return out
}
