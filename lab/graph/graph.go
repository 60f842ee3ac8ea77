// Package graph draws a lab: its members on the node network (nodes, clients,
// load balancers, the control plane), each pod under its node, and each Service
// port joined to the pods that serve it. DOT for Graphviz and other tools, and
// SVG laid out here (no Graphviz needed).
package graph

import (
	"net/netip"
	"strings"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
)

// Lab is what a picture shows: a lab's record (a running lab's, or the one a
// topology would write) and what to call its node network.
type Lab struct {
	record.Lab
	// Network labels the node network, e.g. "node network 192.168.1.0/24".
	Network string
}

// layout is the lab sorted for drawing.
type layout struct {
	// top are the members on the node network that are no node.
	top   []record.Member
	nodes []record.Member
	// pods are each node's pods, in the record's order.
	pods     map[string][]record.Member
	services []record.Service
	// endpointPods maps each Service port (by index) to the pods serving it.
	endpointPods [][]string
}

func layOut(l Lab) layout {
	lo := layout{pods: map[string][]record.Member{}, services: l.Services}
	podByIP := map[string]string{}
	for _, m := range l.Members {
		switch m.Kind {
		case member.KindFabric:
		case member.KindNode:
			lo.nodes = append(lo.nodes, m)
		case member.KindPod:
			lo.pods[m.Node] = append(lo.pods[m.Node], m)
			podByIP[m.IP] = m.Name
		default:
			lo.top = append(lo.top, m)
		}
	}
	for _, s := range l.Services {
		var pods []string
		for _, e := range s.Endpoints {
			// "10.244.1.10:8080 (not ready)"
			addr, _, _ := strings.Cut(e, " ")
			if ap, err := netip.ParseAddrPort(addr); err == nil {
				if p, ok := podByIP[ap.Addr().String()]; ok {
					pods = append(pods, p)
				}
			}
		}
		lo.endpointPods = append(lo.endpointPods, pods)
	}
	return lo
}

// serviceLabel is a Service port's lines: name, ClusterIP:port/protocol, and its
// node port and external addresses when it has them.
func serviceLabel(s record.Service) []string {
	lines := []string{s.Name, s.ClusterIP + ":" + itoa(s.Port) + "/" + s.Protocol}
	if s.NodePort != 0 {
		lines = append(lines, "NodePort "+itoa(s.NodePort))
	}
	if len(s.External) > 0 {
		lines = append(lines, "external "+strings.Join(s.External, ", "))
	}
	return lines
}

// memberLabel is a member's lines: name, kind, address.
func memberLabel(m record.Member) []string {
	lines := []string{m.Name, m.Kind}
	if m.IP != "" {
		lines = append(lines, m.IP)
	}
	return lines
}
