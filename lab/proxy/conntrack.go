package proxy

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// UDP has no connection to end, so conntrack keeps sending a client's datagrams
// where the first one went for as long as the client keeps talking: to an endpoint
// that is gone, or, when the first datagram arrived while the Service had no
// endpoint, to the ClusterIP itself, where nothing answers. kube-proxy therefore
// deletes such entries after each sync that changed the endpoints of a UDP Service
// (kubernetes#48370, #59368). These functions do what its pkg/proxy/conntrack does
// since 1.31 (CleanStaleEntries): reconcile the whole conntrack table against the
// current state rather than chase individual changes. Every mode can use them.

// StaleUDPFlows picks, from flows, the UDP entries kube-proxy deletes given the state
// cur: an entry whose original destination is a UDP ClusterIP:port, but whose reply
// does not come from one of that port's serving endpoints; and an entry to a UDP
// NodePort of a Service that has serving endpoints, whose reply does not come from
// one of them. The first kind covers both endpoints that went away and flows that
// reached the ClusterIP before there was an endpoint (their reply source is the
// ClusterIP itself); the second the same through a NodePort.
func StaleUDPFlows(cur []ServicePort, flows []*netlink.ConntrackFlow) []*netlink.ConntrackFlow {
	byServiceIP := map[netip.AddrPort]map[netip.AddrPort]bool{}
	byNodePort := map[uint16]map[netip.AddrPort]bool{}
	for _, sp := range cur {
		if sp.Protocol != corev1.ProtocolUDP {
			continue
		}
		serving := map[netip.AddrPort]bool{}
		for _, e := range sp.Endpoints {
			if e.Serving {
				serving[netip.AddrPortFrom(e.IP, uint16(e.Port))] = true
			}
		}
		byServiceIP[netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port))] = serving
		if sp.NodePort != 0 && len(serving) > 0 {
			byNodePort[uint16(sp.NodePort)] = serving
		}
	}
	var stale []*netlink.ConntrackFlow
	for _, f := range flows {
		if f.Forward.Protocol != unix.IPPROTO_UDP {
			continue
		}
		dst, ok1 := TupleAddr(f.Forward.DstIP, f.Forward.DstPort)
		replySrc, ok2 := TupleAddr(f.Reverse.SrcIP, f.Reverse.SrcPort)
		if !ok1 || !ok2 {
			continue
		}
		if serving, ok := byServiceIP[dst]; ok && !serving[replySrc] {
			stale = append(stale, f)
			continue
		}
		if serving, ok := byNodePort[f.Forward.DstPort]; ok && !serving[replySrc] {
			stale = append(stale, f)
		}
	}
	return stale
}

// TupleAddr is a conntrack tuple's address and port; false when the address is
// not one.
func TupleAddr(ip []byte, port uint16) (netip.AddrPort, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), port), true
}

// CleanStaleUDPConntrack deletes the stale UDP conntrack entries of the namespace h
// is bound to (netlink.NewHandleAt) after a sync to cur that made changes, when the
// changes call for it, and returns how many it deleted.
func CleanStaleUDPConntrack(h *netlink.Handle, changes Changes, cur []ServicePort) (int, error) {
	if !changes.ConntrackCleanupNeeded() {
		return 0, nil
	}
	flows, err := ListConntrack(h)
	if err != nil {
		return 0, err
	}
	stale := StaleUDPFlows(cur, flows)
	if len(stale) == 0 {
		return 0, nil
	}
	filter := flowFilter{}
	for _, f := range stale {
		filter[flowKeyOf(f)] = true
	}
	var deleted uint
	err = retryInterrupted(func() error {
		n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filter)
		deleted += n
		return err
	})
	if err != nil {
		return int(deleted), fmt.Errorf("conntrack: delete %d stale UDP entries: %w", len(stale), err)
	}
	return int(deleted), nil
}

// retryInterrupted retries a conntrack dump the kernel interrupted because the
// table changed under it, as kube-proxy does (a few times, then gives up).
// ListConntrack is the IPv4 conntrack table of the namespace h is bound to,
// read whole: a dump the kernel interrupted (the table changed under it) is
// read again rather than taken as it is.
func ListConntrack(h *netlink.Handle) ([]*netlink.ConntrackFlow, error) {
	var flows []*netlink.ConntrackFlow
	err := retryInterrupted(func() error {
		var err error
		flows, err = h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("conntrack: list entries: %w", err)
	}
	return flows, nil
}

func retryInterrupted(fn func() error) error {
	var err error
	for range 5 {
		err = fn()
		if err == nil || !(errors.Is(err, netlink.ErrDumpInterrupted) || errors.Is(err, unix.EINTR)) {
			return err
		}
	}
	return err
}

// flowKey identifies a conntrack entry by both of its tuples, as kube-proxy's
// filter does: the delete walks a fresh dump and removes what matches the chosen
// entries exactly.
type flowKey struct {
	proto                          uint8
	fwdSrc, fwdDst, revSrc, revDst netip.AddrPort
}

func flowKeyOf(f *netlink.ConntrackFlow) flowKey {
	ap := func(ip []byte, port uint16) netip.AddrPort { a, _ := TupleAddr(ip, port); return a }
	return flowKey{
		proto:  f.Forward.Protocol,
		fwdSrc: ap(f.Forward.SrcIP, f.Forward.SrcPort), fwdDst: ap(f.Forward.DstIP, f.Forward.DstPort),
		revSrc: ap(f.Reverse.SrcIP, f.Reverse.SrcPort), revDst: ap(f.Reverse.DstIP, f.Reverse.DstPort),
	}
}

type flowFilter map[flowKey]bool

func (f flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool { return f[flowKeyOf(flow)] }
