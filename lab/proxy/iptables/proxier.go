package iptables

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	goiptables "github.com/coreos/go-iptables/iptables"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// Ways of writing the rules (proxy.Options.Apply).
const (
	// ApplyPartial is kube-proxy's own way since 1.27 (KEP-3453): one
	// iptables-restore --noflush that rewrites the chains kube-proxy rewrites on
	// every sync (KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ and
	// the whole filter table) plus the per-Service chains of the Services that
	// changed since the last successful sync, and deletes per-Service chains no
	// longer needed. The first sync, a sync after a failure and (kube-proxy 1.33
	// and later) one an hour after the last full sync, except in large clusters
	// since 1.36, write everything.
	ApplyPartial = "partial"
	// ApplyFull is kube-proxy before 1.27: every sync rewrites every chain.
	ApplyFull = "full"
	// ApplyChanged is svclab's own, smaller still than kube-proxy's partial sync:
	// one iptables-restore of just the chains whose rules differ from what the last
	// successful sync wrote. A sync of an unchanged state writes nothing.
	ApplyChanged = "changed"
	// ApplyPerRule is the naive way, for benchmarks: one iptables command
	// (go-iptables) per chain created, flushed or deleted and per rule appended,
	// for the chains whose rules changed.
	ApplyPerRule = "per-rule"
)

// fullSyncPeriod is kube-proxy's FullSyncPeriod; syncPeriod its default
// --iptables-sync-period, which in large clusters spaces the search for stale
// chains.
const (
	fullSyncPeriod = time.Hour
	syncPeriod     = 30 * time.Second
)

// SyncStats describes one Sync, for benchmarks.
type SyncStats struct {
	Apply string
	// Full tells that the sync wrote every chain and ensured the jumps.
	Full bool
	// Chains and Rules are the size of the whole ruleset (filter and nat).
	Chains, Rules int
	// ChainsWritten and RulesWritten are what this sync wrote; ChainsDeleted the
	// stale per-Service chains it removed.
	ChainsWritten, RulesWritten, ChainsDeleted int
	// Written names the chains written, as "table/chain".
	Written []string
	// RestoreBytes is the size of the iptables-restore input (0 for per-rule).
	RestoreBytes int
	// Commands counts the iptables programs started.
	Commands int
	// Generate is svclab's own work: computing the rules, comparing them with the
	// last sync's and building the restore input.
	Generate time.Duration
	// Setup is the single iptables calls ensuring jumps and chains, the sysctls
	// and the nfacct counters (full syncs only).
	Setup time.Duration
	// Save is iptables-save (or, per rule, iptables -S) looking for stale chains.
	Save time.Duration
	// Write is iptables-restore, or the per-rule iptables calls.
	Write time.Duration
	// Conntrack is the stale UDP conntrack cleanup; ConntrackDeleted what it removed.
	Conntrack        time.Duration
	ConntrackDeleted int
	// Total is the whole Sync.
	Total time.Duration
}

// Proxier programs one node the way kube-proxy's iptables mode does.
type Proxier struct {
	target proxy.Target
	apply  string
	noCT   bool
	cfg    Config
	be     xtables.Backend

	node *namespaces.NS
	acct *nfacct
	run  *xtables.Runner
	ipt  *goiptables.IPTables

	mu          sync.Mutex
	last        *Ruleset
	lastPorts   []proxy.ServicePort
	needFull    bool
	lastFull    time.Time
	lastCleanup time.Time
	stats       SyncStats
}

// validate reads the settings this mode knows.
func validate(t proxy.Target) (xtables.Backend, string, error) {
	be, err := xtables.BackendForFamily(t.Config.Backend, t.Config.IPFamily())
	if err != nil {
		return xtables.Backend{}, "", err
	}
	apply := t.Config.Method
	if apply == "" {
		apply = ApplyPartial
		if !t.Config.VersionOr().AtLeast(1, 27) {
			// kube-proxy before 1.27 had no partial sync (1.26 had it behind an
			// alpha gate, off by default).
			apply = ApplyFull
		}
	}
	if err := mode.CheckMethod(apply); err != nil {
		return xtables.Backend{}, "", err
	}
	if err := t.Config.Validate(proxy.SectionIPTables); err != nil {
		return xtables.Backend{}, "", err
	}
	return be, apply, nil
}

// New makes a proxier for the node whose network namespace is t.NetNS. Rules are
// written by Sync.
func New(t proxy.Target) (*Proxier, error) {
	be, apply, err := validate(t)
	if err != nil {
		return nil, err
	}
	if err := proxy.Prepare("iptables", t, be.Check); err != nil {
		return nil, err
	}
	p := &Proxier{target: t, apply: apply, noCT: t.Config.NoConntrackCleanup, cfg: ConfigFor(t), be: be,
		run: xtables.NewRunner(be, t.RunDir), needFull: true}
	if err := p.open(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Proxier) open() error {
	var err error
	if p.node, err = namespaces.OpenPath(p.target.NetNS); err != nil {
		return err
	}
	if p.cfg.Version.AtLeast(1, 31) {
		// kube-proxy goes on without nfacct when the kernel lacks it, and so do we.
		if s, err := proxy.OpenNetfilterSocket(p.node.File); err == nil {
			p.acct = &nfacct{s}
		}
	}
	if p.apply == ApplyPerRule {
		// go-iptables runs the program with this process's environment, so the
		// per-rule mode takes the default xtables lock (see runner).
		proto := goiptables.ProtocolIPv4
		if p.cfg.ipv6() {
			proto = goiptables.ProtocolIPv6
		}
		if p.ipt, err = goiptables.New(goiptables.IPFamily(proto), goiptables.Path(p.be.IPTables), goiptables.Timeout(5)); err != nil {
			return fmt.Errorf("go-iptables %s: %w", p.be.IPTables, err)
		}
	}
	// kube-proxy sets its conntrack sysctls when it starts, then reads this
	// once: with the kernel's liberal TCP window tracking there are no INVALID
	// packets to drop.
	return p.node.Do(func() error {
		for _, s := range p.target.Config.ConntrackSysctls() {
			if err := namespaces.EnsureSysctlHere(s[0], s[1]); err != nil {
				return err
			}
		}
		liberal, err := namespaces.ReadSysctlHere("net.netfilter.nf_conntrack_tcp_be_liberal")
		if err == nil {
			p.cfg.ConntrackTCPLiberal = liberal != "0"
		}
		return nil
	})
}

// Close releases the namespace handles. The rules stay with the namespace.
func (p *Proxier) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acct != nil {
		p.acct.Close()
		p.acct = nil
	}
	if p.node == nil {
		return nil
	}
	err := p.node.Close()
	p.node = nil
	return err
}

// LastSync describes the last Sync, successful or not.
func (p *Proxier) LastSync() SyncStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Ruleset is what the last successful Sync installed.
func (p *Proxier) Ruleset() *Ruleset {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Stats is LastSync for benchmarks that read every mode alike.
func (p *Proxier) Stats() proxy.SyncStats {
	s := p.LastSync()
	return proxy.SyncStats{
		Total: s.Total,
		Parts: []proxy.Part{{Name: "generate", D: s.Generate}, {Name: "setup", D: s.Setup, Housekeeping: true},
			{Name: "save", D: s.Save, Housekeeping: true}, {Name: "write", D: s.Write},
			{Name: "conntrack", D: s.Conntrack, Housekeeping: true}},
		Counts: []proxy.Count{{Name: "rules", N: s.Rules}, {Name: "chains", N: s.Chains}, {Name: "rules_written", N: s.RulesWritten},
			{Name: "chains_written", N: s.ChainsWritten}, {Name: "commands", N: s.Commands}, {Name: "restore_bytes", N: s.RestoreBytes}},
	}
}

// Sync makes the node's iptables match s.
func (p *Proxier) Sync(ctx context.Context, s *proxy.State) error {
	ports := s.Ports
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.node == nil {
		return errors.New("iptables proxier: closed")
	}
	start := time.Now()
	full := p.needFull || p.last == nil || p.apply == ApplyFull ||
		(p.apply == ApplyPartial && p.cfg.Version.AtLeast(1, 33) && time.Since(p.lastFull) > fullSyncPeriod &&
			!(p.last.LargeCluster && p.cfg.Version.AtLeast(1, 36)))
	p.stats = SyncStats{Apply: p.apply, Full: full}
	p.run.Commands, p.run.Ctx = 0, ctx
	defer func() { p.run.Ctx = context.Background() }()

	t := time.Now()
	changes := proxy.Diff(p.lastPorts, ports)
	diff := time.Since(t)
	var rs *Ruleset
	err := p.node.Do(func() error {
		var err error
		rs, err = p.syncInNamespace(ports, changes, full)
		return err
	})
	// Working out what changed is part of generating the rules.
	p.stats.Generate += diff
	p.stats.Commands += p.run.Commands
	if err != nil {
		// As kube-proxy: what the kernel holds is unknown now, so the next sync
		// writes everything.
		p.needFull = true
		p.stats.Total = time.Since(start)
		return fmt.Errorf("iptables sync: %w", err)
	}
	p.last, p.lastPorts, p.needFull = rs, proxy.ClonePorts(ports), false
	if full {
		p.lastFull = time.Now()
	}

	if !p.noCT {
		t := time.Now()
		n, err := proxy.CleanStaleUDPConntrack(p.node.Netlink, changes, ports)
		p.stats.Conntrack, p.stats.ConntrackDeleted = time.Since(t), n
		if err != nil {
			p.stats.Total = time.Since(start)
			return err
		}
	}
	p.stats.Total = time.Since(start)
	return nil
}

// syncInNamespace does the work that needs the node's namespace; it runs on a
// thread switched into it, so the iptables programs it starts are there too.
func (p *Proxier) syncInNamespace(ports []proxy.ServicePort, changes proxy.Changes, full bool) (*Ruleset, error) {
	if full || !p.cfg.Version.AtLeast(1, 28) {
		// kube-proxy ensures its jumps on full syncs only since partial syncs
		// exist; before, on every sync.
		t := time.Now()
		err := p.setup()
		p.stats.Setup = time.Since(t)
		if err != nil {
			return nil, err
		}
	}
	t := time.Now()
	rs, err := Generate(p.cfg, ports)
	p.stats.Generate = time.Since(t)
	if err != nil {
		return nil, err
	}
	p.stats.Chains, p.stats.Rules = rs.Counts()
	if p.apply == ApplyPerRule {
		err = p.writePerRule(rs, full)
	} else {
		err = p.writeRestore(rs, changes, full)
	}
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// setup writes what kube-proxy sets up outside iptables-restore: the sysctls, the
// nfacct counters and the single-call steps of the ruleset's release.
func (p *Proxier) setup() error {
	// NodePorts answer on 127.0.0.1 (kube-proxy's default): the kernel routes
	// packets to 127.0.0.0/8 after DNAT only with route_localnet. Before 1.26
	// kube-proxy set it unconditionally, since then whenever localhost NodePorts
	// are on (and leaves it as it is otherwise). The sysctl is per namespace:
	// only the node's is touched.
	if p.cfg.LocalhostNodePorts || !p.cfg.Version.AtLeast(1, 26) {
		if err := namespaces.EnsureSysctlHere("net.ipv4.conf.all.route_localnet", "1"); err != nil {
			return err
		}
	}
	if p.acct != nil {
		ok := true
		for _, name := range []string{nfacctInvalidDropped, nfacctLocalhostNodePort} {
			if err := p.acct.ensure(name); err != nil {
				ok = false
			}
		}
		p.cfg.NFAcct = ok
	} else {
		p.cfg.NFAcct = false
	}
	steps := setupSteps(p.cfg.Version)
	if p.apply == ApplyPerRule {
		return p.setupPerRule(steps)
	}
	for _, s := range steps {
		if err := p.ensure(s); err != nil {
			return err
		}
	}
	return nil
}

// ensure carries out one step as kube-proxy's EnsureChain and EnsureRule do.
func (p *Proxier) ensure(s Step) error {
	if s.Rule == nil {
		return p.run.EnsureChain(s.Table, s.Chain)
	}
	if !s.Append {
		return p.run.EnsureRule(s.Table, s.Chain, s.Rule)
	}
	args := append([]string{s.Chain, "-t", s.Table}, s.Rule...)
	there, err := p.run.Test(append([]string{"-C"}, args...)...)
	if err != nil || there {
		return err
	}
	return p.run.Do(append([]string{"-A"}, args...)...)
}
