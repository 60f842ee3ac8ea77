package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	libipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// DrainInterval is how often draining real servers are checked for deletion.
// kube-proxy checks every minute (rsCheckDeleteInterval); svclab checks every
// second so that a lab shows a drained real server go soon after its last
// connection left IPVS's table. Which real servers drain, and when they may go, is
// kube-proxy's.
const DrainInterval = time.Second

// SyncStats describes one Sync, for benchmarks.
type SyncStats struct {
	// VirtualServers, RealServers and SetEntries are the size of the state synced.
	VirtualServers, RealServers, SetEntries int
	// What changed in the kernel.
	ServicesAdded, ServicesUpdated, ServicesDeleted          int
	RealServersAdded, RealServersDeleted, RealServersDrained int
	AddressesBound, AddressesUnbound                         int
	EntriesAdded, EntriesDeleted                             int
	// Netlink requests made: IPVS (generic netlink), links and addresses
	// (rtnetlink), ipsets (nfnetlink); NetlinkCalls is their sum.
	IPVSCalls, LinkCalls, IPSetCalls, NetlinkCalls int
	// Commands counts the iptables programs run.
	Commands int
	// Time spent on the iptables calls and iptables-restore, on IPVS, addresses
	// and ipsets, and on the stale UDP conntrack cleanup.
	IPTables, IPVS, IPSets, Conntrack time.Duration
	ConntrackDeleted                  int
	Total                             time.Duration
}

// Proxier programs one node the way kube-proxy 1.37's IPVS mode does.
type Proxier struct {
	target proxy.Target
	cfg    Config
	noCT   bool

	node *namespaces.NS
	k    *kernel
	run  *xtables.Runner

	mu        sync.Mutex
	draining  drainList
	initial   bool
	lastPorts []proxy.ServicePort
	stats     SyncStats
	drainErr  error

	stop chan struct{}
	done chan struct{}
}

// New makes a proxier for the node whose network namespace is t.NetNS and sets the
// sysctls kube-proxy sets there. Virtual servers and rules are written by Sync.
func New(t proxy.Target) (*Proxier, error) {
	be, err := validate(t)
	if err != nil {
		return nil, err
	}
	if err := proxy.Prepare("ipvs", t, Available, be.Check); err != nil {
		return nil, err
	}
	p := &Proxier{
		target: t, cfg: ConfigFor(t), noCT: t.Config.NoConntrackCleanup,
		run: xtables.NewRunner(be, t.RunDir), k: &kernel{}, draining: drainList{}, initial: true,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := p.open(); err != nil {
		p.closeHandles()
		return nil, err
	}
	go p.drainLoop()
	return p, nil
}

func (p *Proxier) open() error {
	var err error
	path := p.target.NetNS
	if p.node, err = namespaces.OpenPath(path); err != nil {
		return err
	}
	p.k.nl = p.node.Netlink
	sets, err := proxy.OpenNetfilterSocket(p.node.File)
	if err != nil {
		return fmt.Errorf("nfnetlink in %s: %w", path, err)
	}
	p.k.sets = &ipsetSocket{sets}
	if p.k.ipvs, err = libipvs.New(path); err != nil {
		return fmt.Errorf("IPVS netlink in %s: %w", path, err)
	}
	return p.node.Do(func() error { return setSysctls(p.target.Config.ConntrackSysctls()) })
}

// setSysctls sets what kube-proxy's NewProxier sets, in the calling thread's
// namespace: IPVS keeps conntrack entries for the connections it forwards (so that
// iptables' MASQUERADE and the conntrack table see them), drops the next packet of
// a connection whose real server was deleted and reschedules it, expires
// persistence templates of weight-0 real servers, and the node forwards. On
// kernels older than 5.9 kube-proxy also sets conn_reuse_mode=0 (the mode that
// delayed reused source ports by a second, kubernetes#81775); since 5.9 it leaves
// it alone. strictARP (off by default) would set arp_ignore and arp_announce; svclab
// has no option for it. conntrack are the conntrack sysctls kube-proxy sets
// before it makes the proxier (Config.ConntrackSysctls).
func setSysctls(conntrack [][2]string) error {
	settings := append([][2]string(nil), conntrack...)
	settings = append(settings, [2]string{"net.ipv4.vs.conntrack", "1"})
	if major, minor, ok := proxy.KernelRelease(); ok && (major < 5 || (major == 5 && minor < 9)) && (major > 4 || (major == 4 && minor >= 1)) {
		settings = append(settings, [2]string{"net.ipv4.vs.conn_reuse_mode", "0"})
	}
	settings = append(settings,
		[2]string{"net.ipv4.vs.expire_nodest_conn", "1"},
		[2]string{"net.ipv4.vs.expire_quiescent_template", "1"},
		[2]string{"net.ipv4.ip_forward", "1"},
	)
	for _, s := range settings {
		if err := namespaces.EnsureSysctlHere(s[0], s[1]); err != nil {
			return err
		}
	}
	return nil
}

// drainLoop is the graceful termination goroutine; Close stops it.
func (p *Proxier) drainLoop() {
	defer close(p.done)
	tick := time.NewTicker(DrainInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			p.mu.Lock()
			if len(p.draining) > 0 {
				p.drainErr = p.drainOnce()
			}
			p.mu.Unlock()
		}
	}
}

// Close stops the graceful termination goroutine and releases the handles. What
// was installed stays with the namespace, as kube-proxy's state stays on a node
// when it stops.
func (p *Proxier) Close() error {
	select {
	case <-p.stop:
	default:
		close(p.stop)
		<-p.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeHandles()
}

func (p *Proxier) closeHandles() error {
	if p.k.ipvs != nil {
		p.k.ipvs.Close()
		p.k.ipvs = nil
	}
	if p.k.sets != nil {
		p.k.sets.Close()
		p.k.sets = nil
	}
	p.k.nl = nil // the node's, closed with it
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

// Stats is LastSync for benchmarks that read every mode alike.
func (p *Proxier) Stats() proxy.SyncStats {
	s := p.LastSync()
	return proxy.SyncStats{
		Total: s.Total,
		// Its iptables part ensures kube-proxy's chains and jumps and writes a
		// few rules that do not grow with the Services (they match ipsets).
		Parts: []proxy.Part{{Name: "iptables", D: s.IPTables, Housekeeping: true}, {Name: "ipvs", D: s.IPVS},
			{Name: "ipsets", D: s.IPSets}, {Name: "conntrack", D: s.Conntrack, Housekeeping: true}},
		Counts: []proxy.Count{{Name: "virtual_servers", N: s.VirtualServers}, {Name: "real_servers", N: s.RealServers},
			{Name: "set_entries", N: s.SetEntries}, {Name: "netlink_calls", N: s.NetlinkCalls}, {Name: "commands", N: s.Commands}},
	}
}

// Sync makes the node's IPVS table, kube-ipvs0, ipsets and iptables rules match
// ports, in kube-proxy's order, changing only what differs from what the kernel
// holds: every virtual server is read back and compared, real servers are added,
// drained or deleted one netlink call at a time.
func (p *Proxier) Sync(ctx context.Context, s *proxy.State) error {
	ports := s.Ports
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.node == nil {
		return errors.New("ipvs proxier: closed")
	}
	start := time.Now()
	p.stats = SyncStats{}
	p.k.ipvsCalls, p.k.linkCalls, p.k.ipsetCalls, p.run.Commands = 0, 0, 0, 0
	err := p.sync(ctx, ports)
	p.stats.IPVSCalls, p.stats.LinkCalls, p.stats.IPSetCalls = p.k.counts()
	p.stats.NetlinkCalls = p.stats.IPVSCalls + p.stats.LinkCalls + p.stats.IPSetCalls
	p.stats.Commands = p.run.Commands
	if err != nil {
		p.stats.Total = time.Since(start)
		return fmt.Errorf("ipvs sync: %w", err)
	}
	prev := p.lastPorts
	p.lastPorts, p.initial = proxy.ClonePorts(ports), false
	if !p.noCT {
		t := time.Now()
		n, err := proxy.CleanStaleUDPConntrack(p.k.nl, proxy.Diff(prev, ports), ports)
		p.stats.Conntrack, p.stats.ConntrackDeleted = time.Since(t), n
		if err != nil {
			p.stats.Total = time.Since(start)
			return err
		}
	}
	p.stats.Total = time.Since(start)
	// The graceful termination goroutine has no caller to tell; the next Sync
	// reports what it could not delete.
	if err := p.drainErr; err != nil {
		p.drainErr = nil
		return err
	}
	return nil
}

func (p *Proxier) sync(ctx context.Context, ports []proxy.ServicePort) error {
	t := time.Now()
	// kube-proxy's createAndLinkKubeChain, on every sync.
	err := p.node.Do(func() error {
		for _, c := range chains {
			if err := p.run.EnsureChain(c.table, c.name); err != nil {
				return err
			}
		}
		for _, j := range jumps {
			if err := p.run.EnsureRule(j.table, j.from, j.rule()); err != nil {
				return err
			}
		}
		return nil
	})
	p.stats.IPTables += time.Since(t)
	if err != nil {
		return err
	}

	t = time.Now()
	dummy, err := p.k.ensureDummy()
	if err != nil {
		return err
	}
	for _, s := range ipsets {
		if err := p.k.ensureSet(s); err != nil {
			return err
		}
	}
	bound, nodeAddrs, err := p.k.addresses(dummy)
	if err != nil {
		return err
	}
	plan := NewPlan(p.cfg, ports, nodeAddrs)
	p.stats.VirtualServers, p.stats.RealServers, p.stats.SetEntries = len(plan.VirtualServers), plan.RealServerCount(), plan.Entries()

	alreadyBound := map[netip.Addr]bool{}
	for _, a := range bound {
		alreadyBound[a] = true
	}
	active := map[string]bool{}
	for i := range plan.VirtualServers {
		if err := ctx.Err(); err != nil {
			return err
		}
		vs := &plan.VirtualServers[i]
		if err := p.syncService(vs, dummy, alreadyBound); err != nil {
			return err
		}
		active[vs.Key()] = true
		if err := p.syncRealServers(vs); err != nil {
			return err
		}
	}
	p.stats.IPVS += time.Since(t)

	t = time.Now()
	for _, s := range ipsets {
		if err := p.syncSet(s, plan.Sets[s.name]); err != nil {
			return err
		}
	}
	p.stats.IPSets += time.Since(t)

	t = time.Now()
	restore := Restore(p.cfg, plan)
	err = p.node.Do(func() error { return p.run.Restore([]byte(restore)) })
	p.stats.IPTables += time.Since(t)
	if err != nil {
		return err
	}

	t = time.Now()
	want := map[netip.Addr]bool{}
	for _, a := range plan.Bind {
		want[a] = true
	}
	for _, a := range bound {
		if !want[a] {
			if err := p.k.unbind(dummy, a); err != nil {
				return err
			}
			p.stats.AddressesUnbound++
		}
	}
	// cleanLegacyService: virtual servers no Service asks for any more.
	cur, err := p.k.services()
	if err != nil {
		return err
	}
	for i := range cur {
		if !active[cur[i].Key()] {
			if err := p.k.deleteService(&cur[i]); err != nil {
				return err
			}
			p.stats.ServicesDeleted++
		}
	}
	p.stats.IPVS += time.Since(t)
	return nil
}

// syncService creates or updates one virtual server and binds its address
// (kube-proxy's syncService).
func (p *Proxier) syncService(vs *VirtualServer, dummy netlink.Link, alreadyBound map[netip.Addr]bool) error {
	applied, err := p.k.getService(vs)
	switch {
	case err != nil || applied == nil:
		if err := p.k.addService(vs); err != nil {
			return err
		}
		p.stats.ServicesAdded++
	case !sameService(applied, vs):
		if err := p.k.updateService(vs); err != nil {
			return err
		}
		p.stats.ServicesUpdated++
	}
	if vs.Bind && !alreadyBound[vs.Addr] {
		if err := p.k.bind(dummy, vs.Addr); err != nil {
			return err
		}
		p.stats.AddressesBound++
	}
	return nil
}

func sameService(a, b *VirtualServer) bool {
	return a.Addr == b.Addr && a.Protocol == b.Protocol && a.Port == b.Port &&
		a.Scheduler == b.Scheduler && a.Flags == b.Flags && a.Timeout == b.Timeout
}

// syncRealServers makes the real servers of vs match the plan (kube-proxy's
// syncEndpoint): new ones are added with weight 1, a draining one that is wanted
// again is deleted and added back, and ones no longer wanted are deleted or
// drained.
func (p *Proxier) syncRealServers(vs *VirtualServer) error {
	if _, err := p.k.getService(vs); err != nil {
		return fmt.Errorf("virtual server %s: %w", vs.Key(), err)
	}
	cur, err := p.k.dests(vs)
	if err != nil {
		return err
	}
	have := map[string]dest{}
	for _, d := range cur {
		have[d.String()] = d
	}
	want := map[string]bool{}
	for _, rs := range vs.RealServers {
		want[rs.String()] = true
		d, there := have[rs.String()]
		if there {
			// On its first sync kube-proxy resets weights a previous run (or
			// anyone) changed.
			if p.initial && d.Weight != rs.Weight {
				if err := p.k.updateDest(vs, rs); err != nil {
					return err
				}
			}
			key := draining{vs: *vs, rs: rs}.key()
			if _, ok := p.draining[key]; !ok {
				continue
			}
			if err := p.k.deleteDest(vs, rs); err != nil {
				return err
			}
			delete(p.draining, key)
		}
		if err := p.k.addDest(vs, rs); err != nil {
			return err
		}
		p.stats.RealServersAdded++
	}
	for _, d := range cur {
		if want[d.String()] {
			continue
		}
		if _, ok := p.draining[draining{vs: *vs, rs: d.RealServer}.key()]; ok {
			continue
		}
		gone, err := p.gracefulDelete(vs, d.RealServer)
		if err != nil {
			return err
		}
		if gone {
			p.stats.RealServersDeleted++
		} else {
			p.stats.RealServersDrained++
		}
	}
	return nil
}

// syncSet makes one ipset hold exactly entries (syncIPSetEntries).
func (p *Proxier) syncSet(s ipsetDef, entries []string) error {
	cur, err := p.k.setEntries(s)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, e := range entries {
		want[e] = true
	}
	for e := range cur {
		if !want[e] {
			if err := p.k.deleteEntry(s, e); err != nil {
				return err
			}
			p.stats.EntriesDeleted++
		}
	}
	for _, e := range entries {
		if !cur[e] {
			if err := p.k.addEntry(s, e); err != nil {
				return err
			}
			p.stats.EntriesAdded++
		}
	}
	return nil
}
