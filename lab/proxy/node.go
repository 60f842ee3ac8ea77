package proxy

import (
	"errors"
	"fmt"
	"os"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Prepare checks what every proxier needs before it opens a node: a node
// namespace to program (svclab never programs its own), what the mode needs of
// the kernel and its programs (checks, in order), and the run directory for its
// files.
func Prepare(mode string, t Target, checks ...func() error) error {
	if t.NetNS == "" {
		return fmt.Errorf("%s proxier: no node network namespace (svclab never programs its own)", mode)
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	if t.RunDir != "" {
		if err := os.MkdirAll(t.RunDir, 0o755); err != nil {
			return fmt.Errorf("%s proxier: %w", mode, err)
		}
	}
	return nil
}

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
