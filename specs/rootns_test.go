package specs

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// rootSysctls are the settings a lab would be tempted to change in the root
// namespace; it must change none of them.
var rootSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/ipv4/conf/all/rp_filter",
	"net/ipv4/conf/all/arp_ignore",
	"net/ipv4/conf/all/arp_announce",
	"net/ipv4/conf/all/send_redirects",
	"net/ipv4/fib_multipath_hash_policy",
	"net/ipv4/fib_multipath_hash_fields",
	"net/bridge/bridge-nf-call-iptables",
	"net/ipv6/conf/all/disable_ipv6",
	"net/netfilter/nf_conntrack_tcp_be_liberal",
	"net/ipv4/vs/conntrack",
	"net/ipv4/vs/expire_nodest_conn",
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// rootSnapshot describes the root network namespace: links, addresses, routes of
// every table, policy rules, iptables rules of both backends and the sysctls above.
// It only reads: the legacy tables are dumped only if they already exist, since
// asking for them would create them.
func rootSnapshot() (string, error) {
	var b strings.Builder
	links, err := netlink.LinkList()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range links {
		a := l.Attrs()
		lines = append(lines, fmt.Sprintf("link %s %s master=%d flags=%v", a.Name, l.Type(), a.MasterIndex, a.Flags))
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		lines = append(lines, fmt.Sprintf("addr %s link=%d", a.IPNet, a.LinkIndex))
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		lines = append(lines, "route "+r.String())
	}
	rules, err := netlink.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return "", err
	}
	for _, r := range rules {
		lines = append(lines, "rule "+r.String())
	}
	sort.Strings(lines)
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n")
	for _, s := range rootSysctls {
		v, err := os.ReadFile("/proc/sys/" + s)
		if err == nil {
			fmt.Fprintf(&b, "sysctl %s=%s", s, v)
		}
	}
	saves := [][]string{{"iptables-nft-save"}}
	if names, _ := os.ReadFile("/proc/net/ip_tables_names"); len(strings.TrimSpace(string(names))) > 0 {
		fmt.Fprintf(&b, "legacy tables: %s\n", strings.Fields(string(names)))
		saves = append(saves, []string{"iptables-legacy-save"})
	}
	for _, argv := range saves {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", argv[0], err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			b.WriteString(counters.ReplaceAllString(line, "[0:0]") + "\n")
		}
	}
	return b.String(), nil
}
