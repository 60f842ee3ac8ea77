package supervise

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
)

type death struct {
	d         record.Death
	restartIn time.Duration
}

// TestDeathsAndRestarts kills watched processes by their pid, as `kill -9`
// does: one that is not restarted is reported once with its status; one that
// is comes back after the back-off as a new process, counted, and its second
// death waits twice as long; a process the lab stops, and anything after
// Close, is neither reported nor restarted.
func TestDeathsAndRestarts(t *testing.T) {
	ns := nstest.New(t, "starts processes")
	log := filepath.Join(t.TempDir(), "log")
	var (
		mu    sync.Mutex
		procs []*kube.Process
	)
	start := func() (*kube.Process, error) {
		p, err := kube.Start(kube.Command{Name: "sleep", Netns: ns.Name, Path: "/bin/sh", Args: []string{"-c", "exec sleep 60"}, LogFile: log})
		if err == nil {
			mu.Lock()
			procs = append(procs, p)
			mu.Unlock()
		}
		return p, err
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.Stop(context.Background())
		}
	})
	run := func() *kube.Process {
		t.Helper()
		p, err := start()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	died, restarted := make(chan death, 8), make(chan *Component, 8)
	s := New(Events{
		Died:      func(_ *Component, d record.Death, in time.Duration) { died <- death{d, in} },
		Restarted: func(_ context.Context, c *Component, _ *kube.Process) { restarted <- c },
		RestartFailed: func(c *Component, err error, _ time.Duration) {
			t.Errorf("restart %s: %v", c.Name, err)
		},
	})
	next := func(what string) death {
		t.Helper()
		select {
		case d := <-died:
			return d
		case <-time.After(time.Minute):
			t.Fatalf("%s: no death reported a minute after SIGKILL", what)
			return death{}
		}
	}
	kill := func(p *kube.Process) {
		t.Helper()
		if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}

	before := time.Now()
	once, stopped := run(), run()
	s.Watch("once on node-1", once, nil)
	s.Watch("stopped on node-1", stopped, nil)
	again := s.Watch("again on node-1", run(), start)
	if err := stopped.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	killedAt := time.Now()
	kill(once)
	d := next("not restarted")
	t.Logf("%v, seen %s after the kill", d.d, d.d.At.Sub(killedAt))
	if d.d.String() != "once on node-1 exited 137 (killed)" || d.d.PID != once.Pid() || d.restartIn != 0 {
		t.Errorf("death %+v: want once on node-1 exited 137 (killed), pid %d, not restarted", d, once.Pid())
	}

	first := again.Process()
	kill(first)
	if d := next("restarted"); d.d.Component != "again on node-1" || d.restartIn != InitialBackOff {
		t.Errorf("death %+v: want again on node-1, restarting in %s", d, InitialBackOff)
	}
	select {
	case c := <-restarted:
		if c != again || c.Restarts() != 1 || c.Process() == first || c.Process().Exited() != nil {
			t.Errorf("after the restart: %s, %d restarts, process %d (first %d): want again on node-1 running a new process, 1 restart",
				c.Name, c.Restarts(), c.Process().Pid(), first.Pid())
		}
	case <-time.After(InitialBackOff + time.Minute):
		t.Fatal("not restarted")
	}
	kill(again.Process())
	if d := next("restarted twice"); d.restartIn != 2*InitialBackOff {
		t.Errorf("second death %+v: want restarting in %s", d, 2*InitialBackOff)
	}
	if d := s.Deaths(before); len(d) != 3 {
		t.Errorf("Deaths(before): %v, want three", d)
	}
	if d := s.Deaths(time.Now()); len(d) != 0 {
		t.Errorf("Deaths(now): %v, want none", d)
	}

	// Close during the back-off: no restart.
	s.Close()
	select {
	case c := <-restarted:
		t.Errorf("%s restarted after Close", c.Name)
	case d := <-died:
		t.Errorf("reported after Close or for a stopped process: %+v", d)
	default:
	}
	if again.Restarts() != 1 {
		t.Errorf("restarts after Close: %d, want 1", again.Restarts())
	}
}

func TestBackOff(t *testing.T) {
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for step, w := range want {
		if got := backOff(step); got != w {
			t.Errorf("backOff(%d) = %s, want %s", step, got, w)
		}
	}
}
