package iptables

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// Rule is one rule: the words after "-A CHAIN", each a separate word and unquoted.
type Rule []string

// String is the rule as iptables-restore reads it. Words with a space (only
// comments have them) are put in double quotes, exactly where kube-proxy writes
// quotes: Service names cannot contain spaces or quotes, so a comment without a
// space is one kube-proxy leaves bare.
func (r Rule) String() string {
	var b bytes.Buffer
	r.writeTo(&b)
	return b.String()
}

func (r Rule) writeTo(b *bytes.Buffer) {
	for i, w := range r {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w == "" || strings.ContainsAny(w, " \t") {
			b.WriteByte('"')
			b.WriteString(w)
			b.WriteByte('"')
		} else {
			b.WriteString(w)
		}
	}
}

// Chain is one chain kube-proxy owns and rewrites whole.
type Chain struct {
	Name  string
	Rules []Rule
	// Service is "namespace/name" of the Service whose chains these are (KUBE-SVC-,
	// KUBE-SVL-, KUBE-EXT-, KUBE-XLB-, KUBE-FW-, KUBE-SEP-). kube-proxy's partial
	// sync rewrites them only when that Service or its endpoints changed; chains
	// with no Service (KUBE-SERVICES, KUBE-NODEPORTS, the filter table, ...) are
	// rewritten on every sync.
	Service string
}

// Table is the part of one iptables table kube-proxy writes with iptables-restore.
type Table struct {
	Name   string
	Chains []*Chain
	// index finds chains by name; tens of thousands of chains make a search slow.
	// Generate fills it, so a Ruleset is only read once made.
	index map[string]*Chain
}

// Chain returns the chain called name, or nil.
func (t *Table) Chain(name string) *Chain {
	if t.index == nil {
		t.index = make(map[string]*Chain, len(t.Chains))
		for _, c := range t.Chains {
			t.index[c.Name] = c
		}
	}
	return t.index[name]
}

// Step is something kube-proxy (or, for old releases, the kubelet) makes sure of
// outside iptables-restore, with single iptables calls: a chain that must exist
// (iptables -N) and, when Rule is set, a rule in it (iptables -C, then -I at the
// top or -A at the end). Jumps from the built-in chains are made this way because
// iptables-restore --noflush cannot add one rule to a chain it does not own.
type Step struct {
	Table string
	Chain string
	Rule  Rule
	// Append puts Rule at the end of Chain (the kubelet's EnsureRule(Append));
	// otherwise it goes first (kube-proxy's EnsureRule(Prepend), iptables -I).
	Append bool
}

// String is the step as iptables arguments, for reading.
func (s Step) String() string {
	switch {
	case s.Rule == nil:
		return fmt.Sprintf("-t %s -N %s", s.Table, s.Chain)
	case s.Append:
		return fmt.Sprintf("-t %s -A %s %s", s.Table, s.Chain, s.Rule)
	default:
		return fmt.Sprintf("-t %s -I %s %s", s.Table, s.Chain, s.Rule)
	}
}

// Ruleset is everything one node's kube-proxy writes in iptables mode for one
// state of the Services.
type Ruleset struct {
	Version version.Version
	// Setup is what is ensured with single iptables calls, in order.
	Setup []Step
	// Tables are filter then nat, in the order kube-proxy's own tests sort them
	// (see sortChains).
	Tables []*Table
	// LargeCluster is kube-proxy's large cluster mode: more than 1000 endpoints in
	// all, so per-endpoint comments are left out (and, since 1.25, stale chains
	// are looked for less often).
	LargeCluster bool
}

// Table returns the table called name, or nil.
func (rs *Ruleset) Table(name string) *Table {
	for _, t := range rs.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Counts returns the number of chains and rules in the restore-written tables.
func (rs *Ruleset) Counts() (chains, rules int) {
	for _, t := range rs.Tables {
		chains += len(t.Chains)
		for _, c := range t.Chains {
			rules += len(c.Rules)
		}
	}
	return chains, rules
}

// Restore is the iptables-restore --noflush input that writes every chain.
func (rs *Ruleset) Restore() string {
	return string(restoreInput(rs, selectChains(rs, func(*Table, *Chain) bool { return true }), nil))
}

// selectChains returns, for each table of rs in order, the chains write picks.
func selectChains(rs *Ruleset, write func(*Table, *Chain) bool) [][]*Chain {
	sel := make([][]*Chain, len(rs.Tables))
	for i, t := range rs.Tables {
		for _, c := range t.Chains {
			if write(t, c) {
				sel[i] = append(sel[i], c)
			}
		}
	}
	return sel
}

// restoreInput is the iptables-restore input that writes the chains sel holds
// for each table and deletes the chains in del (table -> chain names). Each
// table is laid out as kube-proxy's tests print it: chain lines, rules, then
// deletions. A table with nothing to write is left out.
func restoreInput(rs *Ruleset, sel [][]*Chain, del map[string][]string) []byte {
	// Rules of kube-proxy's tables print at about 100 bytes; sizing the buffer
	// once spares copying megabytes as it grows.
	rules := 0
	for _, chains := range sel {
		for _, c := range chains {
			rules += len(c.Rules)
		}
	}
	var b bytes.Buffer
	b.Grow(128 * rules)
	for i, t := range rs.Tables {
		chains := sel[i]
		gone := del[t.Name]
		if len(chains) == 0 && len(gone) == 0 {
			continue
		}
		b.WriteString("*" + t.Name + "\n")
		for _, c := range chains {
			b.WriteString(":" + c.Name + " - [0:0]\n")
		}
		// A chain line for a chain about to be deleted flushes it, so no rule of it
		// still jumps somewhere when it goes.
		for _, name := range gone {
			b.WriteString(":" + name + " - [0:0]\n")
		}
		for _, c := range chains {
			for _, r := range c.Rules {
				b.WriteString("-A ")
				b.WriteString(c.Name)
				b.WriteByte(' ')
				r.writeTo(&b)
				b.WriteByte('\n')
			}
		}
		for _, name := range gone {
			b.WriteString("-X " + name + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// sortChains orders chains as kube-proxy's tests do (sortIPTablesRules):
// KUBE-NODEPORTS, then KUBE-SERVICES, then the other KUBE- chains by name, then
// everything else by name.
func sortChains(chains []*Chain) {
	rank := func(name string) int {
		switch {
		case name == xtables.ChainNodePorts:
			return 0
		case name == xtables.ChainServices:
			return 1
		case strings.HasPrefix(name, "KUBE-"):
			return 2
		}
		return 3
	}
	sort.SliceStable(chains, func(i, j int) bool {
		ri, rj := rank(chains[i].Name), rank(chains[j].Name)
		if ri != rj {
			return ri < rj
		}
		return chains[i].Name < chains[j].Name
	})
}

// builder collects rules per chain in the order a kube-proxy sync writes them and
// turns them into a Ruleset.
type builder struct {
	tables map[string]map[string]*Chain
	// declared records the chains given a chain line; a rule added to a chain
	// nobody declared is a bug in the layout code.
	declared map[string]map[string]bool
}

func newBuilder() *builder {
	return &builder{
		tables:   map[string]map[string]*Chain{"filter": {}, "nat": {}},
		declared: map[string]map[string]bool{"filter": {}, "nat": {}},
	}
}

// declare writes the chain line of chain, owned by service ("" for a chain
// rewritten on every sync).
func (b *builder) declare(table, chain, service string) {
	b.get(table, chain).Service = service
	b.declared[table][chain] = true
}

// add appends one rule to chain.
func (b *builder) add(table, chain string, words ...string) {
	c := b.get(table, chain)
	c.Rules = append(c.Rules, Rule(words))
}

func (b *builder) get(table, chain string) *Chain {
	c := b.tables[table][chain]
	if c == nil {
		c = &Chain{Name: chain}
		b.tables[table][chain] = c
	}
	return c
}

func (b *builder) ruleset(v version.Version, setup []Step, large bool) (*Ruleset, error) {
	rs := &Ruleset{Version: v, Setup: setup, LargeCluster: large}
	for _, name := range []string{"filter", "nat"} {
		t := &Table{Name: name}
		for chain, c := range b.tables[name] {
			if !b.declared[name][chain] {
				return nil, fmt.Errorf("iptables layout %s: %s chain %s has rules but no chain line", v, name, chain)
			}
			t.Chains = append(t.Chains, c)
		}
		sortChains(t.Chains)
		t.index = b.tables[name]
		rs.Tables = append(rs.Tables, t)
	}
	return rs, nil
}

// words joins word lists, for rules assembled from parts.
func words(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
