// Package verify plans, from a topology alone, what every flow to every Service must
// do under a mode's dataplane semantics (which backends may answer, with which
// source address, or refused, or dropped), or reads such a plan from a flows file,
// and executes a plan with real connections in a running lab.
package verify

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// Source is a lab member a flow starts from.
type Source struct {
	Name string
	Kind string // member.KindPod, member.KindNode or member.KindClient
	IP   netip.Addr
	// Node is the node a pod runs on, or the node itself.
	Node string
}

// Target is one address of a Service port.
type Target struct {
	// NodePort is the node whose address:nodePort is dialled; empty for the ClusterIP.
	Node string
	Addr netip.AddrPort
	// External is LoadBalancer for a load balancer ingress IP, ExternalIP for an
	// external IP; empty for a ClusterIP or a NodePort.
	External string
}

// Kinds of External targets.
const (
	LoadBalancer = "LoadBalancer"
	ExternalIP   = "externalIP"
)

func (t Target) String() string {
	switch {
	case t.External != "":
		return t.External + " " + t.Addr.String()
	case t.Node == "":
		return "ClusterIP " + t.Addr.String()
	}
	return "NodePort " + t.Addr.String() + " (" + t.Node + ")"
}

// isClusterIP tells whether t is a Service's ClusterIP.
func (t Target) isClusterIP() bool { return t.Node == "" && t.External == "" }

// Expectation is what a flow must do.
type Expectation struct {
	// Outcome is Answered, Refused, Timeout (dropped) or Unreachable.
	Outcome traffic.Outcome
	// Backends maps each endpoint ("ip:port") that may answer to the client source
	// addresses it may see (any, when none are given). Every one must answer at
	// least once.
	Backends map[string][]netip.Addr
	// Sticky is set for ClientIP session affinity: one client's connections all go
	// to one of Backends, whichever the first connection picked.
	Sticky bool
	// SomeOf is set when each connection goes to one of Backends but not every
	// one need answer: ClientIP affinity kept by each of several nodes a flow
	// may enter at.
	SomeOf bool
	// MayTimeout is set when some backends the rules pick cannot answer, because
	// their replies bypass the node that translated the request.
	MayTimeout bool
	// MinShare, when set, is the least chance with which a new connection
	// reaches each of Backends: picks that are not uniform over the endpoints,
	// as when a load balancer spreads flows over nodes with different numbers
	// of local endpoints. Zero: uniform over the flow's Candidates.
	MinShare float64
	// Why is one line of reasoning, for the report.
	Why string
}

func (e Expectation) String() string {
	switch e.Outcome {
	case traffic.Answered:
		s := describeBackends(e.Backends)
		switch {
		case e.Sticky:
			s = "one of " + s
		case e.SomeOf:
			s = "some of " + s
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
		parts[i] = k
		if len(srcs) > 0 {
			parts[i] += " (src " + strings.Join(srcs, "|") + ")"
		}
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
	Version       version.Version
	// DetectLocalMode is kube-proxy's detectLocalMode ("" is its default,
	// ClusterCIDR), with the settings of the BridgeInterface and
	// InterfaceNamePrefix modes.
	DetectLocalMode, BridgeInterface, InterfaceNamePrefix string
	// NodePortAddresses is kube-proxy's nodePortAddresses: CIDRs, or
	// "primary"; empty: every local address.
	NodePortAddresses []string
}

func newModel(t *topology.Topology, c proxy.Config) *model {
	k := c.KubeProxy
	m := &model{t: t, cluster: cluster{ClusterCIDR: c.ClusterCIDR(), MasqueradeAll: c.MasqueradeAll(), Version: c.VersionOr(),
		DetectLocalMode: string(k.DetectLocalMode), BridgeInterface: k.DetectLocal.BridgeInterface, InterfaceNamePrefix: k.DetectLocal.InterfaceNamePrefix,
		NodePortAddresses: k.NodePortAddresses},
		nodes: map[string]topology.Node{}}
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

// servesNodePorts tells whether kube-proxy's nodePortAddresses lets node d's
// address a take NodePort traffic: every local address when unset, else those
// in one of its ranges, and d's node IP for "primary".
func (m *model) servesNodePorts(a netip.Addr, d string) bool {
	if len(m.cluster.NodePortAddresses) == 0 {
		return true
	}
	for _, s := range m.cluster.NodePortAddresses {
		if s == "primary" {
			if a == m.nodes[d].IP {
				return true
			}
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

// isLocal is kube-proxy's local-traffic detector on node d (detectLocalMode):
// whether it takes a packet from src for a pod's, and whether kube-proxy has a
// detector at all; without one (ClusterCIDR mode and no clusterCIDR, or a mode
// whose setting is empty) it writes no rule that tells pods' traffic apart, so
// nothing masquerades traffic to a ClusterIP and nothing short-circuits pods'
// traffic to external addresses (upstream's proxier tests without a detector).
// The interface a packet enters d by: cni0 (the lab's pod bridge) from d's own
// pods, none for d's own packets (they are locally generated), eth0 otherwise.
func (m *model) isLocal(src Source, d string) (local, detects bool) {
	iif := "eth0"
	switch {
	case src.Kind == member.KindPod && src.Node == d:
		iif = "cni0"
	case src.Kind == member.KindNode && src.Node == d:
		iif = ""
	}
	c := m.cluster
	switch c.DetectLocalMode {
	case "NodeCIDR":
		p := m.nodes[d].PodCIDR
		return p.Contains(src.IP), p.IsValid()
	case "BridgeInterface":
		return iif != "" && iif == c.BridgeInterface, c.BridgeInterface != ""
	case "InterfaceNamePrefix":
		return iif != "" && strings.HasPrefix(iif, c.InterfaceNamePrefix), c.InterfaceNamePrefix != ""
	}
	return c.ClusterCIDR.Contains(src.IP), c.ClusterCIDR.IsValid()
}

// masqAddr is the source MASQUERADE gives a packet leaving node d for endpoint e:
// the address of the interface it leaves by (cni0 for a local pod, eth0 otherwise).
func (m *model) masqAddr(d string, e proxy.Endpoint) netip.Addr {
	if m.nodeOf(e) == d {
		return m.nodes[d].Gateway()
	}
	return m.nodes[d].IP
}

// flowAt is a flow once the frame has settled where it is translated.
type flowAt struct {
	src Source
	sp  *proxy.ServicePort // as the mode's proxier sees it
	tgt Target
	// d is the node that translates the flow.
	d string
	c proxy.Categorized // sp's endpoints for d
}

// choice is what the translating node does with a flow.
type choice struct {
	// none, when set, is the outcome of a flow that no endpoint answers
	// (refused or dropped); eps and masq are then unused.
	none traffic.Outcome
	eps  []proxy.Endpoint
	masq bool
	why  string
}

// expect is what a mode with semantics s does with a flow. The frame is common to
// every mode: a client outside the cluster cannot reach a ClusterIP; the flow is
// translated by the node a NodePort is addressed to (no other node's rules take a
// packet addressed to another node's address), else by the node it leaves from (a
// pod's, or the node itself); the semantics choose the endpoints there; then each
// endpoint answers with the masquerade address when the flow is masqueraded, with
// the client's own address when its replies come back through the translating
// node, and not at all otherwise.
func (m *model) expect(s semantics, src Source, port proxy.ServicePort, tgt Target) Expectation {
	if src.Kind == member.KindClient && tgt.isClusterIP() {
		return Expectation{Outcome: traffic.Unreachable, Why: "ClusterIPs are not routed outside the cluster"}
	}
	if tgt.External != "" {
		return m.expectExternal(s, src, port, tgt)
	}
	d := src.Node
	if tgt.Node != "" {
		d = tgt.Node
		if !m.servesNodePorts(tgt.Addr.Addr(), d) {
			return Expectation{Outcome: traffic.Refused, Why: "nodePortAddresses leaves " + tgt.Addr.Addr().String() + " out: no rule takes its NodePorts and nothing listens there"}
		}
	}
	exp, _ := m.expectAt(s, src, port, tgt, d)
	return exp
}

// expectAt is what happens to a flow translated by node d, and the endpoints the
// rules there pick among (nil when none answers).
func (m *model) expectAt(s semantics, src Source, port proxy.ServicePort, tgt Target, d string) (Expectation, []proxy.Endpoint) {
	sp := s.view(port, m.cluster.Version)
	ch := s.choose(m, flowAt{src: src, sp: &sp, tgt: tgt, d: d, c: proxy.Categorize(&sp, d)})
	if ch.none != "" {
		return Expectation{Outcome: ch.none, Why: ch.why}, nil
	}
	exp := Expectation{Outcome: traffic.Answered, Backends: map[string][]netip.Addr{}, Why: ch.why, Sticky: sp.AffinitySeconds > 0}
	seen, localOnly := s.replyAddr(src, tgt)
	for _, e := range ch.eps {
		if e.IP == m.nodes[d].IP {
			// A host-network endpoint of the translating node (an API
			// server on its control-plane node): the packet is delivered
			// locally, and POSTROUTING, where MASQUERADE would rewrite its
			// source, is not on its path.
			exp.Backends[e.String()] = []netip.Addr{seen}
			continue
		}
		self := e.IP == src.IP
		if ch.masq || self && s.hairpinMasqueraded(m.nodeOf(e) == d) {
			exp.Backends[e.String()] = []netip.Addr{m.masqAddr(d, e)}
			continue
		}
		if self || !m.returnsThrough(d, src, e) || localOnly && m.nodeOf(e) != d {
			exp.MayTimeout = true
			continue
		}
		exp.Backends[e.String()] = []netip.Addr{seen}
	}
	if exp.MayTimeout {
		exp.Why += "; " + s.lost(d)
	}
	if len(exp.Backends) == 0 {
		return Expectation{Outcome: traffic.Timeout, Why: exp.Why}, nil
	}
	return exp, ch.eps
}

// returnsThrough tells whether replies from endpoint e to src's own address pass
// through node d, where the request was translated and where its translation must
// be undone. Replies leave e through its node (its default gateway, or
// br_netfilter on the bridge), then reach a pod through the pod's node, a node
// directly (d itself, when the node is the client), and a client directly.
func (m *model) returnsThrough(d string, src Source, e proxy.Endpoint) bool {
	if m.nodeOf(e) == d {
		return true
	}
	return (src.Kind == member.KindPod || src.Kind == member.KindNode) && src.Node == d
}
