package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/proxy"
)

// ipsetSocket adds and deletes ipset entries over nfnetlink. vishvananda/netlink's
// IpsetAdd sends a protocol with every port, which a bitmap:port set (the
// NodePort sets) refuses; this sends each attribute a set type takes, as the ipset
// program does.
type ipsetSocket struct {
	*proxy.NetfilterSocket
}

func (s *ipsetSocket) addDel(cmd int, set ipsetDef, e *netlink.IPSetEntry) error {
	req := nl.NewNetlinkRequest(cmd|(unix.NFNL_SUBSYS_IPSET<<8), nl.GetIpsetFlags(cmd))
	req.AddData(&nl.Nfgenmsg{NfgenFamily: uint8(unix.AF_NETLINK), Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_PROTOCOL, nl.Uint8Attr(nl.IPSET_PROTOCOL)))
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(set.name)))
	data := nl.NewRtAttr(nl.IPSET_ATTR_DATA|int(nl.NLA_F_NESTED), nil)
	if e.IP != nil {
		ip := nl.NewRtAttr(nl.IPSET_ATTR_IPADDR_IPV4|int(nl.NLA_F_NET_BYTEORDER), e.IP.To4())
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_IP|int(nl.NLA_F_NESTED), ip.Serialize()))
	}
	if e.Port != nil {
		if set.typ != bitmapPort && e.Protocol != nil {
			data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PROTO, nl.Uint8Attr(*e.Protocol)))
		}
		buf := make([]byte, 2)
		binary.BigEndian.PutUint16(buf, *e.Port)
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT|int(nl.NLA_F_NET_BYTEORDER), buf))
	}
	if e.IP2 != nil {
		ip := nl.NewRtAttr(nl.IPSET_ATTR_IPADDR_IPV4|int(nl.NLA_F_NET_BYTEORDER), e.IP2.To4())
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_IP2|int(nl.NLA_F_NESTED), ip.Serialize()))
		if set.typ == hashIPPortNet {
			data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_CIDR2, nl.Uint8Attr(e.CIDR2)))
		}
	}
	req.AddData(data)
	_, err := s.Execute(req, 0)
	var errno syscall.Errno
	if errors.As(err, &errno) && int(errno) >= nl.IPSET_ERR_PRIVATE {
		return nl.IPSetError(uintptr(errno))
	}
	if err != nil {
		return fmt.Errorf("ipset netlink: %w", err)
	}
	return nil
}
