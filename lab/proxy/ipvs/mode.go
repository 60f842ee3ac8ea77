package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

func init() {
	proxy.Register(proxy.Mode{
		Name:      "ipvs",
		Summary:   "kube-proxy's IPVS mode: a virtual server per ClusterIP and NodePort address, kube-ipvs0, ipsets and a few iptables rules",
		New:       proxy.Constructor(New),
		Render:    Render,
		Available: Available,
		Kernel: []string{"ip_vs", "ip_set", "dummy", "nf_tables", "ip_tables", "xt_comment", "xt_conntrack",
			"xt_mark", "xt_addrtype", "xt_set", "xt_MASQUERADE", "ipt_REJECT", "nf_conntrack_netlink"},
	})
}

// validate reads the options this mode knows and rejects the others.
func validate(t proxy.Target, o proxy.Options) (xtables.Backend, error) {
	be, err := xtables.BackendFor(o.Backend)
	if err != nil {
		return xtables.Backend{}, err
	}
	if o.Apply != "" {
		return xtables.Backend{}, fmt.Errorf("ipvs mode has no apply method (got %q): it changes virtual servers one netlink call at a time and writes its few iptables rules with one iptables-restore", o.Apply)
	}
	if o.Scheduler != "" && !schedulers[o.Scheduler] {
		names := make([]string, 0, len(schedulers))
		for s := range schedulers {
			names = append(names, s)
		}
		sort.Strings(names)
		return xtables.Backend{}, fmt.Errorf("IPVS scheduler %q: want one of %s", o.Scheduler, strings.Join(names, ", "))
	}
	if v := t.Cluster.Version; v != (proxy.Version{}) && v != proxy.DefaultVersion {
		return xtables.Backend{}, fmt.Errorf("ipvs mode reproduces kube-proxy %s only (asked for %s)", proxy.DefaultVersion, v)
	}
	return be, nil
}

// Render prints what a proxier for t installs for ports, without root: the virtual
// servers as `ipvsadm -Ln` shows them, the addresses on kube-ipvs0, the ipsets as
// `ipset save` shows them, and the iptables calls and iptables-restore input. The
// NodePort virtual servers listen on the node address and on its cni0 address (the
// first address of its podCIDR), the local addresses a lab node has.
func Render(t proxy.Target, o proxy.Options, ports []proxy.ServicePort) (string, error) {
	if _, err := validate(t, o); err != nil {
		return "", err
	}
	c := ConfigFor(t, o)
	addrs := []netip.Addr{t.Node.IP}
	if t.Node.PodCIDR.IsValid() {
		addrs = append(addrs, t.Node.PodCIDR.Masked().Addr().Next())
	}
	p := NewPlan(c, ports, addrs)
	var b strings.Builder
	fmt.Fprintf(&b, "# kube-proxy %s, ipvs mode, node %s (%s), scheduler %s\n", proxy.DefaultVersion, t.Node.Name, t.Node.IP, c.Scheduler)
	b.WriteString("# ipvsadm -Ln --sort\n")
	b.WriteString(ipvsadmText(p.VirtualServers))
	fmt.Fprintf(&b, "# %s (dummy, down) holds:", DummyDevice)
	for _, a := range p.Bind {
		fmt.Fprintf(&b, " %s/32", a)
	}
	b.WriteString("\n# ipset save\n")
	b.WriteString(ipsetSave(p.Sets))
	b.WriteString("# iptables calls before each iptables-restore (-N: create unless present; -I: insert first unless iptables -C finds it):\n")
	for _, s := range setupSteps() {
		b.WriteString("#   " + s + "\n")
	}
	b.WriteString("# iptables-restore -w 5 --noflush --counters of:\n")
	b.WriteString(Restore(c, p.Sets))
	return b.String(), nil
}

// Available tells whether this kernel has IPVS and ipset and both iptables
// backends are installed.
func Available() error {
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		return errors.New("this kernel has no IPVS (CONFIG_IP_VS: /proc/net/ip_vs is missing); " +
			"run it in svclab's VM, whose Debian kernel has it: `svclab vm -- ARGS...` (`svclab verify` does that by itself)")
	}
	// A read-only query: the ipset protocol version the kernel speaks.
	if _, _, err := netlink.IpsetProtocol(); err != nil {
		return fmt.Errorf("this kernel has IPVS but no ipset (CONFIG_IP_SET): %w", err)
	}
	for _, name := range []string{"nft", "legacy"} {
		if err := xtables.Backends[name].Check(); err != nil {
			return err
		}
	}
	return nil
}
