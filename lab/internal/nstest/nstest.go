// Package nstest gives Go tests throwaway network namespaces to program the
// kernel in.
package nstest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/svclab/svclab/lab/namespaces"
)

// New creates a network namespace ("svclab-t-" and a random suffix, so `svclab
// clean` knows it) with lo up, deleted when the test ends, pass or fail, and
// returns it held open (closed at the end too). Without root the test fails,
// saying that it does what (e.g. "programs iptables") and needs root: it never
// skips.
func New(tb testing.TB, does string) *namespaces.NS {
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
	ns, err := namespaces.Open(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Close() })
	lo, err := ns.Netlink.LinkByName("lo")
	if err == nil {
		err = ns.Netlink.LinkSetUp(lo)
	}
	if err != nil {
		tb.Fatalf("namespace %s: lo up: %v", name, err)
	}
	return ns
}
