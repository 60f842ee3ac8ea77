package iptables

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// What the proxier offers benchmarks besides its SyncStats (see proxy.BareApplier,
// proxy.SyncEstimator, proxy.KernelCounter), and the mode's Cleanup.

// kubeTables are the tables kube-proxy writes to (mangle holds only its canary
// chain).
var kubeTables = []string{"filter", "nat", "mangle"}

// Cleanup flushes every chain of kube-proxy's tables in t's node and deletes
// the chains that are not built in, leaving the node as a fresh one. A lab node
// holds no rules but kube-proxy's. It runs whatever became of a caller's
// context: it is cleanup.
func Cleanup(t proxy.Target) error {
	be, err := xtables.BackendFor(t.Config.Backend)
	if err != nil {
		return err
	}
	run := xtables.NewRunner(be, t.RunDir)
	ns, err := namespaces.OpenPath(t.NetNS)
	if err != nil {
		return fmt.Errorf("iptables cleanup: %w", err)
	}
	defer ns.Close()
	err = ns.Do(func() error {
		for _, table := range kubeTables {
			for _, op := range []string{"-F", "-X"} {
				if err := run.Do("-t", table, op); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("iptables cleanup: %w", err)
	}
	return nil
}

// inNode runs f with the proxier's runner in the node's namespace, its programs
// killed when ctx is cancelled. The caller holds p.mu.
func (p *Proxier) inNode(ctx context.Context, f func(r *xtables.Runner) error) error {
	if p.node == nil {
		return fmt.Errorf("iptables proxier: closed")
	}
	p.run.Ctx = ctx
	defer func() { p.run.Ctx = context.Background() }()
	return p.node.Do(func() error { return f(p.run) })
}

// BareApply writes what a full sync of s writes with one iptables-restore,
// with the flags kube-proxy uses and nothing else, timed around the program as
// a sync's write is.
func (p *Proxier) BareApply(ctx context.Context, s *proxy.State) (d time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := Generate(p.cfg, s.Ports)
	if err != nil {
		return 0, err
	}
	input := []byte(rs.Restore())
	err = p.inNode(ctx, func(r *xtables.Runner) error {
		start := time.Now()
		err := r.Restore(input)
		d = time.Since(start)
		return err
	})
	if err != nil {
		return d, fmt.Errorf("bare iptables-restore: %w", err)
	}
	return d, nil
}

// KernelCounts counts the rules (-A lines) iptables-save prints for kube-proxy's
// tables: the kernel's own account of what is installed, as "rules" (it holds
// the jumps from the built-in chains and the mangle canary besides what a sync
// generates).
func (p *Proxier) KernelCounts(ctx context.Context) ([]proxy.Count, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	err := p.inNode(ctx, func(r *xtables.Runner) error {
		for _, t := range kubeTables {
			out, err := r.Save(t)
			if err != nil {
				return err
			}
			for _, l := range bytes.Split(out, []byte("\n")) {
				if bytes.HasPrefix(l, []byte("-A ")) {
					n++
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count rules in the kernel: %w", err)
	}
	return []proxy.Count{{Name: "rules", N: n}}, nil
}

// EstimateSync estimates a sync by the per-rule method, which cannot be
// stopped part-way (each rule is a go-iptables call that takes no context): it
// makes one iptables call per chain it creates or flushes and per rule it
// appends, each costing what a call that reads a chain costs, which the node
// is asked now on a small chain and on KUBE-SERVICES (as large as the node's
// table), so about their mean on average.
func (p *Proxier) EstimateSync(ctx context.Context, s *proxy.State) (time.Duration, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apply != ApplyPerRule {
		return 0, "", fmt.Errorf("iptables proxier: the %s method's syncs are not estimated", p.apply)
	}
	rs, err := Generate(p.cfg, s.Ports)
	if err != nil {
		return 0, "", err
	}
	calls := perRuleCalls(p.last, rs, p.needFull || p.last == nil)
	var small, large time.Duration
	err = p.inNode(ctx, func(r *xtables.Runner) error {
		var err error
		if small, err = callCost(r, "filter", "INPUT"); err != nil {
			return err
		}
		large, err = callCost(r, "nat", xtables.ChainServices)
		return err
	})
	if err != nil {
		return 0, "", err
	}
	perCall := (small + max(small, large)) / 2
	why := fmt.Sprintf("%d iptables calls of about %s each: %s on a small chain, %s on KUBE-SERVICES", calls,
		perCall.Round(100*time.Microsecond), small.Round(100*time.Microsecond), large.Round(100*time.Microsecond))
	return time.Duration(calls) * perCall, why, nil
}

// perRuleCalls is how many iptables calls the per-rule method makes to write
// rs after last: a chain created or flushed and each rule appended for every
// chain it writes, a flush and a delete for every stale chain; a full sync
// also lists nat's chains and ensures each single-call step with a check and,
// where the node lacks what the step ensures, a create or insert (counted as
// on a node emptied first, where only a chain an earlier step made is there).
func perRuleCalls(last, rs *Ruleset, full bool) int {
	calls := 0
	for _, w := range perRuleChains(last, rs, full) {
		calls += 1 + len(w.c.Rules)
	}
	if full {
		calls++
		made := map[string]bool{}
		for _, s := range rs.Setup {
			calls++
			if s.Rule != nil || !made[s.Table+"/"+s.Chain] {
				calls++
			}
			if s.Rule == nil {
				made[s.Table+"/"+s.Chain] = true
			}
		}
		return calls
	}
	for _, t := range rs.Tables {
		calls += 2 * len(staleChains(last, rs, t.Name))
	}
	return calls
}

// callCost is the time of one iptables call that reads a chain (the least of
// three): `iptables -C CHAIN -j RETURN`, which iptables answers "no" after
// loading the chain (nft) or the whole table (legacy); a missing chain is a
// "no" too (status 1 in both backends). On an empty table it is what any call costs at
// least, mostly starting the program; on a full one, what a call costs once
// the table is large.
func callCost(r *xtables.Runner, table, chain string) (best time.Duration, err error) {
	for i := 0; i < 3; i++ {
		start := time.Now()
		if _, err := r.Test("-t", table, "-C", chain, "-j", "RETURN"); err != nil {
			return 0, fmt.Errorf("timing one iptables call: %w", err)
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}
