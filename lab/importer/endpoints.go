package importer

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// standInSlices are the slices of a Service the input has none of, made as
// the cluster would have made them: from its Endpoints object (which the
// EndpointSlice mirroring keeps in step), or else, for a Service with a
// selector, from the input's pods it selects (the EndpointSlice controller's
// rule). A Service with a selector and neither gets a note: in the lab it has
// no endpoints, and every check of it expects a refusal.
func (b *builder) standInSlices(svc Object[corev1.Service], d *Dump) []Object[discoveryv1.EndpointSlice] {
	s := svc.Obj
	id := s.Namespace + "/" + s.Name
	for _, e := range d.Endpoints {
		if e.Obj.Namespace == s.Namespace && e.Obj.Name == s.Name {
			out := slicesOfEndpoints(e)
			b.notef("Service %s: no EndpointSlice in the input: its endpoints are its Endpoints object's (%s)", id, e.Where)
			return out
		}
	}
	if len(s.Spec.Selector) == 0 || s.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if len(d.Pods) == 0 {
		b.notef("Service %s: selects pods, but the input has no EndpointSlice, Endpoints or Pod of it: it has no endpoints in the lab (dump endpointslices, endpoints or pods with it)", id)
		return nil
	}
	out := slicesOfPods(svc, d.Pods)
	n := 0
	for _, sl := range out {
		n += len(sl.Obj.Endpoints)
	}
	b.notef("Service %s: no EndpointSlice or Endpoints in the input: its endpoints are the %d pods of the input its selector %s matches, as the EndpointSlice controller makes them", id, n, labels.SelectorFromSet(s.Spec.Selector))
	return out
}

// slicesOfEndpoints is one slice per subset of e: its addresses ready, its
// notReadyAddresses not, each with its node, hostname and target.
func slicesOfEndpoints(e Object[corev1.Endpoints]) []Object[discoveryv1.EndpointSlice] {
	var out []Object[discoveryv1.EndpointSlice]
	for i, sub := range e.Obj.Subsets {
		sl := newSlice(e.Obj.Namespace, e.Obj.Name, i, firstAddress(sub))
		for _, p := range sub.Ports {
			sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(cmpProto(p.Protocol)), Port: ptr.To(p.Port)})
		}
		for _, group := range []struct {
			addrs []corev1.EndpointAddress
			ready bool
		}{{sub.Addresses, true}, {sub.NotReadyAddresses, false}} {
			for _, a := range group.addrs {
				ep := discoveryv1.Endpoint{
					Addresses: []string{a.IP},
					Conditions: discoveryv1.EndpointConditions{
						Ready: ptr.To(group.ready), Serving: ptr.To(group.ready), Terminating: ptr.To(false),
					},
					NodeName:  a.NodeName,
					TargetRef: a.TargetRef,
				}
				if a.Hostname != "" {
					ep.Hostname = ptr.To(a.Hostname)
				}
				sl.Endpoints = append(sl.Endpoints, ep)
			}
		}
		out = append(out, Object[discoveryv1.EndpointSlice]{fmt.Sprintf("%s.subsets[%d]", e.Where, i), sl})
	}
	return out
}

func firstAddress(sub corev1.EndpointSubset) string {
	for _, a := range append(slices.Clone(sub.Addresses), sub.NotReadyAddresses...) {
		return a.IP
	}
	return ""
}

// newSlice is an empty slice of Service namespace/name, its addressType
// that of addr.
func newSlice(namespace, name string, i int, addr string) discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-" + strconv.Itoa(i), Namespace: namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: name},
		},
		AddressType: family,
	}
}

// slicesOfPods is what the EndpointSlice controller makes of the pods svc
// selects: every pod of its namespace with an address, not finished, its
// labels matching; ready as its Ready condition says unless it is being
// deleted; a target port by name resolved in each pod's containers (a pod
// without that name has no endpoint for the port). Pods with the same
// resolved ports share a slice.
func slicesOfPods(svc Object[corev1.Service], pods []Object[corev1.Pod]) []Object[discoveryv1.EndpointSlice] {
	s := svc.Obj
	sel := labels.SelectorFromSet(s.Spec.Selector)
	byPorts := map[string]*discoveryv1.EndpointSlice{}
	var keys []string
	for _, in := range pods {
		p := in.Obj
		if p.Namespace != s.Namespace || p.Status.PodIP == "" || !sel.Matches(labels.Set(p.Labels)) ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ports := podPorts(s, p)
		if len(ports) == 0 {
			continue
		}
		key := portsKey(ports)
		sl, ok := byPorts[key]
		if !ok {
			sl = ptr.To(newSlice(s.Namespace, s.Name, len(keys), p.Status.PodIP))
			sl.Ports = ports
			byPorts[key] = sl
			keys = append(keys, key)
		}
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		terminating := p.DeletionTimestamp != nil
		ep := discoveryv1.Endpoint{
			Addresses: []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(ready && !terminating), Serving: ptr.To(ready), Terminating: ptr.To(terminating),
			},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name},
		}
		if p.Spec.NodeName != "" {
			ep.NodeName = ptr.To(p.Spec.NodeName)
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	var out []Object[discoveryv1.EndpointSlice]
	for _, k := range keys {
		out = append(out, Object[discoveryv1.EndpointSlice]{svc.Where + " (from its pods)", *byPorts[k]})
	}
	return out
}

// podPorts are svc's ports as pod p serves them.
func podPorts(svc corev1.Service, p corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		port := sp.TargetPort.IntVal
		if sp.TargetPort.StrVal != "" {
			port = 0
			for _, c := range p.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.Name == sp.TargetPort.StrVal && cmpProto(cp.Protocol) == cmpProto(sp.Protocol) {
						port = cp.ContainerPort
					}
				}
			}
		} else if port == 0 {
			port = sp.Port // targetPort defaults to port
		}
		if port == 0 {
			continue
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Protocol: ptr.To(cmpProto(sp.Protocol)), Port: ptr.To(port)})
	}
	return out
}

func portsKey(ports []discoveryv1.EndpointPort) string {
	var parts []string
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%s/%d", *p.Name, *p.Protocol, *p.Port))
	}
	return strings.Join(parts, ",")
}
