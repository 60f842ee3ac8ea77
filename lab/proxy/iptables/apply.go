package iptables

import (
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// writeRestore writes rs with one iptables-restore, choosing the chains as the
// proxier's apply method says.
func (p *Proxier) writeRestore(rs *Ruleset, changes proxy.Changes, full bool) error {
	t := time.Now()
	var write func(*Table, *Chain) bool
	switch {
	case full:
		write = func(*Table, *Chain) bool { return true }
	case p.apply == ApplyPartial:
		// kube-proxy's partial sync: the Services its change trackers report.
		write = func(_ *Table, c *Chain) bool {
			_, changed := changes[c.Service]
			return c.Service == "" || changed
		}
	default: // ApplyChanged
		write = func(t *Table, c *Chain) bool { return chainChanged(p.last, t.Name, c) }
	}

	var del map[string][]string
	if p.apply == ApplyChanged && !full {
		del = map[string][]string{"nat": staleChains(p.last, rs, "nat")}
	}
	generate := time.Since(t)
	if del == nil && (!rs.LargeCluster || !p.cfg.Version.AtLeast(1, 25) || time.Since(p.lastCleanup) > syncPeriod) {
		// kube-proxy finds stale chains in iptables-save of nat on every sync, except
		// in large clusters (1.25 and later) where iptables-save is slow and stale
		// chains harmless: there once per sync period.
		ts := time.Now()
		out, err := p.run.Save("nat")
		p.stats.Save = time.Since(ts)
		if err != nil {
			return err
		}
		nat := rs.Table("nat")
		var gone []string
		for _, name := range xtables.ChainsIn(out) {
			if isServiceChain(name) && nat.Chain(name) == nil {
				gone = append(gone, name)
			}
		}
		sort.Strings(gone)
		del = map[string][]string{"nat": gone}
		p.lastCleanup = time.Now()
	}

	t = time.Now()
	sel := selectChains(rs, write)
	input := restoreInput(rs, sel, del)
	for i, tb := range rs.Tables {
		for _, c := range sel[i] {
			p.stats.Written = append(p.stats.Written, tb.Name+"/"+c.Name)
			p.stats.ChainsWritten++
			p.stats.RulesWritten += len(c.Rules)
		}
		p.stats.ChainsDeleted += len(del[tb.Name])
	}
	p.stats.RestoreBytes = len(input)
	p.stats.Generate += generate + time.Since(t)
	if len(input) == 0 {
		return nil
	}
	t = time.Now()
	err := p.run.Restore(input)
	p.stats.Write = time.Since(t)
	return err
}

// chainChanged tells whether chain c of table differs from what last holds.
func chainChanged(last *Ruleset, table string, c *Chain) bool {
	if last == nil {
		return true
	}
	old := last.Table(table).Chain(c.Name)
	return old == nil || !reflect.DeepEqual(old.Rules, c.Rules)
}

// staleChains are the chains of table that last has and next does not.
func staleChains(last, next *Ruleset, table string) []string {
	if last == nil {
		return nil
	}
	var gone []string
	nt := next.Table(table)
	for _, c := range last.Table(table).Chains {
		if nt.Chain(c.Name) == nil {
			gone = append(gone, c.Name)
		}
	}
	sort.Strings(gone)
	return gone
}

// writePerRule writes rs the naive way: every chain that is new or whose rules
// changed is created or flushed and refilled one rule at a time, then stale chains
// are flushed and deleted. All chains exist before any rule jumping to them is
// added, and a stale chain is deleted only once nothing jumps to it.
func (p *Proxier) writePerRule(rs *Ruleset, full bool) error {
	t := time.Now()
	todo := perRuleChains(p.last, rs, full)
	stale := map[string][]string{}
	if full {
		ts := time.Now()
		chains, err := p.ipt.ListChains("nat")
		p.stats.Commands++
		p.stats.Save = time.Since(ts)
		if err != nil {
			return fmt.Errorf("list nat chains: %w", err)
		}
		nat := rs.Table("nat")
		for _, name := range chains {
			if isServiceChain(name) && nat.Chain(name) == nil {
				stale["nat"] = append(stale["nat"], name)
			}
		}
	} else {
		for _, tb := range rs.Tables {
			stale[tb.Name] = staleChains(p.last, rs, tb.Name)
		}
	}
	p.stats.Generate = time.Since(t)

	t = time.Now()
	defer func() { p.stats.Write = time.Since(t) }()
	calls := 0
	defer func() { p.stats.Commands += calls }()
	for _, w := range todo {
		// ClearChain creates the chain, or flushes it when it exists.
		calls++
		if err := p.ipt.ClearChain(w.table, w.c.Name); err != nil {
			return fmt.Errorf("%s chain %s: %w", w.table, w.c.Name, err)
		}
	}
	for _, w := range todo {
		for _, r := range w.c.Rules {
			calls++
			if err := p.ipt.Append(w.table, w.c.Name, r...); err != nil {
				return fmt.Errorf("%s chain %s: append %s: %w", w.table, w.c.Name, r, err)
			}
		}
		p.stats.Written = append(p.stats.Written, w.table+"/"+w.c.Name)
		p.stats.ChainsWritten++
		p.stats.RulesWritten += len(w.c.Rules)
	}
	for _, table := range []string{"filter", "nat"} {
		for _, name := range stale[table] {
			calls++
			if err := p.ipt.ClearChain(table, name); err != nil {
				return fmt.Errorf("%s chain %s: %w", table, name, err)
			}
		}
	}
	for _, table := range []string{"filter", "nat"} {
		for _, name := range stale[table] {
			calls++
			if err := p.ipt.DeleteChain(table, name); err != nil {
				return fmt.Errorf("%s chain %s: %w", table, name, err)
			}
			p.stats.ChainsDeleted++
		}
	}
	return nil
}

// tableChain is a chain and the table it is in.
type tableChain struct {
	table string
	c     *Chain
}

// perRuleChains are the chains of rs the per-rule method writes after last:
// every chain on a full sync, else those that are new or whose rules changed.
func perRuleChains(last, rs *Ruleset, full bool) []tableChain {
	var todo []tableChain
	for _, tb := range rs.Tables {
		for _, c := range tb.Chains {
			if full || chainChanged(last, tb.Name, c) {
				todo = append(todo, tableChain{tb.Name, c})
			}
		}
	}
	return todo
}

// setupPerRule carries out the single-call steps with go-iptables.
func (p *Proxier) setupPerRule(steps []Step) error {
	for _, s := range steps {
		p.stats.Commands++
		if s.Rule == nil {
			exists, err := p.ipt.ChainExists(s.Table, s.Chain)
			if err != nil {
				return fmt.Errorf("%s chain %s: %w", s.Table, s.Chain, err)
			}
			if !exists {
				p.stats.Commands++
				if err := p.ipt.NewChain(s.Table, s.Chain); err != nil {
					return fmt.Errorf("%s chain %s: %w", s.Table, s.Chain, err)
				}
			}
			continue
		}
		there, err := p.ipt.Exists(s.Table, s.Chain, s.Rule...)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		if there {
			continue
		}
		p.stats.Commands++
		if s.Append {
			err = p.ipt.Append(s.Table, s.Chain, s.Rule...)
		} else {
			err = p.ipt.Insert(s.Table, s.Chain, 1, s.Rule...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}
