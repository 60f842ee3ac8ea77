package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// mode is the IPVS mode as registered.
var mode = proxy.Mode{
	Name:      "ipvs",
	Summary:   "kube-proxy's IPVS mode: a virtual server per ClusterIP and NodePort address, kube-ipvs0, ipsets and a few iptables rules",
	Dataplane: proxy.Dataplane{Model: proxy.ModelIPVS, Selection: proxy.SharedPerVirtualServer},
	Section:   proxy.SectionIPVS,
	// It changes virtual servers one netlink call at a time and writes its few
	// iptables rules with one iptables-restore.
	Methods:         []string{MethodNetlink},
	Available:       Available,
	NoUserNamespace: errNoUserNamespace,
	Kernel: []string{"ip_vs", "ip_set", "dummy", "nf_tables", "ip_tables", "xt_comment", "xt_conntrack",
		"xt_mark", "xt_addrtype", "xt_set", "xt_MASQUERADE", "ipt_REJECT", "nf_conntrack_netlink"},
	Rules: func(c proxy.Config) [][]string {
		return [][]string{{"ipvsadm", "-Ln"}, {"ipset", "save"}, {xtables.SaveProgram(c.Backend)}}
	},
	Read: Read,
}

// MethodNetlink is how the mode writes: incremental netlink calls.
const MethodNetlink = "netlink"

func init() {
	// New and Render read mode (its methods), so they join it here.
	mode.New, mode.Render = proxy.Constructor(New), Render
	proxy.Register(mode)
}

// validate reads the settings this mode knows.
func validate(t proxy.Target) (xtables.Backend, error) {
	be, err := xtables.BackendFor(t.Config.Backend)
	if err != nil {
		return xtables.Backend{}, err
	}
	if err := mode.CheckMethod(t.Config.Method); err != nil {
		return xtables.Backend{}, err
	}
	if s := t.Config.KubeProxy.IPVS.Scheduler; s != "" && !schedulers[s] {
		names := make([]string, 0, len(schedulers))
		for s := range schedulers {
			names = append(names, s)
		}
		sort.Strings(names)
		return xtables.Backend{}, fmt.Errorf("ipvs.scheduler %q: want one of %s", s, strings.Join(names, ", "))
	}
	if v := t.Config.Version; v != (version.Version{}) && v != version.Default {
		return xtables.Backend{}, fmt.Errorf("ipvs mode reproduces kube-proxy %s only (asked for %s)", version.Default, v)
	}
	if err := t.Config.Validate(proxy.SectionIPVS); err != nil {
		return xtables.Backend{}, err
	}
	return be, nil
}

// Render prints what a proxier for t installs for ports, without root: the virtual
// servers as `ipvsadm -Ln` shows them, the addresses on kube-ipvs0, the ipsets as
// `ipset save` shows them, and the iptables calls and iptables-restore input. The
// NodePort virtual servers listen on the node address and on its cni0 address (the
// first address of its podCIDR), the local addresses a lab node has.
func Render(t proxy.Target, s *proxy.State) (string, error) {
	ports := s.Ports
	if _, err := validate(t); err != nil {
		return "", err
	}
	c := ConfigFor(t)
	addrs := []netip.Addr{t.Node.IP}
	if t.Node.PodCIDR.IsValid() {
		addrs = append(addrs, t.Node.PodCIDR.Masked().Addr().Next())
	}
	p := NewPlan(c, ports, addrs)
	var b strings.Builder
	fmt.Fprintf(&b, "# kube-proxy %s, ipvs mode, node %s (%s), scheduler %s\n", version.Default, t.Node.Name, t.Node.IP, c.Scheduler)
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
	b.WriteString(Restore(c, p))
	return b.String(), nil
}

// errNoUserNamespace: the kernel registers IPVS's sysctls (net.ipv4.vs.*,
// which kube-proxy and svclab's proxier set: conntrack=1) only in network
// namespaces of the initial user namespace (ip_vs_control.c hides them from
// the others), so the mode cannot run without root on the host. Found by the
// rootless spec in svclab's VM: "open /proc/sys/net/ipv4/vs/conntrack: no
// such file or directory".
var errNoUserNamespace = errors.New("IPVS cannot run in a user namespace (svclab without root): the kernel gives its sysctls (net.ipv4.vs.*) " +
	"to network namespaces of the initial user namespace only; run it in svclab's VM, as root in its guest (`svclab verify` does that by itself), or as root")

// Available tells whether this kernel has IPVS and ipset and both iptables
// backends are installed.
func Available() error {
	if namespaces.InUserNamespace() {
		return errNoUserNamespace
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		return errors.New("this kernel has no IPVS (CONFIG_IP_VS: /proc/net/ip_vs is missing); " +
			"run it in svclab's VM, whose Debian kernel has it: `svclab vm -- ARGS...` (`svclab verify` does that by itself)")
	}
	// A read-only query: the ipset protocol version the kernel speaks.
	if _, _, err := netlink.IpsetProtocol(); err != nil {
		return fmt.Errorf("this kernel has IPVS but no ipset (CONFIG_IP_SET): %w", err)
	}
	return xtables.CheckAll()
}
