package iptables

import (
	"fmt"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

func init() {
	proxy.Register(proxy.Mode{
		Name:      "iptables",
		Summary:   "kube-proxy's iptables mode: KUBE-SERVICES, KUBE-SVC-, KUBE-SEP- chains written with iptables-restore",
		New:       proxy.Constructor(New),
		Render:    Render,
		Available: Available,
		Kernel: []string{"nf_tables", "ip_tables", "xt_comment", "xt_conntrack", "xt_mark", "xt_statistic",
			"xt_recent", "xt_addrtype", "xt_tcpudp", "xt_MASQUERADE", "xt_nat", "ipt_REJECT", "nf_conntrack_netlink"},
	})
}

// Render prints what a proxier for t installs for ports: the single-call steps as
// comments, then the iptables-restore input of a full sync. It needs no root and
// assumes what kube-proxy finds on svclab's kernel: nfacct present,
// nf_conntrack_tcp_be_liberal off.
func Render(t proxy.Target, o proxy.Options, ports []proxy.ServicePort) (string, error) {
	if _, _, err := validate(t, o); err != nil {
		return "", err
	}
	cfg := ConfigFor(t)
	rs, err := Generate(cfg, ports)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# kube-proxy %s, iptables mode, node %s (%s)\n", cfg.Version, t.Node.Name, t.Node.IP)
	b.WriteString("# Ensured with single iptables calls before iptables-restore (-N: create unless present;\n")
	b.WriteString("# -I/-A: insert first/append unless iptables -C finds the rule):\n")
	for _, s := range rs.Setup {
		b.WriteString("#   " + s.String() + "\n")
	}
	b.WriteString("# Then iptables-restore -w 5 --noflush --counters of:\n")
	b.WriteString(rs.Restore())
	return b.String(), nil
}

// Available tells whether the default (nft) and legacy backends are installed.
func Available() error {
	for _, name := range []string{"nft", "legacy"} {
		if err := xtables.Backends[name].Check(); err != nil {
			return err
		}
	}
	return nil
}
