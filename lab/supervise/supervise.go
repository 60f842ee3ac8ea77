// Package supervise watches the component processes a lab started, as a
// kubelet watches its containers: a component that ends without the lab
// stopping it (killed, crashed, exited by itself) is a death, seen the moment
// the process is reaped, kept for `svclab verify` to fail on and handed to the
// lab to log and record for `svclab ls`; a component a kubelet would restart
// (a pod's container with restartPolicy Always, a static pod) is restarted
// with a kubelet's back-off.
package supervise

import (
	"context"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
)

// A kubelet's CrashLoopBackOff: the first restart after 10 s, each next one
// after twice the last wait, at most 5 minutes; a container that ran for 10
// minutes starts over from 10 s.
const (
	InitialBackOff = 10 * time.Second
	MaxBackOff     = 5 * time.Minute
	backOffReset   = 2 * MaxBackOff
)

// Restart starts a component again after its death.
type Restart func() (*kube.Process, error)

// Events are what the supervisor tells the lab, each from the goroutine that
// watches the component.
type Events struct {
	// Died is a death; restartIn is the back-off before the restart, 0 when
	// the component is not restarted.
	Died func(c *Component, d record.Death, restartIn time.Duration)
	// Restarted is a restart: old is the process that died; ctx ends when
	// the supervisor is closed.
	Restarted func(ctx context.Context, c *Component, old *kube.Process)
	// RestartFailed is a restart that could not start the process; it is
	// tried again after the next back-off.
	RestartFailed func(c *Component, err error, retryIn time.Duration)
}

// Component is one supervised component: its current process and how often
// it was restarted.
type Component struct {
	// Name says what it is and where it runs: "kube-proxy on node-1".
	Name    string
	restart Restart

	mu       sync.Mutex
	proc     *kube.Process
	restarts int
}

// Process is the component's current process (the last one started).
func (c *Component) Process() *kube.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// Restarts is how often the component was restarted.
func (c *Component) Restarts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// Supervisor watches a lab's components until it is closed.
type Supervisor struct {
	events Events
	// ctx ends when the supervisor is closed.
	ctx  context.Context
	stop context.CancelFunc
	// watching counts the goroutines that watch a component, so that Close
	// returns only once none can report or restart any more.
	watching sync.WaitGroup

	mu     sync.Mutex
	closed bool
	deaths []record.Death
}

// New returns a supervisor that tells events what it sees.
func New(events Events) *Supervisor {
	ctx, stop := context.WithCancel(context.Background())
	return &Supervisor{events: events, ctx: ctx, stop: stop}
}

// Watch supervises p, the component called name, and restarts it with
// restart after each death when restart is not nil. The process's own waiter
// reaps it (kube.Start), so a death is seen when the kernel reports it, with
// no polling; an exit after Stop is none.
func (s *Supervisor) Watch(name string, p *kube.Process, restart Restart) *Component {
	c := &Component{Name: name, restart: restart, proc: p}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return c
	}
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		s.watch(c)
	}()
	return c
}

func (s *Supervisor) watch(c *Component) {
	step := 0
	for {
		p := c.Process()
		select {
		case <-s.ctx.Done():
			return
		case <-p.Done():
		}
		if p.Stopped() {
			return
		}
		now := time.Now()
		d := record.Death{Component: c.Name, PID: p.Pid(), Status: p.ExitStatus(), At: now, Log: p.LogFile}
		s.mu.Lock()
		s.deaths = append(s.deaths, d)
		s.mu.Unlock()
		if c.restart == nil {
			s.events.Died(c, d, 0)
			return
		}
		if now.Sub(p.Started) >= backOffReset {
			step = 0
		}
		wait := backOff(step)
		step++
		s.events.Died(c, d, wait)
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
			next, err := c.restart()
			if err == nil {
				c.mu.Lock()
				c.proc, c.restarts = next, c.restarts+1
				c.mu.Unlock()
				s.events.Restarted(s.ctx, c, p)
				break
			}
			wait = backOff(step)
			step++
			s.events.RestartFailed(c, err, wait)
		}
	}
}

// backOff is the wait before the restart after step earlier ones.
func backOff(step int) time.Duration {
	d := InitialBackOff
	for range step {
		d *= 2
		if d >= MaxBackOff {
			return MaxBackOff
		}
	}
	return d
}

// Deaths lists the deaths seen at or after since, oldest first.
func (s *Supervisor) Deaths(since time.Time) []record.Death {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []record.Death
	for _, d := range s.deaths {
		if !d.At.Before(since) {
			out = append(out, d)
		}
	}
	return out
}

// Close stops watching and restarting, and returns once nothing more can be
// reported or restarted: the lab calls it before it stops its components
// (each Component's Process is then the one to stop), and must not hold what
// the events take.
func (s *Supervisor) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.stop()
	}
	s.mu.Unlock()
	s.watching.Wait()
}
