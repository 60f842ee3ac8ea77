package verify

import (
	"net/netip"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// iptablesRules is what kube-proxy's iptables mode does with a flow, following the
// chains of pkg/proxy/iptables: which endpoints the policy chain holds on the
// translating node, whether KUBE-MARK-MASQ marks the flow, and whether the replies
// come back through that node.
type iptablesRules struct{}

// view: releases before 1.24 see endpoints differently (proxy.ServicePort.AsSeenBy),
// and the iptables proxier renders what its release sees.
func (iptablesRules) view(sp proxy.ServicePort, v version.Version) proxy.ServicePort {
	return sp.AsSeenBy(v)
}

func (iptablesRules) choose(m *model, f flowAt) choice {
	src, sp, c, d := f.src, f.sp, f.c, f.d
	// fromPod: the local-traffic detector takes the packet for a pod's.
	fromPod, detects := m.isLocal(src, d)
	// srcLocal: the packet's source is an address of d (the node itself).
	srcLocal := src.Kind == member.KindNode && src.Node == d
	if !c.HasAny {
		if f.tgt.External != "" && srcLocal {
			// KUBE-EXTERNAL-SERVICES is jumped to from INPUT and FORWARD only, and
			// these addresses are not the node's: its own packet leaves for the
			// node network untranslated, where no one answers it.
			return choice{none: traffic.Timeout, why: "no endpoints: the node's own packet to an " + f.tgt.External + " address passes no REJECT (KUBE-EXTERNAL-SERVICES is not in OUTPUT) and goes unanswered"}
		}
		return choice{none: traffic.Refused, why: "no endpoints: KUBE-SERVICES / KUBE-EXTERNAL-SERVICES reject"}
	}
	if f.tgt.isClusterIP() {
		// What the detector does not take for a pod's is masqueraded (a node's
		// own packets leave with its eth0 address); without a detector, nothing.
		masq := m.cluster.MasqueradeAll || detects && !fromPod
		if !sp.InternalLocal {
			return choice{eps: c.Cluster, masq: masq, why: "ClusterIP: any endpoint"}
		}
		if len(c.Local) == 0 {
			return choice{none: traffic.Timeout, why: "internalTrafficPolicy Local and no endpoint on " + d + ": dropped"}
		}
		return choice{eps: c.Local, masq: masq, why: "internalTrafficPolicy Local: endpoints on " + d}
	}
	kind := externalKind(f.tgt)
	switch {
	case !sp.ExternalLocal:
		return choice{eps: c.Cluster, masq: true, why: kind + ", policy Cluster: any endpoint, masqueraded"}
	case fromPod:
		return choice{eps: c.Cluster, why: kind + ", policy Local, from a pod: short-circuited to the cluster chain"}
	case srcLocal:
		return choice{eps: c.Cluster, masq: true, why: kind + ", policy Local, from the node itself: masqueraded, any endpoint"}
	case len(c.Local) == 0:
		return choice{none: traffic.Timeout, why: "externalTrafficPolicy Local and no endpoint on " + d + ": dropped"}
	}
	return choice{eps: c.Local, why: kind + ", policy Local: endpoints on " + d + ", client address kept"}
}

// externalKind names an external target in reasons: NodePort, LoadBalancer or
// externalIP.
func externalKind(t Target) string {
	if t.External != "" {
		return t.External
	}
	return "NodePort"
}

// replyAddr: every flow carries its source's own address.
func (iptablesRules) replyAddr(src Source, _ Target) (netip.Addr, bool) { return src.IP, false }

func (iptablesRules) dataplane() proxy.Model { return proxy.ModelIPTables }

// firewalled: the KUBE-FW- chain sends the sources it admits on; the others
// fall through to KUBE-PROXY-FIREWALL's DROP.
func (iptablesRules) firewalled(_ Source, addr netip.Addr) string {
	return "source " + addr.String() + " is outside loadBalancerSourceRanges and no load balancer IP they admit: KUBE-FW- lets it fall through to KUBE-PROXY-FIREWALL, which drops it"
}

// refusedBeforeFirewall: without endpoints there is no KUBE-FW- chain
// (proxy.ServicePort.FirewallSources), so the question never arises.
func (iptablesRules) refusedBeforeFirewall(Source) bool { return false }

// hairpinMasqueraded: every KUBE-SEP chain marks packets from its own endpoint, on
// whichever node translates them.
func (iptablesRules) hairpinMasqueraded(bool) bool { return true }

func (iptablesRules) lost(d string) string {
	return "replies from endpoints off " + d + " bypass its conntrack and never reach the client"
}
