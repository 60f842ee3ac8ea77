package differential

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// dispatchChains are kube-proxy's chains that hold one rule (or pair) per Service
// port, written in the order a proxier walks its Services: kube-proxy walks a Go
// map, so that order changes from sync to sync and means nothing. Everywhere else
// rule order is compared.
var dispatchChains = map[string]bool{
	"KUBE-SERVICES":          true,
	"KUBE-NODEPORTS":         true,
	"KUBE-EXTERNAL-SERVICES": true,
	"KUBE-PROXY-FIREWALL":    true,
}

// Normalize rewrites the output of one of a mode's rule commands (proxy.Mode.Rules)
// into a form in which two nodes holding the same rules print the same text:
// nothing that depends on when or in which order the rules were written
// (comments with dates, packet counters, the kernel's order of chains, sets and
// virtual servers, the order of Services in dispatch chains). argv[0] says which
// program printed out.
func Normalize(argv []string, out string) string {
	switch prog := argv[0]; {
	case strings.HasSuffix(prog, "-save") && strings.Contains(prog, "iptables"):
		return normalizeIPTablesSave(out)
	case prog == "ipvsadm":
		return normalizeIPVSAdm(out)
	case prog == "ipset":
		return normalizeIPSetSave(out)
	}
	return out
}

var chainCounters = regexp.MustCompile(`\s*\[\d+:\d+\]$`)

// normalizeIPTablesSave prints each table of iptables-save output, tables in
// name order (iptables-legacy-save prints them in the order the kernel
// registered them), with its chains in name order (declarations without
// counters, then each chain's rules), keeping rule order except in dispatch
// chains, where rules are sorted.
func normalizeIPTablesSave(out string) string {
	tables := map[string]string{}
	var b strings.Builder
	var table string
	var decls []string
	rules := map[string][]string{}
	flush := func() {
		slices.Sort(decls)
		var chains []string
		for c := range rules {
			chains = append(chains, c)
		}
		slices.Sort(chains)
		for _, d := range decls {
			b.WriteString(d + "\n")
		}
		for _, c := range chains {
			rs := rules[c]
			if dispatchChains[c] {
				rs = slices.Sorted(slices.Values(rs))
			}
			for _, r := range rs {
				b.WriteString(r + "\n")
			}
		}
		decls, rules = nil, map[string][]string{}
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			table = line
			b.Reset()
			b.WriteString(line + "\n")
		case strings.HasPrefix(line, ":"):
			decls = append(decls, chainCounters.ReplaceAllString(line, ""))
		case strings.HasPrefix(line, "-A "):
			chain, _, _ := strings.Cut(strings.TrimPrefix(line, "-A "), " ")
			rules[chain] = append(rules[chain], line)
		case line == "COMMIT":
			flush()
			b.WriteString("COMMIT\n")
			tables[table] += b.String()
			b.Reset()
		default:
			b.WriteString(line + "\n")
		}
	}
	var all strings.Builder
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		all.WriteString(tables[name])
	}
	return all.String()
}

// normalizeIPVSAdm prints `ipvsadm -Ln` with virtual servers in address order,
// each with its real servers in address order, without the connection counts
// (ActiveConn, InActConn), which traffic changes.
func normalizeIPVSAdm(out string) string {
	var head []string
	var services [][]string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  -> ") && len(services) > 0:
			f := strings.Fields(line)
			if len(f) >= 6 && f[1] != "RemoteAddress:Port" {
				// -> addr forward weight active inactive
				line = "  -> " + strings.Join(f[1:4], " ")
			}
			services[len(services)-1] = append(services[len(services)-1], line)
		case strings.HasPrefix(line, "TCP ") || strings.HasPrefix(line, "UDP ") || strings.HasPrefix(line, "SCTP "):
			services = append(services, []string{strings.Join(strings.Fields(line), " ")})
		case line == "":
		default:
			if len(services) == 0 {
				head = append(head, line)
			}
		}
	}
	var blocks []string
	for _, s := range services {
		slices.Sort(s[1:])
		blocks = append(blocks, strings.Join(s, "\n"))
	}
	slices.Sort(blocks)
	return strings.Join(append(head, blocks...), "\n") + "\n"
}

// normalizeIPSetSave prints `ipset save` set by set in name order, each set's
// create line first and its members sorted.
func normalizeIPSetSave(out string) string {
	creates := map[string]string{}
	members := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "create":
			creates[f[1]] = line
		case "add":
			members[f[1]] = append(members[f[1]], line)
		}
	}
	var names []string
	for n := range creates {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(creates[n] + "\n")
		for _, m := range slices.Sorted(slices.Values(members[n])) {
			b.WriteString(m + "\n")
		}
	}
	return b.String()
}
