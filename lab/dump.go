package lab

import (
	"fmt"
	"strings"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// Dump returns what a person debugging a failed check looks at first, for the named
// members (every node and load balancer when none is named): rules, conntrack,
// addresses and routes.
// Errors of the tools go into the text: a dump never fails.
func (l *Lab) Dump(members ...string) string {
	if len(members) == 0 {
		t := l.Topology()
		for _, n := range t.Nodes {
			members = append(members, n.Name)
		}
		for _, lb := range t.LoadBalancers {
			members = append(members, lb.Name)
		}
	}
	var b strings.Builder
	for _, name := range members {
		m, err := l.Member(name)
		if err != nil {
			fmt.Fprintf(&b, "### %s: %v\n", name, err)
			continue
		}
		for _, argv := range dumpCommands(l.mode, l.config, m.Kind) {
			fmt.Fprintf(&b, "### %s %s (netns %s): %s\n", m.Kind, m.Name, m.NetNS, strings.Join(argv, " "))
			out, err := namespaces.Output(m.NetNS, argv...)
			b.Write(out)
			if err != nil {
				fmt.Fprintf(&b, "(%v)\n", err)
			}
		}
	}
	return b.String()
}

// dumpCommands are the commands Dump runs in a member of kind: addresses and
// routes, and on a node mode m's rules under configuration c and conntrack.
func dumpCommands(m proxy.Mode, c proxy.Config, kind string) [][]string {
	cmds := [][]string{{"ip", "-4", "addr"}, {"ip", "-4", "route"}}
	if kind != member.KindNode || m.Rules == nil {
		return cmds
	}
	return append(append(cmds, m.Rules(c)...), []string{"conntrack", "-L"})
}
