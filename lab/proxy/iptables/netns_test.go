package iptables

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// newNodeNS creates a throwaway network namespace ("svclab-t-" and a random
// suffix) with lo up, removed when the test ends, pass or fail, and returns its
// path. These tests program real iptables and need root; they fail, not skip,
// without it.
func newNodeNS(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test programs iptables in a network namespace of its own and must run as root")
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
	path := namespaces.Path(name)
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("namespace %s: lo up: %v", name, err)
	}
	return path
}

// nsName is the name of the namespace at path, for namespaces.Output.
func nsName(path string) string { return path[strings.LastIndex(path, "/")+1:] }

// saved is iptables-save of the nat and filter tables in the namespace at path,
// normalised so that two ways of writing the same rules compare equal: chain
// declarations (names only) are sorted, and each chain's rules are kept in order
// but the chains are listed by name (iptables-nft lists chains in the order they
// were made).
func saved(t testing.TB, backend, path string) string {
	t.Helper()
	var out strings.Builder
	for _, table := range []string{"filter", "nat"} {
		b, err := namespaces.Output(nsName(path), xtables.Backends[backend].Save, "-t", table)
		if err != nil {
			t.Fatal(err)
		}
		var decl []string
		rules := map[string][]string{}
		for _, l := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(l, ":"):
				decl = append(decl, strings.Fields(l)[0])
			case strings.HasPrefix(l, "-A "):
				chain := strings.Fields(l)[1]
				rules[chain] = append(rules[chain], l)
			}
		}
		sort.Strings(decl)
		fmt.Fprintf(&out, "*%s\n%s\n", table, strings.Join(decl, "\n"))
		names := make([]string, 0, len(rules))
		for n := range rules {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out.WriteString(strings.Join(rules[n], "\n") + "\n")
		}
	}
	return out.String()
}
