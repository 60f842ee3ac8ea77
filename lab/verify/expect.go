// Package verify derives, from a topology alone, what every flow to every Service
// must do (which backends may answer, with which source address, or refused, or
// dropped) and checks each with real connections in a running lab.
package verify

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// Source is a lab member a flow starts from.
type Source struct {
	Name string
	Kind string // "pod", "node" or "client"
	IP   netip.Addr
	// Node is the node a pod runs on, or the node itself.
	Node string
}

// Target is one address of a Service port.
type Target struct {
	// NodePort is the node whose address:nodePort is dialled; empty for the ClusterIP.
	Node string
	Addr netip.AddrPort
}

func (t Target) String() string {
	if t.Node == "" {
		return "ClusterIP " + t.Addr.String()
	}
	return "NodePort " + t.Addr.String() + " (" + t.Node + ")"
}

// Expectation is what a flow must do.
type Expectation struct {
	// Outcome is Answered, Refused, Timeout (dropped) or Unreachable.
	Outcome traffic.Outcome
	// Backends maps each endpoint ("ip:port") that may answer to the client source
	// addresses it may see. Every one must answer at least once.
	Backends map[string][]netip.Addr
	// Sticky is set for ClientIP session affinity: one client's connections all go
	// to one of Backends, whichever the first connection picked.
	Sticky bool
	// MayTimeout is set when some backends the rules pick cannot answer, because
	// their replies bypass the node that translated the request.
	MayTimeout bool
	// Why is one line of reasoning, for the report.
	Why string
}

func (e Expectation) String() string {
	switch e.Outcome {
	case traffic.Answered:
		s := describeBackends(e.Backends)
		if e.Sticky {
			s = "one of " + s
		}
		if e.MayTimeout {
			s += "; others time out"
		}
		return s
	case traffic.Timeout:
		return "no answer (times out)"
	}
	return string(e.Outcome)
}

func describeBackends(b map[string][]netip.Addr) string {
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		srcs := make([]string, len(b[k]))
		for j, a := range b[k] {
			srcs[j] = a.String()
		}
		parts[i] = fmt.Sprintf("%s (src %s)", k, strings.Join(srcs, "|"))
	}
	return strings.Join(parts, ", ")
}

// model knows the addresses of a topology's nodes.
type model struct {
	t       *topology.Topology
	cluster cluster
	nodes   map[string]topology.Node
}

// cluster is what the models read of the proxy configuration.
type cluster struct {
	ClusterCIDR   netip.Prefix
	MasqueradeAll bool
	Version       proxy.Version
}

func newModel(t *topology.Topology, c proxy.Config) *model {
	m := &model{t: t, cluster: cluster{ClusterCIDR: c.ClusterCIDR(), MasqueradeAll: c.MasqueradeAll(), Version: c.VersionOr()}, nodes: map[string]topology.Node{}}
	for _, n := range t.Nodes {
		m.nodes[n.Name] = n
	}
	return m
}

// nodeOf is the node an endpoint runs on: its nodeName, else the node whose podCIDR
// holds its address; "" when it is on no node of the lab.
func (m *model) nodeOf(e proxy.Endpoint) string {
	if e.NodeName != "" {
		return e.NodeName
	}
	for _, n := range m.t.Nodes {
		if n.PodCIDR.Contains(e.IP) {
			return n.Name
		}
	}
	return ""
}

// masqAddr is the source MASQUERADE gives a packet leaving node d for endpoint e:
// the address of the interface it leaves by (cni0 for a local pod, eth0 otherwise).
func (m *model) masqAddr(d string, e proxy.Endpoint) netip.Addr {
	if m.nodeOf(e) == d {
		return m.nodes[d].Gateway()
	}
	return m.nodes[d].IP
}

// expectIPTables is what kube-proxy's iptables mode does with a flow, following the
// chains of pkg/proxy/iptables: where the flow is translated (the node it leaves
// from, or for a NodePort the node it is addressed to), which endpoints the policy
// chain holds there, whether KUBE-MARK-MASQ marks it, and whether the replies come
// back through the translating node.
func (m *model) expectIPTables(src Source, port *proxy.ServicePort, tgt Target) Expectation {
	seen := port.AsSeenBy(m.cluster.Version)
	sp := &seen
	if src.Kind == "client" && tgt.Node == "" {
		return Expectation{Outcome: traffic.Unreachable, Why: "ClusterIPs are not routed outside the cluster"}
	}
	// d is the node whose nat table translates the flow.
	d := src.Node
	if tgt.Node != "" && (src.Kind == "client" || tgt.Node != src.Node) {
		d = tgt.Node
	}
	c := proxy.Categorize(sp, d)
	if !c.HasAny {
		return Expectation{Outcome: traffic.Refused, Why: "no endpoints: KUBE-SERVICES / KUBE-EXTERNAL-SERVICES reject"}
	}
	fromPod := src.Kind == "pod" && m.cluster.ClusterCIDR.Contains(src.IP)
	// srcLocal: the packet's source is an address of d (the node itself).
	srcLocal := src.Kind == "node" && src.Node == d
	var eps []proxy.Endpoint
	masq := false
	why := ""
	if tgt.Node == "" {
		if sp.InternalLocal {
			eps, why = c.Local, "internalTrafficPolicy Local: endpoints on "+d
			if len(eps) == 0 {
				return Expectation{Outcome: traffic.Timeout, Why: "internalTrafficPolicy Local and no endpoint on " + d + ": dropped"}
			}
		} else {
			eps, why = c.Cluster, "ClusterIP: any endpoint"
		}
		// A node's own packets leave with its eth0 address, outside the cluster CIDR.
		masq = m.cluster.MasqueradeAll || !m.cluster.ClusterCIDR.Contains(src.IP)
	} else if !sp.ExternalLocal {
		eps, masq, why = c.Cluster, true, "NodePort, policy Cluster: any endpoint, masqueraded"
	} else {
		switch {
		case fromPod:
			eps, why = c.Cluster, "NodePort, policy Local, from a pod: short-circuited to the cluster chain"
		case srcLocal:
			eps, masq, why = c.Cluster, true, "NodePort, policy Local, from the node itself: masqueraded, any endpoint"
		default:
			eps, why = c.Local, "NodePort, policy Local: endpoints on "+d+", client address kept"
			if len(eps) == 0 {
				return Expectation{Outcome: traffic.Timeout, Why: "externalTrafficPolicy Local and no endpoint on " + d + ": dropped"}
			}
		}
	}
	exp := Expectation{Outcome: traffic.Answered, Backends: map[string][]netip.Addr{}, Why: why, Sticky: sp.AffinitySeconds > 0}
	for _, e := range eps {
		// A pod reaching itself through the Service is masqueraded by its KUBE-SEP
		// chain's hairpin rule.
		if masq || e.IP == src.IP {
			exp.Backends[e.String()] = []netip.Addr{m.masqAddr(d, e)}
			continue
		}
		if !m.returnsThrough(d, src, e) {
			exp.MayTimeout = true
			exp.Why += "; replies from endpoints off " + d + " bypass its conntrack and never reach the client"
			continue
		}
		exp.Backends[e.String()] = []netip.Addr{src.IP}
	}
	if len(exp.Backends) == 0 {
		return Expectation{Outcome: traffic.Timeout, Why: exp.Why}
	}
	return exp
}

// returnsThrough tells whether replies from endpoint e to src's own address pass
// through node d, where the request was translated and where conntrack must undo it.
// Replies leave e through its node (its default gateway, or br_netfilter on the
// bridge), then reach a pod through the pod's node, or a node or client directly.
func (m *model) returnsThrough(d string, src Source, e proxy.Endpoint) bool {
	if m.nodeOf(e) == d {
		return true
	}
	return src.Kind == "pod" && src.Node == d
}
