package iptables

import (
	"fmt"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// mode is the iptables mode as registered.
var mode = proxy.Mode{
	Name:      "iptables",
	Summary:   "kube-proxy's iptables mode: KUBE-SERVICES, KUBE-SVC-, KUBE-SEP- chains written with iptables-restore",
	Dataplane: proxy.Dataplane{Model: proxy.ModelIPTables, Selection: proxy.RandomPerConnection},
	Section:   proxy.SectionIPTables,
	Variants:  xtables.Variants(),
	Methods:   []string{ApplyPartial, ApplyFull, ApplyChanged, ApplyPerRule},
	PerRule:   []string{ApplyPerRule},
	Available: Available,
	Kernel: []string{"nf_tables", "ip_tables", "xt_comment", "xt_conntrack", "xt_mark", "xt_statistic",
		"xt_recent", "xt_addrtype", "xt_tcpudp", "xt_MASQUERADE", "xt_nat", "ipt_REJECT", "nf_conntrack_netlink"},
	Cleanup: Cleanup,
	Rules: func(c proxy.Config) [][]string {
		return [][]string{{xtables.SaveProgramFor(c.Backend, c.IPFamily())}}
	},
	Read: Read,
}

func init() {
	// New and Render read mode (its methods), so they join it here.
	mode.New, mode.Render = proxy.Constructor(New), Render
	proxy.Register(mode)
}

// Render prints what a proxier for t installs for ports: the single-call steps as
// comments, then the iptables-restore input of a full sync. It needs no root and
// assumes what kube-proxy finds on svclab's kernel: nfacct present,
// nf_conntrack_tcp_be_liberal off.
func Render(t proxy.Target, s *proxy.State) (string, error) {
	ports := s.Ports
	if _, _, err := validate(t); err != nil {
		return "", err
	}
	cfg := ConfigFor(t)
	rs, err := Generate(cfg, ports)
	if err != nil {
		return "", err
	}
	// The IPv6 proxier's programs are ip6tables'; IPv4's header stays as it was.
	prog, family := "iptables", ""
	if cfg.ipv6() {
		prog, family = "ip6tables", " (IPv6 proxier)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# kube-proxy %s, iptables mode%s, node %s (%s)\n", cfg.Version, family, t.Node.Name, t.Node.IP)
	fmt.Fprintf(&b, "# Ensured with single %s calls before %s-restore (-N: create unless present;\n", prog, prog)
	fmt.Fprintf(&b, "# -I/-A: insert first/append unless %s -C finds the rule):\n", prog)
	for _, s := range rs.Setup {
		b.WriteString("#   " + s.String() + "\n")
	}
	fmt.Fprintf(&b, "# Then %s-restore -w 5 --noflush --counters of:\n", prog)
	b.WriteString(rs.Restore())
	return b.String(), nil
}

// Available tells whether both xtables backends are installed.
func Available() error { return xtables.CheckAll() }
