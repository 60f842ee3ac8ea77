package lab

import (
	"fmt"
	"strings"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
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
		for _, argv := range l.dumpCommands(m.Kind) {
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

func (l *Lab) dumpCommands(kind string) [][]string {
	cmds := [][]string{{"ip", "-4", "addr"}, {"ip", "-4", "route"}}
	if kind != member.KindNode || l.mode.Rules == nil {
		return cmds
	}
	return append(append(cmds, l.mode.Rules(l.config)...), []string{"conntrack", "-L"})
}
