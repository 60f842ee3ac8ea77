package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// moduleTrees are directories under lib/modules/RELEASE/kernel that go into the
// guest whole. Only preloadModules are loaded at boot; the rest are there so the
// guest kernel can autoload what a lab asks for (an xt match, an nft expression,
// a qdisc) through /sbin/modprobe, as a real node would.
var moduleTrees = []string{
	"net/netfilter",
	"net/ipv4/netfilter",
	"net/ipv6/netfilter",
	"net/bridge",
	"net/sched",
	"net/8021q",
	"drivers/virtio",
}

// moduleFiles are single modules added besides moduleTrees.
var moduleFiles = []string{
	"crypto/crc32c_generic.ko",
	"drivers/char/virtio_console.ko",
	// Text search algorithms for xt_string, which requests them by name.
	"lib/ts_bm.ko",
	"lib/ts_kmp.ko",
	"lib/ts_fsm.ko",
	"drivers/net/dummy.ko",
	"drivers/net/veth.ko",
	"drivers/net/macvlan.ko",
	"drivers/net/ipvlan/ipvlan.ko",
	"drivers/net/vxlan/vxlan.ko",
	"net/ipv4/ipip.ko",
	"net/ipv4/tcp_diag.ko",
	"net/ipv4/udp_diag.ko",
	// NETLINK_XFRM: vishvananda/netlink's handles open a socket of every family
	// they support, and fail if one is missing.
	"net/xfrm/xfrm_user.ko",
}

// earlyModules give the guest its virtio serial ports, the channel to the host;
// /init loads them before anything else.
var earlyModules = []string{"virtio_pci", "virtio_console"}

// preloadModules are loaded by /init before the command starts, in this order.
// crc32c_generic comes first: libcrc32c (needed by ip_vs, nf_tables' nat) asks
// for crc32c through a soft dependency that busybox modprobe does not follow.
var preloadModules = []string{
	"crc32c_generic",
	"veth", "dummy", "bridge", "br_netfilter", "vxlan",
	"nf_conntrack", "nf_conntrack_netlink", "nf_nat",
	// iptables-legacy tables and the xt extensions kube-proxy uses.
	"ip_tables", "iptable_filter", "iptable_nat", "iptable_mangle", "iptable_raw",
	"ip6_tables", "ip6table_filter", "ip6table_nat", "ip6table_mangle", "ip6table_raw",
	"xt_MASQUERADE", "xt_statistic", "xt_recent", "xt_comment", "xt_mark",
	"xt_addrtype", "xt_conntrack", "xt_ipvs", "xt_physdev", "xt_multiport",
	"xt_tcpudp", "xt_nat", "xt_REDIRECT", "xt_set", "xt_limit", "xt_CT",
	"ipt_REJECT", "ip6t_REJECT",
	// nf_tables, for iptables-nft and for nft itself.
	"nf_tables", "nft_compat", "nft_chain_nat", "nft_ct", "nft_nat", "nft_masq",
	"nft_redir", "nft_reject_inet", "nft_reject_ipv4", "nft_reject_ipv6",
	"nft_numgen", "nft_hash", "nft_limit", "nft_fib_inet", "nft_fib_ipv4", "nft_fib_ipv6",
	// ipset and the set types kube-proxy's IPVS mode creates (and the rest).
	"ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip",
	"ip_set_hash_ipportnet", "ip_set_hash_net", "ip_set_hash_netport",
	"ip_set_hash_netiface", "ip_set_hash_ipmark", "ip_set_hash_ipmac", "ip_set_hash_mac",
	"ip_set_hash_netnet", "ip_set_hash_netportnet", "ip_set_bitmap_ip",
	"ip_set_bitmap_ipmac", "ip_set_bitmap_port", "ip_set_list_set",
	// IPVS with every scheduler kube-proxy accepts.
	"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_sh",
	"ip_vs_dh", "ip_vs_sed", "ip_vs_nq", "ip_vs_mh",
}

// modDep is a parsed modules.dep: module path -> paths it needs, relative to
// lib/modules/RELEASE.
type modDep map[string][]string

func readModDep(file string) (modDep, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := modDep{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, sc.Err()
}

// moduleName is the name modprobe knows a module file by.
func moduleName(p string) string {
	return strings.ReplaceAll(strings.TrimSuffix(path.Base(p), ".ko"), "-", "_")
}

// selectModules returns the module files (relative to lib/modules/RELEASE) the
// guest gets: moduleTrees, moduleFiles and everything they depend on. It fails
// if a preloaded module would be missing.
func selectModules(deps modDep) ([]string, error) {
	chosen := map[string]bool{}
	var add func(string)
	add = func(m string) {
		if chosen[m] {
			return
		}
		chosen[m] = true
		for _, d := range deps[m] {
			add(d)
		}
	}
	for m := range deps {
		for _, t := range moduleTrees {
			if strings.HasPrefix(m, "kernel/"+t+"/") {
				add(m)
			}
		}
	}
	for _, f := range moduleFiles {
		if _, ok := deps["kernel/"+f]; !ok {
			return nil, fmt.Errorf("module %s is not in this kernel", f)
		}
		add("kernel/" + f)
	}
	names := map[string]bool{}
	for m := range chosen {
		names[moduleName(m)] = true
	}
	for _, m := range append(append([]string{}, earlyModules...), preloadModules...) {
		if !names[m] {
			return nil, fmt.Errorf("module %s is not in this kernel or not among the guest's modules", m)
		}
	}
	out := make([]string, 0, len(chosen))
	for m := range chosen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// stageModules unpacks the kernel package's modules into work, picks the guest's
// set, and lays it out under work/guest with its own depmod output (modules.dep,
// modules.alias for autoloading), ready to be added to the guest tree.
func stageModules(ctx context.Context, k Kernel, work string) (guestRoot string, count int, err error) {
	full := filepath.Join(work, "deb")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", k.Deb, full).CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("dpkg-deb -x %s: %v: %s", k.Deb, err, bytes.TrimSpace(out))
	}
	// Newer Debian releases ship modules under /usr/lib/modules.
	modRoot := ""
	for _, d := range []string{"lib/modules", "usr/lib/modules"} {
		if _, err := os.Stat(filepath.Join(full, d, k.Release)); err == nil {
			modRoot = d
			break
		}
	}
	if modRoot == "" {
		return "", 0, fmt.Errorf("%s has no lib/modules/%s", k.Deb, k.Release)
	}
	if out, err := exec.CommandContext(ctx, "depmod", "-b", full, k.Release).CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("depmod -b %s: %v: %s", full, err, bytes.TrimSpace(out))
	}
	src := filepath.Join(full, modRoot, k.Release)
	deps, err := readModDep(filepath.Join(src, "modules.dep"))
	if err != nil {
		return "", 0, err
	}
	mods, err := selectModules(deps)
	if err != nil {
		return "", 0, err
	}
	guestRoot = filepath.Join(work, "guest")
	dst := filepath.Join(guestRoot, "lib", "modules", k.Release)
	for _, m := range mods {
		if err := linkInto(filepath.Join(src, m), filepath.Join(dst, m)); err != nil {
			return "", 0, err
		}
	}
	for _, f := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		if _, err := os.Stat(filepath.Join(src, f)); err == nil {
			if err := linkInto(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
				return "", 0, err
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "depmod", "-b", guestRoot, k.Release).CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("depmod -b %s: %v: %s", guestRoot, err, bytes.TrimSpace(out))
	}
	return guestRoot, len(mods), nil
}

func linkInto(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Link(src, dst)
}
