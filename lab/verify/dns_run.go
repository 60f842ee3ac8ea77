package verify

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/svclab/svclab/lab/traffic"
)

// Tries of one DNS question, as a stub resolver makes them (glibc: attempts:2):
// a question unanswered within dnsTimeout is asked once more. Answers come in
// milliseconds (tens in an emulated VM); a lab loses no packet but to the
// dataplane itself, so a second try that is needed is said in the observation.
const (
	dnsTimeout  = time.Second
	dnsAttempts = 2
)

func (lk Lookup) planned(label string) Check {
	exp := lk.Expected.String()
	why := lk.Expected.Why
	if lk.Connect != nil && lk.Expected.Outcome == traffic.Answered {
		exp += "; then " + lk.Connect.Expected.String()
		why += "; then " + lk.Connect.Expected.Why
	}
	return Check{
		Name: lk.Name, Mode: label, From: lk.Source.Name, To: lk.Type + " " + lk.Query, Expected: exp,
		Service: lk.Service, Protocol: lk.Protocol, Why: why,
	}
}

// executeLookups makes the plan's DNS checks, a few at a time.
func executeLookups(ctx context.Context, l Lab, lookups []Lookup, label string, b Bounds, wt *watch) ([]Check, error) {
	checks := make([]Check, len(lookups))
	configs := map[string]*dns.ClientConfig{}
	netns := make([]string, len(lookups))
	for i, lk := range lookups {
		m, err := l.Member(lk.Source.Name)
		if err != nil {
			return nil, fmt.Errorf("verify: lookup %q: %w", lk.Name, err)
		}
		netns[i] = m.NetNS
		if configs[lk.Source.Name] != nil {
			continue
		}
		// The pod's own resolv.conf gives the search path and ndots.
		b, err := l.PodResolvConf(lk.Source.Name)
		if err == nil && b == nil {
			err = fmt.Errorf("it has no resolv.conf of its own")
		}
		if err == nil {
			configs[lk.Source.Name], err = dns.ClientConfigFromReader(bytes.NewReader(b))
		}
		if err != nil {
			return nil, fmt.Errorf("verify: pod %s: %w", lk.Source.Name, err)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	// The connections that follow lookups and must be refused share each
	// client's ICMP budget, as refused flows do (see icmpBudget).
	budget := newICMPBudget()
	for i := range lookups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			lk, conf := lookups[i], configs[lookups[i].Source.Name]
			bound := b.Check
			if bound <= 0 {
				// Each name of the search path asked dnsAttempts times,
				// then the connection that follows.
				bound = boundOf(len(conf.NameList(lk.Query))*dnsAttempts+refuseAttempts, max(dnsTimeout, answerTimeout))
			}
			checks[i] = wt.bounded(ctx, bound, lk.planned(label), func(ctx context.Context, w *waiting) Check {
				return runLookup(ctx, lk, netns[i], conf, label, budget, w)
			})
		}()
	}
	wg.Wait()
	return checks, ctx.Err()
}

// runLookup asks one question from the pod's namespace as its stub resolver
// would: each name of the search path in turn until one exists, each asked up
// to dnsAttempts times; then it compares the answer and makes the connection
// that follows.
func runLookup(ctx context.Context, lk Lookup, netns string, conf *dns.ClientConfig, label string, budget *icmpBudget, w *waiting) Check {
	c := lk.planned(label)
	names := conf.NameList(lk.Query)
	var (
		resp     *dns.Msg
		asked    string
		timeouts int
		err      error
	)
	for _, name := range names {
		asked = name
		resp, err = nil, nil
		for try := 0; try < dnsAttempts && !over(ctx); try++ {
			c.Attempts++
			w.setAttempt(c.Attempts, len(names)*dnsAttempts)
			w.set(fmt.Sprintf("a DNS answer (%s %s, %s) from %s", lk.Type, name, lk.Protocol, lk.Server))
			resp, err = traffic.Exchange(ctx, netns, lk.Protocol, lk.Server, name, dns.StringToType[lk.Type])
			if traffic.Classify(err) != traffic.Timeout {
				break
			}
			timeouts++
		}
		// A stub resolver goes on down the search path while a name does not
		// exist or has no record of the type.
		if err != nil || !(resp.Rcode == dns.RcodeNameError || resp.Rcode == dns.RcodeSuccess && len(resp.Answer) == 0) {
			break
		}
	}
	exp := lk.Expected
	var got []string
	switch {
	case err != nil:
		out := traffic.Classify(err)
		c.Observed = string(out)
		c.Passed = exp.Outcome == out
	case exp.Outcome != traffic.Answered:
		c.Observed = "answered " + dns.RcodeToString[resp.Rcode]
	default:
		for _, rr := range resp.Answer {
			got = append(got, answerText(rr))
		}
		slices.Sort(got)
		switch {
		case resp.Rcode == dns.RcodeNameError:
			c.Observed = "NXDOMAIN"
			c.Passed = exp.NXDomain
		case resp.Rcode != dns.RcodeSuccess:
			c.Observed = dns.RcodeToString[resp.Rcode]
		default:
			c.Observed = strings.Join(got, ", ")
			if c.Observed == "" {
				c.Observed = "no records"
			}
			c.Passed = !exp.NXDomain && slices.Equal(got, exp.Records)
		}
		if asked != lk.Query {
			c.Observed += " (as " + asked + ")"
		}
	}
	if timeouts > 0 {
		c.Observed += fmt.Sprintf(" [%d unanswered tries]", timeouts)
	}
	if c.Passed && lk.Connect != nil {
		ok, seen := connectTo(ctx, *lk.Connect, netns, got, budget, w)
		c.Observed += "; then " + seen
		c.Passed = ok
	}
	c.Passed = c.Passed && !over(ctx)
	return c
}

// connectTo makes the one connection that follows a lookup, to the address the
// answer gave (its A record) and the port of f, and judges it as f's expectation
// does: an answer from one of the backends that may answer, seeing an allowed
// source address.
func connectTo(ctx context.Context, f Flow, netns string, records []string, budget *icmpBudget, w *waiting) (bool, string) {
	var addr netip.Addr
	for _, r := range records {
		if a, ok := strings.CutPrefix(r, "A "); ok {
			addr, _ = netip.ParseAddr(a)
		}
	}
	if !addr.IsValid() {
		return false, "no address to connect to"
	}
	to := netip.AddrPortFrom(addr, f.Target.Addr.Port())
	d := traffic.Dial{From: netns, Protocol: f.Protocol, To: to, Timeout: answerTimeout,
		Waiting: waitsOf(w, f.Protocol+" "+to.String()+", the address the answer gave")}
	refused := f.Expected.Outcome == traffic.Refused
	if refused {
		budget.spend(ctx, f.Source.IP)
	}
	r, err := traffic.RequestContext(ctx, d)
	out := traffic.Classify(err)
	// A refusal that timed out is tried again an icmp_ratelimit interval
	// later, as a refusal check is.
	for i := 1; i < refuseAttempts && out == traffic.Timeout && refused && !over(ctx); i++ {
		sleep(ctx, icmpInterval)
		budget.spend(ctx, f.Source.IP)
		r, err = traffic.RequestContext(ctx, d)
		out = traffic.Classify(err)
	}
	if out != traffic.Answered {
		return out == f.Expected.Outcome, string(out)
	}
	srcs, ok := f.Expected.Backends[r.Backend()]
	seen := fmt.Sprintf("%s answered (src %s)", r.Backend(), r.Client.Addr())
	return f.Expected.Outcome == traffic.Answered && ok && allowed(srcs, r.Client.Addr()), seen
}
