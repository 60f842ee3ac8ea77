package namespaces

import (
	"errors"
	"fmt"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NS is a network namespace held open, the one way svclab works in a member's
// namespace from any goroutine: File is its file handle (to open further
// netlink sockets there and to create veth peers directly inside it), Netlink a
// netlink handle bound to it, and Do and Output run code and programs inside it.
type NS struct {
	// Name is the namespace's name under Dir; empty when it was opened by a path
	// elsewhere.
	Name    string
	Path    string
	File    netns.NsHandle
	Netlink *netlink.Handle
	cni     cnins.NetNS
}

// Open opens the named namespace.
func Open(name string) (*NS, error) {
	n, err := OpenPath(Path(name))
	if err != nil {
		return nil, err
	}
	n.Name = name
	return n, nil
}

// OpenPath opens the namespace whose file is path (/run/netns/NAME,
// /proc/PID/ns/net); on error it closes what it opened.
func OpenPath(path string) (*NS, error) {
	n := &NS{Path: path, File: netns.None()}
	var err error
	if n.cni, err = cnins.GetNS(path); err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	if n.File, err = netns.GetFromPath(path); err != nil {
		n.Close()
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	if n.Netlink, err = netlink.NewHandleAt(n.File); err != nil {
		n.Close()
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return n, nil
}

// String names the namespace in messages.
func (n *NS) String() string {
	if n.Name != "" {
		return n.Name
	}
	return n.Path
}

// Close releases the handles; the namespace and what is in it stay.
func (n *NS) Close() error {
	var errs []error
	if n.Netlink != nil {
		n.Netlink.Close()
		n.Netlink = nil
	}
	if n.File.IsOpen() {
		errs = append(errs, n.File.Close())
		n.File = netns.None()
	}
	if n.cni != nil {
		errs = append(errs, n.cni.Close())
		n.cni = nil
	}
	return errors.Join(errs...)
}

// Do runs fn on a thread switched into the namespace (CNI's ns.Do: a locked
// thread of its own, thrown away if it cannot be switched back). Sockets opened
// in fn stay in the namespace and may be used from any goroutine afterwards;
// goroutines started in fn do not inherit the namespace; a process started in fn
// does.
func (n *NS) Do(fn func() error) error {
	if n.cni == nil {
		return fmt.Errorf("netns %s: closed", n)
	}
	if err := n.cni.Do(func(cnins.NetNS) error { return fn() }); err != nil {
		return fmt.Errorf("netns %s: %w", n, err)
	}
	return nil
}

// Output runs a program inside the namespace and returns its standard output; on
// failure the error carries its standard error.
func (n *NS) Output(argv ...string) ([]byte, error) {
	var out []byte
	err := n.Do(func() (err error) {
		out, err = outputHere(argv)
		return err
	})
	return out, err
}
