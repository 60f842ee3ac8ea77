package components

import (
	"context"
	"time"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
)

// Supervision is the part of a lab that hears from its supervisor (package
// supervise) about the component processes it watches: it says in the owner's
// log what died and what restarted, keeps deaths and restarts in the record,
// where `svclab ls` shows them as the lab's health, and has the cluster DNS
// report a CoreDNS pod's restarts. It has no state beyond what it tells.
type Supervision struct {
	// ID names the lab in the log; Logf writes a line to the owner's log.
	ID   string
	Logf func(format string, args ...any)
	// Record is the lab's record: it writes no more once the lab is down.
	Record Recorder
	// Restarted, when set, is told of every restart (the cluster DNS, which
	// reports a CoreDNS pod's restart count).
	Restarted func(ctx context.Context, c *supervise.Component)
}

// Events are what the supervisor tells s.
func (s *Supervision) Events() supervise.Events {
	return supervise.Events{Died: s.died, Restarted: s.restarted, RestartFailed: s.restartFailed}
}

// died is told of every component that ended without the lab stopping it:
// the owner's log says so with its status and when it restarts, and the
// record shows it to `svclab ls` as the lab's health.
func (s *Supervision) died(c *supervise.Component, d record.Death, restartIn time.Duration) {
	then := "not restarted"
	if restartIn > 0 {
		then = "restarting in " + restartIn.String() + " (back-off)"
	}
	s.Logf("lab %s: %s (pid %d) exited %s; its log: %s; %s", s.ID, d.Component, d.PID, d.Status, d.Log, then)
	s.update("the death of "+c.Name, func(r *record.Lab) { r.Deaths = append(r.Deaths, d) })
}

// restarted is told of a restart: the record names the new process (for
// `svclab clean`) and counts the restart, and a CoreDNS pod's status says its
// restart count through the API, as its kubelet reports it (until ctx ends:
// the lab goes down).
func (s *Supervision) restarted(ctx context.Context, c *supervise.Component, old *kube.Process) {
	p := c.Process()
	s.Logf("lab %s: %s restarted (pid %d, restart %d)", s.ID, c.Name, p.Pid(), c.Restarts())
	s.update("the restart of "+c.Name, func(r *record.Lab) {
		for i, rc := range r.Components {
			if rc.Process.PID == old.Pid() {
				r.Components[i].Process = record.ProcessOf(p.Pid())
			}
		}
		for i := len(r.Deaths) - 1; i >= 0; i-- {
			if d := &r.Deaths[i]; d.Component == c.Name && d.Restarted == nil {
				now := time.Now()
				d.Restarted = &now
				break
			}
		}
	})
	if s.Restarted != nil {
		s.Restarted(ctx, c)
	}
}

// restartFailed is told of a restart that could not start the process.
func (s *Supervision) restartFailed(c *supervise.Component, err error, retryIn time.Duration) {
	s.Logf("lab %s: restart %s: %v; trying again in %s (back-off)", s.ID, c.Name, err, retryIn)
}

// update changes the record; a failure to write it is logged, for the lab
// runs on.
func (s *Supervision) update(what string, change func(r *record.Lab)) {
	if err := s.Record.Update(change); err != nil {
		s.Logf("lab %s: record %s: %v", s.ID, what, err)
	}
}
