package verify

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Bounds are the limits and the heartbeat of a run. A check's attempts are
// each bounded by their timeouts, but a check can still make many of them one
// after another (21 of a sticky flow, up to 4 s each when its picks time out),
// and flows through one IPVS scheduler run in sequence: a verify under load was
// seen printing nothing for 400 s. Every check therefore runs under a bound of
// its own, which it fails naming what it waited for, and a long run says every
// Every which checks are still running.
type Bounds struct {
	// Check bounds every check; 0: each check's own, from the attempts it
	// plans (see boundOf).
	Check time.Duration
	// Every is the heartbeat's interval: while checks run, Log gets a line
	// every Every naming those still running. 0: DefaultHeartbeat.
	Every time.Duration
	// Log receives the heartbeat; nil: no heartbeat.
	Log io.Writer
}

// DefaultHeartbeat is the heartbeat of a run whose Bounds set none: often
// enough that a stuck run shows within a CI log's glance, seldom enough that a
// passing run of a large lab prints a few lines.
const DefaultHeartbeat = 10 * time.Second

// boundSlack is added to every computed bound: the time a loaded machine may
// take to schedule a check's goroutine, enter namespaces and read tables
// between its attempts. A bound guards against a check that never ends; it is
// no claim about how fast one is.
const boundSlack = 30 * time.Second

// stuckGrace is how long a check whose context ended is waited for before it is
// given up as stuck: its attempt under way closes its socket at once.
const stuckGrace = 2 * time.Second

// boundOf is the longest a check making attempts attempts of at most timeout
// each may take: each attempt waits at most timeout to connect and timeout
// for its reply and the server's close, may be paced by an ICMP rate-limit
// interval, and up to maxHijacked attempts are made again.
func boundOf(attempts int, timeout time.Duration) time.Duration {
	return time.Duration(attempts+maxHijacked)*(2*timeout+icmpInterval) + boundSlack
}

// waiting is where one running check stands: what it waits for, since when,
// in which attempt. The check's goroutine writes it, the heartbeat and the
// bound read it.
type waiting struct {
	mu       sync.Mutex
	name     string // the check's (the flow's) name
	member   string // the lab member it runs from
	started  time.Time
	what     string // what it waits for now: "a reply from 10.96.0.10:80"
	since    time.Time
	attempt  int
	attempts int
}

// set records that the check now waits for what.
func (w *waiting) set(what string) {
	w.mu.Lock()
	w.what, w.since = what, time.Now()
	w.mu.Unlock()
}

// setAttempt records that the check makes attempt n of of.
func (w *waiting) setAttempt(n, of int) {
	w.mu.Lock()
	w.attempt, w.attempts = n, of
	w.mu.Unlock()
}

// String says where the check stands, as the heartbeat and a bound's failure
// print it.
func (w *waiting) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := fmt.Sprintf("%s from %s", w.name, w.member)
	if w.what != "" {
		s += fmt.Sprintf(", waiting %s for %s", time.Since(w.since).Round(100*time.Millisecond), w.what)
	}
	if w.attempts > 0 {
		s += fmt.Sprintf(" (attempt %d of %d)", w.attempt, w.attempts)
	}
	return s
}

// watch keeps the running checks of one run, for the heartbeat. Lock order:
// watch.mu, then a waiting's mu (status reads each running check's under its
// own); a check's goroutine takes only its waiting's.
type watch struct {
	mu      sync.Mutex
	running map[*waiting]bool
	done    int
	total   int
}

func newWatch(total int) *watch { return &watch{running: map[*waiting]bool{}, total: total} }

// bounded runs one check, fn, under bound: fn gets a context that ends when the
// bound passes (or the run ends) and a waiting to keep up to date. A check
// still running at its bound fails there, naming its flow, its member and what
// it waited for, whether or not fn returns: a step that ignores its context
// (a kernel call that never answers) cannot hold the run. planned is the
// check as planned, returned when fn never does.
func (wt *watch) bounded(ctx context.Context, bound time.Duration, planned Check, fn func(context.Context, *waiting) Check) Check {
	w := &waiting{name: planned.Name, member: planned.From, started: time.Now()}
	wt.mu.Lock()
	wt.running[w] = true
	wt.mu.Unlock()
	defer func() {
		wt.mu.Lock()
		delete(wt.running, w)
		wt.done++
		wt.mu.Unlock()
	}()
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	result := make(chan Check, 1)
	go func() { result <- fn(cctx, w) }()
	var c Check
	select {
	case c = <-result:
		if !over(cctx) || over(ctx) {
			return c
		}
		// It returned because its bound passed: it failed there.
	case <-cctx.Done():
		if ctx.Err() != nil {
			// The run ends (interrupted, or its lab went away): the
			// check returns as soon as its attempt under way notices,
			// unless it is stuck where no context reaches.
			select {
			case c = <-result:
			case <-time.After(stuckGrace):
				c = planned
				c.Observed = "not finished when the run ended: " + w.String()
			}
			return c
		}
		// Its observations so far, if it returns soon; otherwise the
		// check as planned, observing nothing.
		select {
		case c = <-result:
		case <-time.After(stuckGrace):
			c = planned
		}
	}
	exceeded := fmt.Sprintf("no result within %s: %s", bound, w)
	if c.Observed != "" {
		exceeded += "; seen before: " + c.Observed
	}
	c.Observed, c.Passed = exceeded, false
	return c
}

// over tells whether ctx has ended or its deadline has passed. A context's
// deadline ends it when its timer's goroutine runs, which on a loaded machine
// can be well after the deadline, while a dial given that context fails at
// once ("i/o timeout") from the deadline alone: a check looping on ctx.Err()
// alone was seen making 20 attempts in a millisecond past its bound, each
// "timed out".
func over(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// status is one heartbeat line: how many checks are done and where each running
// one stands.
func (wt *watch) status(label string, elapsed time.Duration) string {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	var running []string
	for w := range wt.running {
		running = append(running, w.String())
	}
	sort.Strings(running)
	return fmt.Sprintf("%s: %d of %d checks done after %s; running: %s", label, wt.done, wt.total,
		elapsed.Round(time.Second), strings.Join(running, "; "))
}
