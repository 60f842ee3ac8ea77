package verify

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// DNS checks, planned from the topology and the Kubernetes DNS specification
// (github.com/kubernetes/dns, docs/specification.md): every pod of the lab asks
// the cluster DNS, at the kube-dns ClusterIP through its node's dataplane, over
// UDP and over TCP, for
//   - the A record of every Service with a ClusterIP: by its full name, and
//     through the pod's search path as "name.namespace" and, in its own
//     namespace, "name" (the seed's service-httpd.default and service-httpd);
//     then connects to the address it got, as a client would;
//   - the SRV record of each of their named ports, and the PTR record of their
//     ClusterIPs;
//   - a headless Service's A records, one per ready endpoint (NXDOMAIN with
//     none), and an ExternalName Service's CNAME;
//   - a name that does not exist (NXDOMAIN).
// So a DNS check is also a check of kube-dns's ClusterIP over UDP and TCP: when
// the mode's model says a pod's packets to it are refused or dropped, that is
// what the lookups must see.

// nxName is the Service name the NXDOMAIN checks ask for; a lab that has it is
// not checked for it.
const nxName = "svclab-no-such-service"

// Lookup is one DNS question a pod asks the cluster DNS, with what must come back.
type Lookup struct {
	Name   string
	Source Source
	// Server is the cluster DNS, the kube-dns ClusterIP and port 53.
	Server netip.AddrPort
	// Protocol is UDP or TCP, and Service the kube-dns port it goes to.
	Protocol string
	Service  string
	// Query is the name as the pod asks it: one without the final dot goes
	// through the pod's search path (its resolv.conf), as a stub resolver takes
	// it.
	Query string
	// Type is the record type asked: A, SRV or PTR.
	Type     string
	Expected Answer
	// Connect is the connection made to the address the answer gives, and what
	// it must see; nil for none.
	Connect *Flow
}

// Answer is what a lookup must get.
type Answer struct {
	// Outcome is Answered, or what the model says of the pod's packets to
	// kube-dns (Refused, Timeout).
	Outcome traffic.Outcome
	// NXDomain: the name does not exist.
	NXDomain bool
	// Records are the answer section, each as "TYPE data" (see record), sorted.
	Records []string
	Why     string
}

func (a Answer) String() string {
	switch {
	case a.Outcome != traffic.Answered:
		return string(a.Outcome)
	case a.NXDomain:
		return "NXDOMAIN"
	}
	return strings.Join(a.Records, ", ")
}

// answerText renders an answer record for comparison: its type and data, without
// the owner name, class and TTL; SRV without priority and weight (CoreDNS's
// split of weight among targets is its own choice, not the specification's).
func answerText(rr dns.RR) string {
	switch r := rr.(type) {
	case *dns.A:
		return "A " + r.A.String()
	case *dns.SRV:
		return fmt.Sprintf("SRV %d %s", r.Port, r.Target)
	case *dns.PTR:
		return "PTR " + r.Ptr
	case *dns.CNAME:
		return "CNAME " + r.Target
	}
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// isComponent tells whether the pod runs a cluster component rather than
// svclab's servers.
func isComponent(t *topology.Topology, ip netip.Addr) bool {
	return slices.ContainsFunc(t.Pods, func(p topology.Pod) bool { return p.IP == ip && p.Component != "" })
}

// servesComponent tells whether a Service port leads to a component's pods
// (kube-dns to CoreDNS): they answer their own protocol, not svclab's echo, so
// echo flows leave the port out; the DNS checks are its checks.
func servesComponent(t *topology.Topology, sp proxy.ServicePort) bool {
	return slices.ContainsFunc(sp.Endpoints, func(e proxy.Endpoint) bool { return isComponent(t, e.IP) })
}

// deriveLookups plans the DNS checks of topology t, none without cluster DNS.
func deriveLookups(t *topology.Topology, mod *model, rules semantics, ports []proxy.ServicePort) []Lookup {
	d := t.DNS
	if d == nil {
		return nil
	}
	server := netip.AddrPortFrom(d.ServiceIP, 53)
	dnsPorts := map[string]proxy.ServicePort{}
	for _, sp := range ports {
		if topology.IsDNSService(sp.Name.Namespace, sp.Name.Name) && sp.Port == 53 {
			dnsPorts[string(sp.Protocol)] = sp
		}
	}
	readyAddrs := readyEndpointAddrs(t)
	var out []Lookup
	for _, p := range t.Pods {
		if p.Component != "" {
			continue
		}
		src := Source{Name: p.Name, Kind: member.KindPod, IP: p.IP, Node: p.Node}
		questions := questionsFor(t, p.Namespace, readyAddrs, ports)
		for _, proto := range []string{"UDP", "TCP"} {
			dnsPort, ok := dnsPorts[proto]
			if !ok {
				continue
			}
			reach := mod.expect(rules, src, dnsPort, Target{Addr: server})
			for _, q := range questions {
				lk := Lookup{
					Source: src, Server: server, Protocol: proto, Service: dnsPort.Name.String(version.Default),
					Query: q.query, Type: q.qtype, Expected: q.answer,
				}
				lk.Name = fmt.Sprintf("pod %s -> %s %s (%s)", p.Name, q.qtype, q.query, proto)
				if reach.Outcome != traffic.Answered || reach.MayTimeout {
					// The pod cannot reach kube-dns: its lookups see what its
					// packets do.
					o := reach.Outcome
					if reach.MayTimeout {
						o = traffic.Timeout
					}
					lk.Expected = Answer{Outcome: o, Why: "kube-dns from this pod: " + reach.Why}
				} else if q.connect != nil {
					lk.Connect = connectFlow(mod, rules, src, *q.connect)
				}
				out = append(out, lk)
			}
		}
	}
	return out
}

// question is one lookup a pod makes, before the transport is chosen.
type question struct {
	query, qtype string
	answer       Answer
	// connect is the Service port a connection to the answer's address goes
	// to; nil for none.
	connect *proxy.ServicePort
}

// questionsFor are the lookups of a pod in namespace ns, Service by Service.
func questionsFor(t *topology.Topology, ns string, ready map[string][]string, ports []proxy.ServicePort) []question {
	d := t.DNS
	var qs []question
	nx := true
	for i := range t.Services {
		svc := &t.Services[i]
		full := d.ServiceName(svc.Namespace, svc.Name)
		if svc.Name == nxName && svc.Namespace == ns {
			nx = false
		}
		switch {
		case svc.Spec.Type == corev1.ServiceTypeExternalName:
			target := dns.Fqdn(svc.Spec.ExternalName)
			qs = append(qs, question{query: full, qtype: "A", answer: Answer{Outcome: traffic.Answered, Records: []string{"CNAME " + target},
				Why: "an ExternalName Service is a CNAME to its externalName"}})
		case svc.Spec.ClusterIP == corev1.ClusterIPNone:
			addrs := ready[svc.Namespace+"/"+svc.Name]
			a := Answer{Outcome: traffic.Answered, Why: "a headless Service has an A record per ready endpoint"}
			if len(addrs) == 0 {
				a.NXDomain, a.Why = true, "a headless Service without ready endpoints has no A record"
			}
			for _, ip := range addrs {
				a.Records = append(a.Records, "A "+ip)
			}
			qs = append(qs, question{query: full, qtype: "A", answer: a})
		default:
			a := Answer{Outcome: traffic.Answered, Records: []string{"A " + svc.Spec.ClusterIP}, Why: "a Service's A record is its ClusterIP"}
			var connect *proxy.ServicePort
			if sp, ok := firstPort(svc, ports); ok && !servesComponent(t, sp) {
				connect = &sp
			}
			names := []string{full, svc.Name + "." + svc.Namespace}
			if svc.Namespace == ns {
				names = append(names, svc.Name)
			}
			for _, n := range names {
				q := question{query: n, qtype: "A", answer: a, connect: connect}
				if !dns.IsFqdn(n) {
					q.answer.Why += ", found through the pod's search path"
				}
				qs = append(qs, q)
			}
			for _, p := range svc.Spec.Ports {
				if p.Name == "" {
					continue
				}
				qs = append(qs, question{
					query: fmt.Sprintf("_%s._%s.%s", p.Name, strings.ToLower(string(p.Protocol)), full), qtype: "SRV",
					answer: Answer{Outcome: traffic.Answered, Records: []string{fmt.Sprintf("SRV %d %s", p.Port, full)},
						Why: "a named port has an SRV record naming the Service"},
				})
			}
			if rev, err := dns.ReverseAddr(svc.Spec.ClusterIP); err == nil {
				qs = append(qs, question{query: rev, qtype: "PTR",
					answer: Answer{Outcome: traffic.Answered, Records: []string{"PTR " + full}, Why: "a ClusterIP's PTR record names its Service"}})
			}
		}
	}
	if nx {
		qs = append(qs, question{query: d.ServiceName(ns, nxName), qtype: "A",
			answer: Answer{Outcome: traffic.Answered, NXDomain: true, Why: "a Service that does not exist has no name"}})
	}
	return qs
}

// firstPort is a Service's first port as the proxies see it.
func firstPort(svc *corev1.Service, ports []proxy.ServicePort) (proxy.ServicePort, bool) {
	if len(svc.Spec.Ports) == 0 {
		return proxy.ServicePort{}, false
	}
	p0 := svc.Spec.Ports[0]
	for _, sp := range ports {
		if sp.Name.Namespace == svc.Namespace && sp.Name.Name == svc.Name && sp.Port == int(p0.Port) && sp.Protocol == p0.Protocol {
			return sp, true
		}
	}
	return proxy.ServicePort{}, false
}

// readyEndpointAddrs are the addresses of each Service's ready endpoints, by
// "namespace/name", sorted: a headless Service's A records.
func readyEndpointAddrs(t *topology.Topology) map[string][]string {
	out := map[string][]string{}
	for _, s := range t.EndpointSlices() {
		key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if !slices.Contains(out[key], a) {
					out[key] = append(out[key], a)
				}
			}
		}
	}
	for k := range out {
		slices.SortFunc(out[k], func(a, b string) int {
			return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b))
		})
	}
	return out
}

// connectFlow is the one connection a pod makes to a Service port's ClusterIP
// once it has resolved its name, with what the echo flow to it must see.
func connectFlow(mod *model, rules semantics, src Source, sp proxy.ServicePort) *Flow {
	tgt := Target{Addr: netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port))}
	exp := mod.expect(rules, src, sp, tgt)
	return &Flow{
		Name: fmt.Sprintf("%s %s -> %s %s", src.Kind, src.Name, sp.Name.String(version.Default), tgt), Source: src, Target: tgt,
		To: tgt.String(), Protocol: string(sp.Protocol), Service: sp.Name.String(version.Default), Candidates: len(sp.Endpoints), Expected: exp,
	}
}
