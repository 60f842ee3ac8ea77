package iptables

import (
	"context"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxy"
)

// The per-rule estimate counts the calls a per-rule sync makes: on an empty
// node, the first sync; then each change from the state before.
func TestPerRuleCallsCountTheSync(t *testing.T) {
	for _, backend := range []string{"nft", "legacy"} {
		t.Run(backend, func(t *testing.T) {
			p := newProxier(t, newNodeNS(t), v137, proxy.Config{Backend: backend, Method: ApplyPerRule})
			for i, ports := range states() {
				rs, err := Generate(p.cfg, ports)
				if err != nil {
					t.Fatal(err)
				}
				want := perRuleCalls(p.last, rs, p.last == nil)
				if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
					t.Fatalf("state %d: %v", i, err)
				}
				if got := p.LastSync().Commands; got != want {
					t.Errorf("state %d: the sync made %d iptables calls, %d counted ahead", i, got, want)
				}
			}
			if _, why, err := p.EstimateSync(context.Background(), proxy.StateOf(states()[0])); err != nil || !strings.Contains(why, "iptables calls of about") {
				t.Errorf("EstimateSync: %q, %v", why, err)
			}
		})
	}
}

// The bare apply installs the chains a sync writes, and nothing else (the
// jumps from the built-in chains are the sync's single calls); Cleanup leaves
// the node without a rule; the kernel's count holds what the sync generated
// and those jumps.
func TestBareApplyAndCleanup(t *testing.T) {
	for _, backend := range []string{"nft", "legacy"} {
		t.Run(backend, func(t *testing.T) {
			path := newNodeNS(t)
			p := newProxier(t, path, v137, proxy.Config{Backend: backend})
			ports := states()[0]
			if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
				t.Fatal(err)
			}
			synced := saved(t, backend, path)
			counts, err := p.KernelCounts(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, rules := p.Ruleset().Counts()
			if len(counts) != 1 || counts[0].Name != "rules" || counts[0].N < rules || counts[0].N > rules+30 {
				t.Errorf("kernel counts %v, generated %d rules", counts, rules)
			}
			tg := p.target
			if err := Cleanup(tg); err != nil {
				t.Fatal(err)
			}
			if left := saved(t, backend, path); strings.Contains(left, "-A ") || strings.Contains(left, ":KUBE-") {
				t.Fatalf("Cleanup left:\n%s", left)
			}
			if _, err := p.BareApply(context.Background(), proxy.StateOf(ports)); err != nil {
				t.Fatal(err)
			}
			bare := saved(t, backend, path)
			checkChains(t, p.Ruleset(), bare)
			for _, l := range strings.Split(bare, "\n") {
				if !strings.Contains(synced, l) {
					t.Errorf("the bare apply installed %q, which the sync did not", l)
				}
			}
			if strings.Contains(bare, "-A PREROUTING") {
				t.Error("the bare apply installed the sync's jumps")
			}
		})
	}
}

// checkChains checks that every chain of rs is installed with its rules.
func checkChains(t *testing.T, rs *Ruleset, save string) {
	t.Helper()
	tables := strings.Split(save, "*nat\n")
	byTable := map[string]string{"filter": tables[0], "nat": tables[1]}
	for _, tb := range rs.Tables {
		for _, c := range tb.Chains {
			if n := strings.Count(byTable[tb.Name], "-A "+c.Name+" "); !strings.Contains(byTable[tb.Name], "\n:"+c.Name+"\n") || n != len(c.Rules) {
				t.Errorf("%s chain %s: %d rules installed, %d generated", tb.Name, c.Name, n, len(c.Rules))
			}
		}
	}
}
