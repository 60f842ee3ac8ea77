package iptables

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nfacct talks to the kernel's extended accounting (nfnetlink_acct) of one network
// namespace. kube-proxy 1.31 and later create two named counters there and let two
// rules count packets into them (-m nfacct); the rules are written only when the
// counters could be created.
type nfacct struct {
	sock *nl.NetlinkSocket
}

// openNFAcct opens a netfilter netlink socket inside the namespace ns.
func openNFAcct(ns netns.NsHandle) (*nfacct, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nfacct: open netfilter netlink socket: %w", err)
	}
	return &nfacct{sock: s}, nil
}

func (a *nfacct) Close() { a.sock.Close() }

// Messages and attributes of nfnetlink_acct (linux/netfilter/nfnetlink_acct.h).
const (
	nfnlMsgAcctNew = 0
	nfacctAttrName = 1
)

// ensure creates the counter called name unless it exists.
func (a *nfacct) ensure(name string) error {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   uint32(unix.SizeofNlMsghdr),
			Type:  uint16(nfnlMsgAcctNew | unix.NFNL_SUBSYS_ACCT<<8),
			Flags: unix.NLM_F_REQUEST | unix.NLM_F_CREATE | unix.NLM_F_ACK,
		},
		Sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: a.sock}},
	}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_NETLINK, Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(nfacctAttrName, nl.ZeroTerminated(name)))
	_, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	// The kernel answers EBUSY when a counter of that name exists (and neither
	// NLM_F_EXCL nor NLM_F_REPLACE is set): it is there, which is all we want.
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("nfacct: create counter %s: %w", name, err)
	}
	return nil
}
