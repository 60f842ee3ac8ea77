// Package nstest gives Go tests throwaway network namespaces to program the
// kernel in.
package nstest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/namespaces"
)

// New creates a network namespace ("svclab-t-" and a random suffix, so `svclab
// clean` knows it) with lo up, deleted when the test ends, pass or fail. It
// returns the namespace's name and a netlink handle bound to it, closed at the
// end too. Without root the test fails, saying that it does what (e.g. "programs
// iptables") and needs root: it never skips.
func New(tb testing.TB, does string) (string, *netlink.Handle) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatalf("this test %s in a network namespace of its own and must run as root", does)
	}
	name := fmt.Sprintf("svclab-t-%08x", rand.Uint32())
	if err := namespaces.Create(name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := namespaces.Delete(name); err != nil {
			tb.Errorf("delete namespace %s: %v", name, err)
		}
	})
	nsh, err := netns.GetFromPath(namespaces.Path(name))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nsh.Close() })
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Close)
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		tb.Fatalf("namespace %s: lo up: %v", name, err)
	}
	return name, h
}
