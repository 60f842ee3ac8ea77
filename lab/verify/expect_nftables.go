package verify

import (
	"net/netip"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// nftablesRules is kube-proxy's nftables mode: its dispatch is one table of
// verdict maps instead of chains, and for every flow verify plans it does what
// the iptables mode does, with the differences the kernel showed.
type nftablesRules struct{ iptablesRules }

// choose: a node's own connection to an external or load balancer IP of a
// Service without endpoints is rejected, where the iptables mode lets it go
// unanswered: kube-proxy's filter-output chain checks new connections against
// its no-endpoint-services map, which holds those addresses too (the iptables
// mode's KUBE-EXTERNAL-SERVICES is not jumped to from OUTPUT).
func (n nftablesRules) choose(m *model, f flowAt) choice {
	srcLocal := f.src.Kind == member.KindNode && f.src.Node == f.d
	if !f.c.HasAny && f.tgt.External != "" && srcLocal {
		return choice{none: traffic.Refused, why: "no endpoints: the node's own packet to an " + f.tgt.External + " address is rejected in filter-output (no-endpoint-services holds it)"}
	}
	return n.iptablesRules.choose(m, f)
}

// hairpinMasqueraded: a pod reaching itself is masqueraded by the
// hairpin-connections set, which holds the node's own endpoints only (1.37's
// syncProxyRules adds an endpoint to it only when it is local). A pod that
// dials another node's NodePort with policy Local is short-circuited there to
// any endpoint, itself included, and that node does not masquerade it: its
// replies to itself bypass that node and are lost. (The iptables mode marks
// every endpoint's own traffic in its KUBE-SEP chain, on every node.)
func (nftablesRules) hairpinMasqueraded(local bool) bool { return local }

func (nftablesRules) dataplane() proxy.Model { return proxy.ModelNFTables }

// firewalled: firewall-check (from filter-prerouting and filter-output, before
// anything rejects) sends the load balancer IP to its firewall chain, whose
// "saddr != { ... } drop" drops the flow, endpoints or not.
func (nftablesRules) firewalled(_ Source, addr netip.Addr) string {
	return "source " + addr.String() + " is outside loadBalancerSourceRanges and no load balancer IP they admit: its firewall chain drops it"
}

// refusedBeforeFirewall: firewall-check runs before the no-endpoints reject in
// prerouting and output alike.
func (nftablesRules) refusedBeforeFirewall(Source) bool { return false }
