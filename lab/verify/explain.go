package verify

import (
	"context"
	"fmt"
	"io"
	"time"

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
			t, err := trace.Run(ctx, tl, req)
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
