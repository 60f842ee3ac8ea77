package lab

import (
	"context"
	"errors"
	"path/filepath"
	"sync"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
)

// components are the component processes a lab started (API server,
// controller manager, kube-proxies, CoreDNS), in order, each recorded and
// watched by the lab's supervisor.
type components struct {
	rec        recorder
	runDir     string
	supervisor *supervise.Supervisor

	// mu guards list; it is taken inside the lab's mu (Down), and the
	// ledger's inside it (add).
	mu   sync.Mutex
	list []*supervise.Component
}

// logFile is where the component called name writes, in the lab's run directory.
func (c *components) logFile(name string) string {
	return filepath.Join(c.runDir, name+".log")
}

// add records a component process, so that `svclab clean` can end it should
// it outlive the lab's owner, and supervises it under name ("kube-proxy on
// node-1"), restarting it with restart after a death when restart is not nil.
func (c *components) add(p *kube.Process, name string, restart supervise.Restart) (*supervise.Component, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	comp := c.supervisor.Watch(name, p, restart)
	c.list = append(c.list, comp)
	return comp, c.rec.update(func(r *record.Lab) {
		r.Components = append(r.Components, record.Component{Name: p.Name, Process: record.ProcessOf(p.Pid())})
	})
}

// stop stops every component process.
func (c *components) stop() error {
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	// The lab goes with them, so nothing they would flush on the way out is
	// kept: a short grace, all at once.
	ctx, cancel := context.WithTimeout(context.Background(), componentStopGrace)
	defer cancel()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, comp := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = comp.Process().Stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// componentStopGrace is how long a component may take to end after SIGTERM
// when its lab goes down, before SIGKILL: none. The run directory (etcd's
// data, the logs) is removed with the lab and kube-proxy leaves its rules on
// the way out anyway, so a graceful end keeps nothing; waiting for the API
// server's took most of the second it was allowed (issue 20: down < 1 s).
const componentStopGrace = 0
