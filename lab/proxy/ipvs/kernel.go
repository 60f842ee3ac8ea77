package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	libipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// kernel is a node's IPVS table, links and ipsets, through handles opened inside
// the node's network namespace once, usable from any goroutine. It counts the
// netlink requests it makes. It is not safe for concurrent use: moby/ipvs pairs
// requests and answers on one socket, so its owner serialises calls.
type kernel struct {
	ipvs *libipvs.Handle
	nl   *netlink.Handle
	sets *ipsetSocket
	// calls counts netlink requests: IPVS (generic netlink), rtnetlink (links and
	// addresses) and ipset (nfnetlink).
	ipvsCalls, linkCalls, ipsetCalls int
}

func (k *kernel) counts() (ipvs, link, ipset int) { return k.ipvsCalls, k.linkCalls, k.ipsetCalls }

func toService(v *VirtualServer) *libipvs.Service {
	return &libipvs.Service{
		Address: net.IP(v.Addr.AsSlice()), Protocol: protocolNumber(v.Protocol), Port: v.Port,
		SchedName: v.Scheduler, Flags: v.Flags, Timeout: v.Timeout,
		AddressFamily: unix.AF_INET, Netmask: 0xffffffff,
	}
}

func fromService(s *libipvs.Service) VirtualServer {
	a, _ := netip.AddrFromSlice(s.Address)
	return VirtualServer{
		Protocol: protocolOf(s.Protocol), Addr: a.Unmap(), Port: s.Port,
		Scheduler: s.SchedName, Flags: s.Flags &^ flagHashed, Timeout: s.Timeout,
	}
}

func toDestination(r RealServer) *libipvs.Destination {
	return &libipvs.Destination{
		Address: net.IP(r.Addr.AsSlice()), Port: r.Port, Weight: r.Weight,
		ConnectionFlags: libipvs.ConnectionFlagMasq, AddressFamily: unix.AF_INET,
	}
}

// dest is a real server as the kernel reports it.
type dest struct {
	RealServer
	active, inactive int
}

func (k *kernel) getService(v *VirtualServer) (*VirtualServer, error) {
	k.ipvsCalls++
	s, err := k.ipvs.GetService(toService(v))
	if err != nil {
		return nil, err
	}
	got := fromService(s)
	return &got, nil
}

func (k *kernel) services() ([]VirtualServer, error) {
	k.ipvsCalls++
	ss, err := k.ipvs.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list IPVS services: %w", err)
	}
	out := make([]VirtualServer, len(ss))
	for i, s := range ss {
		out[i] = fromService(s)
	}
	return out, nil
}

func (k *kernel) addService(v *VirtualServer) error {
	k.ipvsCalls++
	if err := k.ipvs.NewService(toService(v)); err != nil {
		return fmt.Errorf("add virtual server %s: %w", v.Key(), err)
	}
	return nil
}

func (k *kernel) updateService(v *VirtualServer) error {
	k.ipvsCalls++
	if err := k.ipvs.UpdateService(toService(v)); err != nil {
		return fmt.Errorf("update virtual server %s: %w", v.Key(), err)
	}
	return nil
}

func (k *kernel) deleteService(v *VirtualServer) error {
	k.ipvsCalls++
	if err := k.ipvs.DelService(toService(v)); err != nil {
		return fmt.Errorf("delete virtual server %s: %w", v.Key(), err)
	}
	return nil
}

func (k *kernel) dests(v *VirtualServer) ([]dest, error) {
	k.ipvsCalls++
	ds, err := k.ipvs.GetDestinations(toService(v))
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", v.Key(), err)
	}
	out := make([]dest, len(ds))
	for i, d := range ds {
		a, _ := netip.AddrFromSlice(d.Address)
		out[i] = dest{RealServer: RealServer{Addr: a.Unmap(), Port: d.Port, Weight: d.Weight},
			active: d.ActiveConnections, inactive: d.InactiveConnections}
	}
	return out, nil
}

func (k *kernel) addDest(v *VirtualServer, r RealServer) error {
	k.ipvsCalls++
	if err := k.ipvs.NewDestination(toService(v), toDestination(r)); err != nil {
		return fmt.Errorf("add real server %s to %s: %w", r, v.Key(), err)
	}
	return nil
}

func (k *kernel) updateDest(v *VirtualServer, r RealServer) error {
	k.ipvsCalls++
	if err := k.ipvs.UpdateDestination(toService(v), toDestination(r)); err != nil {
		return fmt.Errorf("set weight %d on real server %s of %s: %w", r.Weight, r, v.Key(), err)
	}
	return nil
}

func (k *kernel) deleteDest(v *VirtualServer, r RealServer) error {
	k.ipvsCalls++
	if err := k.ipvs.DelDestination(toService(v), toDestination(r)); err != nil {
		return fmt.Errorf("delete real server %s of %s: %w", r, v.Key(), err)
	}
	return nil
}

// ensureDummy creates kube-ipvs0 unless it exists, and returns it. As kube-proxy,
// it leaves the link down: the kernel adds local routes for its addresses all the
// same, and a down link answers nothing itself.
func (k *kernel) ensureDummy() (netlink.Link, error) {
	k.linkCalls++
	l, err := k.nl.LinkByName(DummyDevice)
	if err == nil {
		return l, nil
	}
	k.linkCalls++
	if err := k.nl.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: DummyDevice}}); err != nil {
		return nil, fmt.Errorf("create %s (needs CONFIG_DUMMY): %w", DummyDevice, err)
	}
	k.linkCalls++
	l, err = k.nl.LinkByName(DummyDevice)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DummyDevice, err)
	}
	return l, nil
}

// addresses lists the IPv4 addresses of the namespace: those on dummy, and the
// others except loopback ones (kube-proxy's GetAllLocalAddressesExcept).
func (k *kernel) addresses(dummy netlink.Link) (bound, node []netip.Addr, err error) {
	k.linkCalls++
	addrs, err := k.nl.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		switch {
		case a.LinkIndex == dummy.Attrs().Index:
			bound = append(bound, ip)
		case !ip.IsLoopback():
			node = append(node, ip)
		}
	}
	return bound, node, nil
}

func (k *kernel) bind(dummy netlink.Link, a netip.Addr) error {
	k.linkCalls++
	err := k.nl.AddrAdd(dummy, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(32, 32)}})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("bind %s to %s: %w", a, DummyDevice, err)
	}
	return nil
}

func (k *kernel) unbind(dummy netlink.Link, a netip.Addr) error {
	k.linkCalls++
	err := k.nl.AddrDel(dummy, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(32, 32)}})
	if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("unbind %s from %s: %w", a, DummyDevice, err)
	}
	return nil
}

func (k *kernel) ensureSet(s ipsetDef) error {
	k.ipsetCalls++
	if err := k.nl.IpsetCreate(s.name, s.typ, s.createOptions()); err != nil {
		return fmt.Errorf("create ipset %s %s (needs CONFIG_IP_SET): %w", s.name, s.typ, err)
	}
	return nil
}

func (k *kernel) setEntries(s ipsetDef) (map[string]bool, error) {
	k.ipsetCalls++
	res, err := k.nl.IpsetList(s.name)
	if err != nil {
		return nil, fmt.Errorf("list ipset %s: %w", s.name, err)
	}
	out := map[string]bool{}
	for i := range res.Entries {
		out[entryString(s.typ, &res.Entries[i])] = true
	}
	return out, nil
}

func (k *kernel) addEntry(s ipsetDef, entry string) error {
	e, err := parseEntry(s.typ, entry)
	if err != nil {
		return err
	}
	k.ipsetCalls++
	if err := k.sets.addDel(nl.IPSET_CMD_ADD, s, e); err != nil && !isSetExists(err) {
		return fmt.Errorf("ipset add %s %s: %w", s.name, entry, err)
	}
	return nil
}

func (k *kernel) deleteEntry(s ipsetDef, entry string) error {
	e, err := parseEntry(s.typ, entry)
	if err != nil {
		return err
	}
	k.ipsetCalls++
	if err := k.sets.addDel(nl.IPSET_CMD_DEL, s, e); err != nil && !isSetExists(err) {
		return fmt.Errorf("ipset del %s %s: %w", s.name, entry, err)
	}
	return nil
}
