package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

// DummyDevice is the interface kube-proxy binds every ClusterIP to, so that the
// node accepts packets for them and IPVS (which only sees packets addressed to the
// node) can take them.
const DummyDevice = "kube-ipvs0"

// Virtual server flags, as the kernel defines them (IP_VS_SVC_F_*).
const (
	// FlagPersistent is ClientIP session affinity: a template per client address
	// sends its new connections to the same real server until the template expires.
	FlagPersistent = 0x1
	// flagHashed is set by the kernel on every service it holds; it is not ours.
	flagHashed = 0x2
	// FlagSourceHash (IP_VS_SVC_F_SCHED2, "mh-port") makes the mh scheduler hash the
	// source port too; kube-proxy sets it whenever the scheduler is mh.
	FlagSourceHash = 0x10
)

// schedulers kube-proxy's IPVS mode is used with (its own docs list rr, wrr, lc,
// wlc, lblc, lblcr, sh, dh, sed, nq; mh has dedicated code). svclab's VM loads the
// modules of the ones below; lblc and lblcr are for caches and make no sense for
// Services.
var schedulers = map[string]bool{"rr": true, "wrr": true, "lc": true, "wlc": true, "sh": true, "dh": true, "sed": true, "nq": true, "mh": true}

// defaultScheduler is kube-proxy's when --ipvs-scheduler is empty.
const defaultScheduler = "rr"

// Config is what one node's IPVS proxier needs to compute its state.
type Config struct {
	Node proxy.Node
	// ClusterCIDR drives kube-proxy's "detect local" masquerade rule; when it is not
	// valid, kube-proxy falls back to masquerading traffic whose source is a VIP.
	ClusterCIDR   netip.Prefix
	MasqueradeAll bool
	Scheduler     string
}

// ConfigFor is the Config of the node t describes.
func ConfigFor(t proxy.Target) Config {
	s := t.Config.KubeProxy.IPVS.Scheduler
	if s == "" {
		s = defaultScheduler
	}
	return Config{Node: t.Node, ClusterCIDR: t.Config.ClusterCIDR(), MasqueradeAll: t.Config.MasqueradeAll(), Scheduler: s}
}

// RealServer is one destination of a virtual server.
type RealServer struct {
	Addr   netip.Addr
	Port   uint16
	Weight int
}

func (r RealServer) String() string { return netip.AddrPortFrom(r.Addr, r.Port).String() }

// VirtualServer is one IPVS service as kube-proxy creates it, with the real servers
// it should hold.
type VirtualServer struct {
	// Service is the Service port it belongs to ("namespace/name:port"), for messages.
	Service   string
	Protocol  corev1.Protocol
	Addr      netip.Addr
	Port      uint16
	Scheduler string
	Flags     uint32
	// Timeout is the persistence timeout in seconds (ClientIP affinity).
	Timeout uint32
	// Bind tells that Addr goes on kube-ipvs0 (ClusterIPs; node addresses are the
	// node's own already).
	Bind        bool
	RealServers []RealServer
}

// Key is kube-proxy's name of a virtual server, "addr:port/PROTOCOL".
func (v *VirtualServer) Key() string {
	return netip.AddrPortFrom(v.Addr, v.Port).String() + "/" + string(v.Protocol)
}

// Plan is everything a node's IPVS proxier installs for one state.
type Plan struct {
	// VirtualServers are sorted by protocol, address and port.
	VirtualServers []VirtualServer
	// Bind are the addresses kube-ipvs0 must hold (KUBE-IPVS-IPS), sorted.
	Bind []netip.Addr
	// Sets holds the entries of every ipset kube-proxy creates, in kube-proxy's
	// string form, sorted.
	Sets map[string][]string
	// NoNodeAccess are the load balancer IP:ports with source ranges that leave
	// out the node's address: kube-proxy keeps the node itself from them with a
	// rule each (kubernetes#119656), sorted.
	NoNodeAccess []Portal
}

// Portal is one address, protocol and port.
type Portal struct {
	Addr     netip.Addr
	Protocol corev1.Protocol
	Port     uint16
}

// Entries is how many entries all sets hold.
func (p *Plan) Entries() int {
	n := 0
	for _, e := range p.Sets {
		n += len(e)
	}
	return n
}

// RealServerCount is how many real servers all virtual servers hold.
func (p *Plan) RealServerCount() int {
	n := 0
	for _, v := range p.VirtualServers {
		n += len(v.RealServers)
	}
	return n
}

// NewPlan computes, as kube-proxy 1.37's syncProxyRules does, the virtual servers,
// bound addresses and ipset entries of node c.Node for ports. nodeAddrs are the
// node's own addresses, every local one except loopback ones and those on
// kube-ipvs0 (eth0's node IP and cni0's address in a lab): NodePort virtual
// servers listen on them (nodePortAddresses unset), and an external or load
// balancer IP among them is not bound to kube-ipvs0.
func NewPlan(c Config, ports []proxy.ServicePort, nodeAddrs []netip.Addr) *Plan {
	p := &Plan{Sets: map[string][]string{}}
	sets := map[string]map[string]bool{}
	add := func(set, entry string) {
		if sets[set] == nil {
			sets[set] = map[string]bool{}
		}
		sets[set][entry] = true
	}
	bind := map[netip.Addr]bool{}
	for i := range ports {
		sp := &ports[i]
		proto := strings.ToLower(string(sp.Protocol))
		// Hairpin: a local endpoint reaching itself through the Service is
		// masqueraded. kube-proxy lists every local endpoint, ready or not.
		for _, e := range sp.Endpoints {
			if e.NodeName == c.Node.Name {
				add(setLoopBack, fmt.Sprintf("%s,%s:%d,%s", e.IP, proto, e.Port, e.IP))
			}
		}
		add(setClusterIP, fmt.Sprintf("%s,%s:%d", sp.ClusterIP, proto, sp.Port))
		cat := proxy.Categorize(sp, c.Node.Name)
		vs := c.virtualServer(sp, sp.ClusterIP, uint16(sp.Port))
		vs.Bind = true
		vs.RealServers = realServers(cat, sp.InternalLocal)
		p.VirtualServers = append(p.VirtualServers, vs)
		bind[sp.ClusterIP] = true

		if sp.NodePort != 0 && len(nodeAddrs) > 0 {
			switch sp.Protocol {
			case corev1.ProtocolTCP, corev1.ProtocolUDP:
				add(nodePortSet(sp.Protocol, false), fmt.Sprint(sp.NodePort))
				if sp.ExternalLocal {
					add(nodePortSet(sp.Protocol, true), fmt.Sprint(sp.NodePort))
				}
			case corev1.ProtocolSCTP:
				for _, a := range nodeAddrs {
					add(setNodePortSCTP, fmt.Sprintf("%s,%s:%d", a, proto, sp.NodePort))
					if sp.ExternalLocal {
						add(setNodePortLocalSCTP, fmt.Sprintf("%s,%s:%d", a, proto, sp.NodePort))
					}
				}
			}
			for _, a := range nodeAddrs {
				vs := c.virtualServer(sp, a, uint16(sp.NodePort))
				vs.RealServers = realServers(cat, sp.ExternalLocal)
				p.VirtualServers = append(p.VirtualServers, vs)
			}
		}
		if sp.HealthCheckNodePort != 0 {
			add(setHealthCheckNodePort, fmt.Sprint(sp.HealthCheckNodePort))
		}
		// External IPs and load balancer IPs are virtual servers of their own,
		// with the real servers of the external policy; each goes on kube-ipvs0
		// unless the node has it already.
		external := func(a netip.Addr) {
			vs := c.virtualServer(sp, a, uint16(sp.Port))
			vs.Bind = !slices.Contains(nodeAddrs, a)
			vs.RealServers = realServers(cat, sp.ExternalLocal)
			p.VirtualServers = append(p.VirtualServers, vs)
			if vs.Bind {
				bind[a] = true
			}
		}
		for _, a := range sp.ExternalIPs {
			entry := fmt.Sprintf("%s,%s:%d", a, proto, sp.Port)
			if sp.ExternalLocal {
				add(setExternalIPLocal, entry)
			} else {
				add(setExternalIP, entry)
			}
			external(a)
		}
		for _, a := range sp.LoadBalancerIPs {
			entry := fmt.Sprintf("%s,%s:%d", a, proto, sp.Port)
			add(setLoadBalancer, entry)
			if sp.ExternalLocal {
				add(setLoadBalancerLocal, entry)
			}
			if sp.FirewallSources(a, c.Node.IP, proxy.ModelIPVS) != nil {
				add(setLoadBalancerFW, entry)
				for _, r := range sp.SourceRanges {
					add(setLoadBalancerSrcCIDR, fmt.Sprintf("%s,%s", entry, r))
				}
				if sp.RangesHold(c.Node.IP) {
					add(setLoadBalancerSrcIP, fmt.Sprintf("%s,%s", entry, a))
				} else {
					p.NoNodeAccess = append(p.NoNodeAccess, Portal{Addr: a, Protocol: sp.Protocol, Port: uint16(sp.Port)})
				}
			}
			external(a)
		}
	}
	for a := range bind {
		p.Bind = append(p.Bind, a)
		add(setIPVSIPs, a.String())
	}
	sort.Slice(p.Bind, func(i, j int) bool { return p.Bind[i].Less(p.Bind[j]) })
	for _, s := range ipsets {
		entries := make([]string, 0, len(sets[s.name]))
		for e := range sets[s.name] {
			entries = append(entries, e)
		}
		sort.Strings(entries)
		p.Sets[s.name] = entries
	}
	sortVirtualServers(p.VirtualServers)
	slices.SortFunc(p.NoNodeAccess, func(a, b Portal) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Protocol), string(b.Protocol)); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	p.NoNodeAccess = slices.Compact(p.NoNodeAccess)
	return p
}

func (c Config) virtualServer(sp *proxy.ServicePort, addr netip.Addr, port uint16) VirtualServer {
	vs := VirtualServer{
		Service:  sp.Name.String(version.Default),
		Protocol: sp.Protocol, Addr: addr, Port: port, Scheduler: c.Scheduler,
	}
	if sp.AffinitySeconds > 0 {
		vs.Flags |= FlagPersistent
		vs.Timeout = uint32(sp.AffinitySeconds)
	}
	if c.Scheduler == "mh" {
		vs.Flags |= FlagSourceHash
	}
	return vs
}

// realServers is kube-proxy's syncEndpoint choice: with a Local policy the local
// endpoints, and when there are none, the cluster endpoints (kubernetes#97081: pods
// on a node without local endpoints can still reach the Service; outside clients'
// replies then take another way back and are lost). With policy Cluster, the
// cluster endpoints. Every real server gets weight 1.
func realServers(c proxy.Categorized, onlyLocal bool) []RealServer {
	eps := c.Cluster
	if onlyLocal && len(c.Local) > 0 {
		eps = c.Local
	}
	seen := map[string]bool{}
	var out []RealServer
	for _, e := range eps {
		rs := RealServer{Addr: e.IP, Port: uint16(e.Port), Weight: 1}
		if !seen[rs.String()] {
			seen[rs.String()] = true
			out = append(out, rs)
		}
	}
	sortRealServers(out)
	return out
}

func sortVirtualServers(vs []VirtualServer) {
	sort.Slice(vs, func(i, j int) bool {
		a, b := &vs[i], &vs[j]
		if pa, pb := protocolNumber(a.Protocol), protocolNumber(b.Protocol); pa != pb {
			return pa < pb
		}
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c < 0
		}
		return a.Port < b.Port
	})
}

func sortRealServers(rs []RealServer) {
	sort.Slice(rs, func(i, j int) bool {
		if c := rs[i].Addr.Compare(rs[j].Addr); c != 0 {
			return c < 0
		}
		return rs[i].Port < rs[j].Port
	})
}

// protocolNumber is the IP protocol number of p (0 if unknown).
func protocolNumber(p corev1.Protocol) uint16 {
	switch p {
	case corev1.ProtocolTCP:
		return 6
	case corev1.ProtocolUDP:
		return 17
	case corev1.ProtocolSCTP:
		return 132
	}
	return 0
}

func protocolOf(n uint16) corev1.Protocol {
	switch n {
	case 6:
		return corev1.ProtocolTCP
	case 17:
		return corev1.ProtocolUDP
	case 132:
		return corev1.ProtocolSCTP
	}
	return corev1.Protocol(fmt.Sprint(n))
}
