// Package supervise watches the component processes a lab started, as a
// kubelet watches its containers: a component that ends without the lab
// stopping it (killed, crashed, exited by itself) is a death, seen the moment
// the process is reaped, kept for `svclab verify` to fail on and handed to the
// lab to log and record for `svclab ls`.
package supervise

import (
	"sync"
	"time"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
)

// Supervisor watches a lab's components until it is closed.
type Supervisor struct {
	onDeath func(record.Death)
	stop    chan struct{}
	// watching counts the goroutines that wait on a process, so that Close
	// returns only once none can report a death any more.
	watching sync.WaitGroup

	mu     sync.Mutex
	closed bool
	deaths []record.Death
}

// New returns a supervisor that calls onDeath, from the goroutine that
// waited on the process, for every death it sees.
func New(onDeath func(record.Death)) *Supervisor {
	return &Supervisor{onDeath: onDeath, stop: make(chan struct{})}
}

// Watch watches p, the component called name ("kube-proxy on node-1"). The
// process's own waiter reaps it (kube.Start), so the death is seen when the
// kernel reports it, with no polling; an exit after p.Stop is none.
func (s *Supervisor) Watch(name string, p *kube.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		select {
		case <-s.stop:
			return
		case <-p.Done():
		}
		if p.Stopped() {
			return
		}
		d := record.Death{Component: name, PID: p.Pid(), Status: p.ExitStatus(), At: time.Now(), Log: p.LogFile}
		s.mu.Lock()
		s.deaths = append(s.deaths, d)
		s.mu.Unlock()
		s.onDeath(d)
	}()
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

// Close stops watching and returns once no death can be reported any more:
// the lab calls it before it stops its components, and must not hold what
// onDeath takes.
func (s *Supervisor) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.watching.Wait()
}
