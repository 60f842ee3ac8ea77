package proxy

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/namespaces"
)

// newTestNS creates a throwaway network namespace ("svclab-t-" and a random suffix)
// with lo up, deleted when the test ends, pass or fail. It returns the namespace's
// name and a netlink handle bound to it. The tests using it need root and fail
// without it.
func newTestNS(t *testing.T) (string, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test works in a network namespace of its own and must run as root")
	}
	name := fmt.Sprintf("svclab-t-%08x", rand.Uint32())
	if err := namespaces.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := namespaces.Delete(name); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	nsh, err := netns.GetFromPath(namespaces.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsh.Close() })
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("namespace %s: lo up: %v", name, err)
	}
	return name, h
}
