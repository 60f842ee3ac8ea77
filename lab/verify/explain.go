package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/svclab/svclab/lab/internal/progress"
	"github.com/svclab/svclab/lab/trace"
	"github.com/svclab/svclab/lab/traffic"
)

// explainAttempts bounds the traced attempts of a failed check that look for
// one failing attempt: a flow that fails on some picks only (one backend of
// several unanswered) may need a few.
const explainAttempts = 3

// Explain attaches to each failed check of plan p (and with all, to every
// check) the trace of one attempt of its flow in the running lab l: for a
// failed check, the first of a few attempts that fails as the check did
// (or the last one made, when none does). checks are Execute's for p; the
// flows' checks come first, in p's order. Traces run one at a time after the
// checks, so that the lab is otherwise quiet, as the counter deltas of
// iptables-legacy need.
func Explain(ctx context.Context, l Lab, p Plan, checks []Check, all bool, log io.Writer) error {
	tl := trace.FromRecord(l.Record())
	for i, f := range p.Flows {
		if i >= len(checks) || ctx.Err() != nil {
			break
		}
		c := &checks[i]
		if c.Passed && !all {
			continue
		}
		fmt.Fprintf(log, "svclab: tracing %s\n", c.Name)
		req := trace.Request{From: f.Source.Name, To: f.Target.Addr, Protocol: f.Protocol, Timeout: timeoutOf(f.Expected)}
		tries := 1
		if !c.Passed {
			tries = explainAttempts
		}
		for n := 0; n < tries; n++ {
			t, err := boundedTrace(ctx, tl, req, c.Name, log)
			if err != nil {
				return fmt.Errorf("verify: tracing %s: %w", c.Name, err)
			}
			c.Trace = t
			// Another attempt may fail where this one did not only if
			// the rules picked a backend for it.
			if c.Passed || !f.Expected.admitsAttempt(t.End) || t.End.Observed != traffic.Answered {
				break
			}
		}
	}
	return ctx.Err()
}

// traceBound bounds one traced attempt: a trace sets up its rules and monitor
// in every namespace the packet crosses, waits for the attempt and reads them
// back, retrying a few times when a proxy rewrote a rule under it, each step
// within seconds; on a loaded machine, whose xtables lock other labs hold, a
// step may wait its turn. A guard against a trace that never ends, no claim
// about how fast one is.
const traceBound = 3 * time.Minute

// boundedTrace is trace.Run within traceBound, with a heartbeat on log while it
// runs: a trace stuck where its context does not reach fails the run naming the
// check it traced instead of holding it.
func boundedTrace(ctx context.Context, tl trace.Lab, req trace.Request, name string, log io.Writer) (*trace.Trace, error) {
	ctx, cancel := context.WithTimeout(ctx, traceBound)
	defer cancel()
	type result struct {
		t   *trace.Trace
		err error
	}
	done := make(chan result, 1)
	var r result
	progress.While(DefaultHeartbeat, func(elapsed time.Duration) {
		fmt.Fprintf(log, "svclab: still tracing %s (from %s to %s %s) after %s\n", name, req.From, req.Protocol, req.To, elapsed.Round(time.Second))
	}, func() {
		go func() {
			t, err := trace.Run(ctx, tl, req)
			done <- result{t, err}
		}()
		select {
		case r = <-done:
		case <-ctx.Done():
			select {
			case r = <-done:
			case <-time.After(stuckGrace):
				r.err = ctx.Err()
			}
		}
	})
	if r.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("no trace within %s of one attempt from %s to %s %s: %w", traceBound, req.From, req.Protocol, req.To, r.err)
	}
	return r.t, r.err
}

// timeoutOf bounds a traced attempt: the check has made its attempts with
// room for retransmissions already; a trace that waits as long as a dropped
// flow's attempts is enough to explain one.
func timeoutOf(exp Expectation) time.Duration {
	if exp.Outcome == traffic.Timeout {
		return dropTimeout
	}
	return traffic.DefaultTimeout
}

// admitsAttempt tells whether the traced attempt that ended as e is one a flow
// meeting exp may make: a refused flow's attempt must be refused here, as one
// attempt is all a trace makes.
func (exp Expectation) admitsAttempt(e trace.End) bool {
	r := traffic.Reply{Addr: e.Backend, Client: e.Seen}
	if exp.Outcome == traffic.Refused {
		return e.Observed == traffic.Refused
	}
	return exp.admits(e.Observed, r)
}
