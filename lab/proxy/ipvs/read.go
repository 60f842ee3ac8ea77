package ipvs

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	libipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// Read reads the Services a node's IPVS table holds, over an IPVS netlink socket
// opened in ns: every virtual server is a frontend, a ClusterIP one when its
// address is bound to kube-ipvs0 and a NodePort otherwise (a node address); its
// real servers of weight above 0 are the backends (weight 0 is a real server
// draining, which takes no new connection), none is a Reject (IPVS answers ICMP
// port unreachable), and persistence is ClientIP affinity with its timeout. A
// load balancer IP in KUBE-LOAD-BALANCER-FW admits the sources
// KUBE-LOAD-BALANCER-SOURCE-CIDR (its ranges) and KUBE-LOAD-BALANCER-SOURCE-IP
// (itself, when the node's address is in a range) give it only.
// kube-proxy makes a virtual server per node address for each NodePort; Read
// folds them into one frontend, Inconsistent when the addresses differ (as they
// do for a moment while a sync goes through them one by one).
func Read(ns *namespaces.NS, _ proxy.Config) (proxy.ServiceMap, error) {
	h, err := libipvs.New(ns.Path)
	if err != nil {
		return nil, fmt.Errorf("read IPVS of %s: %w", ns, err)
	}
	defer h.Close()
	k := &kernel{ipvs: h, nl: ns.Netlink}
	bound := map[netip.Addr]bool{}
	if dummy, err := ns.Netlink.LinkByName(DummyDevice); err == nil {
		addrs, _, err := k.addresses(dummy)
		if err != nil {
			return nil, fmt.Errorf("read IPVS of %s: %w", ns, err)
		}
		for _, a := range addrs {
			bound[a] = true
		}
	}
	vss, err := k.services()
	if err != nil {
		return nil, fmt.Errorf("read IPVS of %s: %w", ns, err)
	}
	fw, err := k.firewall()
	if err != nil {
		return nil, fmt.Errorf("read IPVS of %s: %w", ns, err)
	}
	out := proxy.ServiceMap{}
	nodePorts := map[proxy.Frontend]map[netip.Addr]proxy.Forwarding{}
	for i := range vss {
		vs := &vss[i]
		ds, err := k.dests(vs)
		if err != nil {
			return nil, fmt.Errorf("read IPVS of %s: %w", ns, err)
		}
		var backends []netip.AddrPort
		for _, d := range ds {
			if d.Weight > 0 {
				backends = append(backends, netip.AddrPortFrom(d.Addr, d.Port))
			}
		}
		affinity := 0
		if vs.Flags&FlagPersistent != 0 {
			affinity = int(vs.Timeout)
		}
		fwd := proxy.Forwarded(backends, affinity)
		if bound[vs.Addr] {
			if ranges, ok := fw[vs.Key()]; ok {
				fwd = fwd.FirewalledBy(ranges)
				if len(ranges) == 0 {
					fwd = proxy.Forwarding{Verdict: proxy.Drop}
				}
			}
			out[proxy.ClusterIPFrontend(vs.Protocol, vs.Addr, int(vs.Port))] = fwd
			continue
		}
		f := proxy.NodePortFrontend(vs.Protocol, int(vs.Port))
		if nodePorts[f] == nil {
			nodePorts[f] = map[netip.Addr]proxy.Forwarding{}
		}
		nodePorts[f][vs.Addr] = fwd
	}
	for f, byAddr := range nodePorts {
		out[f] = fold(byAddr)
	}
	return out, nil
}

// firewall reads kube-proxy's source range firewall: for each load balancer
// virtual server (by Key) in KUBE-LOAD-BALANCER-FW, the source ranges of
// KUBE-LOAD-BALANCER-SOURCE-CIDR and the addresses of
// KUBE-LOAD-BALANCER-SOURCE-IP that may reach it. A node without those sets
// (kube-proxy has not programmed it) has no firewall.
func (k *kernel) firewall() (map[string][]netip.Prefix, error) {
	out := map[string][]netip.Prefix{}
	key := func(e *netlink.IPSetEntry) string {
		a, _ := netip.AddrFromSlice(e.IP)
		var port uint16
		if e.Port != nil {
			port = *e.Port
		}
		proto := uint16(6)
		if e.Protocol != nil {
			proto = uint16(*e.Protocol)
		}
		return netip.AddrPortFrom(a.Unmap(), port).String() + "/" + string(protocolOf(proto))
	}
	guarded, err := k.nl.IpsetList(setLoadBalancerFW)
	if err != nil {
		return out, nil
	}
	for i := range guarded.Entries {
		out[key(&guarded.Entries[i])] = nil
	}
	// A source range's entry holds its length; a source IP's (hash:ip,port,ip)
	// is one address.
	for _, set := range []struct {
		name string
		bits func(e *netlink.IPSetEntry) int
	}{
		{setLoadBalancerSrcCIDR, func(e *netlink.IPSetEntry) int { return int(e.CIDR2) }},
		{setLoadBalancerSrcIP, func(*netlink.IPSetEntry) int { return 32 }},
	} {
		sources, err := k.nl.IpsetList(set.name)
		if err != nil {
			return nil, fmt.Errorf("list ipset %s: %w", set.name, err)
		}
		for i := range sources.Entries {
			e := &sources.Entries[i]
			k := key(e)
			if _, ok := out[k]; !ok {
				continue
			}
			a, _ := netip.AddrFromSlice(e.IP2)
			out[k] = append(out[k], netip.PrefixFrom(a.Unmap(), set.bits(e)))
		}
	}
	return out, nil
}

// fold is one NodePort's forwarding over the node addresses it has a virtual
// server on: theirs when they agree, else Inconsistent with every backend and
// what each address does.
func fold(byAddr map[netip.Addr]proxy.Forwarding) proxy.Forwarding {
	addrs := make([]netip.Addr, 0, len(byAddr))
	for a := range byAddr {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	first := byAddr[addrs[0]]
	same := true
	var all []netip.AddrPort
	var detail []string
	for _, a := range addrs {
		fw := byAddr[a]
		same = same && fw.Equal(first)
		all = append(all, fw.Backends...)
		detail = append(detail, fmt.Sprintf("%s: %s", a, fw))
	}
	if same {
		return first
	}
	union := proxy.Forwarded(all, 0)
	return proxy.Forwarding{Verdict: proxy.Inconsistent, Backends: union.Backends, Detail: strings.Join(detail, "; ")}
}
