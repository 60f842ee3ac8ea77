package iptables

import (
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// jump is one rule kube-proxy keeps at the top of a built-in chain, leading to one of
// its own chains.
type jump struct {
	table, from, to, comment string
	match                    []string
}

var ctNew = []string{"-m", "conntrack", "--ctstate", "NEW"}

// jumpsCurrent are kube-proxy's jumps since 1.28 (iptablesJumpChains followed by
// iptablesKubeletJumpChains, the kubelet's KUBE-FIREWALL jumps kube-proxy took over
// when the kubelet stopped writing iptables rules).
var jumpsCurrent = []jump{
	{"filter", "INPUT", xtables.ChainExternalServices, "kubernetes externally-visible service portals", ctNew},
	{"filter", "FORWARD", xtables.ChainExternalServices, "kubernetes externally-visible service portals", ctNew},
	{"filter", "INPUT", xtables.ChainNodePorts, "kubernetes health check service ports", nil},
	{"filter", "FORWARD", xtables.ChainServices, "kubernetes service portals", ctNew},
	{"filter", "OUTPUT", xtables.ChainServices, "kubernetes service portals", ctNew},
	{"filter", "FORWARD", xtables.ChainForward, "kubernetes forwarding rules", nil},
	{"filter", "INPUT", xtables.ChainProxyFirewall, "kubernetes load balancer firewall", ctNew},
	{"filter", "OUTPUT", xtables.ChainProxyFirewall, "kubernetes load balancer firewall", ctNew},
	{"filter", "FORWARD", xtables.ChainProxyFirewall, "kubernetes load balancer firewall", ctNew},
	{"nat", "OUTPUT", xtables.ChainServices, "kubernetes service portals", nil},
	{"nat", "PREROUTING", xtables.ChainServices, "kubernetes service portals", nil},
	{"nat", "POSTROUTING", xtables.ChainPostrouting, "kubernetes postrouting rules", nil},
	{"filter", "INPUT", xtables.ChainFirewall, "", nil},
	{"filter", "OUTPUT", xtables.ChainFirewall, "", nil},
}

// jumpsXLB are kube-proxy's jumps of 1.13 to 1.19.
var jumpsXLB = []jump{
	{"filter", "INPUT", xtables.ChainExternalServices, "kubernetes externally-visible service portals", ctNew},
	{"filter", "FORWARD", xtables.ChainServices, "kubernetes service portals", ctNew},
	{"filter", "OUTPUT", xtables.ChainServices, "kubernetes service portals", ctNew},
	{"filter", "INPUT", xtables.ChainServices, "kubernetes service portals", ctNew},
	{"filter", "FORWARD", xtables.ChainForward, "kubernetes forwarding rules", nil},
	{"nat", "OUTPUT", xtables.ChainServices, "kubernetes service portals", nil},
	{"nat", "PREROUTING", xtables.ChainServices, "kubernetes service portals", nil},
	{"nat", "POSTROUTING", xtables.ChainPostrouting, "kubernetes postrouting rules", nil},
}

// canaries are the empty KUBE-PROXY-CANARY chains kube-proxy (since 1.17) keeps in
// three tables; it watches them to notice that someone flushed iptables and then
// syncs everything again.
func canaries(v version.Version) []Step {
	if !v.AtLeast(1, 17) {
		return nil
	}
	return []Step{
		{Table: "mangle", Chain: xtables.ChainProxyCanary},
		{Table: "nat", Chain: xtables.ChainProxyCanary},
		{Table: "filter", Chain: xtables.ChainProxyCanary},
	}
}

// jumpSteps ensures each target chain, then puts the jump first in its built-in
// chain. Jumps added later end up above earlier ones in the same chain.
func jumpSteps(jumps []jump) []Step {
	var steps []Step
	for _, j := range jumps {
		rule := append(Rule(nil), j.match...)
		if j.comment != "" {
			rule = append(rule, "-m", "comment", "--comment", j.comment)
		}
		rule = append(rule, "-j", j.to)
		steps = append(steps, Step{Table: j.table, Chain: j.to}, Step{Table: j.table, Chain: j.from, Rule: rule})
	}
	return steps
}

// setupSteps are the single-call steps of release v.
func setupSteps(v version.Version) []Step {
	if v.AtLeast(1, 24) {
		return setupCurrent(v)
	}
	return setupXLB(v)
}

func setupCurrent(v version.Version) []Step {
	return append(canaries(v), jumpSteps(jumpsCurrent)...)
}

// setupXLB is what a node of the old layout had outside iptables-restore: first the
// kubelet's chains (syncNetworkUtil of kubelet 1.18: KUBE-MARK-DROP, which
// kube-proxy's Local-policy chains jump to, and KUBE-FIREWALL, which drops what it
// marked and blocks outside packets to 127.0.0.0/8), then kube-proxy's jumps. The
// kubelet also ensured KUBE-MARK-MASQ and KUBE-POSTROUTING with the rules
// kube-proxy writes into them anyway; only their chains are kept here.
func setupXLB(v version.Version) []Step {
	steps := []Step{
		{Table: "nat", Chain: xtables.ChainMarkDrop},
		{Table: "nat", Chain: xtables.ChainMarkDrop, Rule: Rule{"-j", "MARK", "--or-mark", dropMark}, Append: true},
		{Table: "filter", Chain: xtables.ChainFirewall},
		{Table: "filter", Chain: xtables.ChainFirewall, Append: true, Rule: Rule{
			"-m", "comment", "--comment", "kubernetes firewall for dropping marked packets",
			"-m", "mark", "--mark", dropMark + "/" + dropMark, "-j", "DROP"}},
		{Table: "filter", Chain: xtables.ChainFirewall, Append: true, Rule: Rule{
			"-m", "comment", "--comment", "block incoming localnet connections",
			"--dst", "127.0.0.0/8", "!", "--src", "127.0.0.0/8",
			"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP"}},
		{Table: "filter", Chain: "OUTPUT", Rule: Rule{"-j", xtables.ChainFirewall}},
		{Table: "filter", Chain: "INPUT", Rule: Rule{"-j", xtables.ChainFirewall}},
		{Table: "nat", Chain: xtables.ChainMarkMasq},
		{Table: "nat", Chain: xtables.ChainPostrouting},
		{Table: "nat", Chain: "POSTROUTING", Rule: Rule{"-m", "comment", "--comment", "kubernetes postrouting rules", "-j", xtables.ChainPostrouting}},
	}
	steps = append(steps, canaries(v)...)
	return append(steps, jumpSteps(jumpsXLB)...)
}
