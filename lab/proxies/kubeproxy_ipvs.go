package proxies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// ipvsSyncPending says what shows kube-proxy's IPVS mode inside a sync on the
// node of ns, whose IPVS state got already matches what it must program, or
// is empty when nothing does: an address it serves that its rules would still
// refuse (ipvsAdmittedSets), or a set filled before its rule (ruleLessIPSet).
func ipvsSyncPending(ns *namespaces.NS, backend string, got proxy.ServiceMap) string {
	sets, err := ipsetEntries(ns)
	if err != nil {
		return ""
	}
	if f, ok := unadmitted(got, sets); ok {
		return fmt.Sprintf("IPVS serves %s:%d/%s, but none of %s holds it yet, so KUBE-IPVS-FILTER refuses it (kube-proxy fills its sets one by one)",
			f.Addr, f.Port, f.Protocol, strings.Join(ipvsAdmittedSets, ", "))
	}
	if set := ruleLessIPSet(ns, backend, sets); set != "" {
		return "ipset " + set + " holds entries, but kube-proxy has not written its rule yet (its sync is between IPVS and its iptables rules)"
	}
	return ""
}

// ipvsAdmittedSets are the sets whose entries (address, protocol, port)
// KUBE-IPVS-FILTER lets through: a new connection to any other address in
// KUBE-IPVS-IPS is rejected (pkg/proxy/ipvs/proxier.go at v1.37.2,
// writeIptablesRules). kube-proxy fills its sets one by one, in map order, an
// `ipset add` per entry (ipset.go, syncIPSetEntries), so KUBE-IPVS-IPS may
// hold a new load balancer IP before KUBE-LOAD-BALANCER holds its port: a
// running lab's first LoadBalancer Service was refused that way (the spec "A
// running lab's first LoadBalancer Service" in kube-proxy-ipvs under TCG: no
// conntrack entry on either node, the REJECT's mark).
var ipvsAdmittedSets = []string{"KUBE-CLUSTER-IP", "KUBE-LOAD-BALANCER", "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL"}

// unadmitted finds a frontend at an address of got (a ClusterIP, external or
// load balancer IP, which kube-proxy binds to kube-ipvs0) that no admitted set
// holds.
func unadmitted(got proxy.ServiceMap, sets map[string]map[string]bool) (proxy.Frontend, bool) {
	for f := range got {
		if f.IsNodePort() {
			continue
		}
		entry := fmt.Sprintf("%s,%s:%d", f.Addr, strings.ToLower(string(f.Protocol)), f.Port)
		if !slices.ContainsFunc(ipvsAdmittedSets, func(s string) bool { return sets[s][entry] }) {
			return f, true
		}
	}
	return proxy.Frontend{}, false
}

// ipsetEntries reads the node's ipsets and their entries as `ipset save`
// prints them ("add SET ENTRY [OPTIONS]").
func ipsetEntries(ns *namespaces.NS) (map[string]map[string]bool, error) {
	out, err := ns.Output("ipset", "save")
	if err != nil {
		return nil, err
	}
	sets := map[string]map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "add" {
			continue
		}
		if sets[f[1]] == nil {
			sets[f[1]] = map[string]bool{}
		}
		sets[f[1]][f[2]] = true
	}
	return sets, nil
}

// ipvsSetRules are the rules kube-proxy's IPVS mode writes for a set only while
// the set holds entries: the set, and the table and chain of its rule
// (pkg/proxy/ipvs/proxier.go at v1.37.2: ipsetWithIptablesChain, and
// writeIptablesRules for the ClusterIP and external IP sets). Other rules match
// some of these sets at all times (KUBE-IPVS-FILTER's), so a set's reference
// count cannot tell.
var ipvsSetRules = []struct{ set, table, chain string }{
	{"KUBE-LOOP-BACK", "nat", "KUBE-POSTROUTING"},
	{"KUBE-CLUSTER-IP", "nat", "KUBE-SERVICES"},
	{"KUBE-EXTERNAL-IP", "nat", "KUBE-SERVICES"},
	{"KUBE-EXTERNAL-IP-LOCAL", "nat", "KUBE-SERVICES"},
	{"KUBE-LOAD-BALANCER", "nat", "KUBE-SERVICES"},
	{"KUBE-LOAD-BALANCER-LOCAL", "nat", "KUBE-LOAD-BALANCER"},
	{"KUBE-NODE-PORT-LOCAL-TCP", "nat", "KUBE-NODE-PORT"},
	{"KUBE-NODE-PORT-TCP", "nat", "KUBE-NODE-PORT"},
	{"KUBE-NODE-PORT-LOCAL-UDP", "nat", "KUBE-NODE-PORT"},
	{"KUBE-NODE-PORT-UDP", "nat", "KUBE-NODE-PORT"},
	{"KUBE-NODE-PORT-LOCAL-SCTP-HASH", "nat", "KUBE-NODE-PORT"},
	{"KUBE-NODE-PORT-SCTP-HASH", "nat", "KUBE-NODE-PORT"},
	{"KUBE-LOAD-BALANCER-FW", "filter", "KUBE-PROXY-FIREWALL"},
	{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "filter", "KUBE-SOURCE-RANGES-FIREWALL"},
	{"KUBE-LOAD-BALANCER-SOURCE-IP", "filter", "KUBE-SOURCE-RANGES-FIREWALL"},
}

// ruleLessIPSet names a set of kube-proxy's IPVS mode on the node of ns that
// holds entries while its rule is not written yet, or is empty when there is
// none: kube-proxy's IPVS mode is then inside one sync, between IPVS and its
// iptables rules. A sync adds the virtual and real servers first (syncService
// and syncEndpoint, in its loop over the Services), then fills the ipsets, and
// only then writes its rules with iptables-restore (pkg/proxy/ipvs/proxier.go
// at v1.37.2). In between, a connection IPVS takes misses those rules, and its
// conntrack entry keeps that for every SYN it sends again:
//   - KUBE-LOOP-BACK: a pod that reaches itself through its Service is not
//     masqueraded. Right after `svclab up` in the loaded VM the node was in
//     that state (the set held web-a, no rule), which fits the hairpin
//     timeouts verify met on its first attempts.
//   - KUBE-LOAD-BALANCER: a running lab's first LoadBalancer Service. An
//     outside client's connection went to a pod on another node
//     unmasqueraded, whose reply came back from the pod's address, and it timed
//     out (the spec "A running lab's first LoadBalancer Service" in
//     kube-proxy-ipvs, every run under TCG).
//
// Where no such set exists, the node is another mode's, or its sync is through.
// sets are the node's ipsets and their entries.
func ruleLessIPSet(ns *namespaces.NS, backend string, sets map[string]map[string]bool) string {
	saved := map[string]string{}
	for _, r := range ipvsSetRules {
		if len(sets[r.set]) == 0 {
			continue
		}
		if _, ok := saved[r.table]; !ok {
			out, err := ns.Output(xtables.SaveProgram(backend), "-t", r.table)
			if err != nil {
				return ""
			}
			saved[r.table] = string(out)
		}
		if !hasSetRule(saved[r.table], r.chain, r.set) {
			return r.set
		}
	}
	return ""
}

// hasSetRule tells whether iptables-save output holds a rule of chain that
// matches set.
func hasSetRule(save, chain, set string) bool {
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, "-A "+chain+" ") && strings.Contains(line, "--match-set "+set+" ") {
			return true
		}
	}
	return false
}
