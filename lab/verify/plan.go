package verify

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
)

// Plan is every check a verify run makes and what each must see, settled before a
// packet is sent.
type Plan struct {
	// Model is the dataplane semantics the plan is for; execution refuses a lab
	// whose mode has other semantics, and schedules flows the way it picks
	// backends.
	Model proxy.Model
	Flows []Flow
	// Lookups are the DNS checks of a lab with cluster DNS (see dns.go).
	Lookups []Lookup
}

// Flow is one member dialling one address, with what must happen.
type Flow struct {
	// Name names the flow's check.
	Name   string
	Source Source
	Target Target
	// To is the target as the report shows it.
	To       string
	Protocol string // "TCP" or "UDP"
	// Service is the Service port dialled ("default/web:http"); empty when the
	// address is none of the topology's Services'.
	Service string
	// Candidates is how many endpoints the rules may pick among. With Expected's
	// backends it sizes the attempts that must see each of them; when it is more
	// than those and no pick is known to go unanswered, every attempt is made, to
	// catch a pick the expectation leaves out.
	Candidates int
	Expected   Expectation
}

// Derive plans every flow of topology t under model m and the cluster-wide
// settings c (kube-proxy release, masquerade-all): from each node, pod and client
// to each ClusterIP:port, each node:nodePort, each load balancer ingress IP:port
// (a client's through the lab's load balancer) and each external IP:port. It
// needs neither root nor a lab.
func Derive(t *topology.Topology, m proxy.Model, c proxy.Config) Plan {
	mod := newModel(t, c)
	rules := mustSemantics(m)
	// Echo flows start from the lab's own pods and go to the Services whose
	// endpoints are svclab's servers; the cluster DNS has its checks below.
	sources := slices.DeleteFunc(sourcesOf(t), func(s Source) bool { return s.Kind == member.KindPod && isComponent(t, s.IP) })
	plan := Plan{Model: m}
	ports := proxy.FromObjects(t.Services, t.EndpointSlices())
	for _, sp := range ports {
		if servesComponent(t, sp) {
			continue
		}
		targets := []Target{{Addr: netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port))}}
		if sp.NodePort != 0 {
			for _, n := range t.Nodes {
				targets = append(targets, Target{Node: n.Name, Addr: netip.AddrPortFrom(n.IP, uint16(sp.NodePort))})
			}
		}
		for _, a := range sp.LoadBalancerIPs {
			targets = append(targets, Target{Addr: netip.AddrPortFrom(a, uint16(sp.Port)), External: LoadBalancer})
		}
		for _, a := range sp.ExternalIPs {
			targets = append(targets, Target{Addr: netip.AddrPortFrom(a, uint16(sp.Port)), External: ExternalIP})
		}
		service := sp.Name.String(version.Default)
		for _, src := range sources {
			for _, tgt := range targets {
				exp := mod.expect(rules, src, sp, tgt)
				// The model knows which endpoints answer; where some picks go
				// unanswered, the rules pick among all of the Service's.
				candidates := len(exp.Backends)
				if exp.MayTimeout {
					candidates = len(sp.Endpoints)
				}
				plan.Flows = append(plan.Flows, Flow{
					Name:   fmt.Sprintf("%s %s -> %s %s", src.Kind, src.Name, service, tgt),
					Source: src, Target: tgt, To: tgt.String(), Protocol: string(sp.Protocol),
					Service: service, Candidates: candidates, Expected: exp,
				})
			}
		}
	}
	plan.Lookups = deriveLookups(t, mod, rules, ports)
	return plan
}

// sourcesOf lists the members a flow can start from: nodes, pods, then clients.
func sourcesOf(t *topology.Topology) []Source {
	var sources []Source
	for _, n := range t.Nodes {
		sources = append(sources, Source{Name: n.Name, Kind: member.KindNode, IP: n.IP, Node: n.Name})
	}
	for _, p := range t.Pods {
		sources = append(sources, Source{Name: p.Name, Kind: member.KindPod, IP: p.IP, Node: p.Node})
	}
	for _, c := range t.Clients {
		sources = append(sources, Source{Name: c.Name, Kind: member.KindClient, IP: c.IP})
	}
	return sources
}

// Checks are the plan's checks as a run reports them, before any is made: nothing
// observed, nothing passed.
func (p Plan) Checks(label string) []Check {
	checks := make([]Check, 0, len(p.Flows)+len(p.Lookups))
	for _, f := range p.Flows {
		checks = append(checks, f.planned(label))
	}
	for _, lk := range p.Lookups {
		checks = append(checks, lk.planned(label))
	}
	return checks
}

func (f Flow) planned(label string) Check {
	return Check{
		Name: f.Name, Mode: label, From: f.Source.Name, To: f.To, Expected: f.Expected.String(),
		Service: f.Service, Protocol: f.Protocol, Why: f.Expected.Why,
	}
}
