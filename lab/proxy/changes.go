package proxy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Changes says, Service by Service ("namespace/name"), what differs between two
// states: what kube-proxy's change trackers hand each sync (its UpdatedServices,
// the Services whose Service or EndpointSlice objects changed). A Service that did
// not change has no entry.
type Changes map[string]Change

// Change is how one Service differs between two states. A Service that appeared
// or went away has both flags set.
type Change struct {
	// Ports: a port was added, removed or altered (its number, node port,
	// policies, ...).
	Ports bool
	// Endpoints: the endpoints of some port differ (in any field; their order
	// does not count).
	Endpoints bool
	// UDP: the Service has a UDP port, before or after.
	UDP bool
}

// Diff compares the states prev and cur. It runs on every sync, so it indexes
// each side's ports once and compares port by port.
func Diff(prev, cur []ServicePort) Changes {
	before, after := byPort(prev), byPort(cur)
	changes := Changes{}
	mark := func(sp *ServicePort, ports, endpoints bool) {
		svc := sp.Name.NamespacedName()
		c := changes[svc]
		c.Ports, c.Endpoints = c.Ports || ports, c.Endpoints || endpoints
		changes[svc] = c
	}
	for k, a := range after {
		b, ok := before[k]
		if !ok {
			mark(a, true, true)
			continue
		}
		if ports, eps := !sameFields(*b, *a), !sameEndpoints(b.Endpoints, a.Endpoints); ports || eps {
			mark(a, ports, eps)
		}
	}
	for k, b := range before {
		if _, ok := after[k]; !ok {
			mark(b, true, true)
		}
	}
	if len(changes) > 0 {
		for _, side := range [][]ServicePort{prev, cur} {
			for i := range side {
				if side[i].Protocol != corev1.ProtocolUDP {
					continue
				}
				if c, ok := changes[side[i].Name.NamespacedName()]; ok {
					c.UDP = true
					changes[side[i].Name.NamespacedName()] = c
				}
			}
		}
	}
	return changes
}

// ConntrackCleanupNeeded tells whether the changes call for the stale UDP
// conntrack cleanup: kube-proxy's ConntrackCleanupRequired, true when the endpoints
// of some Service with a UDP port changed (or the Service appeared or went away).
func (c Changes) ConntrackCleanupNeeded() bool {
	for _, ch := range c {
		if ch.Endpoints && ch.UDP {
			return true
		}
	}
	return false
}

// portKey names one port of a Service whatever its number.
type portKey struct {
	name     ServicePortName
	protocol corev1.Protocol
}

func byPort(ports []ServicePort) map[portKey]*ServicePort {
	m := make(map[portKey]*ServicePort, len(ports))
	for i := range ports {
		m[portKey{ports[i].Name, ports[i].Protocol}] = &ports[i]
	}
	return m
}

// sameFields compares two ports but for their endpoints, field by field:
// reflect.DeepEqual cost half of Diff at 10000 Services. TestSameFields fails
// when ServicePort gains a field this does not compare.
func sameFields(x, y ServicePort) bool {
	return x.Name == y.Name && x.Protocol == y.Protocol && x.ClusterIP == y.ClusterIP &&
		x.Port == y.Port && x.NodePort == y.NodePort && x.ExternalLocal == y.ExternalLocal &&
		x.InternalLocal == y.InternalLocal && x.HealthCheckNodePort == y.HealthCheckNodePort &&
		x.AffinitySeconds == y.AffinitySeconds && slices.Equal(x.ExternalIPs, y.ExternalIPs) &&
		slices.Equal(x.LoadBalancerIPs, y.LoadBalancerIPs) && slices.Equal(x.SourceRanges, y.SourceRanges)
}

// sameEndpoints compares two endpoint lists as sets: they come sorted, so the
// cheap comparison nearly always settles it.
func sameEndpoints(x, y []Endpoint) bool {
	if slices.Equal(x, y) {
		return true
	}
	if len(x) != len(y) {
		return false
	}
	sorted := func(eps []Endpoint) []Endpoint {
		out := slices.Clone(eps)
		slices.SortStableFunc(out, func(a, b Endpoint) int { return strings.Compare(a.String(), b.String()) })
		return out
	}
	return slices.Equal(sorted(x), sorted(y))
}
