package proxy

import (
	"reflect"
	"sort"

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

// Diff compares the states prev and cur.
func Diff(prev, cur []ServicePort) Changes {
	before, after := byService(prev), byService(cur)
	changes := Changes{}
	for _, side := range []map[string]serviceState{before, after} {
		for svc := range side {
			b, a := before[svc], after[svc]
			c := Change{
				Ports:     !reflect.DeepEqual(b.ports, a.ports),
				Endpoints: !reflect.DeepEqual(b.endpoints, a.endpoints),
				UDP:       b.udp || a.udp,
			}
			if c.Ports || c.Endpoints {
				changes[svc] = c
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

// serviceState is one Service's ports (endpoints left out) and each port's
// endpoints, sorted.
type serviceState struct {
	ports     map[portKey]ServicePort
	endpoints map[portKey][]Endpoint
	udp       bool
}

func byService(ports []ServicePort) map[string]serviceState {
	m := map[string]serviceState{}
	for _, sp := range ports {
		svc := sp.Name.NamespacedName()
		s, ok := m[svc]
		if !ok {
			s = serviceState{ports: map[portKey]ServicePort{}, endpoints: map[portKey][]Endpoint{}}
		}
		k := portKey{sp.Name, sp.Protocol}
		var eps []Endpoint
		if len(sp.Endpoints) > 0 {
			eps = append(eps, sp.Endpoints...)
			sort.SliceStable(eps, func(i, j int) bool { return eps[i].String() < eps[j].String() })
		}
		s.endpoints[k] = eps
		sp.Endpoints = nil
		s.ports[k] = sp
		s.udp = s.udp || sp.Protocol == corev1.ProtocolUDP
		m[svc] = s
	}
	return m
}
