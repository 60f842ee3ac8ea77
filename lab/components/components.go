// Package components keeps the component processes a lab started (API server,
// controller manager, kube-proxies, CoreDNS): each recorded as it starts, so
// that `svclab clean` can end it should it outlive the lab's owner, and
// watched by the lab's supervisor, whose events it turns into the owner's log
// and the record (supervision.go).
package components

import (
	"context"
	"errors"
	"path/filepath"
	"sync"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
)

// Recorder keeps the lab's record (the lab's ledger).
type Recorder interface {
	// Update changes the record with change and writes it.
	Update(change func(r *record.Lab)) error
}

// Set is the component processes of a lab, in the order they started.
type Set struct {
	rec        Recorder
	runDir     string
	supervisor *supervise.Supervisor

	// mu guards list; it is taken inside the lab's mu (Down), and the
	// ledger's inside it (Add).
	mu   sync.Mutex
	list []*supervise.Component
}

// New is an empty set whose processes write their logs into runDir, are
// recorded in rec and watched by supervisor.
func New(rec Recorder, runDir string, supervisor *supervise.Supervisor) *Set {
	return &Set{rec: rec, runDir: runDir, supervisor: supervisor}
}

// LogFile is where the component called name writes, in the lab's run directory.
func (c *Set) LogFile(name string) string {
	return filepath.Join(c.runDir, name+".log")
}

// Add records a component process, so that `svclab clean` can end it should
// it outlive the lab's owner, and supervises it under name ("kube-proxy on
// node-1"), restarting it with restart after a death when restart is not nil.
func (c *Set) Add(p *kube.Process, name string, restart supervise.Restart) (*supervise.Component, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	comp := c.supervisor.Watch(name, p, restart)
	c.list = append(c.list, comp)
	return comp, c.rec.Update(func(r *record.Lab) {
		r.Components = append(r.Components, record.Component{Name: p.Name, Process: record.ProcessOf(p.Pid())})
	})
}

// Stop stops every component process.
func (c *Set) Stop() error {
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	// The lab goes with them, so nothing they would flush on the way out is
	// kept: a short grace, all at once.
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
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

// stopGrace is how long a component may take to end after SIGTERM when its
// lab goes down, before SIGKILL: none. The run directory (etcd's data, the
// logs) is removed with the lab and kube-proxy leaves its rules on the way out
// anyway, so a graceful end keeps nothing; waiting for the API server's took
// most of the second it was allowed (issue 20: down < 1 s).
const stopGrace = 0
