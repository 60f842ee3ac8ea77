package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// Marks kube-proxy and the kubelet use: masquerade (shared with the IPVS mode)
// and drop, bit 15, printed the same way.
const (
	masqueradeMark = xtables.MasqueradeMark
	dropMark       = "0x00008000"
)

// Names of kube-proxy's nfacct counters (kube-proxy 1.31 and later count INVALID
// drops and accepted localhost NodePort packets with them).
const (
	nfacctInvalidDropped    = "ct_state_invalid_dropped_pkts"
	nfacctLocalhostNodePort = "localhost_nps_accepted_pkts"
)

// largeClusterEndpoints is kube-proxy's threshold: above this many endpoints in all,
// per-endpoint comments are left out.
const largeClusterEndpoints = 1000

// Config is what shapes one node's rules besides the Services.
type Config struct {
	Version version.Version
	// Family is the IP family of the proxier (IPv4 when empty): kube-proxy's
	// IPv6 proxier writes ip6tables rules (see generateCurrent for where they
	// differ).
	Family corev1.IPFamily
	// Node is the node as the family sees it: its address of that family.
	Node proxy.Node
	// Local is kube-proxy's local-traffic detector (detectLocalMode): how its
	// rules tell a pod's traffic from the rest. Without one kube-proxy cannot
	// tell, and writes no rule that depends on it.
	Local         proxy.LocalDetector
	MasqueradeAll bool
	// LocalhostNodePorts is iptables.localhostNodePorts: NodePorts answer on
	// 127.0.0.1, which takes route_localnet=1 and the rule that guards it.
	// Never for IPv6 (ConfigFor).
	LocalhostNodePorts bool
	// NFAcct tells that kube-proxy's nfacct counters exist in the node; kube-proxy
	// 1.31 and later then add "-m nfacct" matches to two rules.
	NFAcct bool
	// ConntrackTCPLiberal is nf_conntrack_tcp_be_liberal != 0 in the node; kube-proxy
	// 1.29 and later then drop no INVALID packets in KUBE-FORWARD.
	ConntrackTCPLiberal bool
}

// ConfigFor is the configuration of t's node as kube-proxy sees it on a kernel
// with nfacct (such as the one svclab is built on) and default conntrack settings.
// The proxier reads the node's kernel instead.
//
// The IPv6 proxier never has localhost NodePorts: kube-proxy's NewProxier
// (pkg/proxy/iptables/proxier.go) turns them off unless the family's
// nodePortAddresses hold an IPv4 loopback address, which the IPv6 family's
// ("::/0" when unset, proxyutil.NewNodePortAddresses) never do; so the IPv6
// proxier neither sets route_localnet nor writes the rules that go with it.
func ConfigFor(t proxy.Target) Config {
	ipv6 := t.Config.IPFamily() == corev1.IPv6Protocol
	return Config{
		Version:            t.Config.VersionOr(),
		Family:             t.Config.Family,
		Node:               t.Node,
		Local:              t.Config.LocalDetector(t.Node),
		MasqueradeAll:      t.Config.MasqueradeAll(),
		LocalhostNodePorts: t.Config.LocalhostNodePorts() && !ipv6,
		NFAcct:             true,
	}
}

// ipv6 tells whether c is the IPv6 proxier's.
func (c Config) ipv6() bool { return c.Family == corev1.IPv6Protocol }

// familyName is c's family as messages print it.
func (c Config) familyName() corev1.IPFamily {
	if c.Family == "" {
		return corev1.IPv4Protocol
	}
	return c.Family
}

// Generate computes what kube-proxy of c.Version writes for ports on c.Node: the
// chains of the filter and nat tables and the single-call steps around them. The
// doc comment of the package says which releases are reproduced and how.
func Generate(c Config, ports []proxy.ServicePort) (*Ruleset, error) {
	if !c.Version.AtLeast(1, 11) || c.Version.Major != 1 {
		return nil, fmt.Errorf("kube-proxy %s: svclab reproduces the iptables mode of 1.11 and later", c.Version)
	}
	if c.ipv6() && !c.Version.AtLeast(1, 27) {
		return nil, fmt.Errorf("kube-proxy %s: svclab reproduces the iptables mode's IPv6 rules for 1.27 and later", c.Version)
	}
	for i := range ports {
		sp := &ports[i]
		if err := checkPortFamily(c, sp); err != nil {
			return nil, err
		}
		switch sp.Protocol {
		case "TCP", "UDP", "SCTP":
		default:
			return nil, fmt.Errorf("service port %s: protocol %q", sp.Name.String(c.Version), sp.Protocol)
		}
	}
	sorted := sortedPorts(ports)
	if !c.Version.AtLeast(1, 24) {
		for i := range sorted {
			if len(sorted[i].ExternalIPs) > 0 || len(sorted[i].LoadBalancerIPs) > 0 {
				return nil, fmt.Errorf("service port %s: svclab reproduces the rules of external IPs and load balancer IPs for kube-proxy 1.24 and later, not %s", sorted[i].Name.String(c.Version), c.Version)
			}
		}
	}
	if c.Version.AtLeast(1, 24) {
		return generateCurrent(c, sorted)
	}
	// Releases before 1.24 see ready endpoints only and no internal policy.
	for i := range sorted {
		sorted[i] = sorted[i].AsSeenBy(c.Version)
	}
	return generateXLB(c, sorted)
}

// checkPortFamily refuses a port with an address of the other family: one
// proxier writes one family's rules (iptables-restore would refuse the other's).
// proxy.FromObjectsFor picks a family's ports; hand-made ones may mix them.
func checkPortFamily(c Config, sp *proxy.ServicePort) error {
	f := c.familyName()
	bad := func(what string, a netip.Addr) error {
		return fmt.Errorf("service port %s: %s %s: not %s, the family of this proxier", sp.Name.String(c.Version), what, a, f)
	}
	if proxy.FamilyOf(sp.ClusterIP) != f {
		if f == corev1.IPv4Protocol {
			// The message svclab gave before families, kept for IPv4.
			return fmt.Errorf("service port %s: cluster IP %s: svclab's iptables mode is IPv4 only", sp.Name.String(c.Version), sp.ClusterIP)
		}
		return bad("cluster IP", sp.ClusterIP)
	}
	for _, a := range append(slices.Clone(sp.ExternalIPs), sp.LoadBalancerIPs...) {
		if proxy.FamilyOf(a) != f {
			return bad("external address", a)
		}
	}
	for _, r := range sp.SourceRanges {
		if proxy.FamilyOf(r.Addr()) != f {
			return bad("source range", r.Addr())
		}
	}
	for _, e := range sp.Endpoints {
		if proxy.FamilyOf(e.IP) != f {
			return bad("endpoint", e.IP)
		}
	}
	return nil
}

// sortedPorts copies ports into the order svclab writes them: by "namespace/name"
// (the order kube-proxy's tests sort KUBE-SERVICES by), then port name and protocol.
// kube-proxy itself walks a map, so its order changes from sync to sync. The
// endpoints of each port are sorted by "ip:port" as text, as kube-proxy's
// endpoint cache sorts them: that order decides which endpoint gets which
// probability.
func sortedPorts(ports []proxy.ServicePort) []proxy.ServicePort {
	out := make([]proxy.ServicePort, len(ports))
	copy(out, ports)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Name, out[j].Name
		if an, bn := a.NamespacedName(), b.NamespacedName(); an != bn {
			return an < bn
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return out[i].Protocol < out[j].Protocol
	})
	for i := range out {
		eps := make([]proxy.Endpoint, len(out[i].Endpoints))
		copy(eps, out[i].Endpoints)
		sort.SliceStable(eps, func(a, b int) bool { return eps[a].String() < eps[b].String() })
		out[i].Endpoints = eps
	}
	return out
}

// probability is 1/n printed as the release prints it: five decimals up to 1.16,
// ten since.
func probability(v version.Version, n int) string {
	if v.AtLeast(1, 17) {
		return fmt.Sprintf("%0.10f", 1.0/float64(n))
	}
	return fmt.Sprintf("%0.5f", 1.0/float64(n))
}

// totalEndpoints counts endpoints as kube-proxy does for its large cluster mode.
func totalEndpoints(ports []proxy.ServicePort) int {
	n := 0
	for i := range ports {
		n += len(ports[i].Endpoints)
	}
	return n
}
