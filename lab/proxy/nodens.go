package proxy

import (
	"errors"
	"fmt"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NodeNS is a node's network namespace as a proxier holds it open: NS runs code
// on a thread switched into it (the iptables programs, sysctls), Handle opens
// further sockets there (nfacct, ipset), and Netlink is a netlink handle bound to
// it (links, addresses, conntrack).
type NodeNS struct {
	NS      cnins.NetNS
	Handle  netns.NsHandle
	Netlink *netlink.Handle
}

// OpenNodeNS opens the namespace at path; on error it closes what it opened.
func OpenNodeNS(path string) (*NodeNS, error) {
	n := &NodeNS{Handle: netns.None()}
	var err error
	if n.NS, err = cnins.GetNS(path); err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	if n.Handle, err = netns.GetFromPath(path); err != nil {
		n.Close()
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	if n.Netlink, err = netlink.NewHandleAt(n.Handle); err != nil {
		n.Close()
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return n, nil
}

// Close releases the handles; the namespace and what is in it stay.
func (n *NodeNS) Close() error {
	var errs []error
	if n.Netlink != nil {
		n.Netlink.Close()
	}
	if n.Handle.IsOpen() {
		errs = append(errs, n.Handle.Close())
	}
	if n.NS != nil {
		errs = append(errs, n.NS.Close())
	}
	return errors.Join(errs...)
}
