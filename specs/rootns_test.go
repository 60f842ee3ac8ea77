package specs

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
// asking for them would create them. Every read happens on the calling thread,
// which is in the root namespace: not /proc/net, which is /proc/self/net and
// shows the namespace of the process's main thread, and any goroutine of a lab
// inside namespaces.Do may be on that thread at the time: the snapshot then
// listed a node's legacy tables as the root's (1 run in 8 of the load balancer
// container with kube-proxy-iptables-legacy).
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
	if names, _ := os.ReadFile("/proc/thread-self/net/ip_tables_names"); len(strings.TrimSpace(string(names))) > 0 {
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

// rootChanges lists how the root snapshot after differs from before, a line each:
// "- " for a line gone, "+ " for a line new. Lines that only moved (the order of
// iptables rules matters) are reported as one entry with both texts.
func rootChanges(before, after string) []string {
	if before == after {
		return nil
	}
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	count := map[string]int{}
	for _, l := range b {
		count[l]++
	}
	for _, l := range a {
		count[l]--
	}
	var changes []string
	for _, l := range b {
		if count[l] > 0 {
			changes = append(changes, "- "+l)
			count[l]--
		}
	}
	for _, l := range a {
		if count[l] < 0 {
			changes = append(changes, "+ "+l)
			count[l]++
		}
	}
	if len(changes) == 0 {
		changes = []string{"the same lines in another order; before:\n" + before + "\nafter:\n" + after}
	}
	return changes
}

var _ = Describe("rootChanges, the root snapshot check's report", func() {
	It("names the lines gone and the lines new, and a reorder, and nothing for the same snapshot", func() {
		before := "link eth0\nroute a\n-A INPUT -j X\n-A INPUT -j Y\n"
		Expect(rootChanges(before, before)).To(BeEmpty())
		Expect(rootChanges(before, "link eth0\nroute b\n-A INPUT -j X\n-A INPUT -j Y\n")).To(Equal([]string{"- route a", "+ route b"}))
		Expect(rootChanges(before, before+"legacy tables: [filter]\n")).To(Equal([]string{"+ legacy tables: [filter]"}))
		Expect(rootChanges(before, "link eth0\nroute a\n-A INPUT -j Y\n-A INPUT -j X\n")).To(ConsistOf(HavePrefix("the same lines in another order")))
	})
})
