package iptables

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// newNodeNS creates a throwaway network namespace (see nstest.New) and returns
// its path.
func newNodeNS(t testing.TB) string {
	t.Helper()
	name := nstest.New(t, "programs iptables").Name
	return namespaces.Path(name)
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
	return savedWith(t, xtables.Backends[backend].Save, path)
}

// savedWith is saved with the save program given (ip6tables-save's, say).
func savedWith(t testing.TB, save, path string) string {
	t.Helper()
	var out strings.Builder
	for _, table := range []string{"filter", "nat"} {
		b, err := namespaces.Output(nsName(path), save, "-t", table)
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
