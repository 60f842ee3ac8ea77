package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	corev1 "k8s.io/api/core/v1"
)

// The ipsets kube-proxy's IPVS mode creates (pkg/proxy/ipvs/ipset.go), with the
// comments it writes into the iptables rules that match them.
const (
	setLoopBack            = "KUBE-LOOP-BACK"
	setClusterIP           = "KUBE-CLUSTER-IP"
	setExternalIP          = "KUBE-EXTERNAL-IP"
	setExternalIPLocal     = "KUBE-EXTERNAL-IP-LOCAL"
	setLoadBalancer        = "KUBE-LOAD-BALANCER"
	setLoadBalancerFW      = "KUBE-LOAD-BALANCER-FW"
	setLoadBalancerLocal   = "KUBE-LOAD-BALANCER-LOCAL"
	setLoadBalancerSrcIP   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	setLoadBalancerSrcCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	setNodePortTCP         = "KUBE-NODE-PORT-TCP"
	setNodePortLocalTCP    = "KUBE-NODE-PORT-LOCAL-TCP"
	setNodePortUDP         = "KUBE-NODE-PORT-UDP"
	setNodePortLocalUDP    = "KUBE-NODE-PORT-LOCAL-UDP"
	setNodePortSCTP        = "KUBE-NODE-PORT-SCTP-HASH"
	setNodePortLocalSCTP   = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	setHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	setIPVSIPs             = "KUBE-IPVS-IPS"
)

// Set types, as ipset names them.
const (
	hashIP        = "hash:ip"
	hashIPPort    = "hash:ip,port"
	hashIPPortIP  = "hash:ip,port,ip"
	hashIPPortNet = "hash:ip,port,net"
	bitmapPort    = "bitmap:port"
)

// ipsetDef is one set kube-proxy creates on every sync, empty or not.
type ipsetDef struct {
	name, typ, comment string
}

// ipsets lists them in kube-proxy's order (ipsetInfo).
var ipsets = []ipsetDef{
	{setLoopBack, hashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{setClusterIP, hashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	{setExternalIP, hashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	{setExternalIPLocal, hashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{setLoadBalancer, hashIPPort, "Kubernetes service lb portal"},
	{setLoadBalancerFW, hashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{setLoadBalancerLocal, hashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{setLoadBalancerSrcIP, hashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{setLoadBalancerSrcCIDR, hashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{setNodePortTCP, bitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	{setNodePortLocalTCP, bitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{setNodePortUDP, bitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	{setNodePortLocalUDP, bitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{setNodePortSCTP, hashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{setNodePortLocalSCTP, hashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{setHealthCheckNodePort, bitmapPort, "Kubernetes health check node port"},
	{setIPVSIPs, hashIP, "Addresses on the ipvs interface"},
}

func ipsetByName(name string) ipsetDef {
	for _, s := range ipsets {
		if s.name == name {
			return s
		}
	}
	panic("ipvs: no ipset " + name)
}

func nodePortSet(p corev1.Protocol, local bool) string {
	switch {
	case p == corev1.ProtocolTCP && local:
		return setNodePortLocalTCP
	case p == corev1.ProtocolTCP:
		return setNodePortTCP
	case p == corev1.ProtocolUDP && local:
		return setNodePortLocalUDP
	default:
		return setNodePortUDP
	}
}

// createLine is the set as `ipset save` declares it, with kube-proxy's options:
// hash sets "family inet hashsize 1024 maxelem 65536", bitmap:port "range
// 0-65535".
func (s ipsetDef) createLine() string {
	if s.typ == bitmapPort {
		return fmt.Sprintf("create %s %s range 0-65535", s.name, s.typ)
	}
	return fmt.Sprintf("create %s %s family inet hashsize 1024 maxelem 65536", s.name, s.typ)
}

// createOptions are the same options for netlink. Hash sets get the kernel's
// defaults, which are kube-proxy's.
func (s ipsetDef) createOptions() netlink.IpsetCreateOptions {
	// Replace leaves out NLM_F_EXCL: an existing set of the same type is fine,
	// as `ipset create -exist`.
	o := netlink.IpsetCreateOptions{Replace: true}
	if s.typ == bitmapPort {
		o.PortFrom, o.PortTo = 0, 65535
	}
	return o
}

// parseEntry reads an entry in kube-proxy's string form for a set of type typ:
// "80", "10.0.0.1", "10.0.0.1,tcp:80", "10.0.0.1,tcp:80,10.0.0.2".
func parseEntry(typ, s string) (*netlink.IPSetEntry, error) {
	e := &netlink.IPSetEntry{}
	bad := fmt.Errorf("ipset %s entry %q: malformed", typ, s)
	switch typ {
	case bitmapPort:
		port, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return nil, bad
		}
		p := uint16(port)
		e.Port = &p
		return e, nil
	case hashIP:
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, bad
		}
		e.IP = net.IP(a.AsSlice())
		return e, nil
	case hashIPPort, hashIPPortIP, hashIPPortNet:
		parts := strings.Split(s, ",")
		if (typ == hashIPPort && len(parts) != 2) || (typ != hashIPPort && len(parts) != 3) {
			return nil, bad
		}
		a, err := netip.ParseAddr(parts[0])
		if err != nil {
			return nil, bad
		}
		proto, port, ok := strings.Cut(parts[1], ":")
		if !ok {
			return nil, bad
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, bad
		}
		pn := protocolNumber(corev1.Protocol(strings.ToUpper(proto)))
		if pn == 0 {
			return nil, bad
		}
		p, pr := uint16(n), uint8(pn)
		e.IP, e.Port, e.Protocol = net.IP(a.AsSlice()), &p, &pr
		switch typ {
		case hashIPPortIP:
			b, err := netip.ParseAddr(parts[2])
			if err != nil {
				return nil, bad
			}
			e.IP2 = net.IP(b.AsSlice())
		case hashIPPortNet:
			n, err := netip.ParsePrefix(parts[2])
			if err != nil || !n.Addr().Is4() {
				return nil, bad
			}
			e.IP2, e.CIDR2 = net.IP(n.Masked().Addr().AsSlice()), uint8(n.Bits())
		}
		return e, nil
	}
	return nil, fmt.Errorf("ipset type %s: svclab never adds entries to it", typ)
}

// entryString is the kernel's entry in kube-proxy's string form.
func entryString(typ string, e *netlink.IPSetEntry) string {
	ip := func(b net.IP) string {
		a, _ := netip.AddrFromSlice(b)
		return a.Unmap().String()
	}
	port := func() string {
		if e.Port == nil {
			return "?"
		}
		return strconv.Itoa(int(*e.Port))
	}
	proto := func() string {
		if e.Protocol == nil {
			return "tcp"
		}
		return strings.ToLower(string(protocolOf(uint16(*e.Protocol))))
	}
	switch typ {
	case bitmapPort:
		return port()
	case hashIP:
		return ip(e.IP)
	case hashIPPort:
		return fmt.Sprintf("%s,%s:%s", ip(e.IP), proto(), port())
	case hashIPPortIP:
		return fmt.Sprintf("%s,%s:%s,%s", ip(e.IP), proto(), port(), ip(e.IP2))
	case hashIPPortNet:
		return fmt.Sprintf("%s,%s:%s,%s/%d", ip(e.IP), proto(), port(), ip(e.IP2), e.CIDR2)
	}
	return fmt.Sprintf("%+v", *e)
}

// isSetExists tells whether err is ipset's "element already added".
func isSetExists(err error) bool {
	var se nl.IPSetError
	return errors.As(err, &se) && se == nl.IPSET_ERR_EXIST
}
