package importer

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/topology"
)

// kubeProxy takes from kube-proxy's configuration what the file holds (the
// cluster CIDR) and lists the rest that changes rules.
func (b *builder) kubeProxy(d *Dump) {
	if d.KubeProxy == nil {
		return
	}
	c := d.KubeProxy.Obj
	for _, r := range strings.Split(c.ClusterCIDR, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && p.Addr().Is4() {
			b.res.File.ClusterCIDR = p.Masked().String()
			break
		}
	}
	if d.KubeProxyUnknown != "" {
		b.notef("kube-proxy's configuration (%s) has fields svclab's kube-proxy configuration does not (%s): read past them", d.KubeProxy.Where, d.KubeProxyUnknown)
	}
	if c.Mode != "" {
		b.notef("kube-proxy mode %s (%s): a file holds no mode; run svclab with --mode %s", c.Mode, d.KubeProxy.Where, c.Mode)
	}
	var set []string
	if c.IPTables.MasqueradeAll {
		set = append(set, "iptables.masqueradeAll: true")
	}
	if len(c.NodePortAddresses) > 0 {
		set = append(set, "nodePortAddresses: "+strings.Join(c.NodePortAddresses, ","))
	}
	if c.IPVS.Scheduler != "" {
		set = append(set, "ipvs.scheduler: "+c.IPVS.Scheduler)
	}
	if c.IPVS.StrictARP {
		set = append(set, "ipvs.strictARP: true")
	}
	if c.IPTables.LocalhostNodePorts != nil && !*c.IPTables.LocalhostNodePorts {
		set = append(set, "iptables.localhostNodePorts: false")
	}
	if c.DetectLocalMode != "" && c.DetectLocalMode != "ClusterCIDR" {
		set = append(set, "detectLocalMode: "+string(c.DetectLocalMode))
	}
	if len(c.FeatureGates) > 0 {
		set = append(set, fmt.Sprintf("featureGates: %v", c.FeatureGates))
	}
	if len(set) > 0 {
		b.notef("kube-proxy's configuration sets %s, which a file cannot hold: give them to `svclab up --proxy kube-proxy --kube-proxy-config FILE`", strings.Join(set, "; "))
	}
}

// cidrs fills clusterCIDR and serviceCIDR, which a dump of Nodes and Services
// does not state, from what it holds.
func (b *builder) cidrs() {
	f := &b.res.File
	if f.ClusterCIDR == "" {
		var podCIDRs []netip.Addr
		for _, n := range f.Nodes {
			if p, err := netip.ParsePrefix(n.PodCIDR); err == nil {
				podCIDRs = append(podCIDRs, p.Addr(), topology.LastAddr(p))
			}
		}
		p := topology.CoveringPrefix(podCIDRs, 16)
		if !p.IsValid() {
			p = netip.MustParsePrefix("10.244.0.0/16")
		}
		f.ClusterCIDR = p.String()
		b.notef("clusterCIDR %s: inferred from the nodes' podCIDRs (give kube-proxy's ConfigMap to take its clusterCIDR)", f.ClusterCIDR)
	}
	var ips []netip.Addr
	for _, s := range f.Services {
		// default/kubernetes's address is the range's first host, which
		// kubernetesIP places below.
		if s.Spec.Type == corev1.ServiceTypeExternalName || s.Spec.ClusterIP == corev1.ClusterIPNone || s.Spec.ClusterIP == "" ||
			topology.IsKubernetesService(s.Namespace, s.Name) {
			continue
		}
		ips = append(ips, netip.MustParseAddr(s.Spec.ClusterIP))
	}
	// kubeadm's default range, unless the ClusterIPs say otherwise; the
	// range's first host is the kubernetes Service's, which the lab keeps free.
	p := netip.MustParsePrefix("10.96.0.0/12")
	if k := b.kubernetesIP; k.IsValid() && k != p.Addr().Next() && k.Prev().IsValid() {
		// The longest range that starts just before the kubernetes Service's
		// address and holds every ClusterIP.
		for bits := 30; bits >= 8; bits-- {
			c := netip.PrefixFrom(k.Prev(), bits)
			if c.Masked() == c && serviceRangeFits(c, ips) {
				p = c
				break
			}
		}
	}
	if !serviceRangeFits(p, ips) {
		p = topology.CoveringPrefix(ips, 24)
		for p.Bits() > 1 && !serviceRangeFits(p, ips) {
			p = netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked()
		}
	}
	f.ServiceCIDR = p.String()
	if len(ips) == 0 {
		b.notef("serviceCIDR %s: kubeadm's default (the input has no ClusterIP to infer it from)", f.ServiceCIDR)
		return
	}
	b.notef("serviceCIDR %s: inferred from the ClusterIPs (a dump does not state the API server's --service-cluster-ip-range)", f.ServiceCIDR)
}

func serviceRangeFits(p netip.Prefix, ips []netip.Addr) bool {
	for _, ip := range ips {
		if !p.Contains(ip) || ip == p.Addr() || ip == p.Addr().Next() || ip == topology.LastAddr(p) {
			return false
		}
	}
	return true
}

// clients places the clients asked for, or the outside client at the highest
// free address of the node network.
func (b *builder) clients() error {
	if len(b.o.Clients) > 0 {
		for _, c := range b.o.Clients {
			if a, err := netip.ParseAddr(c.IP); err != nil || !a.Is4() {
				return inputErrorf("--client "+c.Name+"="+c.IP, "want an IPv4 address on the node network")
			}
		}
		b.res.File.Clients = b.o.Clients
		return nil
	}
	var addrs []netip.Addr
	for _, n := range b.res.File.Nodes {
		addrs = append(addrs, netip.MustParseAddr(n.IP))
	}
	net := topology.CoveringPrefix(addrs, 24)
	for a := topology.LastAddr(net).Prev(); net.Contains(a) && a != net.Addr(); a = a.Prev() {
		if _, taken := b.byIP[a]; !taken {
			b.res.File.Clients = []topology.ClientSpec{{Name: ClientName, IP: a.String()}}
			return nil
		}
	}
	return nil
}

// externalIPRoutes routes the external IPs as asked, and says which go to the
// first node for want of a route.
func (b *builder) externalIPRoutes() {
	f := &b.res.File
	f.ExternalIPRoutes = b.o.ExternalIPRoutes
	var unrouted []string
	for _, s := range f.Services {
		for _, ip := range s.Spec.ExternalIPs {
			if !slices.ContainsFunc(f.ExternalIPRoutes, func(r topology.ExternalIPRouteSpec) bool { return r.IP == ip }) && !slices.Contains(unrouted, ip) {
				unrouted = append(unrouted, ip)
			}
		}
	}
	if len(unrouted) > 0 && len(f.Nodes) > 0 {
		b.notef("external IPs %s: routed to the first node, %s (a dump does not say how outside traffic reaches them; --route IP=NODE,... says it)", strings.Join(unrouted, ", "), f.Nodes[0].Name)
	}
}
