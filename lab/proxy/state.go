package proxy

import (
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// defaultAffinitySeconds is the API server's default for
// sessionAffinityConfig.clientIP.timeoutSeconds (3 hours).
const defaultAffinitySeconds = 10800

// State is what a proxier programs: the API objects kube-proxy watches (the
// Services, their EndpointSlices, and the Node it runs on), and the per-port view
// kube-proxy's change trackers derive from them, which svclab's proxiers read.
type State struct {
	Services       []corev1.Service
	EndpointSlices []discoveryv1.EndpointSlice
	// Node is the programmed node's object; nil when the caller has none.
	Node *corev1.Node
	// Ports is FromObjects(Services, EndpointSlices).
	Ports []ServicePort
}

// NewState derives the ports of services and slices; the objects are kept as
// given, not copied.
func NewState(services []corev1.Service, slices []discoveryv1.EndpointSlice, node *corev1.Node) *State {
	return &State{Services: services, EndpointSlices: slices, Node: node, Ports: FromObjects(services, slices)}
}

// StateOf is a state holding ports alone, for callers that build ports by hand
// (tests and benchmarks), with no objects behind them.
func StateOf(ports []ServicePort) *State { return &State{Ports: ports} }

// FromObjects is FromObjectsFor the IPv4 proxier.
func FromObjects(services []corev1.Service, slices []discoveryv1.EndpointSlice) []ServicePort {
	return FromObjectsFor(corev1.IPv4Protocol, services, slices)
}

// FromObjectsFor builds the view of family f's proxier from Service and
// EndpointSlice objects, as kube-proxy's service and endpoint change trackers
// of that family do: one ServicePort per Service port of a Service with a
// ClusterIP of family f, with the endpoints of every slice of that family
// labelled with the Service's name whose port has the same name and protocol.
// Services kube-proxy ignores (headless, ExternalName) are left out. Objects are
// expected to be valid (see topology).
func FromObjectsFor(f corev1.IPFamily, services []corev1.Service, slices []discoveryv1.EndpointSlice) []ServicePort {
	var out []ServicePort
	for i := range services {
		svc := &services[i]
		if !proxied(svc) {
			continue
		}
		clusterIP, ok := clusterIPOf(svc, f)
		if !ok {
			continue
		}
		for _, p := range svc.Spec.Ports {
			sp := ServicePort{
				Name:      ServicePortName{Namespace: svc.Namespace, Name: svc.Name, Port: p.Name},
				Protocol:  protocolOf(p.Protocol),
				ClusterIP: clusterIP,
				Port:      int(p.Port),
			}
			if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
				sp.NodePort = int(p.NodePort)
			}
			sp.ExternalIPs = externalIPs(svc, f)
			sp.LoadBalancerIPs = loadBalancerIPs(svc, f)
			sp.SourceRanges = sourceRanges(svc, f)
			// kube-proxy's ExternalPolicyLocal: the policy counts for Services
			// reachable from outside, which a ClusterIP Service is through its
			// external IPs.
			if externallyAccessible(svc) {
				sp.ExternalLocal = svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
			}
			if sp.ExternalLocal && svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
				sp.HealthCheckNodePort = int(svc.Spec.HealthCheckNodePort)
			}
			if itp := svc.Spec.InternalTrafficPolicy; itp != nil && *itp == corev1.ServiceInternalTrafficPolicyLocal {
				sp.InternalLocal = true
			}
			if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
				sp.AffinitySeconds = defaultAffinitySeconds
				if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
					sp.AffinitySeconds = int(*c.ClientIP.TimeoutSeconds)
				}
			}
			sp.Endpoints = endpointsFor(svc, p, slices, f)
			out = append(out, sp)
		}
	}
	return out
}

// proxied tells whether kube-proxy programs the Service at all.
func proxied(svc *corev1.Service) bool {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// externallyAccessible is the API's ExternallyAccessible: NodePort and
// LoadBalancer Services, and ClusterIP Services with external IPs.
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0
}

// externalIPs are the Service's external IPs of family f, in the order given.
func externalIPs(svc *corev1.Service, f corev1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, s := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && FamilyOf(a) == f {
			out = append(out, a)
		}
	}
	return out
}

// loadBalancerIPs are the ingress addresses of family f kube-proxy programs:
// those in VIP mode (an unset ipMode is VIP), in the order given.
func loadBalancerIPs(svc *corev1.Service, f corev1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" || ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP {
			continue
		}
		if a, err := netip.ParseAddr(ing.IP); err == nil && FamilyOf(a) == f {
			out = append(out, a)
		}
	}
	return out
}

// sourceRanges reads spec.loadBalancerSourceRanges as kube-proxy does: space
// around a range is allowed, ranges of the other family are the other
// proxier's, and a range of length 0 allows everything, as no range at all does.
func sourceRanges(svc *corev1.Service, f corev1.IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil || FamilyOf(p.Addr()) != f {
			continue
		}
		if p.Bits() == 0 {
			return nil
		}
		out = append(out, p.Masked())
	}
	return out
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// endpointsFor collects the endpoints of one Service port from every slice of
// family f of the Service as kube-proxy's endpoint slice cache does: the first
// address of each endpoint only, one endpoint per address (one not terminating
// wins over a terminating one), sorted by "ip:port" text.
func endpointsFor(svc *corev1.Service, port corev1.ServicePort, slices []discoveryv1.EndpointSlice, f corev1.IPFamily) []Endpoint {
	seen := map[netip.AddrPort]int{}
	var eps []Endpoint
	for i := range slices {
		s := &slices[i]
		if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name || !sliceOfFamily(s, f) {
			continue
		}
		for _, sp := range s.Ports {
			if sp.Port == nil || derefString(sp.Name) != port.Name || protocolOf(derefProtocol(sp.Protocol)) != protocolOf(port.Protocol) {
				continue
			}
			for _, e := range s.Endpoints {
				if len(e.Addresses) == 0 {
					continue
				}
				ip, err := netip.ParseAddr(e.Addresses[0])
				if err != nil {
					continue
				}
				ep := endpointOf(ip, int(*sp.Port), e)
				ap := netip.AddrPortFrom(ip, uint16(*sp.Port))
				if i, dup := seen[ap]; dup {
					if eps[i].Terminating && !ep.Terminating {
						eps[i] = ep
					}
					continue
				}
				seen[ap] = len(eps)
				eps = append(eps, ep)
			}
		}
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].String() < eps[j].String() })
	return eps
}

// endpointOf reads the conditions as kube-proxy does: a nil ready or serving means
// true, a nil terminating means false.
func endpointOf(ip netip.Addr, port int, e discoveryv1.Endpoint) Endpoint {
	ep := Endpoint{IP: ip, Port: port, Ready: true, Serving: true}
	if c := e.Conditions; c.Ready != nil {
		ep.Ready = *c.Ready
	}
	if c := e.Conditions; c.Serving != nil {
		ep.Serving = *c.Serving
	}
	if c := e.Conditions; c.Terminating != nil {
		ep.Terminating = *c.Terminating
	}
	if e.NodeName != nil {
		ep.NodeName = *e.NodeName
	}
	if r := e.TargetRef; r != nil && r.Kind == "Pod" {
		ep.Pod = r.Namespace + "/" + r.Name
	}
	return ep
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefProtocol(p *corev1.Protocol) corev1.Protocol {
	if p == nil {
		return ""
	}
	return *p
}
