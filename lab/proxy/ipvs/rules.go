package ipvs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/proxy/xtables"
)

// chain is one chain kube-proxy's IPVS mode owns.
type chain struct{ table, name string }

// chains are created (iptables -N) on every sync and declared, so flushed and
// rewritten, in every iptables-restore, in kube-proxy's order (iptablesChains).
var chains = []chain{
	{"nat", xtables.ChainServices},
	{"nat", xtables.ChainPostrouting},
	{"nat", "KUBE-NODE-PORT"},
	{"nat", "KUBE-LOAD-BALANCER"},
	{"nat", xtables.ChainMarkMasq},
	{"filter", xtables.ChainForward},
	{"filter", "KUBE-NODE-PORT"},
	{"filter", xtables.ChainProxyFirewall},
	{"filter", "KUBE-SOURCE-RANGES-FIREWALL"},
	{"filter", "KUBE-IPVS-FILTER"},
	{"filter", "KUBE-IPVS-OUT-FILTER"},
}

// jump is a rule kube-proxy keeps first in a built-in chain (iptablesJumpChain):
// `-m comment --comment COMMENT -j TO`, inserted unless `iptables -C` finds it.
type jump struct{ table, from, to, comment string }

var jumps = []jump{
	{"nat", "OUTPUT", xtables.ChainServices, "kubernetes service portals"},
	{"nat", "PREROUTING", xtables.ChainServices, "kubernetes service portals"},
	{"nat", "POSTROUTING", xtables.ChainPostrouting, "kubernetes postrouting rules"},
	{"filter", "FORWARD", xtables.ChainForward, "kubernetes forwarding rules"},
	{"filter", "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules"},
	{"filter", "INPUT", xtables.ChainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "FORWARD", xtables.ChainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter"},
	{"filter", "OUTPUT", "KUBE-IPVS-OUT-FILTER", "kubernetes ipvs access filter"},
}

func (j jump) rule() []string {
	return []string{"-m", "comment", "--comment", j.comment, "-j", j.to}
}

// setJump is a rule matching one ipset, written only while the set has entries
// (ipsetWithIptablesChain). The local NodePort sets come before the others of
// their protocol: their RETURN keeps Local NodePorts from being marked.
type setJump struct {
	set, table, from, to, match, protocol string
}

var setJumps = []setJump{
	{setLoopBack, "nat", xtables.ChainPostrouting, "MASQUERADE", "dst,dst,src", ""},
	{setLoadBalancer, "nat", xtables.ChainServices, "KUBE-LOAD-BALANCER", "dst,dst", ""},
	{setLoadBalancerLocal, "nat", "KUBE-LOAD-BALANCER", "RETURN", "dst,dst", ""},
	{setNodePortLocalTCP, "nat", "KUBE-NODE-PORT", "RETURN", "dst", "tcp"},
	{setNodePortTCP, "nat", "KUBE-NODE-PORT", xtables.ChainMarkMasq, "dst", "tcp"},
	{setNodePortLocalUDP, "nat", "KUBE-NODE-PORT", "RETURN", "dst", "udp"},
	{setNodePortUDP, "nat", "KUBE-NODE-PORT", xtables.ChainMarkMasq, "dst", "udp"},
	{setNodePortLocalSCTP, "nat", "KUBE-NODE-PORT", "RETURN", "dst,dst", "sctp"},
	{setNodePortSCTP, "nat", "KUBE-NODE-PORT", xtables.ChainMarkMasq, "dst,dst", "sctp"},
	{setLoadBalancerFW, "filter", xtables.ChainProxyFirewall, "KUBE-SOURCE-RANGES-FIREWALL", "dst,dst", ""},
	{setLoadBalancerSrcCIDR, "filter", "KUBE-SOURCE-RANGES-FIREWALL", "RETURN", "dst,dst,src", ""},
	{setLoadBalancerSrcIP, "filter", "KUBE-SOURCE-RANGES-FIREWALL", "RETURN", "dst,dst,src", ""},
}

// Restore is the iptables-restore input kube-proxy 1.37's IPVS mode writes on every
// sync (with --noflush: only its own chains are flushed and rewritten) for a node
// whose ipsets hold p's sets. Its rules depend on which sets have entries, not on
// how many: a thousand Services write the same few rules as one, but for a rule
// per load balancer IP the node may not reach (p.NoNodeAccess).
func Restore(c Config, p *Plan) string {
	sets := p.Sets
	var nat, filter []string
	w := func(dst *[]string, args ...string) { *dst = append(*dst, joinRule(args)) }
	comment := func(set string) string { return quote(ipsetByName(set).comment) }
	nonEmpty := func(set string) bool { return len(sets[set]) > 0 }

	w(&nat, "-A", xtables.ChainServices, "-s", "127.0.0.0/8", "-j", "RETURN")
	for _, sj := range setJumps {
		if !nonEmpty(sj.set) {
			continue
		}
		args := []string{"-A", sj.from}
		if sj.protocol != "" {
			args = append(args, "-p", sj.protocol)
		}
		args = append(args, "-m", "comment", "--comment", comment(sj.set), "-m", "set", "--match-set", sj.set, sj.match, "-j", sj.to)
		if sj.table == "filter" {
			w(&filter, args...)
		} else {
			w(&nat, args...)
		}
	}
	if nonEmpty(setClusterIP) {
		args := []string{"-A", xtables.ChainServices, "-m", "comment", "--comment", comment(setClusterIP), "-m", "set", "--match-set", setClusterIP}
		switch {
		case c.MasqueradeAll:
			args = append(args, "dst,dst", "-j", xtables.ChainMarkMasq)
		case c.ClusterCIDR.IsValid():
			// Traffic to a ClusterIP from outside the cluster CIDR (a node's own
			// processes, whose source is the VIP itself; routed outside clients)
			// is masqueraded.
			args = append(args, "dst,dst", "!", "-s", c.ClusterCIDR.String(), "-j", xtables.ChainMarkMasq)
		default:
			// Without a way to tell pods apart: masquerade what a node sends from
			// a VIP to a VIP.
			args = append(args, "src,dst", "-j", xtables.ChainMarkMasq)
		}
		w(&nat, args...)
	}
	// External IPs: traffic from off the machine (not bridged from a pod, not
	// from the node) and traffic to an external IP the node holds stop here;
	// with policy Cluster all of it is marked first.
	externalIPRules := func(args []string) {
		w(&nat, append(slices.Clone(args), "-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		w(&nat, append(slices.Clone(args), "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
	if nonEmpty(setExternalIP) {
		args := []string{"-A", xtables.ChainServices, "-m", "comment", "--comment", comment(setExternalIP), "-m", "set", "--match-set", setExternalIP, "dst,dst"}
		w(&nat, append(slices.Clone(args), "-j", xtables.ChainMarkMasq)...)
		externalIPRules(args)
	}
	if nonEmpty(setExternalIPLocal) {
		externalIPRules([]string{"-A", xtables.ChainServices, "-m", "comment", "--comment", comment(setExternalIPLocal), "-m", "set", "--match-set", setExternalIPLocal, "dst,dst"})
	}
	w(&nat, "-A", xtables.ChainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "KUBE-NODE-PORT")
	w(&nat, "-A", "KUBE-LOAD-BALANCER", "-j", xtables.ChainMarkMasq)
	w(&filter, "-A", "KUBE-SOURCE-RANGES-FIREWALL", "-j", "DROP")
	// A node outside a load balancer IP's source ranges reaches the IP it holds
	// from that very IP, which no source range rule sees on the way out.
	for _, lb := range p.NoNodeAccess {
		w(&filter, "-A", "KUBE-IPVS-OUT-FILTER", "-s", lb.Addr.String(), "-m", "ipvs", "--vaddr", lb.Addr.String(),
			"--vproto", strings.ToLower(string(lb.Protocol)), "--vport", fmt.Sprint(lb.Port), "-j", "DROP")
	}
	// acceptIPVSTraffic: ClusterIP (and LB) traffic stops here, untouched by rules
	// further down the built-in chains.
	for _, s := range []string{setClusterIP, setLoadBalancer} {
		if nonEmpty(s) {
			w(&nat, "-A", xtables.ChainServices, "-m", "set", "--match-set", s, "dst,dst", "-j", "ACCEPT")
		}
	}
	mark := xtables.MasqueradeMark
	w(&filter, "-A", xtables.ChainForward, "-m", "comment", "--comment", quote("kubernetes forwarding rules"), "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	w(&filter, "-A", xtables.ChainForward, "-m", "comment", "--comment", quote("kubernetes forwarding conntrack rule"), "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	w(&filter, "-A", "KUBE-NODE-PORT", "-m", "comment", "--comment", comment(setHealthCheckNodePort), "-m", "set", "--match-set", setHealthCheckNodePort, "dst", "-j", "ACCEPT")
	// KUBE-IPVS-FILTER (kubernetes#72236): a VIP is a local address, so without
	// this every port of the node would answer on it; only Service ports may.
	for _, s := range []string{setLoadBalancer, setClusterIP, setExternalIP, setExternalIPLocal} {
		w(&filter, "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", s, "dst,dst", "-j", "RETURN")
	}
	w(&filter, "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", setHealthCheckNodePort, "dst", "-j", "RETURN")
	w(&filter, "-A", "KUBE-IPVS-FILTER", "-m", "conntrack", "--ctstate", "NEW", "-m", "set", "--match-set", setIPVSIPs, "dst", "-j", "REJECT")
	w(&nat, "-A", xtables.ChainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	// Clear the mark so a packet that goes through the stack again is not
	// masqueraded twice.
	w(&nat, "-A", xtables.ChainPostrouting, "-j", "MARK", "--xor-mark", mark)
	w(&nat, "-A", xtables.ChainPostrouting, "-m", "comment", "--comment", quote("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE", "--random-fully")
	w(&nat, "-A", xtables.ChainMarkMasq, "-j", "MARK", "--or-mark", mark)

	var b strings.Builder
	for _, table := range []string{"nat", "filter"} {
		b.WriteString("*" + table + "\n")
		for _, ch := range chains {
			if ch.table == table {
				fmt.Fprintf(&b, ":%s - [0:0]\n", ch.name)
			}
		}
		rules := nat
		if table == "filter" {
			rules = filter
		}
		for _, r := range rules {
			b.WriteString(r + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// quote puts an argument in double quotes, as kube-proxy writes comments into
// iptables-restore input.
func quote(s string) string { return `"` + s + `"` }

func joinRule(args []string) string { return strings.Join(args, " ") }

// setupSteps are the single iptables calls kube-proxy makes before each
// iptables-restore, printed as commands.
func setupSteps() []string {
	var out []string
	for _, c := range chains {
		out = append(out, fmt.Sprintf("iptables -t %s -N %s", c.table, c.name))
	}
	for _, j := range jumps {
		out = append(out, fmt.Sprintf("iptables -t %s -I %s -m comment --comment %s -j %s", j.table, j.from, quote(j.comment), j.to))
	}
	return out
}
