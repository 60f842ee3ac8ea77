package iptables

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// Read reads the Services a node's iptables rules (of c's backend) hold, as
// kube-proxy's iptables mode lays them out, from iptables-save of the nat and
// filter tables run inside ns. Both layouts are understood: the current one
// (1.24 and later: KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW- and KUBE-SEP- chains,
// REJECT and DROP in filter's KUBE-SERVICES, KUBE-EXTERNAL-SERVICES and
// KUBE-PROXY-FIREWALL) and the
// older KUBE-XLB- one, whose Local policy without local endpoints jumps to
// KUBE-MARK-DROP.
//
// Frontends are the rules of nat KUBE-SERVICES that match a destination address,
// protocol and port (ClusterIPs, external IPs, load balancer IPs; a load balancer
// IP that jumps to a KUBE-FW- chain forwards from that chain's source ranges
// only), those of nat KUBE-NODEPORTS that match a
// protocol and port and no address (NodePorts; the copies for 127.0.0.0/8 are
// left out), and the REJECT and DROP rules of the filter table. From each, the
// chains are followed as a new connection from outside the cluster (not a pod,
// not the node) would take them: marking rules pass, rules matching a source
// address or a local source type do not apply (a negated one does), rules with
// other matches this reader does not know are passed over, every rule drawing
// at random contributes its endpoint, and the first rule that applies to every
// such packet ends the walk (DNAT, a jump whose chain ends it, REJECT, DROP,
// KUBE-MARK-DROP). A frontend whose nat rules end in no DNAT takes the filter
// table's verdict, or is Untranslated. The ClientIP affinity timeout is the
// --seconds of the "-m recent --rcheck" rules met on the way.
func Read(ns *namespaces.NS, c proxy.Config) (proxy.ServiceMap, error) {
	be, err := xtables.BackendForFamily(c.Backend, c.IPFamily())
	if err != nil {
		return nil, err
	}
	var saved [2][]byte
	for i, table := range []string{"nat", "filter"} {
		if saved[i], err = ns.Output(be.Save, "-t", table); err != nil {
			return nil, fmt.Errorf("read iptables of %s: %w", ns, err)
		}
	}
	m, err := readSaved(saved[0], saved[1])
	if err != nil {
		return nil, fmt.Errorf("read iptables of %s (%s): %w", ns, be.Save, err)
	}
	return m, nil
}

// readSaved summarises iptables-save output of the nat and filter tables.
func readSaved(natSave, filterSave []byte) (proxy.ServiceMap, error) {
	nat, err := parseSave(natSave)
	if err != nil {
		return nil, fmt.Errorf("nat: %w", err)
	}
	filter, err := parseSave(filterSave)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}

	// Each frontend's rules in the dispatch chains, in order.
	entries := map[proxy.Frontend][]*savedRule{}
	for _, r := range nat[xtables.ChainServices] {
		if f, ok := addressFrontend(r); ok {
			entries[f] = append(entries[f], r)
		}
	}
	for _, r := range nat[xtables.ChainNodePorts] {
		if f, ok := nodePortFrontend(r); ok && r.dst == "" {
			entries[f] = append(entries[f], r)
		}
	}
	refused := map[proxy.Frontend]proxy.Verdict{}
	note := func(f proxy.Frontend, r *savedRule) {
		if _, seen := refused[f]; seen || !refusedBy(r) {
			return
		}
		refused[f] = map[string]proxy.Verdict{"REJECT": proxy.Reject, "DROP": proxy.Drop}[r.target]
	}
	for _, r := range filter[xtables.ChainServices] {
		if f, ok := addressFrontend(r); ok {
			note(f, r)
		}
	}
	for _, r := range filter[xtables.ChainExternalServices] {
		if f, ok := addressFrontend(r); ok {
			note(f, r)
		} else if f, ok := nodePortFrontend(r); ok && r.dstType == "LOCAL" {
			note(f, r)
		}
	}
	for _, r := range filter[xtables.ChainProxyFirewall] {
		if f, ok := addressFrontend(r); ok {
			note(f, r)
		}
	}

	out := proxy.ServiceMap{}
	w := walker{nat: nat}
	for f, rules := range entries {
		// A load balancer IP with source ranges: the ranges are its firewall
		// chain's, and what those sources meet is where that chain sends them.
		var ranges []netip.Prefix
		if len(rules) == 1 {
			if rs, target, ok := firewallOf(nat[rules[0].target]); ok {
				jump := *rules[0]
				jump.target = target
				rules, ranges = []*savedRule{&jump}, rs
			}
		}
		o, err := w.walk(rules, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[f] = o.Forwarding(proxy.RefusedOr(refused, f))
		if o.End == proxy.WalkDNAT {
			out[f] = out[f].FirewalledBy(ranges)
		}
	}
	for f, v := range refused {
		if _, ok := out[f]; !ok {
			out[f] = proxy.Forwarding{Verdict: v}
		}
	}
	return out, nil
}

// firewallOf reads a KUBE-FW- chain: rules that send each allowed source range to
// one chain, target, and rules that only comment (the packets that fall through
// are dropped in the filter table): every source it names, the load balancer
// IPs kube-proxy adds for a node in a range among them. ok is false for any
// other chain.
func firewallOf(chain []*savedRule) (ranges []netip.Prefix, target string, ok bool) {
	for _, r := range chain {
		switch {
		case r.target == "" && !r.conditional():
		case r.target != "" && r.src != "" && !strings.HasPrefix(r.src, "!") && r.srcType == "" && !r.random && !r.recentCheck && r.other == "":
			if target != "" && r.target != target {
				return nil, "", false
			}
			target = r.target
			p, err := netip.ParsePrefix(r.src)
			if err != nil {
				return nil, "", false
			}
			ranges = append(ranges, p)
		default:
			return nil, "", false
		}
	}
	return ranges, target, target != ""
}

// refusedBy tells whether r refuses every new connection it matches.
func refusedBy(r *savedRule) bool {
	return (r.target == "REJECT" || r.target == "DROP") && !r.conditional()
}

// addressFrontend is the frontend a rule matching "-d ADDR/32 -p PROTO --dport
// PORT" is for.
func addressFrontend(r *savedRule) (proxy.Frontend, bool) {
	if r.dst == "" || strings.HasPrefix(r.dst, "!") {
		return proxy.Frontend{}, false
	}
	p, err := netip.ParsePrefix(r.dst)
	if err != nil || p.Bits() != p.Addr().BitLen() {
		return proxy.Frontend{}, false
	}
	f, ok := nodePortFrontend(r)
	f.Addr = p.Addr()
	return f, ok
}

// nodePortFrontend is the frontend of a rule's "-p PROTO --dport PORT", with no
// address.
func nodePortFrontend(r *savedRule) (proxy.Frontend, bool) {
	port, err := strconv.ParseUint(r.dport, 10, 16)
	if err != nil || r.proto == "" || strings.HasPrefix(r.proto, "!") {
		return proxy.Frontend{}, false
	}
	return proxy.Frontend{Protocol: corev1.Protocol(strings.ToUpper(r.proto)), Port: uint16(port)}, true
}

type walker struct {
	nat savedTable
}

// walk follows rules as a new connection from outside the cluster would (see
// Read).
func (w walker) walk(rules []*savedRule, depth int) (proxy.Walk, error) {
	if depth > proxy.MaxWalkDepth {
		return proxy.Walk{}, errors.New("chains nest deeper than kube-proxy's (a loop?)")
	}
	// random gathers the endpoints of the rules drawing at random, which each
	// take some packets and let the rest go on.
	var random proxy.Walk
	finish := func() proxy.Walk {
		if len(random.Backends) > 0 {
			random.End = proxy.WalkDNAT
		}
		return random
	}
	for _, r := range rules {
		if r.recentCheck {
			s, err := strconv.Atoi(r.seconds)
			if err != nil {
				return proxy.Walk{}, fmt.Errorf("affinity rule without --seconds: %s", r.line)
			}
			random.Affinity = max(random.Affinity, s)
			continue
		}
		if !appliesToOutside(r) {
			continue
		}
		switch r.target {
		case "", xtables.ChainMarkMasq, "MARK":
			continue
		case "RETURN":
			if r.random {
				continue
			}
			// Back to the chain that jumped here.
			return finish(), nil
		}
		o, err := w.follow(r, depth)
		if err != nil {
			return proxy.Walk{}, err
		}
		if r.random {
			random.Backends = append(random.Backends, o.Backends...)
			random.Affinity = max(random.Affinity, o.Affinity)
			continue
		}
		if o.End != proxy.WalkNone {
			if o.End == proxy.WalkDNAT {
				o.Backends = append(random.Backends, o.Backends...)
				o.Affinity = max(random.Affinity, o.Affinity)
			}
			return o, nil
		}
	}
	// Every rule drew at random and the last missed: kube-proxy never writes
	// that, but those it did write still forward.
	return finish(), nil
}

// follow is where r's target leads.
func (w walker) follow(r *savedRule, depth int) (proxy.Walk, error) {
	switch r.target {
	case "DNAT":
		ap, err := netip.ParseAddrPort(r.toDestination)
		if err != nil {
			return proxy.Walk{}, fmt.Errorf("DNAT to %q: %w: %s", r.toDestination, err, r.line)
		}
		return proxy.Walk{End: proxy.WalkDNAT, Backends: []netip.AddrPort{ap}}, nil
	case "DROP", xtables.ChainMarkDrop:
		// KUBE-MARK-DROP marks the packet for the kubelet's KUBE-FIREWALL to drop
		// (the layout before 1.24).
		return proxy.Walk{End: proxy.WalkDrop}, nil
	case "REJECT":
		return proxy.Walk{End: proxy.WalkReject}, nil
	case "ACCEPT":
		return proxy.Walk{End: proxy.WalkAccept}, nil
	}
	chain, ok := w.nat[r.target]
	if !ok && !strings.HasPrefix(r.target, "KUBE-") {
		return proxy.Walk{}, fmt.Errorf("target %s not understood: %s", r.target, r.line)
	}
	// A KUBE- chain with no rules is not listed by its rules; jumping to it
	// changes nothing.
	return w.walk(chain, depth+1)
}

// appliesToOutside tells whether r matches (some of) the new connections from
// outside the cluster to its frontend: it must not ask for a source address, a
// local source or a match this reader does not know.
func appliesToOutside(r *savedRule) bool {
	if r.src != "" && !strings.HasPrefix(r.src, "!") {
		return false
	}
	if r.srcType != "" && !strings.HasPrefix(r.srcType, "!") {
		return false
	}
	return r.other == ""
}
