package doctor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/record"
)

// Feature states.
const (
	Present = "present"
	Missing = "missing"
	Unknown = "unknown" // not probed; Detail says why
)

// Feature is one kernel feature and what the probe found.
type Feature struct {
	Name  string `json:"name"`
	What  string `json:"what"`
	State string `json:"state"`
	// Detail is the kernel's answer when missing, why it was not probed when
	// unknown.
	Detail string `json:"detail,omitempty"`
	// Fix says how to get it.
	Fix string `json:"fix"`
}

// xtRule is one iptables rule that loads an xtables extension.
type xtRule struct {
	table string
	args  []string
}

// featureDef is a kernel feature doctor knows how to probe. Names are the
// kernel modules that provide them, as modprobe and lsmod show them.
type featureDef struct {
	name, what, fix string
	// rules, for xtables extensions: each must be accepted by every iptables
	// backend the kernel has.
	rules []xtRule
}

// labFeatures are what every lab builds on, whatever the mode.
var labFeatures = []string{"netns", "veth", "bridge", "br_netfilter"}

// probeChain is the chain the xtables probes append to, in the throwaway
// namespace's filter and nat tables.
const probeChain = "SVCLAB-DOCTOR"

// probeSet is the ipset the xt_set probe matches against, of a type kube-proxy's
// IPVS mode uses.
const probeSet, probeSetType = "svclab-doctor", "hash:ip,port"

func filterRule(args ...string) []xtRule { return []xtRule{{"filter", args}} }

var featureDefs = []featureDef{
	{name: "netns", what: "network namespaces", fix: "a kernel with CONFIG_NET_NS"},
	{name: "veth", what: "veth pairs", fix: "modprobe veth, or a kernel with CONFIG_VETH"},
	{name: "bridge", what: "bridges", fix: "modprobe bridge, or a kernel with CONFIG_BRIDGE"},
	{name: "br_netfilter", what: "bridged traffic through iptables", fix: "modprobe br_netfilter, or a kernel with CONFIG_BRIDGE_NETFILTER"},
	{name: "dummy", what: "dummy interfaces, for kube-ipvs0", fix: "modprobe dummy, or a kernel with CONFIG_DUMMY"},
	{name: "nf_tables", what: "nf_tables (iptables' nft backend)", fix: "modprobe nf_tables nft_compat nft_chain_nat, or a kernel with CONFIG_NF_TABLES and CONFIG_NFT_COMPAT"},
	{name: "ip_tables", what: "ip_tables (iptables' legacy backend)", fix: "modprobe ip_tables iptable_filter iptable_nat, or a kernel with CONFIG_IP_NF_IPTABLES"},
	{name: "xt_comment", what: "-m comment", fix: "modprobe xt_comment, or CONFIG_NETFILTER_XT_MATCH_COMMENT",
		rules: filterRule("-m", "comment", "--comment", "svclab doctor", "-j", "RETURN")},
	{name: "xt_conntrack", what: "-m conntrack", fix: "modprobe xt_conntrack, or CONFIG_NETFILTER_XT_MATCH_CONNTRACK",
		rules: filterRule("-m", "conntrack", "--ctstate", "NEW", "-j", "RETURN")},
	{name: "xt_mark", what: "-m mark, -j MARK", fix: "modprobe xt_mark, or CONFIG_NETFILTER_XT_MARK",
		rules: []xtRule{
			{"filter", []string{"-m", "mark", "--mark", "0x4000/0x4000", "-j", "RETURN"}},
			{"filter", []string{"-j", "MARK", "--or-mark", "0x4000"}},
		}},
	{name: "xt_statistic", what: "-m statistic", fix: "modprobe xt_statistic, or CONFIG_NETFILTER_XT_MATCH_STATISTIC",
		rules: filterRule("-m", "statistic", "--mode", "random", "--probability", "0.5", "-j", "RETURN")},
	{name: "xt_recent", what: "-m recent", fix: "modprobe xt_recent, or CONFIG_NETFILTER_XT_MATCH_RECENT",
		rules: filterRule("-m", "recent", "--name", "svclab-doctor", "--rcheck", "--seconds", "10800", "--reap", "-j", "RETURN")},
	{name: "xt_addrtype", what: "-m addrtype", fix: "modprobe xt_addrtype, or CONFIG_NETFILTER_XT_MATCH_ADDRTYPE",
		rules: filterRule("-m", "addrtype", "--dst-type", "LOCAL", "-j", "RETURN")},
	{name: "xt_tcpudp", what: "-m tcp, -m udp", fix: "a kernel with CONFIG_NETFILTER_XTABLES",
		rules: filterRule("-p", "tcp", "-m", "tcp", "--dport", "80", "-j", "RETURN")},
	{name: "xt_set", what: "-m set", fix: "modprobe xt_set, or CONFIG_NETFILTER_XT_SET",
		rules: filterRule("-m", "set", "--match-set", probeSet, "dst,dst", "-j", "RETURN")},
	{name: "xt_MASQUERADE", what: "-j MASQUERADE --random-fully", fix: "modprobe xt_MASQUERADE, or CONFIG_NETFILTER_XT_TARGET_MASQUERADE",
		rules: []xtRule{{"nat", []string{"-j", "MASQUERADE", "--random-fully"}}}},
	{name: "xt_nat", what: "-j DNAT", fix: "modprobe xt_nat, or CONFIG_NETFILTER_XT_NAT",
		rules: []xtRule{{"nat", []string{"-p", "tcp", "-j", "DNAT", "--to-destination", "10.0.0.1:80"}}}},
	{name: "ipt_REJECT", what: "-j REJECT", fix: "modprobe ipt_REJECT, or CONFIG_IP_NF_TARGET_REJECT",
		rules: filterRule("-j", "REJECT")},
	{name: "nf_conntrack_netlink", what: "conntrack over netlink", fix: "modprobe nf_conntrack_netlink, or CONFIG_NF_CT_NETLINK"},
	{name: "ip_vs", what: "IPVS", fix: "modprobe ip_vs, or a kernel with CONFIG_IP_VS"},
	{name: "ip_set", what: "ipset", fix: "modprobe ip_set ip_set_hash_ipport, or a kernel with CONFIG_IP_SET"},
}

func lookupFeature(name string) (featureDef, bool) {
	for _, d := range featureDefs {
		if d.name == name {
			return d, true
		}
	}
	return featureDef{}, false
}

// results collects the probes' answers by feature name.
type results map[string]Feature

func (r results) set(name, state, detail string) {
	d, _ := lookupFeature(name)
	r[name] = Feature{Name: name, What: d.what, Fix: d.fix, State: state, Detail: firstLine(detail)}
}

func (r results) answer(name string, err error) {
	if err != nil {
		r.set(name, Missing, err.Error())
		return
	}
	r.set(name, Present, "")
}

func (r results) list() []Feature {
	out := make([]Feature, 0, len(featureDefs))
	for _, d := range featureDefs {
		f, ok := r[d.name]
		if !ok {
			f = Feature{Name: d.name, What: d.what, Fix: d.fix, State: Unknown, Detail: "not probed"}
		}
		out = append(out, f)
	}
	return out
}

// unprobed answers every feature not answered yet with why it was not probed.
func (r results) unprobed(why string) {
	for _, d := range featureDefs {
		if _, ok := r[d.name]; !ok {
			r.set(d.name, Unknown, why)
		}
	}
}

// probeKernel tries every feature for real inside a network namespace it
// creates for the purpose and removes again on every path out (a killed doctor
// leaves it to `svclab clean`, which removes every svclab- namespace no lab
// owns). Nothing happens in the caller's namespace: links, ipsets and rules are
// made through handles bound to the namespace or by programs started in it.
// Without privileges nothing is probed and every feature says why.
func probeKernel(ctx context.Context, privileged bool) (features []Feature, namespace string, err error) {
	r := results{}
	if !privileged {
		r.unprobed("not probed (not root)")
		return r.list(), "", nil
	}
	name := fmt.Sprintf("%sdoctor-%08x", record.NamespacePrefix, rand.Uint32())
	if err := namespaces.Create(name); err != nil {
		r.set("netns", Missing, err.Error())
		r.unprobed("not probed: no network namespace to try it in")
		return r.list(), "", nil
	}
	defer func() {
		if derr := namespaces.Delete(name); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove the probe's namespace: %w", derr))
		}
	}()
	r.set("netns", Present, "")
	if err := probeIn(ctx, name, r); err != nil {
		return nil, name, err
	}
	return r.list(), name, nil
}

func probeIn(ctx context.Context, name string, r results) error {
	nsh, err := netns.GetFromPath(namespaces.Path(name))
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return fmt.Errorf("netns %s: netlink: %w", name, err)
	}
	defer h.Close()

	r.answer("veth", linkAdd(h, &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "doctor0"}, PeerName: "doctor1"}))
	r.answer("bridge", linkAdd(h, &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "doctor-br"}}))
	if r["bridge"].State == Present {
		// br_netfilter's switches appear in every namespace once it is loaded.
		_, err := namespaces.ReadSysctl(name, "net.bridge.bridge-nf-call-iptables")
		r.answer("br_netfilter", err)
	} else {
		r.set("br_netfilter", Unknown, "not probed: needs a bridge")
	}
	r.answer("dummy", linkAdd(h, &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "doctor-dummy"}}))
	if _, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET); err != nil {
		r.answer("nf_conntrack_netlink", fmt.Errorf("list the conntrack table over netlink: %w", err))
	} else {
		r.answer("nf_conntrack_netlink", nil)
	}
	r.answer("ip_vs", probeIPVS(h))
	if err := h.IpsetCreate(probeSet, probeSetType, netlink.IpsetCreateOptions{}); err != nil {
		r.answer("ip_set", fmt.Errorf("create ipset %s %s: %w", probeSet, probeSetType, err))
	} else {
		r.answer("ip_set", nil)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return probeXtables(ctx, name, r)
}

func linkAdd(h *netlink.Handle, l netlink.Link) error {
	if err := h.LinkAdd(l); err != nil {
		return fmt.Errorf("create %s link %s: %w", l.Type(), l.Attrs().Name, err)
	}
	return nil
}

// probeIPVS asks for IPVS's generic netlink family, which the kernel has
// exactly when it has IPVS (and loads ip_vs for, where it is a module, as the
// IPVS mode's first call would). moby/ipvs is not used here: it runs modprobe
// on the host and logs instead of failing.
func probeIPVS(h *netlink.Handle) error {
	if _, err := h.GenlFamilyGet("IPVS"); err != nil {
		return fmt.Errorf("generic netlink family IPVS: %w", err)
	}
	return nil
}

// probeXtables makes the probe chain with each iptables backend, which tells
// whether the kernel has that backend, then appends one rule per extension with
// every backend that worked.
func probeXtables(ctx context.Context, name string, r results) error {
	// The runners' lock file goes here, not to the host's /run/xtables.lock.
	lockDir, err := os.MkdirTemp("", "svclab-doctor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(lockDir)
	backendFeature := map[string]string{"nft": "nf_tables", "legacy": "ip_tables"}
	var working []*xtables.Runner
	var notProbed []string
	err = namespaces.Do(name, func() error {
		for _, be := range []string{"nft", "legacy"} {
			b := xtables.Backends[be]
			feature := backendFeature[be]
			if err := b.Check(); err != nil {
				r.set(feature, Unknown, "not probed: "+err.Error())
				notProbed = append(notProbed, b.IPTables+" is missing")
				continue
			}
			run := xtables.NewRunner(b, lockDir)
			run.Ctx = ctx
			var cerr error
			for _, table := range []string{"filter", "nat"} {
				if cerr = run.EnsureChain(table, probeChain); cerr != nil {
					break
				}
			}
			r.answer(feature, cerr)
			if cerr == nil {
				working = append(working, run)
			} else {
				notProbed = append(notProbed, b.IPTables+" cannot make a chain")
			}
		}
		for _, d := range featureDefs {
			if len(d.rules) == 0 {
				continue
			}
			switch {
			case len(working) == 0:
				r.set(d.name, Unknown, "not probed: "+strings.Join(notProbed, ", "))
				continue
			case d.name == "xt_set" && r["ip_set"].State != Present:
				r.set(d.name, Unknown, "not probed: needs ipset")
				continue
			}
			r.answer(d.name, appendRules(working, d.rules))
		}
		return nil
	})
	return err
}

// appendRules appends each rule with each runner; the first refusal is the
// answer.
func appendRules(runners []*xtables.Runner, rules []xtRule) error {
	for _, run := range runners {
		for _, rule := range rules {
			if err := run.Do(append([]string{"-t", rule.table, "-A", probeChain}, rule.args...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
