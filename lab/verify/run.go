package verify

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/internal/progress"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/trace"
	"github.com/svclab/svclab/lab/traffic"
)

// missRate bounds, per check, the chance that an endpoint that may answer is never
// picked in the attempts made. A CI run makes about 1000 such checks (verify's
// specs in four iptables modes and the shipped labs in every mode), so together
// they fail falsely about once in 10^4 runs, leaving room in the suite's 1 in
// 1000 for the specs' other statistical checks.
const missRate = 1e-7

// Timeouts of one attempt. Answers in a lab come within milliseconds (tens of
// milliseconds in an emulated VM). An answered flow's attempt may still take
// seconds on a loaded machine: a SYN or its answer lost to a full queue is sent
// again after 1 s, and an emulated VM on a host with a load of 30 was seen
// missing a 1 s bound once in 24 attempts. The bound costs nothing when the
// answer comes, so it leaves room for one retransmission; a dropped flow's
// attempts, which always wait it out, keep 1 s.
const (
	answerTimeout = 4 * time.Second
	dropTimeout   = 1 * time.Second
	// bypassTimeout bounds attempts of flows where some picks are expected to go
	// unanswered (see Expectation.MayTimeout), so those picks cost little.
	bypassTimeout = 300 * time.Millisecond
	// dropAttempts: a dropped flow must time out on every attempt.
	dropAttempts = 2
	// stickyAttempts connections must all reach the backend the first one got:
	// without affinity, a Service of two backends would pass with
	// probability 2^-(stickyAttempts-1), here under 1e-6.
	stickyAttempts = 21
	// refuseAttempts: a REJECT answers every packet alike, so one refusal
	// settles a flow, and each attempt spends the client's ICMP budget (see
	// icmpBudget). A second attempt, a full ICMP rate-limit interval later, is
	// made only after a timeout: a refusal is a single ICMP error (or reset)
	// that CI once saw missing among about 10^4 refusals within the budget, and
	// an ICMP redirect the node sent the same client just before suppresses it
	// (see docs/kernel.md, "What the kernel showed us"). A flow that is dropped, not
	// rejected, times out on both attempts and fails.
	refuseAttempts = 2
	// icmpInterval is net.ipv4.icmp_ratelimit's default, the time one more ICMP
	// error to a host takes to be allowed again.
	icmpInterval = time.Second
)

// Check is one flow's result, in the shape `svclab verify --json` prints.
type Check struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	From     string `json:"from"`
	To       string `json:"to"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Passed   bool   `json:"passed"`
	Service  string `json:"service"`
	Protocol string `json:"protocol"`
	Attempts int    `json:"attempts"`
	Why      string `json:"why"`
	// Trace follows one attempt through the kernel (see Explain).
	Trace *trace.Trace `json:"trace,omitempty"`
}

// Lab is what verify needs of a running lab (a *lab.Lab is one): verify only
// reads a lab, so it does not import the package that builds one.
type Lab interface {
	Mode() string
	Topology() *topology.Topology
	ProxyConfig() proxy.Config
	Member(name string) (*member.Member, error)
	// PodResolvConf is the pod's own resolv.conf, nil when it keeps the host's.
	PodResolvConf(pod string) ([]byte, error)
	// Deaths are the lab's components that died at or after since: a check
	// that passed while one was down proves nothing about a whole lab.
	Deaths(since time.Time) []record.Death
	// Record is the lab as recorded: its members' namespaces, which a trace
	// of a failed check follows.
	Record() record.Lab
}

// Run checks every flow Derive plans for the lab as it is, under its mode's
// semantics; label names the run in each check (e.g. "iptables-nft").
func Run(ctx context.Context, l Lab, label string) ([]Check, error) {
	m, err := ModelOf(l.Mode())
	if err != nil {
		return nil, err
	}
	return Execute(ctx, l, Derive(l.Topology(), m, l.ProxyConfig()), label)
}

// Execute checks every flow of plan p with real connections in the running lab l,
// a few flows at a time; label names the run in each check. Each check is
// bounded by its own attempts (see Bounds); ExecuteBounded sets the bounds and
// a heartbeat.
func Execute(ctx context.Context, l Lab, p Plan, label string) ([]Check, error) {
	return ExecuteBounded(ctx, l, p, label, Bounds{})
}

// ExecuteBounded is Execute under the bounds b: a check that exceeds its bound
// fails naming its flow, its member and what it waited for, and while checks
// run b.Log gets a heartbeat naming those still running.
func ExecuteBounded(ctx context.Context, l Lab, p Plan, label string, b Bounds) (checks []Check, err error) {
	wt := newWatch(len(p.Flows) + len(p.Lookups))
	if b.Log == nil {
		return execute(ctx, l, p, label, b, wt)
	}
	every := b.Every
	if every <= 0 {
		every = DefaultHeartbeat
	}
	progress.While(every, func(elapsed time.Duration) {
		fmt.Fprintln(b.Log, wt.status(label, elapsed))
	}, func() { checks, err = execute(ctx, l, p, label, b, wt) })
	return checks, err
}

func execute(ctx context.Context, l Lab, p Plan, label string, b Bounds, wt *watch) ([]Check, error) {
	m, err := ModelOf(l.Mode())
	if err != nil {
		return nil, err
	}
	if m != p.Model {
		return nil, fmt.Errorf("verify: the lab runs mode %s (%v), the plan is for the %v", l.Mode(), m, p.Model)
	}
	flows := p.Flows
	netns := make([]string, len(flows))
	for i, f := range flows {
		member, err := l.Member(f.Source.Name)
		if err != nil {
			return nil, fmt.Errorf("verify: flow %q: %w", f.Name, err)
		}
		netns[i] = member.NetNS
	}
	var hijacks *hijackFinder
	if m == proxy.ModelIPVS {
		if hijacks, err = newHijackFinder(l); err != nil {
			return nil, err
		}
	}
	checks := make([]Check, len(flows))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	var refused []int
	// Flows through a virtual server whose one scheduler picks the backends of
	// every client's connections (IPVS's rr rotation) run one after another: two
	// side by side could alternate in step and each see one backend only. Random
	// picks per connection need no such care.
	mode, err := proxy.Lookup(l.Mode())
	if err != nil {
		return nil, err
	}
	shared := mode.Dataplane.Selection == proxy.SharedPerVirtualServer
	var groups [][]int
	group := map[string]int{}
	for i := range flows {
		if flows[i].Expected.Outcome == traffic.Refused {
			refused = append(refused, i)
			continue
		}
		key := strconv.Itoa(i)
		switch {
		case shared:
			key = flows[i].scheduler()
		case flows[i].Expected.Sticky:
			// ClientIP affinity is kept per source address in the
			// translating node's rules, for every address of the Service
			// alike (iptables' recent lists, nftables' affinity sets): two
			// flows of one source to one Service side by side can make
			// their first picks before either pick is recorded, and one
			// of them then sees two backends (CI saw node-1's NodePort
			// flow of policies-local's sticky get 20 and 1). They run
			// one after another.
			key = "affinity " + flows[i].Source.Name + " " + flows[i].Service
		}
		g, ok := group[key]
		if !ok {
			g = len(groups)
			group[key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	// Refused flows first, while every node still has its whole budget of ICMP
	// errors for each client: one client's checks in sequence within that
	// budget, different clients side by side. Answered flows that a node
	// forwards out of the interface they came in by make it send their client
	// ICMP redirects, which spend the same budget (see docs/kernel.md).
	bySource := map[netip.Addr][]int{}
	for _, i := range refused {
		src := flows[i].Source.IP
		bySource[src] = append(bySource[src], i)
	}
	for _, list := range bySource {
		wg.Add(1)
		go func() {
			defer wg.Done()
			budget := newICMPBudget()
			for _, i := range list {
				checks[i] = boundedCheck(ctx, wt, b, flows[i], netns[i], label, budget, hijacks)
			}
		}()
	}
	wg.Wait()
	for _, group := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for _, i := range group {
				checks[i] = boundedCheck(ctx, wt, b, flows[i], netns[i], label, nil, hijacks)
			}
		}()
	}
	wg.Wait()
	if len(p.Lookups) > 0 && ctx.Err() == nil {
		lookups, err := executeLookups(ctx, l, p.Lookups, label, b, wt)
		if err != nil {
			return nil, err
		}
		checks = append(checks, lookups...)
	}
	return checks, ctx.Err()
}

// scheduler names the virtual server that picks the flow's backend: the node the
// flow is addressed to, or for a ClusterIP the source's own node. Flows to an
// ingress or external IP may enter at any of several nodes: they share one
// name, the address's.
func (f Flow) scheduler() string {
	if f.Target.External != "" {
		return f.Target.Addr.String()
	}
	node := f.Target.Node
	if node == "" {
		node = f.Source.Node
	}
	return node + " " + f.Target.Addr.String()
}

// icmpBudget paces attempts that must be refused. A refusal is an ICMP error (or a
// TCP reset) from the node's REJECT rule, and the kernel rate-limits the ICMP errors
// a namespace sends to one host: one per net.ipv4.icmp_ratelimit (1 s) after a burst
// of six (XRLIM_BURST_FACTOR in net/ipv4/icmp.c). Past that budget a refusal turns
// into a timeout, a real effect but not the one checked here, so refused flows run
// one at a time, spending at most five errors a second on each client.
type icmpBudget struct {
	mu     sync.Mutex
	tokens map[netip.Addr]float64
	last   map[netip.Addr]time.Time
}

const (
	icmpBurst = 5
	icmpRate  = 1.0 // per second
)

func newICMPBudget() *icmpBudget {
	return &icmpBudget{tokens: map[netip.Addr]float64{}, last: map[netip.Addr]time.Time{}}
}

// spend waits until client may be sent one more error, and takes it. Callers
// may share a budget: each reserves its token under the lock and waits for it
// outside.
func (b *icmpBudget) spend(ctx context.Context, client netip.Addr) {
	b.mu.Lock()
	now := time.Now()
	tokens, seen := b.tokens[client], !b.last[client].IsZero()
	if !seen {
		tokens = icmpBurst
	} else {
		tokens = math.Min(icmpBurst, tokens+now.Sub(b.last[client]).Seconds()*icmpRate)
	}
	var wait time.Duration
	if tokens < 1 {
		wait = time.Duration((1 - tokens) / icmpRate * float64(time.Second))
		tokens = 1
	}
	b.tokens[client], b.last[client] = tokens-1, now.Add(wait)
	b.mu.Unlock()
	sleep(ctx, wait)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// attemptsFor is how many new connections make sure, but for missRate, that each of
// k endpoints that answer is seen when the rules pick uniformly among n >= k.
func attemptsFor(k, n int) int {
	if n <= 1 {
		return 1
	}
	return attemptsForShare(k, 1/float64(n))
}

// attemptsForShare is how many new connections make sure, but for missRate, that
// each of k endpoints, every one reached with chance at least p per connection,
// is seen.
func attemptsForShare(k int, p float64) int {
	if p >= 1 {
		return 1
	}
	return int(math.Ceil(math.Log(missRate/float64(k)) / math.Log(1-p)))
}

// boundedCheck is check under its bound (b.Check, or its attempts'), watched by wt.
func boundedCheck(ctx context.Context, wt *watch, b Bounds, f Flow, netns, label string, budget *icmpBudget, hijacks *hijackFinder) Check {
	bound := b.Check
	if bound <= 0 {
		attempts, timeout := f.attempts()
		bound = boundOf(attempts, timeout)
	}
	return wt.bounded(ctx, bound, f.planned(label), func(ctx context.Context, w *waiting) Check {
		return check(ctx, f, netns, label, budget, hijacks, w)
	})
}

// attempts is how many attempts a check of f makes at most (but for those made
// again, see maxHijacked), and each one's timeout.
func (f Flow) attempts() (int, time.Duration) {
	exp := f.Expected
	attempts, timeout := 1, answerTimeout
	switch {
	case exp.Outcome == traffic.Answered && exp.Sticky:
		attempts = stickyAttempts
		if exp.MayTimeout {
			timeout = bypassTimeout
		}
	case exp.Outcome == traffic.Answered:
		if exp.MayTimeout {
			timeout = bypassTimeout
		}
		attempts = attemptsFor(len(exp.Backends), max(f.Candidates, len(exp.Backends)))
		if exp.MinShare > 0 {
			attempts = attemptsForShare(len(exp.Backends), exp.MinShare)
		}
	case exp.Outcome == traffic.Refused:
		attempts = refuseAttempts
	case exp.Outcome == traffic.Timeout:
		attempts, timeout = dropAttempts, dropTimeout
	}
	return attempts, timeout
}

// waitsOf tells w what an attempt to target waits for at each step.
func waitsOf(w *waiting, target string) func(string) {
	return func(step string) {
		switch step {
		case "connect":
			w.set("connect to " + target)
		case "reply":
			w.set("a reply from " + target)
		case "close":
			w.set("the close of the connection to " + target)
		default:
			w.set(step + " (" + target + ")")
		}
	}
}

// check makes one flow's attempts from the namespace netns, telling w where it
// stands, until ctx ends. In IPVS mode an answered flow's attempt that times
// out is made again when hijacks finds its replies were taken by an older IPVS
// connection (see hijack.go).
func check(ctx context.Context, f Flow, netns, label string, budget *icmpBudget, hijacks *hijackFinder, w *waiting) Check {
	c := f.planned(label)
	attempts, timeout := f.attempts()
	dial := traffic.Dial{From: netns, Protocol: f.Protocol, To: f.Target.Addr, Timeout: timeout,
		Waiting: waitsOf(w, f.Protocol+" "+f.Target.Addr.String())}
	exp := f.Expected
	// Seeing every expected backend settles a flow when the expectation accounts
	// for every endpoint the rules may pick (those it leaves out are known to go
	// unanswered, with MayTimeout). Otherwise, as for a flows file's flow that
	// lists fewer backends than its Service has, every attempt is made, so that
	// one the expectation leaves out is caught: attemptsFor bounds the chance
	// of missing it by missRate too.
	accounted := exp.MayTimeout || len(exp.Backends) >= f.Candidates
	obs := newObservation()
	var taken []string
	// unread is the first failure to read the kernel's tables for that
	// evidence: the check fails as it would have, and says so.
	var unread error
	ok := true
	for i := 0; i < attempts && !over(ctx); i++ {
		c.Attempts++
		w.setAttempt(c.Attempts, attempts+len(taken))
		if i > 0 && exp.Outcome == traffic.Refused {
			w.set("an ICMP rate-limit interval before the next refusal")
			sleep(ctx, icmpInterval)
		}
		if budget != nil {
			w.set("the ICMP budget of " + f.Source.IP.String())
			budget.spend(ctx, f.Source.IP)
		}
		r, err := traffic.RequestContext(ctx, dial)
		if over(ctx) {
			// Ended by the check's bound or the run's end, not by the
			// lab's answer: not an observation.
			break
		}
		out := traffic.Classify(err)
		if out == traffic.Timeout && exp.Outcome == traffic.Answered && !exp.MayTimeout && hijacks != nil && len(taken) < maxHijacked {
			w.set("the nodes' conntrack and IPVS connection tables (looking for an older IPVS connection taking the replies)")
			why, err := hijacks.find(f)
			if why != "" {
				taken = append(taken, why)
				i--
				continue
			}
			if err != nil && unread == nil {
				unread = err
			}
		}
		obs.add(out, r)
		if !exp.admits(out, r) {
			ok = false
		}
		if exp.Outcome == traffic.Answered && !exp.Sticky && !exp.SomeOf && accounted && obs.covers(exp.Backends) ||
			exp.Outcome == traffic.Refused && out == traffic.Refused {
			break
		}
	}
	c.Observed = obs.String()
	if len(taken) > 0 {
		c.Observed += fmt.Sprintf("; %d attempt(s) made again: %s", len(taken), strings.Join(taken, "; "))
	}
	if unread != nil {
		c.Observed += fmt.Sprintf("; could not look for an older IPVS connection taking a timed-out attempt's replies: %v", unread)
	}
	switch {
	case exp.Outcome == traffic.Refused:
		ok = ok && obs.outcomes[traffic.Refused] > 0
	case exp.Outcome != traffic.Answered:
	case exp.Sticky:
		// Affinity: every connection of this client to one backend; where some
		// backends' replies are lost, possibly to one of those every time.
		ok = ok && (len(obs.backends) == 1 && len(obs.outcomes) == 0 ||
			exp.MayTimeout && len(obs.backends) == 0)
	case exp.SomeOf:
		ok = ok && (len(obs.backends) > 0 || exp.MayTimeout)
	default:
		ok = ok && obs.covers(exp.Backends)
	}
	c.Passed = ok && !over(ctx)
	return c
}

// admits tells whether one attempt's outcome out (and reply r, when answered)
// may be part of a flow that meets exp. A refused flow's timeouts are judged
// over all its attempts: one of them must be refused.
func (exp Expectation) admits(out traffic.Outcome, r traffic.Reply) bool {
	switch {
	case out == traffic.Answered && exp.Outcome == traffic.Answered:
		srcs, expected := exp.Backends[r.Backend()]
		return expected && allowed(srcs, r.Client.Addr())
	case out == traffic.Timeout && exp.MayTimeout:
	case out == traffic.Timeout && exp.Outcome == traffic.Refused:
	case out != exp.Outcome:
		return false
	}
	return true
}

// allowed tells whether a backend that may see the sources srcs (any, when none
// are given) may see a.
func allowed(srcs []netip.Addr, a netip.Addr) bool {
	if len(srcs) == 0 {
		return true
	}
	for _, s := range srcs {
		if s == a {
			return true
		}
	}
	return false
}

// observation counts what came back.
type observation struct {
	outcomes map[traffic.Outcome]int
	backends map[string]map[netip.Addr]int
	names    map[string]string
}

func newObservation() *observation {
	return &observation{outcomes: map[traffic.Outcome]int{}, backends: map[string]map[netip.Addr]int{}, names: map[string]string{}}
}

func (o *observation) add(out traffic.Outcome, r traffic.Reply) {
	if out != traffic.Answered {
		o.outcomes[out]++
		return
	}
	b := r.Backend()
	if o.backends[b] == nil {
		o.backends[b] = map[netip.Addr]int{}
	}
	o.backends[b][r.Client.Addr()]++
	o.names[b] = r.Pod
}

func (o *observation) covers(want map[string][]netip.Addr) bool {
	for b := range want {
		if len(o.backends[b]) == 0 {
			return false
		}
	}
	return true
}

func (o *observation) String() string {
	var parts []string
	keys := make([]string, 0, len(o.backends))
	for b := range o.backends {
		keys = append(keys, b)
	}
	sort.Strings(keys)
	for _, b := range keys {
		var srcs []string
		n := 0
		for a, k := range o.backends[b] {
			srcs = append(srcs, a.String())
			n += k
		}
		sort.Strings(srcs)
		parts = append(parts, fmt.Sprintf("%s x%d (src %s)", b, n, strings.Join(srcs, "|")))
	}
	outs := make([]string, 0, len(o.outcomes))
	for out, n := range o.outcomes {
		outs = append(outs, fmt.Sprintf("%s x%d", out, n))
	}
	sort.Strings(outs)
	return strings.Join(append(parts, outs...), ", ")
}
