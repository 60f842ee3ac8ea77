package iptables

import (
	"strconv"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// generateXLB writes the layout of kube-proxy before 1.24, following syncProxyRules
// of kube-proxy 1.18: one KUBE-SVC- chain per port with every ready endpoint, the
// ClusterIP's masquerade rule in KUBE-SERVICES, NodePorts marked for masquerade in
// KUBE-NODEPORTS, and for externalTrafficPolicy Local a KUBE-XLB- chain over the
// local endpoints that jumps to the kubelet's KUBE-MARK-DROP when there are none.
// These releases knew neither internalTrafficPolicy nor terminating endpoints:
// InternalLocal is ignored and only ready endpoints are used.
func generateXLB(c Config, ports []proxy.ServicePort) (*Ruleset, error) {
	v := c.Version
	b := newBuilder()
	large := totalEndpoints(ports) > largeClusterEndpoints

	for _, ch := range []string{xtables.ChainServices, xtables.ChainExternalServices, xtables.ChainForward} {
		b.declare("filter", ch, "")
	}
	for _, ch := range []string{xtables.ChainServices, xtables.ChainNodePorts, xtables.ChainPostrouting, xtables.ChainMarkMasq} {
		b.declare("nat", ch, "")
	}
	writeMasqueradeChainsXLB(b, v)

	for i := range ports {
		writePortXLB(b, c, &ports[i], large)
	}

	b.add("nat", xtables.ChainServices, "-m", "comment", "--comment", "kubernetes service nodeports; NOTE: this must be the last rule in this chain",
		"-m", "addrtype", "--dst-type", "LOCAL", "-j", xtables.ChainNodePorts)

	b.add("filter", xtables.ChainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	b.add("filter", xtables.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding rules",
		"-m", "mark", "--mark", masqueradeMark+"/"+masqueradeMark, "-j", "ACCEPT")
	b.add("filter", xtables.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding conntrack pod source rule",
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	b.add("filter", xtables.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding conntrack pod destination rule",
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

	return b.ruleset(v, setupXLB(v), large)
}

// writeMasqueradeChainsXLB is writeMasqueradeChains as releases before 1.16 wrote
// it: their iptables wrapper did not know --random-fully yet.
func writeMasqueradeChainsXLB(b *builder, v version.Version) {
	if v.AtLeast(1, 16) {
		writeMasqueradeChains(b)
		return
	}
	b.add("nat", xtables.ChainPostrouting, "-m", "mark", "!", "--mark", masqueradeMark+"/"+masqueradeMark, "-j", "RETURN")
	b.add("nat", xtables.ChainPostrouting, "-j", "MARK", "--xor-mark", masqueradeMark)
	b.add("nat", xtables.ChainPostrouting, "-m", "comment", "--comment", "kubernetes service traffic requiring SNAT", "-j", "MASQUERADE")
	b.add("nat", xtables.ChainMarkMasq, "-j", "MARK", "--or-mark", masqueradeMark)
}

func writePortXLB(b *builder, c Config, sp *proxy.ServicePort, large bool) {
	v := c.Version
	n := namesOf(sp, v)
	svc := sp.Name.NamespacedName()
	proto := n.protocol
	port := strconv.Itoa(sp.Port)
	local := externalPolicyLocal(sp)
	// The comment of the per-endpoint rules: always there in 1.11; 1.12 added the
	// large cluster mode that leaves it out, and a bug (the helper appending it
	// returned a slice nobody kept) lost it in every rule up to 1.17.
	commented := !v.AtLeast(1, 12) || (v.AtLeast(1, 18) && !large)
	comment := func(text string) []string {
		if !commented {
			return nil
		}
		return []string{"-m", "comment", "--comment", text}
	}

	ready := sp.Endpoints // Generate kept the ready ones only
	var localReady []proxy.Endpoint
	for _, e := range ready {
		if e.NodeName == c.Node.Name {
			localReady = append(localReady, e)
		}
	}
	hasEndpoints := len(ready) > 0

	if hasEndpoints {
		b.declare("nat", n.svc, svc)
	}
	if local {
		b.declare("nat", n.xlb, svc)
	}

	clusterIP := sp.ClusterIP.String() + "/32"
	if hasEndpoints {
		match := []string{"-m", "comment", "--comment", n.portName + " cluster IP",
			"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port}
		if c.MasqueradeAll {
			b.add("nat", xtables.ChainServices, words(match, []string{"-j", xtables.ChainMarkMasq})...)
		} else if c.Local.Implemented() {
			b.add("nat", xtables.ChainServices, words(match, c.Local.IfNotLocal(), []string{"-j", xtables.ChainMarkMasq})...)
		}
		b.add("nat", xtables.ChainServices, words(match, []string{"-j", n.svc})...)
	} else {
		b.add("filter", xtables.ChainServices, "-m", "comment", "--comment", n.portName+" has no endpoints",
			"-m", proto, "-p", proto, "-d", clusterIP, "--dport", port, "-j", "REJECT")
	}

	if sp.NodePort != 0 {
		nodePort := strconv.Itoa(sp.NodePort)
		if hasEndpoints {
			match := []string{"-m", "comment", "--comment", n.portName, "-m", proto, "-p", proto, "--dport", nodePort}
			if !local {
				b.add("nat", xtables.ChainNodePorts, words(match, []string{"-j", xtables.ChainMarkMasq})...)
				b.add("nat", xtables.ChainNodePorts, words(match, []string{"-j", n.svc})...)
			} else {
				// A packet from 127.0.0.1 DNATed to a pod would come back to a
				// martian source: masquerade localhost clients only.
				b.add("nat", xtables.ChainNodePorts, words(match, []string{"-s", "127.0.0.0/8", "-j", xtables.ChainMarkMasq})...)
				b.add("nat", xtables.ChainNodePorts, words(match, []string{"-j", n.xlb})...)
			}
		} else {
			b.add("filter", xtables.ChainExternalServices, "-m", "comment", "--comment", n.portName+" has no endpoints",
				"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", nodePort, "-j", "REJECT")
		}
	}

	if !hasEndpoints {
		return
	}

	if sp.AffinitySeconds > 0 {
		for _, e := range ready {
			b.add("nat", n.svc, words(comment(n.portName), []string{"-m", "recent", "--name", n.sep(e),
				"--rcheck", "--seconds", strconv.Itoa(sp.AffinitySeconds), "--reap", "-j", n.sep(e)})...)
		}
	}
	for i, e := range ready {
		sep := n.sep(e)
		b.declare("nat", sep, svc)
		var choice []string
		if i < len(ready)-1 {
			choice = []string{"-m", "statistic", "--mode", "random", "--probability", probability(v, len(ready)-i)}
		}
		b.add("nat", n.svc, words(comment(n.portName), choice, []string{"-j", sep})...)
		b.add("nat", sep, words(comment(n.portName), []string{"-s", e.IP.String() + "/32", "-j", xtables.ChainMarkMasq})...)
		var affinity []string
		if sp.AffinitySeconds > 0 {
			affinity = []string{"-m", "recent", "--name", sep, "--set"}
		}
		b.add("nat", sep, words(comment(n.portName), affinity, []string{"-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", e.String()})...)
	}

	if !local {
		return
	}
	if c.Local.Implemented() {
		b.add("nat", n.xlb, words([]string{"-m", "comment", "--comment", "Redirect pods trying to reach external loadbalancer VIP to clusterIP"},
			c.Local.IfLocal(), []string{"-j", n.svc})...)
	}
	b.add("nat", n.xlb, "-m", "comment", "--comment", "masquerade LOCAL traffic for "+n.portName+" LB IP",
		"-m", "addrtype", "--src-type", "LOCAL", "-j", xtables.ChainMarkMasq)
	b.add("nat", n.xlb, "-m", "comment", "--comment", "route LOCAL traffic for "+n.portName+" LB IP to service chain",
		"-m", "addrtype", "--src-type", "LOCAL", "-j", n.svc)
	if len(localReady) == 0 {
		b.add("nat", n.xlb, "-m", "comment", "--comment", n.portName+" has no local endpoints", "-j", xtables.ChainMarkDrop)
		return
	}
	if sp.AffinitySeconds > 0 {
		for _, e := range localReady {
			b.add("nat", n.xlb, "-m", "comment", "--comment", n.portName, "-m", "recent", "--name", n.sep(e),
				"--rcheck", "--seconds", strconv.Itoa(sp.AffinitySeconds), "--reap", "-j", n.sep(e))
		}
	}
	for i, e := range localReady {
		var choice []string
		if i < len(localReady)-1 {
			choice = []string{"-m", "statistic", "--mode", "random", "--probability", probability(v, len(localReady)-i)}
		}
		b.add("nat", n.xlb, words([]string{"-m", "comment", "--comment", "Balancing rule " + strconv.Itoa(i) + " for " + n.portName}, choice, []string{"-j", n.sep(e)})...)
	}
}
