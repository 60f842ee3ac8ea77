package iptables

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/proxy"
)

// nfacct talks to the kernel's extended accounting (nfnetlink_acct) of one network
// namespace. kube-proxy 1.31 and later create two named counters there and let two
// rules count packets into them (-m nfacct); the rules are written only when the
// counters could be created.
type nfacct struct {
	*proxy.NetfilterSocket
}

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
	}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_NETLINK, Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(nfacctAttrName, nl.ZeroTerminated(name)))
	_, err := a.Execute(req, 0)
	// The kernel answers EBUSY when a counter of that name exists (and neither
	// NLM_F_EXCL nor NLM_F_REPLACE is set): it is there, which is all we want.
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("nfacct: create counter %s: %w", name, err)
	}
	return nil
}
