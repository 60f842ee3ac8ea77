package iptables

import (
	"net/netip"
	"strconv"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// generateCurrent writes the layout kube-proxy has used since 1.24: KUBE-SVC- (policy
// Cluster), KUBE-SVL- (policy Local), KUBE-EXT- (external traffic: NodePorts,
// external IPs, load balancer IPs) and KUBE-FW- (load balancer source ranges) per
// port, KUBE-SEP- per endpoint; the masquerade rule of a ClusterIP sits in its
// policy chain. It follows syncProxyRules of kube-proxy 1.37.
//
// The IPv6 proxier (c.Family IPv6) writes the same chains and rules with the
// family's addresses, and differs in what localhost NodePorts need, which
// IPv6 cannot have (no route_localnet; ConfigFor turns them off): no
// KUBE-FIREWALL localnet rule (kube-proxy writes it only "if !isIPv6 &&
// localhostNodePorts"), no nfacct-counted 127.0.0.0/8 NodePort rule (only for
// ipFamily IPv4), and "! -d ::1/128" on the last KUBE-SERVICES rule. Rejects
// are the same "-j REJECT": ip6tables' REJECT answers with its default,
// icmp6-port-unreachable, as iptables' answers icmp-port-unreachable (which is
// what the two save programs print). Addresses are printed as Go's net.IP
// prints them (RFC 5952, as netip does): "-d fd00:10:96::a", "-s
// fd00:10:244:1::a" without "/128", DNAT "--to-destination
// [fd00:10:244:1::a]:8080" (net.JoinHostPort), which is also the text hashed
// into KUBE-SEP- names.
func generateCurrent(c Config, ports []proxy.ServicePort) (*Ruleset, error) {
	v := c.Version
	b := newBuilder()
	large := totalEndpoints(ports) > largeClusterEndpoints
	nfacct := c.NFAcct && v.AtLeast(1, 31)

	for _, ch := range []string{xtables.ChainServices, xtables.ChainExternalServices, xtables.ChainForward, xtables.ChainNodePorts, xtables.ChainProxyFirewall} {
		b.declare("filter", ch, "")
	}
	for _, ch := range []string{xtables.ChainServices, xtables.ChainNodePorts, xtables.ChainPostrouting, xtables.ChainMarkMasq} {
		b.declare("nat", ch, "")
	}
	writeMasqueradeChains(b)
	if v.AtLeast(1, 27) && c.LocalhostNodePorts {
		// NodePorts answer on 127.0.0.1 (iptables.localhostNodePorts, on by default,
		// with nodePortAddresses unset), which takes route_localnet=1. That lets
		// packets from elsewhere addressed to 127.0.0.0/8 in; this rule, the
		// kubelet's before 1.27, drops them unless they belong to a DNATed flow.
		// Without localhost NodePorts the chain stays, empty (its jumps are
		// ensured either way).
		b.declare("filter", xtables.ChainFirewall, "")
		b.add("filter", xtables.ChainFirewall, "-m", "comment", "--comment", "block incoming localnet connections",
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8",
			"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
	}

	for i := range ports {
		writePortCurrent(b, c, &ports[i], large, nfacct)
	}

	// Last: everything addressed to one of the node's own addresses goes on to
	// the NodePorts; 127.0.0.0/8 only with localhost NodePorts, as without
	// route_localnet the kernel would not route it after the DNAT. IPv6 has no
	// route_localnet, so its proxier always leaves out ::1 (syncProxyRules of
	// 1.37: "For IPv6 they never work").
	dest := []string{"-m", "addrtype", "--dst-type", "LOCAL"}
	switch {
	case c.ipv6():
		dest = append(dest, "!", "-d", "::1/128")
	case !c.LocalhostNodePorts:
		dest = append(dest, "!", "-d", "127.0.0.0/8")
	}
	b.add("nat", xtables.ChainServices, words([]string{"-m", "comment", "--comment", "kubernetes service nodeports; NOTE: this must be the last rule in this chain"},
		dest, []string{"-j", xtables.ChainNodePorts})...)

	if !(v.AtLeast(1, 29) && c.ConntrackTCPLiberal) {
		// Packets conntrack calls INVALID (an out-of-window TCP segment, say) would
		// skip the DNAT and reach the wrong host, which answers with a RST that
		// kills the real connection (kubernetes#74839).
		rule := []string{"-m", "conntrack", "--ctstate", "INVALID"}
		if nfacct {
			rule = append(rule, "-m", "nfacct", "--nfacct-name", nfacctInvalidDropped)
		}
		b.add("filter", xtables.ChainForward, append(rule, "-j", "DROP")...)
	}
	b.add("filter", xtables.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding rules",
		"-m", "mark", "--mark", masqueradeMark+"/"+masqueradeMark, "-j", "ACCEPT")
	b.add("filter", xtables.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding conntrack rule",
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

	return b.ruleset(v, setupCurrent(v), large)
}

// writeMasqueradeChains writes KUBE-POSTROUTING and KUBE-MARK-MASQ: a packet that
// some rule marked is masqueraded on its way out, once.
func writeMasqueradeChains(b *builder) {
	b.add("nat", xtables.ChainPostrouting, "-m", "mark", "!", "--mark", masqueradeMark+"/"+masqueradeMark, "-j", "RETURN")
	// Clear the mark so a packet that goes through the stack again (a bridge, a
	// tunnel) is not masqueraded twice.
	b.add("nat", xtables.ChainPostrouting, "-j", "MARK", "--xor-mark", masqueradeMark)
	b.add("nat", xtables.ChainPostrouting, "-m", "comment", "--comment", "kubernetes service traffic requiring SNAT",
		"-j", "MASQUERADE", "--random-fully")
	b.add("nat", xtables.ChainMarkMasq, "-j", "MARK", "--or-mark", masqueradeMark)
}

// externalPolicyLocal is kube-proxy's ExternalPolicyLocal: a Local policy only
// counts for a port reachable from outside.
func externalPolicyLocal(sp *proxy.ServicePort) bool {
	return sp.ExternalLocal && sp.ExternallyAccessible()
}

// writePortCurrent writes one Service port's rules: its frontends in the
// shared chains (KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL,
// KUBE-NODEPORTS), then its own chains, in kube-proxy's order.
func writePortCurrent(b *builder, c Config, sp *proxy.ServicePort, large, nfacct bool) {
	p := planPortCurrent(c, sp)
	p.writeClusterIP(b)
	p.writeExternalAddresses(b)
	p.writeNodePort(b, c, nfacct)
	p.writeHealthCheck(b)
	// From here on every chain belongs to the Service: a partial sync rewrites them
	// only when the Service or its endpoints changed.
	p.writeInternalMasquerade(b, c)
	p.writeExternalChain(b, c)
	p.writeFirewallChain(b, c)
	if p.usesClusterChain {
		b.declare("nat", p.n.svc, p.svc)
		writeToEndpoints(b, c.Version, sp, p.n, p.n.svc, p.cat.Cluster, large)
	}
	if p.usesLocalChain {
		b.declare("nat", p.n.svl, p.svc)
		writeToEndpoints(b, c.Version, sp, p.n, p.n.svl, p.cat.Local, large)
	}
	for _, e := range p.cat.All {
		writeEndpointChain(b, c.Version, sp, p.n, e, large)
	}
}

// portCurrent is what writePortCurrent works out about one Service port before
// it writes a rule: the port's chains, which of them it uses, and where its
// internal (ClusterIP) and external (external IP, load balancer IP, NodePort)
// traffic goes.
type portCurrent struct {
	sp          *proxy.ServicePort
	n           portNames
	svc         string // namespace/name: the Service the port's chains belong to
	proto, port string
	cat         proxy.Categorized

	usesClusterChain, usesLocalChain, usesExtChain, usesFWChain bool
	// Internal traffic goes to internalChain (KUBE-SVC- or KUBE-SVL-) when
	// hasInternal; else internalTarget (REJECT or DROP) refuses it, saying
	// internalComment. External traffic likewise.
	internalChain, internalTarget, internalComment string
	externalChain, externalTarget, externalComment string
	hasInternal, hasExternal                       bool
	// loadBalancerChain takes a load balancer IP's traffic: KUBE-FW- when the
	// port has source ranges, KUBE-EXT- otherwise.
	loadBalancerChain string
	// clusterIPMatch matches the port's ClusterIP traffic.
	clusterIPMatch []string
}

func planPortCurrent(c Config, sp *proxy.ServicePort) *portCurrent {
	n := namesOf(sp, c.Version)
	cat := proxy.Categorize(sp, c.Node.Name)
	p := &portCurrent{sp: sp, n: n, svc: sp.Name.NamespacedName(), proto: n.protocol, port: strconv.Itoa(sp.Port), cat: cat}

	p.usesClusterChain = len(cat.Cluster) > 0 && (!sp.InternalLocal || sp.ExternallyAccessible())
	p.usesLocalChain = len(cat.Local) > 0 && (sp.InternalLocal || externalPolicyLocal(sp))

	p.internalChain, p.hasInternal = n.svc, cat.HasAny
	if sp.InternalLocal {
		p.internalChain = n.svl
		if len(cat.Local) == 0 {
			p.hasInternal = false
		}
	}
	p.externalChain, p.hasExternal = n.svc, cat.HasAny
	if externalPolicyLocal(sp) {
		p.externalChain = n.svl
		if len(cat.Local) == 0 {
			p.hasExternal = false
		}
	}
	p.usesExtChain = cat.HasAny && sp.ExternallyAccessible()

	// Without endpoints anywhere the port's traffic is rejected, so clients hear
	// at once; with endpoints elsewhere but none here for a Local policy it is
	// dropped, as it must not leave the node.
	if !cat.HasAny {
		p.internalTarget, p.internalComment = "REJECT", n.portName+" has no endpoints"
		p.externalTarget, p.externalComment = p.internalTarget, p.internalComment
	} else {
		if !p.hasInternal {
			p.internalTarget, p.internalComment = "DROP", n.portName+" has no local endpoints"
		}
		if !p.hasExternal {
			p.externalTarget, p.externalComment = "DROP", n.portName+" has no local endpoints"
		}
	}

	p.clusterIPMatch = []string{"-m", "comment", "--comment", n.portName + " cluster IP",
		"-m", p.proto, "-p", p.proto, "-d", sp.ClusterIP.String(), "--dport", p.port}
	p.usesFWChain = cat.HasAny && sp.UsesFirewall()
	p.loadBalancerChain = n.ext
	if p.usesFWChain {
		p.loadBalancerChain = n.fw
	}
	return p
}

// writeClusterIP writes the ClusterIP's rule in KUBE-SERVICES: to the internal
// chain, or refusing.
func (p *portCurrent) writeClusterIP(b *builder) {
	if p.hasInternal {
		b.add("nat", xtables.ChainServices, words(p.clusterIPMatch, []string{"-j", p.internalChain})...)
	} else {
		b.add("filter", xtables.ChainServices, "-m", "comment", "--comment", p.internalComment,
			"-m", p.proto, "-p", p.proto, "-d", p.sp.ClusterIP.String(), "--dport", p.port, "-j", p.internalTarget)
	}
}

// writeExternalAddresses writes the rules of external IPs and load balancer
// IPs: they take external traffic, as NodePorts do; a load balancer IP with
// source ranges goes through its firewall chain first, whose sources that fall
// through are dropped in the filter table.
func (p *portCurrent) writeExternalAddresses(b *builder) {
	n := p.n
	addrMatch := func(a netip.Addr) []string {
		return []string{"-m", p.proto, "-p", p.proto, "-d", a.String(), "--dport", p.port}
	}
	for _, a := range p.sp.ExternalIPs {
		if p.cat.HasAny {
			b.add("nat", xtables.ChainServices, words([]string{"-m", "comment", "--comment", n.portName + " external IP"}, addrMatch(a), []string{"-j", n.ext})...)
		}
		if !p.hasExternal {
			b.add("filter", xtables.ChainExternalServices, words([]string{"-m", "comment", "--comment", p.externalComment}, addrMatch(a), []string{"-j", p.externalTarget})...)
		}
	}
	for _, a := range p.sp.LoadBalancerIPs {
		if p.cat.HasAny {
			b.add("nat", xtables.ChainServices, words([]string{"-m", "comment", "--comment", n.portName + " loadbalancer IP"}, addrMatch(a), []string{"-j", p.loadBalancerChain})...)
		}
		if p.usesFWChain {
			b.add("filter", xtables.ChainProxyFirewall, words([]string{"-m", "comment", "--comment", n.portName + " traffic not accepted by " + n.fw}, addrMatch(a), []string{"-j", "DROP"})...)
		}
	}
	if !p.hasExternal {
		for _, a := range p.sp.LoadBalancerIPs {
			b.add("filter", xtables.ChainExternalServices, words([]string{"-m", "comment", "--comment", p.externalComment}, addrMatch(a), []string{"-j", p.externalTarget})...)
		}
	}
}

// writeNodePort writes the NodePort's rules: in KUBE-NODEPORTS (with a counted
// one for 127.0.0.0/8 first, with nfacct and localhost NodePorts), or refusing.
func (p *portCurrent) writeNodePort(b *builder, c Config, nfacct bool) {
	if p.sp.NodePort == 0 {
		return
	}
	n, proto := p.n, p.proto
	nodePort := strconv.Itoa(p.sp.NodePort)
	if p.cat.HasAny {
		if nfacct && c.LocalhostNodePorts {
			b.add("nat", xtables.ChainNodePorts, "-m", "comment", "--comment", n.portName, "-m", proto, "-p", proto,
				"-d", "127.0.0.0/8", "--dport", nodePort,
				"-m", "nfacct", "--nfacct-name", nfacctLocalhostNodePort, "-j", n.ext)
		}
		b.add("nat", xtables.ChainNodePorts, "-m", "comment", "--comment", n.portName, "-m", proto, "-p", proto,
			"--dport", nodePort, "-j", n.ext)
	}
	if !p.hasExternal {
		b.add("filter", xtables.ChainExternalServices, "-m", "comment", "--comment", p.externalComment,
			"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", nodePort, "-j", p.externalTarget)
	}
}

// writeHealthCheck accepts the health check NodePort. It must be reachable
// whether or not this node has endpoints: answering 503 is its job.
func (p *portCurrent) writeHealthCheck(b *builder) {
	if p.sp.HealthCheckNodePort == 0 {
		return
	}
	b.add("filter", xtables.ChainNodePorts, "-m", "comment", "--comment", p.n.portName+" health check node port",
		"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(p.sp.HealthCheckNodePort), "-j", "ACCEPT")
}

// writeInternalMasquerade writes the internal chain's first rule: which
// ClusterIP traffic is masqueraded.
func (p *portCurrent) writeInternalMasquerade(b *builder, c Config) {
	if !p.hasInternal {
		return
	}
	if c.MasqueradeAll {
		b.add("nat", p.internalChain, words(p.clusterIPMatch, []string{"-j", xtables.ChainMarkMasq})...)
	} else if c.Local.Implemented() {
		// Traffic to a ClusterIP from outside the pod network (a node, a
		// router with a route to the service range) is masqueraded, since the
		// endpoint may be on another node and must answer through this one.
		b.add("nat", p.internalChain, words(p.clusterIPMatch, c.Local.IfNotLocal(), []string{"-j", xtables.ChainMarkMasq})...)
	}
}

// writeExternalChain writes KUBE-EXT-: masquerading as the external policy
// asks, then on to the external chain.
func (p *portCurrent) writeExternalChain(b *builder, c Config) {
	if !p.usesExtChain {
		return
	}
	n := p.n
	b.declare("nat", n.ext, p.svc)
	if !externalPolicyLocal(p.sp) {
		// Policy Cluster may send the packet to another node: masquerade, so
		// the reply comes back through this one.
		b.add("nat", n.ext, "-m", "comment", "--comment", "masquerade traffic for "+n.portName+" external destinations", "-j", xtables.ChainMarkMasq)
	} else {
		if c.Local.Implemented() {
			// A pod reaching a NodePort or LB address is treated as if it had
			// gone out to a load balancer and come back: no traffic policy.
			b.add("nat", n.ext, words([]string{"-m", "comment", "--comment", "pod traffic for " + n.portName + " external destinations"},
				c.Local.IfLocal(), []string{"-j", n.svc})...)
		}
		// The node itself talking to its own NodePort has a local source
		// address that must not reach another node unmasqueraded.
		b.add("nat", n.ext, "-m", "comment", "--comment", "masquerade LOCAL traffic for "+n.portName+" external destinations",
			"-m", "addrtype", "--src-type", "LOCAL", "-j", xtables.ChainMarkMasq)
		b.add("nat", n.ext, "-m", "comment", "--comment", "route LOCAL traffic for "+n.portName+" external destinations",
			"-m", "addrtype", "--src-type", "LOCAL", "-j", n.svc)
	}
	if p.hasExternal {
		b.add("nat", n.ext, "-j", p.externalChain)
	}
}

// writeFirewallChain writes KUBE-FW-: allowed sources go on to the external
// chain. A node in one of the ranges may also reach the load balancer IP from
// itself, with the IP as its source when it holds it as a local address.
func (p *portCurrent) writeFirewallChain(b *builder, c Config) {
	if !p.usesFWChain {
		return
	}
	n := p.n
	b.declare("nat", n.fw, p.svc)
	comment := []string{"-m", "comment", "--comment", n.portName + " loadbalancer IP"}
	for _, r := range p.sp.SourceRanges {
		b.add("nat", n.fw, words(comment, []string{"-s", r.String(), "-j", n.ext})...)
	}
	if p.sp.RangesHold(c.Node.IP) {
		for _, a := range p.sp.LoadBalancerIPs {
			b.add("nat", n.fw, words(comment, []string{"-s", a.String(), "-j", n.ext})...)
		}
	}
	b.add("nat", n.fw, "-m", "comment", "--comment", "other traffic to "+n.portName+" will be dropped by KUBE-PROXY-FIREWALL")
}

// writeToEndpoints writes a policy chain (KUBE-SVC- or KUBE-SVL-): with ClientIP
// affinity, a jump to the endpoint the client used last, if within the timeout;
// then the random choice: rule i of n matches with probability 1/(n-i), so every
// endpoint gets 1/n, and the last rule takes what is left.
func writeToEndpoints(b *builder, v version.Version, sp *proxy.ServicePort, n portNames, chain string, eps []proxy.Endpoint, large bool) {
	comment := func(e proxy.Endpoint) []string {
		if large {
			return nil
		}
		return []string{"-m", "comment", "--comment", n.portName + " -> " + e.String()}
	}
	if sp.AffinitySeconds > 0 {
		for _, e := range eps {
			b.add("nat", chain, words(comment(e), []string{"-m", "recent", "--name", n.sep(e),
				"--rcheck", "--seconds", strconv.Itoa(sp.AffinitySeconds), "--reap", "-j", n.sep(e)})...)
		}
	}
	for i, e := range eps {
		var choice []string
		if i < len(eps)-1 {
			choice = []string{"-m", "statistic", "--mode", "random", "--probability", probability(v, len(eps)-i)}
		}
		b.add("nat", chain, words(comment(e), choice, []string{"-j", n.sep(e)})...)
	}
}

// writeEndpointChain writes a KUBE-SEP- chain: traffic from the endpoint to itself
// (hairpin) is masqueraded, or the reply would not come back through the DNAT;
// the affinity list notes the client; then the DNAT.
func writeEndpointChain(b *builder, v version.Version, sp *proxy.ServicePort, n portNames, e proxy.Endpoint, large bool) {
	sep := n.sep(e)
	b.declare("nat", sep, sp.Name.NamespacedName())
	var comment []string
	if !large {
		comment = []string{"-m", "comment", "--comment", n.portName}
	}
	b.add("nat", sep, words(comment, []string{"-s", e.IP.String(), "-j", xtables.ChainMarkMasq})...)
	var affinity []string
	if sp.AffinitySeconds > 0 {
		affinity = []string{"-m", "recent", "--name", sep, "--set"}
	}
	b.add("nat", sep, words(comment, affinity, []string{"-m", n.protocol, "-p", n.protocol, "-j", "DNAT", "--to-destination", e.String()})...)
}
