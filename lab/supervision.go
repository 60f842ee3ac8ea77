package lab

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
)

// supervision is the part of a lab that hears from its supervisor (package
// supervise) about the component processes it watches: it says in the owner's
// log what died and what restarted, keeps deaths and restarts in the record,
// where `svclab ls` shows them as the lab's health, and has the cluster DNS
// report a CoreDNS pod's restarts. It has no state beyond what it tells.
type supervision struct {
	id   string
	logf func(format string, args ...any)
	// record is the lab's record: it writes no more once the lab is down.
	record interface {
		update(change func(r *record.Lab)) error
	}
	// dns is told of every restart; nil without a cluster DNS.
	dns *clusterDNS
}

// events are what the supervisor tells s.
func (s *supervision) events() supervise.Events {
	return supervise.Events{Died: s.died, Restarted: s.restarted, RestartFailed: s.restartFailed}
}

// died is told of every component that ended without the lab stopping it:
// the owner's log says so with its status and when it restarts, and the
// record shows it to `svclab ls` as the lab's health.
func (s *supervision) died(c *supervise.Component, d record.Death, restartIn time.Duration) {
	then := "not restarted"
	if restartIn > 0 {
		then = "restarting in " + restartIn.String() + " (back-off)"
	}
	s.logf("lab %s: %s (pid %d) exited %s; its log: %s; %s", s.id, d.Component, d.PID, d.Status, d.Log, then)
	s.update("the death of "+c.Name, func(r *record.Lab) { r.Deaths = append(r.Deaths, d) })
}

// restarted is told of a restart: the record names the new process (for
// `svclab clean`) and counts the restart, and a CoreDNS pod's status says its
// restart count through the API, as its kubelet reports it (until ctx ends:
// the lab goes down).
func (s *supervision) restarted(ctx context.Context, c *supervise.Component, old *kube.Process) {
	p := c.Process()
	s.logf("lab %s: %s restarted (pid %d, restart %d)", s.id, c.Name, p.Pid(), c.Restarts())
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
	s.dns.restarted(ctx, c)
}

// restartFailed is told of a restart that could not start the process.
func (s *supervision) restartFailed(c *supervise.Component, err error, retryIn time.Duration) {
	s.logf("lab %s: restart %s: %v; trying again in %s (back-off)", s.id, c.Name, err, retryIn)
}

// update changes the record; a failure to write it is logged, for the lab
// runs on.
func (s *supervision) update(what string, change func(r *record.Lab)) {
	if err := s.record.update(change); err != nil {
		s.logf("lab %s: record %s: %v", s.id, what, err)
	}
}

// keepRestartCounts carries the restart counts of old's containers into
// status, which the lab writes anew when a pod's readiness changes.
func keepRestartCounts(status *corev1.PodStatus, old corev1.PodStatus) {
	for i := range status.ContainerStatuses {
		for _, o := range old.ContainerStatuses {
			if o.Name == status.ContainerStatuses[i].Name {
				status.ContainerStatuses[i].RestartCount = o.RestartCount
			}
		}
	}
}

// Deaths lists the components of the lab that ended without the lab stopping
// them (killed, crashed), seen at or after since; a restarted one too.
func (l *Lab) Deaths(since time.Time) []record.Death { return l.supervisor.Deaths(since) }
