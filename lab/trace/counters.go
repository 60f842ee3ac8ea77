package trace

import (
	"slices"
	"strconv"
	"strings"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// counted is one rule (or chain policy) of iptables-save -c output with its
// packet counter.
type counted struct {
	rule    Rule
	packets uint64
}

// saveCounters reads the iptables-legacy rules of ns with their counters.
func saveCounters(ns *namespaces.NS) ([]counted, error) {
	out, err := ns.Output(xtables.SaveProgram("legacy"), "-c")
	if err != nil {
		return nil, err
	}
	return parseCounters(string(out)), nil
}

// parseCounters reads iptables-save -c output: "*table", ":CHAIN POLICY
// [packets:bytes]" and "[packets:bytes] -A CHAIN ...".
func parseCounters(text string) []counted {
	var out []counted
	table := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) == 3 && f[1] != "-" {
				out = append(out, counted{Rule{Table: table, Chain: f[0], Verdict: "policy " + strings.ToLower(f[1]), Text: ":" + f[0] + " " + f[1]}, packetsOf(f[2])})
			}
		case strings.HasPrefix(line, "["):
			end := strings.Index(line, "]")
			if end < 0 {
				continue
			}
			text := strings.TrimSpace(line[end+1:])
			f := strings.Fields(text)
			if len(f) < 2 || f[0] != "-A" {
				continue
			}
			r := Rule{Table: table, Chain: f[1], Text: text, Comment: commentOf(text)}
			if _, target, ok := strings.Cut(text, " -j "); ok {
				r.Verdict = strings.Fields(target)[0]
			}
			out = append(out, counted{r, packetsOf(line[:end+1])})
		}
	}
	return out
}

// packetsOf reads the packet count of "[packets:bytes]".
func packetsOf(s string) uint64 {
	p, _, _ := strings.Cut(strings.Trim(s, "[]"), ":")
	n, _ := strconv.ParseUint(p, 10, 64)
	return n
}

// counterDeltas are the rules whose counters grew from before to after, in
// after's order. A rule is known by its table, chain, text and place among
// equal rules, so that rules added in between do not shift the others.
func counterDeltas(before, after []counted) []Rule {
	type key struct {
		table, chain, text string
		n                  int
	}
	keyOf := func(list []counted) []key {
		seen := map[key]int{}
		keys := make([]key, len(list))
		for i, c := range list {
			k := key{c.rule.Table, c.rule.Chain, c.rule.Text, 0}
			k.n = seen[k]
			seen[k]++
			keys[i] = k
		}
		return keys
	}
	was := map[key]uint64{}
	for i, k := range keyOf(before) {
		was[k] = before[i].packets
	}
	var grew []Rule
	for i, k := range keyOf(after) {
		if p := after[i].packets; p > was[k] {
			r := after[i].rule
			r.Packets = p - was[k]
			grew = append(grew, r)
		}
	}
	return grew
}

// hookOrder is the order the base chains of each table are met: by hook, then
// by table priority within it.
var hookOrder = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
var tableOrder = []string{"raw", "mangle", "nat", "filter", "security"}

// pathOrder puts counter deltas in the order a packet meets them: base chains
// by hook and table, each followed through its jumps into the chains it
// reached; rules no walk reaches come last, as they were.
func pathOrder(rules []Rule) []Rule {
	byChain := map[[2]string][]int{}
	for i, r := range rules {
		k := [2]string{r.Table, r.Chain}
		byChain[k] = append(byChain[k], i)
	}
	done := make([]bool, len(rules))
	var out []Rule
	var visit func(table, chain string)
	visit = func(table, chain string) {
		// A chain's policy is listed before its rules and met after them.
		list := byChain[[2]string{table, chain}]
		list = append(slices.DeleteFunc(slices.Clone(list), func(i int) bool { return strings.HasPrefix(rules[i].Verdict, "policy ") }),
			slices.DeleteFunc(slices.Clone(list), func(i int) bool { return !strings.HasPrefix(rules[i].Verdict, "policy ") })...)
		for _, i := range list {
			if done[i] {
				continue
			}
			done[i] = true
			out = append(out, rules[i])
			if _, ok := byChain[[2]string{table, rules[i].Verdict}]; ok {
				visit(table, rules[i].Verdict)
			}
		}
	}
	for _, hook := range hookOrder {
		for _, table := range tableOrder {
			visit(table, hook)
		}
	}
	for i, r := range rules {
		if !done[i] {
			out = append(out, r)
		}
	}
	return out
}
