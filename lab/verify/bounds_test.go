package verify

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A check's step that never returns and ignores its context (a kernel call
// that never answers) must not hold the run: the check fails at its bound,
// naming its flow, its member and what it waited for, and while it runs the
// heartbeat names it.
func TestBoundedGivesUpAStepThatIgnoresItsContext(t *testing.T) {
	wt := newWatch(1)
	planned := Check{Name: "pod client -> default/web:http ClusterIP 10.96.123.45:80", From: "client"}
	never := make(chan struct{})
	defer close(never)
	started := make(chan struct{})
	var heartbeat string
	go func() {
		<-started
		heartbeat = wt.status("iptables-nft", time.Second)
		close(started)
	}()
	c := wt.bounded(context.Background(), 300*time.Millisecond, planned, func(ctx context.Context, w *waiting) Check {
		w.setAttempt(2, 43)
		w.set("a reply from TCP 10.96.123.45:80")
		started <- struct{}{}
		<-never
		return Check{Passed: true}
	})
	<-started
	if c.Passed {
		t.Fatalf("a check stuck past its bound passed: %+v", c)
	}
	want := "no result within 300ms: " + planned.Name + " from client, waiting "
	if !strings.HasPrefix(c.Observed, want) || !strings.HasSuffix(c.Observed, " for a reply from TCP 10.96.123.45:80 (attempt 2 of 43)") {
		t.Errorf("observed %q, want it to start %q and name what it waited for", c.Observed, want)
	}
	if !strings.Contains(heartbeat, "0 of 1 checks done after 1s; running: "+planned.Name+" from client, waiting ") {
		t.Errorf("heartbeat while it ran: %q", heartbeat)
	}
	if s := wt.status("iptables-nft", time.Second); !strings.HasSuffix(s, "1 of 1 checks done after 1s; running: ") {
		t.Errorf("heartbeat after it failed: %q", s)
	}
}

// Negative control: a check that returns within its bound keeps its own
// result.
func TestBoundedKeepsACheckWithinItsBound(t *testing.T) {
	wt := newWatch(1)
	c := wt.bounded(context.Background(), time.Minute, Check{Name: "f"}, func(ctx context.Context, w *waiting) Check {
		return Check{Name: "f", Passed: true, Observed: "web-a x1"}
	})
	if !c.Passed || c.Observed != "web-a x1" {
		t.Errorf("got %+v", c)
	}
}
