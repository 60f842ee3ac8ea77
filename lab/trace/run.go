package trace

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/ipvs"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/traffic"
)

// ErrNoMember is Run's error for a FROM the lab does not have.
var ErrNoMember = errors.New("no member")

// Request is the flow to trace.
type Request struct {
	// From is the lab member the client runs in.
	From string
	To   netip.AddrPort
	// Protocol is TCP (default) or UDP.
	Protocol string
	// Timeout bounds the connection and its reply (traffic.DefaultTimeout when 0).
	Timeout time.Duration
	// SrcPort is the client's source port; 0 picks one of the trace's own
	// range. A given one replays a flow from the port a client used (IPVS and
	// conntrack keep state by it).
	SrcPort uint16
}

// Source ports of traced flows: below the ephemeral range (32768-60999), so
// that no other socket of the lab picks the port while the trace runs, and
// below the NodePort range.
const (
	firstPort = 20000
	ports     = 10000
)

// MethodFor is how a trace reads the rules of a lab in mode with the xtables
// backend backend.
func MethodFor(mode, backend string) string {
	switch {
	case mode == "nftables":
		return MethodNFTMonitor
	case backend == "legacy":
		return MethodCounterDelta
	}
	return MethodXTMonitor
}

// Run makes one connection (or datagram) of req in the running lab l and
// reports what every namespace it crossed did with it.
func Run(ctx context.Context, l Lab, req Request) (*Trace, error) {
	from, ok := memberOf(l, req.From)
	if !ok {
		var names []string
		for _, m := range l.Members {
			names = append(names, m.Name)
		}
		return nil, fmt.Errorf("%w %q in lab %s (members: %s)", ErrNoMember, req.From, l.ID, strings.Join(names, ", "))
	}
	protocol := strings.ToUpper(req.Protocol)
	if protocol == "" {
		protocol = "TCP"
	}
	if protocol != "TCP" && protocol != "UDP" {
		return nil, fmt.Errorf("protocol %q: want TCP or UDP", req.Protocol)
	}
	if req.SrcPort != 0 {
		// A replayed port is not retried: the first attempt's conntrack
		// and IPVS entries would decide the second one's path.
		return runOnce(ctx, l, req, from, protocol, int(req.SrcPort))
	}
	for attempt := 1; ; attempt++ {
		t, err := runOnce(ctx, l, req, from, protocol, firstPort+rand.IntN(ports))
		if !errors.Is(err, errRuleReplaced) || attempt == replacedAttempts || ctx.Err() != nil {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("attempt %d of %d: %w", attempt, replacedAttempts, err)
			}
			return t, err
		}
	}
}

// replacedAttempts bounds the traces of one request whose rules were replaced
// under them (errRuleReplaced): each attempt is a new flow from a new port.
// A proxy rewrites its rules after a change, a resync or a restart, far less
// often than a trace takes; one that rewrites them all the time (each trace's
// window hit) is reported after this many.
const replacedAttempts = 5

// runOnce traces one flow of req from source port port.
func runOnce(ctx context.Context, l Lab, req Request, from record.Member, protocol string, port int) (*Trace, error) {
	t := &Trace{Lab: l.ID, Mode: l.Mode, Method: MethodFor(l.Mode, l.Backend), From: from.Name, Protocol: protocol, To: req.To}
	if from.IP != "" {
		a, _ := netip.ParseAddr(from.IP)
		t.Source = netip.AddrPortFrom(a, 0)
	}
	t.Source = netip.AddrPortFrom(t.Source.Addr(), uint16(port))

	nss := map[string]*namespaces.NS{}
	defer func() {
		for _, ns := range nss {
			ns.Close()
		}
	}()
	for _, m := range l.Members {
		ns, err := namespaces.Open(m.NetNS)
		if err != nil {
			return nil, err
		}
		nss[m.Name] = ns
	}
	// What the trace creates is recorded before it is created, so that a
	// trace killed with SIGKILL, which runs none of the deferred removals
	// below, leaves nothing `svclab down`, `svclab clean` and the next trace
	// cannot find (record.RemoveKilledTraces). The record goes when all is
	// removed.
	rec := &record.Trace{Port: port, Table: tableName(port), Writer: record.Self()}
	for _, m := range l.Members {
		rec.Namespaces = append(rec.Namespaces, m.NetNS)
	}
	if err := record.WriteTrace(l.RecordDir, l.ID, rec); err != nil {
		return nil, err
	}
	var left bool // a table could not be removed: the record stays for clean
	defer func() {
		if !left {
			record.RemoveTrace(l.RecordDir, l.ID, rec)
		}
	}()
	// The trace table in every namespace; each one added is removed again,
	// whatever happens.
	var mu sync.Mutex
	var added []string
	defer func() {
		for _, ns := range added {
			if err := deleteTable(ns, port); err != nil && namespaces.Exists(ns) {
				left = true
			}
		}
	}()
	g, _ := errgroup.WithContext(ctx)
	for _, m := range l.Members {
		g.Go(func() error {
			if err := addTable(m.NetNS, port, protocol); err != nil {
				return fmt.Errorf("%s %s: the trace table: %w", m.Kind, m.Name, err)
			}
			mu.Lock()
			added = append(added, m.NetNS)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	monitors := map[string]*monitor{}
	defer func() {
		for _, mon := range monitors {
			mon.stop()
		}
	}()
	for _, m := range l.Members {
		mon, err := startMonitor(m.NetNS, monitorCommand(t.Method), port)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Name, err)
		}
		monitors[m.Name] = mon
		// Pdeathsig ends it with this process; the record lets clean end
		// one that outlived it all the same, by PID and start time.
		if p := record.ProcessOf(mon.cmd.Process.Pid); p.Start != 0 {
			rec.Monitors = append(rec.Monitors, p)
			if err := record.WriteTrace(l.RecordDir, l.ID, rec); err != nil {
				return nil, err
			}
		}
	}
	if err := syncAll(monitors, port); err != nil {
		return nil, err
	}
	before := map[string][]counted{}
	if t.Method == MethodCounterDelta {
		var err error
		if before, err = countersOf(l, nss); err != nil {
			return nil, err
		}
	}

	reply, dialErr := traffic.Request(traffic.Dial{From: from.NetNS, Protocol: protocol, To: req.To, SrcPort: port, Timeout: req.Timeout})
	outcome := traffic.Classify(dialErr)

	if err := syncAll(monitors, port); err != nil {
		return nil, err
	}
	evs := map[string][]*event{}
	for name, mon := range monitors {
		evs[name] = events(mon.stop(), port)
	}
	monitors = nil
	deltas := map[string][]Rule{}
	if t.Method == MethodCounterDelta {
		after, err := countersOf(l, nss)
		if err != nil {
			return nil, err
		}
		for name, list := range after {
			deltas[name] = pathOrder(counterDeltas(before[name], list))
		}
	}
	var conns map[string][]ipvs.Conn
	if l.Mode == "ipvs" {
		var err error
		if conns, err = ipvsConns(l, nss); err != nil {
			return nil, err
		}
	}
	for _, m := range order(l, from, reply, evs, deltas) {
		hop, err := hopOf(l, m, from, t, evs[m.Name], deltas[m.Name], nss[m.Name], port, conns[m.Name])
		if err != nil {
			return nil, err
		}
		t.Hops = append(t.Hops, hop)
	}
	t.End = endOf(t, outcome, reply, dialErr, conns)
	t.End.Observed = outcome
	return t, nil
}

func memberOf(l Lab, name string) (record.Member, bool) {
	for _, m := range l.Members {
		if m.Name == name {
			return m, true
		}
	}
	return record.Member{}, false
}

// syncAll syncs every monitor, side by side.
func syncAll(monitors map[string]*monitor, port int) error {
	var g errgroup.Group
	for _, mon := range monitors {
		g.Go(func() error { return mon.sync(port) })
	}
	return g.Wait()
}

// hasRules tells whether a member's namespace holds a proxy's rules.
func hasRules(m record.Member) bool {
	return m.Kind == member.KindNode || m.Kind == member.KindLoadBalancer
}

// countersOf reads the iptables-legacy counters of every namespace with rules.
func countersOf(l Lab, nss map[string]*namespaces.NS) (map[string][]counted, error) {
	var mu sync.Mutex
	out := map[string][]counted{}
	var g errgroup.Group
	for _, m := range l.Members {
		if !hasRules(m) {
			continue
		}
		g.Go(func() error {
			c, err := saveCounters(nss[m.Name])
			mu.Lock()
			out[m.Name] = c
			mu.Unlock()
			return err
		})
	}
	return out, g.Wait()
}

// order is the members the packet crossed, in the order it crossed them: the
// client first, then its node (a pod's), the fabric, the load balancer, the
// nodes (the one that answered last), and the pod that answered. The kernel's
// events carry no time, and different namespaces' monitors read theirs
// independently, so the order is the path's, not the events'.
func order(l Lab, from record.Member, reply traffic.Reply, evs map[string][]*event, deltas map[string][]Rule) []record.Member {
	rank := func(m record.Member) int {
		switch {
		case m.Name == from.Name:
			return 0
		case m.Kind == member.KindNode && m.Name == from.Node:
			return 1
		case m.Kind == member.KindFabric:
			return 2
		case m.Kind == member.KindLoadBalancer:
			return 3
		case m.Kind == member.KindNode && m.Name == reply.Node:
			return 5
		case m.Kind == member.KindNode:
			return 4
		}
		return 6
	}
	var crossed []record.Member
	for _, m := range l.Members {
		if len(evs[m.Name]) > 0 || len(deltas[m.Name]) > 0 || m.Name == from.Name {
			crossed = append(crossed, m)
		}
	}
	sort.SliceStable(crossed, func(i, j int) bool { return rank(crossed[i]) < rank(crossed[j]) })
	return crossed
}

// hopOf is what member m did with the packet.
// conns is its IPVS connection table in IPVS mode.
func hopOf(l Lab, m, from record.Member, t *Trace, evs []*event, deltas []Rule, ns *namespaces.NS, port int, conns []ipvs.Conn) (Hop, error) {
	h := Hop{Member: m.Name, Kind: m.Kind, Counters: deltas}
	var first *packet
	for _, e := range evs {
		if first == nil && e.packet.Dst.IsValid() {
			first = &e.packet
		}
		if e.hook.Table == tableName(port) || e.hook.Table == "" {
			continue
		}
		h.Hooks = append(h.Hooks, e.hook)
	}
	if m.Kind == member.KindPod && m.Name != from.Name {
		// A pod's own namespace holds no rules: that it got the packet is
		// all there is to say (End says whether it answered).
		return h, nil
	}
	if hasRules(m) || m.Name == from.Name {
		var dst netip.AddrPort
		if first != nil && first.Dst.IsValid() && first.Dport != 0 {
			dst = netip.AddrPortFrom(first.Dst, uint16(first.Dport))
		}
		c, err := conntrackOf(ns, t.Protocol, port, dst, t.To)
		if err != nil {
			return h, err
		}
		if c != nil && (hasRules(m) || c.DNAT != "" || c.SNAT != "") {
			h.Conntrack = c
		}
	}
	if first != nil && m.Kind != member.KindFabric {
		dst := first.Dst
		if h.Conntrack != nil {
			dst = h.Conntrack.Reply.Src.Addr()
		}
		r, err := routeOf(ns, first.Src, dst, first.In)
		if err != nil {
			r = "(" + err.Error() + ")"
		}
		h.Route = r
	}
	if l.Mode == "ipvs" && m.Kind == member.KindNode {
		h.IPVS = fromPort(conns, port)
		if len(h.IPVS) == 0 {
			dst := netip.AddrPortFrom(t.To.Addr(), t.To.Port())
			if first != nil && first.Dst.IsValid() && first.Dport != 0 {
				dst = netip.AddrPortFrom(first.Dst, uint16(first.Dport))
			}
			empty, err := ipvsEmptyService(ns, t.Protocol, dst)
			if err != nil {
				return h, err
			}
			h.IPVSEmpty = empty
		}
	}
	return h, nil
}

// endOf is how the flow ended: its outcome as the client saw it, and who
// answered, refused or dropped it as the trace shows.
// conns are the nodes' IPVS connection tables in IPVS mode.
func endOf(t *Trace, outcome traffic.Outcome, reply traffic.Reply, err error, conns map[string][]ipvs.Conn) End {
	if outcome == traffic.Answered {
		return End{Outcome: Answered, Pod: reply.Pod, Backend: reply.Addr, Seen: reply.Client}
	}
	e := End{Error: err.Error()}
	switch outcome {
	case traffic.Refused, traffic.Reset, traffic.Unreachable:
		e.Outcome = Refused
		if member, r := lastRule(t, func(r Rule) bool { return isReject(r) }); r != nil {
			e.By, e.Member, e.Rule = "REJECT rule", member, r
			return e
		}
		for _, h := range t.Hops {
			if h.IPVSEmpty != "" {
				// A node's own connection meets IPVS in LOCAL_OUT, before any
				// filter rule of OUTPUT: no rule names this refusal.
				e.By, e.Member = "IPVS: virtual service "+h.IPVSEmpty+" has no real server (IPVS answers port unreachable itself)", h.Member
				return e
			}
		}
		e.By = "no listener (a reset or port unreachable from the destination)"
		if n := len(t.Hops); n > 0 {
			e.Member = t.Hops[n-1].Member
		}
		return e
	}
	e.Outcome = Dropped
	if member, r := lastRule(t, isDrop); r != nil {
		e.By, e.Member, e.Rule = "DROP rule", member, r
		return e
	}
	if node, how := replyTaken(t, conns); how != "" {
		e.By, e.Member = how, node
		return e
	}
	if member, r := lastRule(t, func(Rule) bool { return true }); r != nil {
		e.By, e.Member, e.Rule = "nothing that answered; the last rule seen", member, r
		return e
	}
	e.By = "nothing that answered; no rule seen"
	return e
}

func isReject(r Rule) bool {
	return strings.Contains(r.Text, "-j REJECT") || strings.Contains(r.Text, "reject") || strings.EqualFold(r.Verdict, "REJECT")
}

func isDrop(r Rule) bool {
	return !isReject(r) && (r.Verdict == "drop" || r.Verdict == "DROP" || r.Verdict == "policy drop")
}

// lastRule is the last rule of the trace that pred accepts, and its member.
func lastRule(t *Trace, pred func(Rule) bool) (string, *Rule) {
	for i := len(t.Hops) - 1; i >= 0; i-- {
		h := t.Hops[i]
		var rules []Rule
		for _, k := range h.Hooks {
			rules = append(rules, k.Rules...)
		}
		rules = append(rules, h.Counters...)
		for j := len(rules) - 1; j >= 0; j-- {
			if pred(rules[j]) {
				r := rules[j]
				return h.Member, &r
			}
		}
	}
	return "", nil
}
