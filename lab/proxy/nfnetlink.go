package proxy

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetfilterSocket is a netfilter netlink (nfnetlink) socket in one network
// namespace, for what the modes ask of netfilter's subsystems directly:
// nfnetlink_acct's counters, ipset's entries.
type NetfilterSocket struct {
	sh *nl.SocketHandle
}

// OpenNetfilterSocket opens a netfilter netlink socket inside the network
// namespace ns.
func OpenNetfilterSocket(ns netns.NsHandle) (*NetfilterSocket, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	return &NetfilterSocket{sh: &nl.SocketHandle{Socket: s}}, nil
}

// Execute sends req on the socket and waits for the kernel's answer, as
// nl.NetlinkRequest.Execute does.
func (s *NetfilterSocket) Execute(req *nl.NetlinkRequest, resType uint16) ([][]byte, error) {
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: s.sh}
	return req.Execute(unix.NETLINK_NETFILTER, resType)
}

// Close closes the socket; a nil or closed one is left alone.
func (s *NetfilterSocket) Close() {
	if s != nil && s.sh != nil {
		s.sh.Close()
		s.sh = nil
	}
}
